//! `tcpdoctor diagnose URL`: measure, capture our own traffic, explain (the
//! work is in `tcpdoctor-investigate`).

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use tcpdoctor_investigate::{Outcome, Plan, Step};
use tcpdoctor_load::{RequestSpec, Target};

use crate::load::parse_duration;
use crate::Format;

pub const HELP: &str = "\
Examples:
  tcpdoctor diagnose http://10.0.0.2:8080/
  tcpdoctor diagnose --write self.pcap http://10.0.0.2:8080/    keep the capture for Wireshark
  tcpdoctor diagnose --format json http://10.0.0.2:8080/ | jq '.verdict.sentence'

What it does, in about 6 seconds by default:
  1. the round trip: 5 TCP SYN probes (as hping3 -S; connect() timing without root);
  2. up to 20 requests one after another on one keep-alive connection;
  3. a 2 s load on 10 connections (as wrk);
while capturing its own traffic to the server (AF_PACKET on the interface the route to the
server uses) and analysing it as `tcpdoctor analyze` would. The verdict puts the latency next to
the round trip and names the mechanism that cost the time, the endpoint responsible and the fix:
  requests take 44.0 ms at p50 while the round trip is 0.05 ms (TCP SYN); 98% of exchanges wait
  ~40 ms for a delayed ACK because 10.0.0.2:8080 (server) sends each response in two segments
  with Nagle on ... — fix: ...

Without root it still runs, without a capture: it reports the timings and what the kernel says
about its own connection (TCP_INFO: smoothed RTT, delayed-ACK timeout, retransmissions, time
limited by the receive window), and says what it could not see.

Exit status: 0 diagnosed; 1 --fail-on-finding was given and a finding was reported, or no
request got a response; 2 usage error (bad URL, option).";

#[derive(clap::Args)]
pub struct DiagnoseArgs {
    /// Target URL: http://host[:port][/path] (IPv6: http://[::1]:8080/).
    url: String,
    /// Concurrent connections of the load step (0 skips it).
    #[arg(short = 'c', long, default_value_t = 10, value_name = "N")]
    connections: usize,
    /// Duration of the load step.
    #[arg(short = 'd', long, default_value = "2s", value_parser = parse_duration, value_name = "TIME")]
    duration: Duration,
    /// Requests sent one after another on one connection (at most 3 s of them).
    #[arg(long, default_value_t = 20, value_name = "N")]
    requests: u32,
    /// SYN probes for the round trip.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pings: u64,
    /// Time without a response before a request counts as failed.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "TIME")]
    timeout: Duration,
    /// Extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// Request method.
    #[arg(short = 'm', long, default_value = "GET")]
    method: String,
    /// Request body; `@FILE` reads it from a file.
    #[arg(long, value_name = "BODY")]
    body: Option<String>,
    /// Measure only: do not capture (no root needed).
    #[arg(long)]
    no_capture: bool,
    /// Also write the captured traffic to this pcap file.
    #[arg(long, value_name = "FILE.pcap")]
    write: Option<PathBuf>,
    /// Output format: `text` for people, `json` for machines.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit with status 1 when a finding is reported (for scripts and CI).
    #[arg(long)]
    fail_on_finding: bool,
}

pub fn run(args: &DiagnoseArgs) -> anyhow::Result<u8> {
    let target = Target::parse(&args.url).map_err(|e| anyhow::anyhow!(e.to_string()))?;
    let body = match args.body.as_deref() {
        None => Vec::new(),
        Some(b) => match b.strip_prefix('@') {
            Some(path) => {
                std::fs::read(path).map_err(|e| anyhow::anyhow!(format!("--body @{path}: {e}")))?
            }
            None => b.as_bytes().to_vec(),
        },
    };
    let request = RequestSpec {
        method: args.method.clone(),
        headers: args.headers.clone(),
        body,
        close: false,
    };
    tcpdoctor_load::build_request(&target, &request).map_err(|e| anyhow::anyhow!(e.to_string()))?;
    let plan = Plan {
        pings: args.pings.max(1),
        sequential: args.requests,
        connections: args.connections,
        load_duration: args.duration,
        timeout: args.timeout,
        capture: !args.no_capture,
        write: args.write.clone(),
        ..Plan::new(target, request)
    };
    let progress = io::stderr().is_terminal() && matches!(args.format, Format::Text);
    let outcome = tcpdoctor_investigate::run(&plan, |s| {
        if progress {
            let what = match s {
                Step::RoundTrip => "measuring the round trip",
                Step::Sequential => "sending requests one by one",
                Step::Load => "running a short concurrent load",
                Step::Analysis => "analysing the captured traffic",
            };
            eprint!("\r\x1b[2K{what}…");
        }
    })?;
    if progress {
        eprint!("\r\x1b[2K");
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match args.format {
        Format::Json => {
            serde_json::to_writer(&mut out, &to_json(&outcome)?)?;
            out.write_all(b"\n")?;
        }
        Format::Text => text(&outcome, &mut out)?,
    }
    out.flush()?;
    let answered = !outcome.sequential.latencies_ms.is_empty()
        || outcome.load.as_ref().is_some_and(|l| l.requests > 0);
    if !answered {
        return Ok(1);
    }
    let found = outcome
        .analysis
        .as_ref()
        .is_some_and(|a| !a.findings.is_empty());
    Ok(if args.fail_on_finding && found { 1 } else { 0 })
}

fn ms(d: f64) -> String {
    if d >= 1000.0 {
        format!("{:.2} s", d / 1e3)
    } else if d >= 10.0 {
        format!("{d:.1} ms")
    } else {
        format!("{d:.2} ms")
    }
}

fn text(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "tcpdoctor diagnose {} ({})", o.url, o.server)?;
    match (&o.round_trip, &o.round_trip_error) {
        (Some(r), _) => match r.stats.summary_ms() {
            Some((min, avg, max, mdev)) => writeln!(
                out,
                "round trip  {} probes ({}), {:.0}% loss, min/avg/max/mdev = {:.3}/{:.3}/{:.3}/{:.3} ms{}",
                r.stats.transmitted,
                r.method,
                r.stats.loss() * 100.0,
                min,
                avg,
                max,
                mdev,
                r.fallback_reason
                    .as_deref()
                    .map(|w| format!(" (raw SYN probes not used: {w})"))
                    .unwrap_or_default()
            )?,
            None => writeln!(
                out,
                "round trip  {} probes ({}), no answer",
                r.stats.transmitted, r.method
            )?,
        },
        (None, Some(e)) => writeln!(out, "round trip  not measured: {e}")?,
        (None, None) => {}
    }
    let s = &o.sequential;
    if let Some(first) = s.latencies_ms.first() {
        write!(
            out,
            "one by one  {} requests on {} connection(s): first {}",
            s.latencies_ms.len(),
            s.reconnects + 1,
            ms(*first)
        )?;
        if let Some(rest) = s.median_after_first_ms() {
            write!(out, ", then {} at the median", ms(rest))?;
        }
        writeln!(out)?;
    }
    if let Some(e) = &s.error {
        writeln!(out, "one by one  stopped: {e}")?;
    }
    if let Some(l) = &o.load {
        let lat = l.latency();
        writeln!(
            out,
            "load        {} connections for {:.1} s: {:.0} req/s, latency p50 {} · p90 {} · p99 {} · max {}{}",
            l.connections,
            l.elapsed.as_secs_f64(),
            l.requests_per_sec(),
            ms(lat.p50),
            ms(lat.p90),
            ms(lat.p99),
            ms(lat.max),
            if l.errors.total() > 0 {
                format!(" · {} errors", l.errors.total())
            } else {
                String::new()
            }
        )?;
    }
    if let Some(e) = &o.load_error {
        writeln!(out, "load        failed: {e}")?;
    }
    if let Some(c) = &o.captured {
        writeln!(
            out,
            "capture     {} frames to/from {} on {}{}{}",
            c.frames,
            o.server,
            c.interface,
            if c.kernel.dropped > 0 {
                format!(" ({} dropped by the kernel)", c.kernel.dropped)
            } else {
                String::new()
            },
            c.written
                .as_ref()
                .map(|p| format!(", written to {}", p.display()))
                .unwrap_or_default()
        )?;
    }
    writeln!(out)?;
    writeln!(out, "VERDICT  {}", o.verdict.sentence())?;
    for h in &o.hints {
        writeln!(out, "hint     {h}")?;
    }
    for c in &o.could_not_see {
        writeln!(out, "unseen   {c}")?;
    }
    if let Some(a) = &o.analysis {
        if !a.findings.is_empty() || !a.minor_findings.is_empty() {
            writeln!(out)?;
            writeln!(out, "The analysis of the captured traffic:")?;
            writeln!(out)?;
            let width = std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.parse::<usize>().ok())
                .unwrap_or(100)
                .clamp(60, 200);
            tcpdoctor_report::text(
                a,
                &o.url,
                "live capture",
                tcpdoctor_report::TextOptions {
                    connections: 5,
                    width,
                },
                out,
            )?;
        }
    }
    Ok(())
}

fn to_json(o: &Outcome) -> anyhow::Result<Value> {
    // The analysis contract's fields at the top level (schema, capture,
    // connections, findings…), then what diagnose measured.
    let mut doc = match &o.analysis {
        Some(a) => serde_json::to_value(a)?,
        None => {
            json!({"schema": 1, "capture": null, "connections": [], "findings": [], "minor_findings": []})
        }
    };
    let rtt = o.round_trip.as_ref().map(|r| {
        let s = r.stats.summary_ms();
        json!({
            "method": r.method,
            "fallback_reason": r.fallback_reason,
            "probes": r.stats.transmitted,
            "answered": r.stats.received,
            "loss": r.stats.loss(),
            "min_ms": s.map(|s| s.0),
            "avg_ms": s.map(|s| s.1),
            "max_ms": s.map(|s| s.2),
            "mdev_ms": s.map(|s| s.3),
            "median_ms": r.stats.median_ms(),
        })
    });
    let load = o.load.as_ref().map(|l| {
        let lat = l.latency();
        json!({
            "connections": l.connections,
            "duration_s": l.elapsed.as_secs_f64(),
            "requests": l.requests,
            "requests_per_sec": l.requests_per_sec(),
            "transfer_bytes_per_sec": l.transfer_bytes_per_sec(),
            "latency_ms": {"p50": lat.p50, "p75": lat.p75, "p90": lat.p90, "p99": lat.p99,
                           "p999": lat.p999, "max": lat.max, "mean": lat.mean},
            "errors": {"connect": l.errors.connect, "read": l.errors.read, "write": l.errors.write,
                       "timeout": l.errors.timeout, "status": l.errors.status},
        })
    });
    let s = &o.sequential;
    let measured = json!({
        "round_trip": rtt,
        "round_trip_error": o.round_trip_error,
        "sequential": {
            "requests": s.latencies_ms.len(),
            "latencies_ms": s.latencies_ms,
            "statuses": s.statuses,
            "reconnects": s.reconnects,
            "error": s.error,
            "tcp_info": s.tcp_info,
        },
        "load": load,
        "load_error": o.load_error,
        "capture": o.captured.as_ref().map(|c| json!({
            "interface": c.interface,
            "frames": c.frames,
            "kernel_received": c.kernel.received,
            "kernel_dropped": c.kernel.dropped,
            "written": c.written.as_ref().map(|p| p.display().to_string()),
        })),
        "elapsed_s": o.elapsed.as_secs_f64(),
    });
    if let Value::Object(m) = &mut doc {
        m.insert(
            "target".into(),
            json!({"url": o.url, "server": o.server.to_string()}),
        );
        m.insert("measured".into(), measured);
        m.insert(
            "verdict".into(),
            json!({
                "sentence": o.verdict.sentence(),
                "headline": o.verdict.headline,
                "cause": o.verdict.cause,
                "fix": o.verdict.fix,
            }),
        );
        m.insert("hints".into(), json!(o.hints));
        m.insert("could_not_see".into(), json!(o.could_not_see));
    }
    Ok(doc)
}
