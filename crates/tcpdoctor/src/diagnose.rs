//! `tcpdoctor diagnose URL`: measure, capture our own traffic, explain (the
//! work is in `tcpdoctor-diagnose`).

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use tcpdoctor_diagnose::{render, Plan};
use tcpdoctor_load::Target;

use crate::load::{parse_duration, RequestArgs};
use crate::Format;

pub const HELP: &str = include_str!("../help/diagnose.txt");

#[derive(clap::Args)]
pub struct DiagnoseArgs {
    /// Target URL: http[s]://host[:port][/path] (IPv6: http://[::1]:8080/).
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
    #[command(flatten)]
    request: RequestArgs,
    /// Measure only: do not capture (no root needed).
    #[arg(long)]
    no_capture: bool,
    /// Also write the captured traffic to this file: pcapng if its name ends in
    /// `.pcapng`, pcap otherwise. Checked before anything is measured.
    #[arg(short = 'w', long, value_name = "FILE.pcap")]
    write: Option<PathBuf>,
    /// Also write the analysis as one self-contained HTML page (with --write, its
    /// time-sequence graphs are drawn from that pcap).
    #[arg(long, value_name = "REPORT.html")]
    html: Option<String>,
    /// Output format: `text` for people, `json` for machines.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit with status 1 when a finding is reported (for scripts and CI).
    #[arg(long)]
    fail_on_finding: bool,
    #[command(flatten)]
    tls: crate::tls::TlsArgs,
}

pub fn run(args: &DiagnoseArgs) -> anyhow::Result<u8> {
    let target = Target::parse(&args.url).map_err(|e| anyhow::anyhow!(e.to_string()))?;
    let request = args.request.spec()?;
    tcpdoctor_load::build_request(&target, &request).map_err(|e| anyhow::anyhow!(e.to_string()))?;
    let plan = Plan {
        pings: args.pings.max(1),
        sequential: args.requests,
        connections: args.connections,
        load_duration: args.duration,
        timeout: args.timeout,
        capture: !args.no_capture,
        write: args.write.clone(),
        tls: args.tls.options(),
        ..Plan::new(target, request)
    };
    // A path that cannot be written fails now, not after the measurement.
    let output = match &plan.write {
        Some(p) if plan.capture => Some(tcpdoctor_diagnose::Output::create(p)?),
        _ => None,
    };
    // Ctrl-C ends the step in progress; what was measured is reported. A
    // second one quits at once.
    let interrupt = std::sync::Arc::new(tcpdoctor_load::Live::default());
    {
        let interrupt = std::sync::Arc::clone(&interrupt);
        let _ = ctrlc::set_handler(move || {
            if interrupt.stopped() {
                std::process::exit(130);
            }
            interrupt.stop();
            eprintln!(
                "{}tcpdoctor: interrupted; reporting what was measured (Ctrl-C again to quit)",
                if io::stderr().is_terminal() {
                    "\r\x1b[2K"
                } else {
                    ""
                }
            );
        });
    }
    let progress = io::stderr().is_terminal() && matches!(args.format, Format::Text);
    let outcome = tcpdoctor_diagnose::run_with(&plan, output, &interrupt, |s| {
        if progress {
            eprint!("\r\x1b[2K{}…", s.doing());
        }
    })?;
    if progress {
        eprint!("\r\x1b[2K");
    }
    if let Some(html) = args.html.as_deref() {
        match &outcome.analysis {
            Some(a) => {
                let write = args.write.as_ref().and_then(|p| p.to_str());
                tcpdoctor_report_html::pass::write(
                    a,
                    &outcome.latency_bins,
                    write,
                    &format!("diagnose {}", outcome.url),
                    "live capture of its own traffic",
                    &tcpdoctor_report_html::pass::Outputs {
                        html: Some(html),
                        annotate: None,
                    },
                )?;
            }
            None => eprintln!("tcpdoctor: --html {html}: no capture to report (it needs root)"),
        }
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match args.format {
        Format::Json => {
            let mut doc = render::to_json(&outcome)?;
            tcpdoctor_report::stamp(
                &mut doc,
                "diagnose",
                serde_json::json!({
                    "url": args.url, "connections": args.connections,
                    "duration_s": args.duration.as_secs_f64(), "requests": args.requests,
                    "pings": args.pings, "timeout_s": args.timeout.as_secs_f64(),
                    "method": args.request.method, "capture": !args.no_capture,
                    "write": args.write.as_ref().map(|p| p.display().to_string()),
                }),
            );
            serde_json::to_writer(&mut out, &doc)?;
            out.write_all(b"\n")?;
        }
        Format::Text => render::text(&outcome, &mut out)?,
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
