//! `tcpdoctor ping` and `tcpdoctor trace` (the work is in `tcpdoctor-probe`).

use std::io::{self, IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tcpdoctor_engine::round3;

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
  tcpdoctor ping -c 3 http://10.0.0.2:8080/     a URL: its host and port
  tcpdoctor ping -S -p 80 -c 3 10.0.0.2          hping3's own spelling

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
  tcpdoctor trace http://10.0.4.2:8080/            a URL: its host and port
  tcpdoctor trace -c 20 -i 200ms 10.0.4.2:80       20 rounds: loss and jitter per hop (as mtr)
  tcpdoctor trace -c 60 --report --format json 10.0.4.2:80 | jq '.hops[] | [.ttl, .loss]'

Sends TCP SYNs with TTL (hop limit) 1, 2, 3…, three per hop, up to 16 in flight at once (-N),
nearest hops first, as traceroute and mtr do: a hop that answers nothing costs one wait (-w),
shared with the hops probed beside it, and once a farther hop has answered, a silent one is given
up after 10 times that answer's round trip. Hops are printed in order as they complete. Each router where the TTL runs out
answers with ICMP time exceeded, matched to its probe by the TCP header it quotes; the target
itself answers with SYN-ACK (open) or RST (closed), which ends the trace. All probes belong to one
flow (same addresses, ports and header fields; only the sequence number differs), so routers that
balance load by flow (ECMP) send them all the same way, and the path shown is the one a
connection to that port takes. `*`: no answer within the wait (a router that does not send ICMP, a
firewall, or ICMP rate limiting). !N !H !P !X: unreachable (network, host, protocol, prohibited).

Needs root or CAP_NET_RAW.

Ctrl-C stops at once: the hops done so far stay printed, then one line says it was interrupted.

Exit status: 0 the target answered; 1 it did not (or interrupted first); 2 usage error or no
permission.";

/// `-4`, `-6`: the address family the target is resolved in.
#[derive(clap::Args)]
struct FamilyArgs {
    /// Use IPv4 only.
    #[arg(short = '4', conflicts_with = "ipv6")]
    ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6')]
    ipv6: bool,
}

#[derive(clap::Args)]
pub struct PingArgs {
    /// Target: HOST:PORT, [IPV6]:PORT, or a URL (http://host:port/; port 80 when omitted).
    target: String,
    /// Probes to send (default: until Ctrl-C).
    #[arg(short = 'c', long, value_name = "N")]
    count: Option<u64>,
    /// Time between probes: 1s, 200ms, 0.5 (seconds), u100000 (µs, as hping3).
    #[arg(short = 'i', long, default_value = "1s", value_parser = parse_duration, value_name = "TIME", value_hint = clap::ValueHint::Other)]
    interval: Duration,
    /// How long to wait for the last probe's answer.
    #[arg(short = 'W', long, default_value = "1s", value_parser = parse_duration, value_name = "TIME")]
    timeout: Duration,
    /// Time connect() instead of sending raw SYNs.
    #[arg(long)]
    connect: bool,
    /// Destination port (hping3 -p), instead of the one in the target.
    #[arg(short = 'p', long, value_name = "PORT")]
    port: Option<u16>,
    /// Accepted for hping3's command lines: the probes are SYNs anyway.
    #[arg(short = 'S', long = "syn", hide = true)]
    _syn: bool,
    #[command(flatten)]
    family: FamilyArgs,
    /// Output format: `text` (hping3-like) or `json`.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

impl PingArgs {
    /// The ping asked for: the target resolved, the times checked.
    fn config(&self) -> anyhow::Result<PingConfig> {
        let target = resolve(&self.target, self.port, &self.family)?;
        if self.interval.is_zero() || self.timeout.is_zero() {
            anyhow::bail!("interval and timeout must be above 0");
        }
        Ok(PingConfig {
            target,
            count: self.count,
            interval: self.interval,
            timeout: self.timeout,
            connect_only: self.connect,
        })
    }
}

#[derive(clap::Args)]
pub struct TraceArgs {
    /// Target: HOST:PORT, [IPV6]:PORT, or a URL (http://host:port/; port 80 when omitted).
    target: String,
    /// Maximum number of hops.
    #[arg(short = 'm', long, default_value_t = 30, value_name = "N")]
    max_hops: u8,
    /// First TTL.
    #[arg(short = 'f', long, default_value_t = 1, value_name = "N")]
    first_ttl: u8,
    /// Probes per hop (per round).
    #[arg(short = 'q', long, default_value_t = 3, value_name = "N")]
    queries: u8,
    /// Longest wait for a probe's answer; once a farther hop has answered, a probe is
    /// given up after 10 times that answer's round trip (as traceroute's -w).
    #[arg(short = 'w', long, default_value = "2s", value_parser = parse_duration, value_name = "TIME")]
    wait: Duration,
    /// Probes in flight at once (traceroute -N).
    #[arg(short = 'N', long, default_value_t = 16, value_name = "N")]
    parallel: usize,
    /// Rounds over the path, for loss and jitter per hop (as mtr -c); the table of
    /// each hop's loss and round trips is printed at the end.
    #[arg(
        short = 'c',
        long,
        visible_alias = "repeat",
        default_value_t = 1,
        value_name = "N"
    )]
    count: u32,
    /// Time between the starts of two rounds (with --count).
    #[arg(short = 'i', long, default_value = "1s", value_parser = parse_duration, value_name = "TIME", value_hint = clap::ValueHint::Other)]
    interval: Duration,
    /// Print only the per-hop table at the end (as mtr --report), not the hops as they come.
    #[arg(long)]
    report: bool,
    /// Destination port (traceroute -p), instead of the one in the target.
    #[arg(short = 'p', long, value_name = "PORT")]
    port: Option<u16>,
    #[command(flatten)]
    family: FamilyArgs,
    /// Output format: `text` (traceroute-like) or `json`.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

impl TraceArgs {
    /// The trace asked for: the target resolved, the counts and times checked.
    fn config(&self) -> anyhow::Result<TraceConfig> {
        let target = resolve(&self.target, self.port, &self.family)?;
        if self.queries == 0 || self.wait.is_zero() || self.count == 0 || self.parallel == 0 {
            anyhow::bail!("at least one probe per hop, one round, one probe in flight and a wait above 0 are needed");
        }
        Ok(TraceConfig {
            target,
            first_ttl: self.first_ttl,
            max_hops: self.max_hops,
            probes: self.queries,
            wait: self.wait,
            parallel: self.parallel,
            rounds: self.count,
            interval: self.interval,
        })
    }
}

impl FamilyArgs {
    fn family(&self) -> Family {
        match (self.ipv4, self.ipv6) {
            (true, _) => Family::V4,
            (_, true) => Family::V6,
            _ => Family::Any,
        }
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

/// The address to probe: `target` (a host, `host:port` or a URL) resolved in
/// the family asked for, its port replaced by `--port` when given.
fn resolve(target: &str, port: Option<u16>, family: &FamilyArgs) -> anyhow::Result<SocketAddr> {
    let mut addr = tcpdoctor_probe::resolve(&crate::target::host_port(target), family.family())?;
    if let Some(p) = port {
        addr.set_port(p);
    }
    Ok(addr)
}

pub fn ping(args: &PingArgs) -> anyhow::Result<u8> {
    let config = args.config()?;
    let target = config.target;
    let text = matches!(args.format, Format::Text);
    let mut method = None;
    let mut replies = Vec::new();
    let mut out = io::stdout();
    let stats = tcpdoctor_probe::ping(&config, &stop_on_ctrl_c(), |e| {
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
                "refused": stats.refused,
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
            let mut doc = doc;
            tcpdoctor_report::stamp(
                &mut doc,
                "ping",
                serde_json::json!({
                    "target": args.target, "port": args.port, "count": args.count,
                    "interval_ms": ms(args.interval), "timeout_ms": ms(args.timeout),
                    "connect": args.connect,
                }),
            );
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
    let config = args.config()?;
    let target = config.target;
    let text = matches!(args.format, Format::Text);
    let lines = text && !args.report;
    let rounds_progress = text && args.count > 1 && io::stderr().is_terminal();
    let mut out = io::stdout();
    let started = std::time::Instant::now();
    let result = tcpdoctor_probe::trace(&config, &stop_on_ctrl_c(), |e| {
        let _ = match e {
            TraceEvent::Started(src) if text => writeln!(
                out,
                "traceroute to {target}, {} hops max, TCP SYN from {src} (one flow: same addresses and ports for every probe)",
                config.max_hops
            ),
            TraceEvent::HopDone(hop) if lines => {
                writeln!(out, "{}", hop_line(hop)).and_then(|_| out.flush())
            }
            TraceEvent::RoundDone(n) if rounds_progress => {
                eprint!("\r\x1b[2Kround {n} of {}", config.rounds);
                Ok(())
            }
            _ => Ok(()),
        };
    })
    .map_err(probe_error)?;
    if rounds_progress {
        eprint!("\r\x1b[2K");
    }
    let elapsed = started.elapsed();
    if !text {
        let input = serde_json::json!({
            "target": args.target, "port": args.port, "max_hops": args.max_hops,
            "first_ttl": args.first_ttl, "queries": args.queries, "wait_ms": ms(args.wait),
            "parallel": args.parallel, "count": args.count, "interval_ms": ms(args.interval),
        });
        let mut doc = serde_json::json!({
            "target": target.to_string(),
            "source": result.source.to_string(),
            "reached": result.reached,
            "rounds": result.rounds,
            "interrupted": result.interrupted,
            "elapsed_s": round3(elapsed.as_secs_f64()),
            "hops": result.hops.iter().map(|h| {
                let s = hop_stats(h);
                serde_json::json!({
                    "ttl": h.ttl,
                    "addresses": h.addresses().iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                    "sent": h.probes.len(),
                    "answered": h.answered(),
                    "loss": round3(h.loss()),
                    "rtt_ms": s.map(|s| serde_json::json!({
                        "last": s.last, "avg": s.avg, "best": s.best, "worst": s.worst, "stdev": s.stdev,
                    })),
                    "probes": h.probes.iter().map(|p| match p.answer {
                        None => serde_json::Value::Null,
                        Some((from, rtt, kind)) => serde_json::json!({
                            "from": from.to_string(), "rtt_ms": round3(ms(rtt)),
                            "reply": reply_name(kind),
                        }),
                    }).collect::<Vec<_>>(),
                })
            }).collect::<Vec<_>>(),
        });
        tcpdoctor_report::stamp(&mut doc, "trace", input);
        serde_json::to_writer(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        if result.interrupted {
            // The terminal echoed ^C: start a clean line.
            let wipe = if io::stdout().is_terminal() {
                "\r\x1b[2K"
            } else {
                ""
            };
            writeln!(
                out,
                "{wipe}interrupted after {} round(s), {:.1} s",
                result.rounds,
                elapsed.as_secs_f64()
            )?;
        }
        if args.report || args.count > 1 {
            report_table(&mut out, &result)?;
        }
        if !result.reached && !result.interrupted {
            writeln!(out, "target not reached")?;
        }
    }
    out.flush()?;
    Ok(if result.reached { 0 } else { 1 })
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
fn hop_line(hop: &tcpdoctor_probe::Hop) -> String {
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

fn hop_stats(h: &tcpdoctor_probe::Hop) -> Option<HopStats> {
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
fn report_table(out: &mut impl Write, r: &tcpdoctor_probe::TraceResult) -> io::Result<()> {
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
