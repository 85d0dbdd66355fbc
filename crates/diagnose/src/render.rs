//! The outcome of `diagnose` for people (text) and machines (JSON).

use std::io::{self, Write};

use serde_json::{json, Value};

use tcpdoctor_report::fmt_ms as ms;

use crate::Outcome;

/// The text report: measurements, the verdict, then the analysis.
pub fn text(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "tcpdoctor diagnose {} ({})", o.url, o.server)?;
    round_trip(o, out)?;
    one_by_one(o, out)?;
    load(o, out)?;
    capture(o, out)?;
    error_causes(o, out)?;
    verdict(o, out)?;
    analysis(o, out)
}

/// The round trip measured by the probes, or why it was not.
fn round_trip(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    match (&o.round_trip, &o.round_trip_error) {
        (Some(r), _) => match r.stats.summary_ms() {
            Some((min, avg, max, mdev)) => writeln!(
                out,
                "round trip  {} probes ({}), {:.0}% loss, min/avg/max/mdev = {:.3}/{:.3}/{:.3}/{:.3} ms{}{}",
                r.stats.transmitted,
                r.method,
                r.stats.loss() * 100.0,
                min,
                avg,
                max,
                mdev,
                if r.stats.refused > 0 {
                    format!(" — {} answered by an RST: the port is closed", r.stats.refused)
                } else {
                    String::new()
                },
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
    Ok(())
}

/// The requests made one by one: connection setup, latencies, why they stopped.
fn one_by_one(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let s = &o.sequential;
    if let Some(setup) = &s.setup {
        write!(out, "setup       TCP connect {}", ms(setup.connect_ms))?;
        if let Some(t) = setup.tls_handshake_ms {
            write!(
                out,
                " · TLS handshake {} ({}{})",
                ms(t),
                setup.tls_version.as_deref().unwrap_or("TLS"),
                setup
                    .alpn
                    .as_deref()
                    .map(|a| format!(", ALPN {a}"))
                    .unwrap_or_default()
            )?;
        }
        if let Some(t) = setup.first_byte_ms {
            write!(out, " · first byte {}", ms(t))?;
        }
        writeln!(out)?;
    }
    if let Some(first) = s.latencies_ms.first() {
        write!(
            out,
            "one by one  {} requests on {} connection(s): first {}",
            s.latencies_ms.len(),
            s.reconnects + 1,
            ms(*first)
        )?;
        if let Some(rest) = s.median_after_first_ms() {
            write!(out, ", then {} at the median on that connection", ms(rest))?;
        }
        writeln!(out)?;
    }
    if let Some(e) = &s.error {
        writeln!(out, "one by one  stopped: {e}")?;
    }
    Ok(())
}

/// The load's throughput and latencies, or why it failed.
fn load(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    if let Some(l) = o.load.as_ref().filter(|l| l.requests == 0) {
        writeln!(
            out,
            "load        {} connections for {:.1} s: no response, {} errors",
            l.connections,
            l.elapsed.as_secs_f64(),
            l.errors.total()
        )?;
    } else if let Some(l) = &o.load {
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
    Ok(())
}

/// What was captured, and the step an interrupt ended.
fn capture(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
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
    if let Some(step) = o.interrupted {
        writeln!(
            out,
            "interrupted during the {} step: the report covers what was measured until then",
            match step {
                crate::Step::RoundTrip => "round-trip",
                crate::Step::Sequential => "one-by-one",
                crate::Step::Load => "load",
                crate::Step::Analysis => "analysis",
            }
        )?;
    }
    Ok(())
}

/// The load's most frequent error causes.
fn error_causes(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    if let Some(l) = &o.load {
        let mut causes: Vec<(&String, &u64)> = l.error_causes.iter().collect();
        causes.sort_by(|a, b| b.1.cmp(a.1));
        for (what, n) in causes.iter().take(3) {
            writeln!(out, "errors      {what}: {n}")?;
        }
    }
    Ok(())
}

/// The verdict, the hints, and what could not be seen.
fn verdict(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "VERDICT  {}", o.verdict.sentence())?;
    for h in &o.hints {
        writeln!(out, "hint     {h}")?;
    }
    for c in &o.could_not_see {
        writeln!(out, "unseen   {c}")?;
    }
    Ok(())
}

/// The analysis of the captured traffic, when it found anything.
fn analysis(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
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

/// The JSON document: the analysis contract's fields (schema 1) plus
/// `target`, `measured`, `verdict`, `hints` and `could_not_see`.
pub fn to_json(o: &Outcome) -> serde_json::Result<Value> {
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
            "refused": r.stats.refused,
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
                       "timeout": l.errors.timeout, "status": l.errors.status,
                       "causes": l.error_causes},
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
            "on_first_connection": s.on_first_connection,
            "error": s.error,
            "tcp_info": s.tcp_info,
            "setup": s.setup,
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
        "interrupted": o.interrupted.map(|s| s.name()),
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
