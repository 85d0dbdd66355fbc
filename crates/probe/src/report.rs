//! What `tcpdoctor ping` and `tcpdoctor trace` print: hping3's lines and
//! summary, traceroute's lines, mtr's per-hop table, and the JSON documents
//! of both (without the `schema`/`command`/`input` stamp, the binary's).
//!
//! Writers' I/O errors are returned as they are.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde_json::{json, Value};
use tcpdoctor_units::round3;

use crate::packet::flag_letters;
use crate::{Hop, HopReply, Method, PingReply, PingStats, ReplyKind, TraceResult};

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The first line of a ping: how the probes go.
pub fn ping_started(out: &mut impl Write, target: SocketAddr, m: &Method) -> io::Result<()> {
    match m {
        Method::RawSyn { source } => writeln!(
            out,
            "TCPING {target}: SYN probes from {source} over a raw socket"
        ),
        Method::Connect { reason } => writeln!(
            out,
            "TCPING {target}: timing connect() (full handshake), not raw SYN probes: {reason}"
        ),
    }
}

/// hping3's line for a reply.
pub fn ping_reply(out: &mut impl Write, target: SocketAddr, r: &PingReply) -> io::Result<()> {
    match r.kind {
        ReplyKind::Icmp(k) => writeln!(
            out,
            "ICMP {} from ip={} seq={} rtt={:.1} ms",
            if k.mark().is_empty() {
                "time exceeded".to_string()
            } else {
                format!("unreachable {}", k.mark())
            },
            r.from,
            r.seq,
            ms(r.rtt)
        ),
        ReplyKind::Connected | ReplyKind::Refused => writeln!(
            out,
            "ip={} port={} {} seq={} rtt={:.1} ms",
            r.from,
            target.port(),
            if r.kind == ReplyKind::Connected {
                "connected"
            } else {
                "refused"
            },
            r.seq,
            ms(r.rtt)
        ),
        _ => writeln!(
            out,
            "len={} ip={} ttl={} sport={} flags={} seq={} win={} rtt={:.1} ms",
            r.len.unwrap_or(0),
            r.from,
            r.ttl.map_or("?".to_string(), |t| t.to_string()),
            target.port(),
            flag_letters(r.flags.unwrap_or(0)),
            r.seq,
            r.window.unwrap_or(0),
            ms(r.rtt)
        ),
    }
}

/// The statistics at the end of a ping, as ping prints them.
pub fn ping_summary(out: &mut impl Write, host: IpAddr, s: &PingStats) -> io::Result<()> {
    writeln!(out, "\n--- {host} tcpdoctor ping statistic ---")?;
    let errors = if s.errors > 0 {
        format!(", +{} errors", s.errors)
    } else {
        String::new()
    };
    writeln!(
        out,
        "{} packets transmitted, {} packets received{errors}, {:.0}% packet loss",
        s.transmitted,
        s.received,
        s.loss() * 100.0
    )?;
    if let Some((min, avg, max, mdev)) = s.summary_ms() {
        writeln!(
            out,
            "round-trip min/avg/max/mdev = {min:.3}/{avg:.3}/{max:.3}/{mdev:.3} ms"
        )?;
    }
    Ok(())
}

/// A ping's JSON document: how it probed, the statistics, every reply.
pub fn ping_json(
    target: SocketAddr,
    method: Option<&Method>,
    stats: &PingStats,
    replies: &[PingReply],
) -> Value {
    let (min, avg, max, mdev) = stats.summary_ms().unwrap_or_default();
    json!({
        "target": target.to_string(),
        "method": match method {
            Some(Method::RawSyn { .. }) => "raw_syn",
            _ => "connect",
        },
        "source": match method { Some(Method::RawSyn { source }) => Some(source.to_string()), _ => None },
        "fallback_reason": match method { Some(Method::Connect { reason }) => Some(reason.clone()), _ => None },
        "transmitted": stats.transmitted,
        "received": stats.received,
        "refused": stats.refused,
        "errors": stats.errors,
        "loss": stats.loss(),
        "rtt_ms": if stats.rtts.is_empty() { Value::Null } else {
            json!({"min": min, "avg": avg, "max": max, "mdev": mdev,
                   "median": stats.median_ms()})
        },
        "replies": replies.iter().map(|r| json!({
            "seq": r.seq, "rtt_ms": ms(r.rtt), "from": r.from.to_string(),
            "reply": match r.kind {
                ReplyKind::SynAck => "syn-ack".to_string(),
                ReplyKind::Rst => "rst".to_string(),
                ReplyKind::Connected => "connected".to_string(),
                ReplyKind::Refused => "refused".to_string(),
                ReplyKind::Icmp(k) => format!("icmp{}", k.mark()),
            },
            "ttl": r.ttl, "window": r.window,
        })).collect::<Vec<_>>(),
    })
}

/// The first line of a trace.
pub fn trace_started(
    out: &mut impl Write,
    target: SocketAddr,
    max_hops: u8,
    source: SocketAddr,
) -> io::Result<()> {
    writeln!(
        out,
        "traceroute to {target}, {max_hops} hops max, TCP SYN from {source} (one flow: same addresses and ports for every probe)",
    )
}

/// The end of a trace's text: that it was interrupted (`wipe` first: the
/// terminal echoed ^C), the per-hop table (`table`), or that the target was
/// not reached.
pub fn trace_end(
    out: &mut impl Write,
    result: &TraceResult,
    elapsed: Duration,
    table: bool,
    wipe: &str,
) -> io::Result<()> {
    if result.interrupted {
        writeln!(
            out,
            "{wipe}interrupted after {} round(s), {:.1} s",
            result.rounds,
            elapsed.as_secs_f64()
        )?;
    }
    if table {
        report_table(out, result)?;
    }
    if !result.reached && !result.interrupted {
        writeln!(out, "target not reached")?;
    }
    Ok(())
}

/// A trace's JSON document: every hop, its loss, round trips and probes.
pub fn trace_json(target: SocketAddr, result: &TraceResult, elapsed: Duration) -> Value {
    json!({
        "target": target.to_string(),
        "source": result.source.to_string(),
        "reached": result.reached,
        "rounds": result.rounds,
        "interrupted": result.interrupted,
        "elapsed_s": round3(elapsed.as_secs_f64()),
        "hops": result.hops.iter().map(|h| {
            let s = hop_stats(h);
            json!({
                "ttl": h.ttl,
                "addresses": h.addresses().iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                "sent": h.probes.len(),
                "answered": h.answered(),
                "loss": round3(h.loss()),
                "rtt_ms": s.map(|s| json!({
                    "last": s.last, "avg": s.avg, "best": s.best, "worst": s.worst, "stdev": s.stdev,
                })),
                "probes": h.probes.iter().map(|p| match p.answer {
                    None => Value::Null,
                    Some((from, rtt, kind)) => json!({
                        "from": from.to_string(), "rtt_ms": round3(ms(rtt)),
                        "reply": reply_name(kind),
                    }),
                }).collect::<Vec<_>>(),
            })
        }).collect::<Vec<_>>(),
    })
}

fn reply_name(kind: HopReply) -> String {
    match kind {
        HopReply::TimeExceeded => "time_exceeded".to_string(),
        HopReply::Unreachable(k) => format!("unreachable{}", k.mark()),
        HopReply::SynAck => "syn-ack".to_string(),
        HopReply::Rst => "rst".to_string(),
    }
}

/// A traceroute line: ` 3  10.0.2.1  0.123 ms  0.101 ms *`.
pub fn hop_line(hop: &Hop) -> String {
    let mut s = format!("{:>2} ", hop.ttl);
    let mut line_from = None;
    for probe in &hop.probes {
        match probe.answer {
            None => s.push_str(" *"),
            Some((from, rtt, kind)) => {
                if line_from != Some(from) {
                    s.push_str(&format!(" {from}"));
                    line_from = Some(from);
                }
                s.push_str(&format!("  {:.3} ms", ms(rtt)));
                match kind {
                    HopReply::TimeExceeded => {}
                    HopReply::Unreachable(k) => s.push_str(&format!(" {}", k.mark())),
                    HopReply::SynAck => s.push_str(" [open]"),
                    HopReply::Rst => s.push_str(" [closed]"),
                }
            }
        }
    }
    s
}

/// Round trips of a hop's answered probes, in ms.
struct HopStats {
    last: f64,
    avg: f64,
    best: f64,
    worst: f64,
    stdev: f64,
}

fn hop_stats(h: &Hop) -> Option<HopStats> {
    let v: Vec<f64> = h.rtts().iter().map(|d| ms(*d)).collect();
    let last = *v.last()?;
    let n = v.len() as f64;
    let avg = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n;
    Some(HopStats {
        last: round3(last),
        avg: round3(avg),
        best: round3(v.iter().copied().fold(f64::INFINITY, f64::min)),
        worst: round3(v.iter().copied().fold(0.0, f64::max)),
        stdev: round3(var.sqrt()),
    })
}

/// mtr's report: one line per hop with its loss and round trips.
pub fn report_table(out: &mut impl Write, r: &TraceResult) -> io::Result<()> {
    writeln!(
        out,
        "{:<4}{:<40} {:>6} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "hop", "host", "loss%", "sent", "last", "avg", "best", "worst", "stdev"
    )?;
    for h in &r.hops {
        let addrs = h.addresses();
        let host = if addrs.is_empty() {
            "???".to_string()
        } else {
            addrs
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let st = hop_stats(h);
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
        writeln!(
            out,
            "{:<4}{:<40} {:>5.1}% {:>5} {:>8} {:>8} {:>8} {:>8} {:>8}",
            format!("{}.", h.ttl),
            host,
            h.loss() * 100.0,
            h.probes.len(),
            f(st.as_ref().map(|s| s.last)),
            f(st.as_ref().map(|s| s.avg)),
            f(st.as_ref().map(|s| s.best)),
            f(st.as_ref().map(|s| s.worst)),
            f(st.as_ref().map(|s| s.stdev)),
        )?;
    }
    Ok(())
}
