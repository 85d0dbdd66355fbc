//! `tcpdoctor ping` and `tcpdoctor trace` (the work is in `tcpdoctor-probe`).

use std::io::{self, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tcpdoctor_probe::{
    packet::flag_letters, Family, HopReply, Method, PingConfig, PingEvent, PingStats, ProbeError,
    ReplyKind, TraceConfig, TraceEvent,
};

use crate::load::parse_duration;
use crate::Format;

pub const PING_HELP: &str = "\
Examples:
  tcpdoctor ping 10.0.0.2:80                one SYN a second until Ctrl-C (hping3 -S -p 80)
  tcpdoctor ping -c 10 -i 200ms example.com:443
  tcpdoctor ping -c 5 [2001:db8::2]:8080    IPv6
  tcpdoctor ping -c 10 --format json 10.0.0.2:80 | jq .rtt_ms

Each probe is a TCP SYN from one reserved source port, sent over a raw socket; the round trip runs
from the SYN to the SYN-ACK (port open) or RST (port closed) that acknowledges it. A SYN-ACK is
answered with an RST, so the server keeps no half-open connection. Works where ICMP ping is blocked
and measures what a connection setup costs. The round trip of a SYN is the network's (plus the
server kernel's): a fast SYN round trip with slow requests points away from the network.

Needs root or CAP_NET_RAW; without them it times connect() instead and says so.

Exit status: 0 at least one probe answered; 1 none answered; 2 usage error.";

pub const TRACE_HELP: &str = "\
Examples:
  tcpdoctor trace 10.0.4.2:80
  tcpdoctor trace -q 1 -w 500ms example.com:443
  tcpdoctor trace [2001:db8::2]:8080

Sends TCP SYNs with TTL (hop limit) 1, 2, 3…, three per hop. Each router where the TTL runs out
answers with ICMP time exceeded, matched to its probe by the TCP header it quotes; the target
itself answers with SYN-ACK (open) or RST (closed), which ends the trace. All probes belong to one
flow (same addresses, ports and header fields; only the sequence number differs), so routers that
balance load by flow (ECMP) send them all the same way, and the path shown is the one a
connection to that port takes. `*`: no answer within the wait (a router that does not send ICMP, a
firewall, or ICMP rate limiting). !N !H !P !X: unreachable (network, host, protocol, prohibited).

Needs root or CAP_NET_RAW.

Exit status: 0 the target answered; 1 it did not; 2 usage error or no permission.";

#[derive(clap::Args)]
pub struct PingArgs {
    /// Target: HOST:PORT, [IPV6]:PORT (port 80 when omitted).
    target: String,
    /// Probes to send (default: until Ctrl-C).
    #[arg(short = 'c', long, value_name = "N")]
    count: Option<u64>,
    /// Time between probes: 1s, 200ms, 0.5 (seconds), u100000 (µs, as hping3).
    #[arg(short = 'i', long, default_value = "1s", value_parser = parse_duration, value_name = "TIME")]
    interval: Duration,
    /// How long to wait for the last probe's answer.
    #[arg(short = 'W', long, default_value = "1s", value_parser = parse_duration, value_name = "TIME")]
    timeout: Duration,
    /// Time connect() instead of sending raw SYNs.
    #[arg(long)]
    connect: bool,
    /// Use IPv4 only.
    #[arg(short = '4', conflicts_with = "ipv6")]
    ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6')]
    ipv6: bool,
    /// Output format: `text` (hping3-like) or `json`.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(clap::Args)]
pub struct TraceArgs {
    /// Target: HOST:PORT, [IPV6]:PORT (port 80 when omitted).
    target: String,
    /// Maximum number of hops.
    #[arg(short = 'm', long, default_value_t = 30, value_name = "N")]
    max_hops: u8,
    /// First TTL.
    #[arg(short = 'f', long, default_value_t = 1, value_name = "N")]
    first_ttl: u8,
    /// Probes per hop.
    #[arg(short = 'q', long, default_value_t = 3, value_name = "N")]
    queries: u8,
    /// Wait for each probe's answer.
    #[arg(short = 'w', long, default_value = "2s", value_parser = parse_duration, value_name = "TIME")]
    wait: Duration,
    /// Use IPv4 only.
    #[arg(short = '4', conflicts_with = "ipv6")]
    ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6')]
    ipv6: bool,
    /// Output format: `text` (traceroute-like) or `json`.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

fn family(v4: bool, v6: bool) -> Family {
    match (v4, v6) {
        (true, _) => Family::V4,
        (_, true) => Family::V6,
        _ => Family::Any,
    }
}

fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let _ = ctrlc::set_handler(move || s.store(true, std::sync::atomic::Ordering::Relaxed));
    stop
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn ping(args: &PingArgs) -> anyhow::Result<u8> {
    let target = tcpdoctor_probe::resolve(&args.target, family(args.ipv4, args.ipv6))?;
    if args.interval.is_zero() || args.timeout.is_zero() {
        anyhow::bail!("interval and timeout must be above 0");
    }
    let config = PingConfig {
        target,
        count: args.count,
        interval: args.interval,
        timeout: args.timeout,
        connect_only: args.connect,
    };
    let stop = stop_on_ctrl_c();
    let text = matches!(args.format, Format::Text);
    let mut method = None;
    let mut replies = Vec::new();
    let mut out = io::stdout();
    let stats = tcpdoctor_probe::ping(&config, &stop, |e| {
        match e {
            PingEvent::Started(m) => {
                if text {
                    let _ = match m {
                        Method::RawSyn { source } => writeln!(
                            out,
                            "TCPING {target}: SYN probes from {source} over a raw socket"
                        ),
                        Method::Connect { reason } => writeln!(
                            out,
                            "TCPING {target}: timing connect() (full handshake), not raw SYN probes: {reason}"
                        ),
                    };
                }
                method = Some(m.clone());
            }
            PingEvent::Reply(r) => {
                if text {
                    let _ = match r.kind {
                        ReplyKind::Icmp(k) => writeln!(
                            out,
                            "ICMP {} from ip={} seq={} rtt={:.1} ms",
                            if k.mark().is_empty() { "time exceeded".to_string() } else { format!("unreachable {}", k.mark()) },
                            r.from, r.seq, ms(r.rtt)
                        ),
                        ReplyKind::Connected | ReplyKind::Refused => writeln!(
                            out,
                            "ip={} port={} {} seq={} rtt={:.1} ms",
                            r.from,
                            target.port(),
                            if r.kind == ReplyKind::Connected { "connected" } else { "refused" },
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
                    };
                    let _ = out.flush();
                }
                replies.push(*r);
            }
        }
    })
    .map_err(probe_error)?;
    match args.format {
        Format::Text => ping_summary(&mut out, &target.ip().to_string(), &stats)?,
        Format::Json => {
            let (min, avg, max, mdev) = stats.summary_ms().unwrap_or_default();
            let doc = serde_json::json!({
                "target": target.to_string(),
                "method": match &method {
                    Some(Method::RawSyn { .. }) => "raw_syn",
                    _ => "connect",
                },
                "source": match &method { Some(Method::RawSyn { source }) => Some(source.to_string()), _ => None },
                "fallback_reason": match &method { Some(Method::Connect { reason }) => Some(reason.clone()), _ => None },
                "transmitted": stats.transmitted,
                "received": stats.received,
                "errors": stats.errors,
                "loss": stats.loss(),
                "rtt_ms": if stats.rtts.is_empty() { serde_json::Value::Null } else {
                    serde_json::json!({"min": min, "avg": avg, "max": max, "mdev": mdev,
                                       "median": stats.median_ms()})
                },
                "replies": replies.iter().map(|r| serde_json::json!({
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
            });
            serde_json::to_writer(&mut out, &doc)?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    Ok(if stats.received > 0 { 0 } else { 1 })
}

fn ping_summary(out: &mut impl Write, host: &str, s: &PingStats) -> io::Result<()> {
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

fn probe_error(e: ProbeError) -> anyhow::Error {
    match e {
        ProbeError::Permission(m) => {
            anyhow::anyhow!("{m} (run as root, or `setcap cap_net_raw+ep` the binary)")
        }
        e => anyhow::anyhow!(e),
    }
}

pub fn trace(args: &TraceArgs) -> anyhow::Result<u8> {
    let target = tcpdoctor_probe::resolve(&args.target, family(args.ipv4, args.ipv6))?;
    if args.queries == 0 || args.wait.is_zero() {
        anyhow::bail!("at least one probe per hop and a wait above 0 are needed");
    }
    let config = TraceConfig {
        target,
        first_ttl: args.first_ttl,
        max_hops: args.max_hops,
        probes: args.queries,
        wait: args.wait,
    };
    let stop = stop_on_ctrl_c();
    let text = matches!(args.format, Format::Text);
    let mut out = io::stdout();
    let mut line_from: Option<std::net::IpAddr> = None;
    let mut line_started = false;
    let result = tcpdoctor_probe::trace(&config, &stop, |e| {
        if !text {
            return;
        }
        let _ = match e {
            TraceEvent::Started(src) => writeln!(
                out,
                "traceroute to {target}, {} hops max, TCP SYN from {src} (one flow: same addresses and ports for every probe)",
                config.max_hops
            ),
            TraceEvent::Probe { ttl, probe } => {
                let mut s = String::new();
                if !std::mem::replace(&mut line_started, true) {
                    s.push_str(&format!("{ttl:>2} "));
                }
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
                write!(out, "{s}").and_then(|_| out.flush())
            }
            TraceEvent::HopDone(_) => {
                (line_from, line_started) = (None, false);
                writeln!(out)
            }
        };
    })
    .map_err(probe_error)?;
    if !text {
        let doc = serde_json::json!({
            "target": target.to_string(),
            "source": result.source.to_string(),
            "reached": result.reached,
            "hops": result.hops.iter().map(|h| serde_json::json!({
                "ttl": h.ttl,
                "probes": h.probes.iter().map(|p| match p.answer {
                    None => serde_json::Value::Null,
                    Some((from, rtt, kind)) => serde_json::json!({
                        "from": from.to_string(), "rtt_ms": ms(rtt),
                        "reply": match kind {
                            HopReply::TimeExceeded => "time_exceeded".to_string(),
                            HopReply::Unreachable(k) => format!("unreachable{}", k.mark()),
                            HopReply::SynAck => "syn-ack".to_string(),
                            HopReply::Rst => "rst".to_string(),
                        },
                    }),
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        serde_json::to_writer(&mut out, &doc)?;
        writeln!(out)?;
    } else if !result.reached {
        writeln!(out, "target not reached")?;
    }
    out.flush()?;
    Ok(if result.reached { 0 } else { 1 })
}
