//! `tcpdoctor ping` and `tcpdoctor trace`: their arguments and exit status
//! (the probes and what they print are `tcpdoctor-probe`'s, its `report`).

use std::io::{self, IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tcpdoctor_probe::report::{self, ms};
use tcpdoctor_probe::{Family, PingConfig, PingEvent, ProbeError, TraceConfig, TraceEvent};

use crate::load::parse_duration;
use crate::Format;

pub const PING_HELP: &str = include_str!("../help/ping.txt");

pub const TRACE_HELP: &str = include_str!("../help/trace.txt");

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

/// The address to probe: `target` (a host, `host:port` or a URL) resolved in
/// the family asked for, its port replaced by `--port` when given.
fn resolve(target: &str, port: Option<u16>, family: &FamilyArgs) -> anyhow::Result<SocketAddr> {
    let mut addr =
        tcpdoctor_probe::resolve(&tcpdoctor_probe::target::host_port(target), family.family())?;
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
    let stats = tcpdoctor_probe::ping(&config, &stop_on_ctrl_c(), |e| match e {
        PingEvent::Started(m) => {
            if text {
                let _ = report::ping_started(&mut out, target, m);
            }
            method = Some(m.clone());
        }
        PingEvent::Reply(r) => {
            if text {
                let _ = report::ping_reply(&mut out, target, r);
                let _ = out.flush();
            }
            replies.push(*r);
        }
    })
    .map_err(probe_error)?;
    match args.format {
        Format::Text => report::ping_summary(&mut out, target.ip(), &stats)?,
        Format::Json => {
            let mut doc = report::ping_json(target, method.as_ref(), &stats, &replies);
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
            TraceEvent::Started(src) if text => {
                report::trace_started(&mut out, target, config.max_hops, *src)
            }
            TraceEvent::HopDone(hop) if lines => {
                writeln!(out, "{}", report::hop_line(hop)).and_then(|_| out.flush())
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
        let mut doc = report::trace_json(target, &result, elapsed);
        tcpdoctor_report::stamp(&mut doc, "trace", input);
        serde_json::to_writer(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        // Interrupted: the terminal echoed ^C, so start a clean line.
        let wipe = if result.interrupted && io::stdout().is_terminal() {
            "\r\x1b[2K"
        } else {
            ""
        };
        let table = args.report || args.count > 1;
        report::trace_end(&mut out, &result, elapsed, table, wipe)?;
    }
    out.flush()?;
    Ok(if result.reached { 0 } else { 1 })
}
