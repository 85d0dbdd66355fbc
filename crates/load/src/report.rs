//! What `tcpdoctor load` prints, as wrk does: the banner, the progress line
//! on a terminal, the latency table and distribution, errors, the schedule,
//! throughput, the TLS handshakes; and its JSON document (without the
//! `schema`/`command`/`input` stamp, the binary's).

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tcpdoctor_units::bytes_f64 as fmt_bytes;

use crate::{Config, Live, Report, LATE_AFTER};

/// The two lines before the run: its length, URL, threads and connections.
pub fn banner(out: &mut impl Write, config: &Config) -> io::Result<()> {
    writeln!(
        out,
        "Running {} test @ {}",
        fmt_duration(config.duration),
        config.target.url
    )?;
    writeln!(
        out,
        "  {} threads and {} connections{}",
        config.threads.min(config.connections),
        config.connections,
        match config.rate {
            Some(r) =>
                format!(", {r} requests/sec on a schedule (latency from the scheduled send)"),
            None => String::new(),
        }
    )
}

/// One line on the terminal, rewritten each second.
pub fn progress(live: &Live, done: &AtomicBool, total: Duration) {
    let start = Instant::now();
    let mut last = 0;
    let mut last_t = start;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let now = Instant::now();
        if now.duration_since(last_t) < Duration::from_secs(1) {
            continue;
        }
        let n = live.requests();
        let rate = (n - last) as f64 / now.duration_since(last_t).as_secs_f64();
        (last, last_t) = (n, now);
        eprint!(
            "\r  {:>5.1}s / {}  {:>10.0} req/s  {} requests  {} errors   ",
            now.duration_since(start).as_secs_f64(),
            fmt_duration(total),
            rate,
            n,
            live.errors()
        );
    }
    eprint!("\r{:80}\r", "");
}

fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 && d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else if s >= 1.0 {
        format!("{s:.2}s")
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// wrk's units: us, ms, s, two decimals.
fn fmt_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.2}us", ms * 1000.0)
    } else if ms < 1000.0 {
        format!("{ms:.2}ms")
    } else {
        format!("{:.2}s", ms / 1000.0)
    }
}

/// The report after the run (the TLS handshakes' lines last).
pub fn text(r: &Report, out: &mut impl Write) -> io::Result<()> {
    let l = r.latency();
    if r.requests == 0 {
        // No latency to show: say why instead of a table of zeros.
        match r.main_error() {
            Some((what, n)) => writeln!(out, "  No response: {what} ({n} times)")?,
            None => writeln!(out, "  No response")?,
        }
    } else {
        latency_table(&l, out)?;
    }
    writeln!(
        out,
        "  {} requests in {:.2}s, {} read{}",
        r.requests,
        r.elapsed.as_secs_f64(),
        fmt_bytes(r.bytes as f64),
        if r.keepalive {
            String::new()
        } else {
            format!(", {} connections", r.connects)
        }
    )?;
    rest(r, out)?;
    tls_text(r, out)
}

fn latency_table(l: &crate::Latency, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "  Thread Stats   Avg      Stdev     Max   +/- Stdev")?;
    writeln!(
        out,
        "    Latency   {:>8}  {:>8}  {:>8}  {:>7.2}%",
        fmt_ms(l.mean),
        fmt_ms(l.stdev),
        fmt_ms(l.max),
        l.within_stdev * 100.0
    )?;
    writeln!(out, "  Latency Distribution")?;
    for (label, v) in [
        ("50%", l.p50),
        ("75%", l.p75),
        ("90%", l.p90),
        ("99%", l.p99),
        ("99.9%", l.p999),
        ("max", l.max),
    ] {
        writeln!(out, "  {label:>6}  {:>8}", fmt_ms(v))?;
    }
    Ok(())
}

fn rest(r: &Report, out: &mut impl Write) -> io::Result<()> {
    if r.status.len() > 1 || r.status.keys().any(|&c| !(200..400).contains(&c)) {
        let codes: Vec<String> = r.status.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        writeln!(out, "  Status codes: {}", codes.join(", "))?;
    }
    let e = &r.errors;
    if e.status > 0 {
        writeln!(out, "  Non-2xx or 3xx responses: {}", e.status)?;
    }
    if e.connect + e.read + e.write + e.timeout > 0 {
        writeln!(
            out,
            "  Socket errors: connect {}, read {}, write {}, timeout {}",
            e.connect, e.read, e.write, e.timeout
        )?;
        let mut causes: Vec<(&String, &u64)> = r.error_causes.iter().collect();
        causes.sort_by(|a, b| b.1.cmp(a.1));
        for (what, n) in causes {
            writeln!(out, "    {what}: {n}")?;
        }
    }
    if let Some(rate) = &r.rate {
        writeln!(
            out,
            "  Schedule: {} requests/sec asked; {} sends late by more than {} ms (worst {})",
            rate.target,
            rate.late_sends,
            LATE_AFTER.as_millis(),
            fmt_ms(rate.max_late.as_secs_f64() * 1000.0)
        )?;
    }
    writeln!(out, "Requests/sec: {:>10.2}", r.requests_per_sec())?;
    writeln!(
        out,
        "Transfer/sec: {:>10}",
        fmt_bytes(r.transfer_bytes_per_sec())
    )?;
    Ok(())
}

/// The run's JSON document, its `tls` object included.
pub fn json(r: &Report) -> serde_json::Value {
    let mut doc = json_without_tls(r);
    doc["tls"] = tls_json(r);
    doc
}

fn json_without_tls(r: &Report) -> serde_json::Value {
    let l = r.latency();
    let e = &r.errors;
    let status: serde_json::Map<String, serde_json::Value> = r
        .status
        .iter()
        .map(|(c, n)| (c.to_string(), (*n).into()))
        .collect();
    serde_json::json!({
        "url": r.url,
        "connections": r.connections,
        "threads": r.threads,
        "keepalive": r.keepalive,
        "duration_s": r.elapsed.as_secs_f64(),
        "requests": r.requests,
        "bytes": r.bytes,
        "connects": r.connects,
        "requests_per_sec": r.requests_per_sec(),
        "transfer_bytes_per_sec": r.transfer_bytes_per_sec(),
        "latency_from": if r.rate.is_some() { "schedule" } else { "send" },
        "latency_ms": {
            "p50": l.p50, "p75": l.p75, "p90": l.p90, "p99": l.p99, "p999": l.p999,
            "max": l.max, "mean": l.mean, "stdev": l.stdev,
        },
        "errors": {
            "connect": e.connect, "read": e.read, "write": e.write,
            "timeout": e.timeout, "status": e.status, "total": e.total(),
            "causes": r.error_causes,
        },
        "status_codes": status,
        "rate": r.rate.map(|rate| serde_json::json!({
            "target_per_sec": rate.target,
            "late_sends": rate.late_sends,
            "late_after_ms": LATE_AFTER.as_secs_f64() * 1000.0,
            "max_late_ms": rate.max_late.as_secs_f64() * 1000.0,
        })),
    })
}

/// The handshake lines of the load's text report.
fn tls_text(r: &Report, out: &mut impl Write) -> io::Result<()> {
    if let (Some(h), Some(p50)) = (&r.tls_handshakes, r.tls_handshake_at(0.5)) {
        writeln!(
            out,
            "  TLS handshakes {}: p50 {:.2} ms, p90 {:.2} ms, max {:.2} ms (TCP established to TLS \
             established; not in the latencies above)",
            h.len(),
            p50,
            r.tls_handshake_at(0.9).unwrap_or(0.0),
            h.max() as f64 / 1000.0
        )?;
    }
    if let Some(e) = &r.tls_error {
        writeln!(out, "  {e}")?;
    }
    Ok(())
}

/// The `tls` object of the load's JSON (null for http://).
fn tls_json(r: &Report) -> serde_json::Value {
    match &r.tls_handshakes {
        None => serde_json::Value::Null,
        Some(h) => serde_json::json!({
            "handshakes": h.len(),
            "handshake_ms": if h.is_empty() { serde_json::Value::Null } else { serde_json::json!({
                "p50": r.tls_handshake_at(0.5), "p90": r.tls_handshake_at(0.9),
                "p99": r.tls_handshake_at(0.99), "max": h.max() as f64 / 1000.0,
            })},
            "error": r.tls_error,
        }),
    }
}
