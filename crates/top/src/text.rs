//! The text views: a top-like table per interval, and the final report.

use std::fmt::Write;

use crate::tracker::{Final, Interval, Stats};
pub use tcpdoctor_units::bytes;

pub fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else if noun.ends_with('s') {
        format!("{n} {noun}es")
    } else {
        format!("{n} {noun}s")
    }
}

fn rate(n: u64, secs: f64) -> String {
    if secs <= 0.0 {
        return bytes(n);
    }
    format!("{}/s", bytes((n as f64 / secs) as u64))
}

fn ms(us: Option<u32>) -> String {
    us.map_or_else(|| "-".into(), |u| format!("{:.2}", f64::from(u) / 1000.0))
}

fn opt(v: Option<u32>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn lost_words(stats: &Stats, lost_now: u64) -> String {
    let mut s = format!("{} lost", lost_now);
    if stats.lost > 0 {
        s.push_str(&format!(
            " ({} in all: counts below have holes)",
            stats.lost
        ));
    }
    if stats.throttled > 0 {
        s.push_str(&format!(", sampling throttled {} times", stats.throttled));
    }
    let bad = stats.truncated + stats.bad_records + stats.unknown_type;
    if bad > 0 {
        s.push_str(&format!(", {bad} records not decoded"));
    }
    s
}

/// The interval table.
pub fn interval(
    iv: &Interval,
    secs: f64,
    elapsed: f64,
    stats: &Stats,
    lost_now: u64,
    names: &dyn Fn(u32) -> Option<String>,
) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "tcpdoctor top  {elapsed:.0} s  {} events, {}; {} open connections",
        stats.events,
        lost_words(stats, lost_now),
        iv.open
    );
    let _ = writeln!(
        o,
        "\n{:>8} {:<16} {:>5} {:>12} {:>12} {:>8} {:>7} {:>4} {:>6}",
        "PID", "COMMAND", "CONNS", "WRITTEN", "READ", "WRITES", "RETRANS", "RTO", "RESETS"
    );
    for p in &iv.processes {
        let pid = p.pid.map_or_else(|| "?".into(), |p| p.to_string());
        let cmd = p
            .command
            .clone()
            .or_else(|| p.pid.and_then(names))
            .unwrap_or_else(|| "(unknown)".into());
        let _ = writeln!(
            o,
            "{:>8} {:<16} {:>5} {:>12} {:>12} {:>8} {:>7} {:>4} {:>6}",
            pid,
            cmd.chars().take(16).collect::<String>(),
            p.connections,
            rate(p.delta.sent, secs),
            rate(p.delta.received, secs),
            p.delta.writes,
            p.delta.retransmits,
            p.rto_episodes,
            p.resets
        );
    }
    if !iv.connections.is_empty() {
        let _ = writeln!(
            o,
            "\n{:>8} {:<46} {:>10} {:>10} {:>7} {:>7} {:>5} {:>9} {:>9} {:>4}",
            "PID",
            "LOCAL -> REMOTE",
            "WRITTEN",
            "READ",
            "SRTT",
            "MIN",
            "CWND",
            "SND_WND",
            "RCV_WND",
            "RTX"
        );
        for c in &iv.connections {
            let pid = c.pid.map_or_else(|| "?".into(), |p| p.to_string());
            let t = format!(
                "{} -> {}{}",
                c.local.map_or("?".into(), |a| a.to_string()),
                c.remote.map_or("?".into(), |a| a.to_string()),
                if c.closed { " (closed)" } else { "" }
            );
            let _ = writeln!(
                o,
                "{:>8} {:<46} {:>10} {:>10} {:>7} {:>7} {:>5} {:>9} {:>9} {:>4}",
                pid,
                t,
                bytes(c.delta.sent),
                bytes(c.delta.received),
                ms(c.srtt_us),
                ms(c.srtt_min_us),
                opt(c.cwnd),
                opt(c.snd_wnd),
                opt(c.rcv_wnd),
                c.delta.retransmits
            );
        }
    }
    for x in &iv.findings {
        o.push('\n');
        finding(&mut o, x, "");
    }
    o
}

/// The final report.
pub fn final_report(f: &Final, elapsed_s: f64) -> String {
    let mut o = String::new();
    let s = &f.stats;
    let _ = writeln!(
        o,
        "tcpdoctor top: {:.1} s traced, {} events, {} lost, {}, {}",
        elapsed_s,
        s.events,
        s.lost,
        plural(s.connections_seen, "connection"),
        plural(f.processes.len() as u64, "process")
    );
    for n in s.notes() {
        let _ = writeln!(o, "  note: {n}");
    }
    if s.rcvqueue_full + s.exceed_buf_limit_receive + s.exceed_buf_limit_send > 0 {
        let _ = writeln!(
            o,
            "  system: {} receive-queue-full events, {} receive / {} send memory-limit events \
             (the kernel names no socket for these)",
            s.rcvqueue_full, s.exceed_buf_limit_receive, s.exceed_buf_limit_send
        );
    }
    let _ = writeln!(o, "\nProcesses:");
    for p in f.processes.iter().take(20) {
        let _ = writeln!(
            o,
            "  {} {} — {}: wrote {} in {} writes, read {}, {} retransmitted, {} RTO, {} resets",
            p.pid,
            if p.command.is_empty() {
                "(exited)"
            } else {
                &p.command
            },
            plural(p.connections, "connection"),
            bytes(p.totals.sent),
            p.totals.writes,
            bytes(p.totals.received),
            p.totals.retransmits,
            p.rto_episodes,
            p.resets
        );
        if !p.cmdline.is_empty() {
            let _ = writeln!(
                o,
                "      {}",
                p.cmdline.chars().take(100).collect::<String>()
            );
        }
    }
    if f.findings.is_empty() {
        let _ = writeln!(
            o,
            "\nNo findings: no loss, retransmission timeout, SYN retry, reset, Nagle hold or window \
             stall."
        );
    } else {
        let _ = writeln!(o, "\nFindings:");
        for x in &f.findings {
            finding(&mut o, x, "  ");
        }
    }
    o
}

/// A finding's two lines (kind, culprit, explanation; its fix), the first
/// indented by `indent`.
fn finding(o: &mut String, x: &crate::findings::Finding, indent: &str) {
    let _ = writeln!(
        o,
        "{indent}{} ({}, {}): {}\n    fix: {}",
        kind_name(x.kind),
        x.culprit.role,
        x.culprit.endpoint,
        x.explanation,
        x.fix
    );
}

/// A finding kind's name, as in the JSON.
fn kind_name(k: crate::findings::FindingKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
