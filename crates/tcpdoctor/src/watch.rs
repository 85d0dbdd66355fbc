//! `tcpdoctor watch`: live capture analysed as it happens (the work is in
//! `tcpdoctor-watch`).

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use tcpdoctor_watch::capture::{Config, Session};
use tcpdoctor_watch::{report, Metrics};

use crate::load::parse_duration;
use crate::{Format, EXIT_FINDING, EXIT_OK};

/// Exit status: the interface went down or was deleted during the watch; the
/// report covers what was captured before.
pub const EXIT_CAPTURE_ENDED: u8 = 3;

pub const HELP: &str = "\
Examples:
  sudo tcpdoctor watch -i eth0 --filter 'port 8080'
  sudo tcpdoctor watch --duration 30s --format json | jq -c '.findings? // .exchange_latency_ms'
  sudo tcpdoctor watch -i eth0 --prometheus :9464          metrics at http://HOST:9464/metrics
  sudo ip netns exec web tcpdoctor watch -i eth0 --write live.pcap --duration 1m
  sudo tcpdoctor watch -i eth0 --duration 30s --write live.pcap --html live.html   the report as a page

It captures on the interface (AF_PACKET with a TPACKET_V3 ring; the filter runs in the kernel),
feeds every frame to the same engine as `tcpdoctor analyze`, and every --interval shows:
  tcpdoctor watch on eth0 (port 8080): 6 s, 5210 packets/s, 4 open connections, no kernel drops
    exchanges in the last interval: 1302   p50 0.21 ms   p90 40.3 ms   p99 41.1 ms   max 42.0 ms
    findings so far (time lost, largest first):
      nagle_delayed_ack  server  10.0.0.2:8080    512 times in 4 connections, typically 40.1 ms, 20.5 s lost
    busiest servers in the last interval: ...
Findings that conclude when a connection closes (receive window, loss, latency) appear once
their connection has closed. On Ctrl-C, or at the end of --duration, the full `analyze` report
follows (a second Ctrl-C quits at once). Frames the kernel dropped because the reader fell behind
are counted and reported in every interval: a capture with drops has holes.

--format json: one JSON object per line and interval
  {\"interval\":3,\"t_s\":3.0,\"packets\":…,\"packets_per_sec\":…,\"kernel_drops\":0,\"kernel_drops_total\":0,
   \"exchanges\":…,\"exchange_latency_ms\":{\"p50\",\"p90\",\"p99\",\"max\"}|null,\"findings\":[…],
   \"minor_findings\":[…],\"open_connections\":…,\"top_servers\":[…]}
then the analysis document (schema 1, as `analyze --format json`) as the last line.

--prometheus ADDR serves /metrics (OpenMetrics text): tcpdoctor_packets_total,
tcpdoctor_sysctl_drops_total, tcpdoctor_exchanges_total, tcpdoctor_exchange_duration_seconds
(histogram per server), tcpdoctor_time_lost_seconds_total and
tcpdoctor_finding_occurrences_total (per kind, culprit, role), tcpdoctor_open_connections.

Filter, as in tcpdump: host A, src host A, dst host A (IPv4 or IPv6), net 10.0.0.0/8 (and src/dst
net), port N, src port N, dst port N, portrange N-M, tcp port N, udp, sctp, icmp, icmp6, ip, ip6,
joined with and (&&), or (||), not (!) and parentheses. As in tcpdump, `and` and `or` bind equally,
left to right, and a bare value repeats the previous qualifiers (`port 80 or 443`). Addresses and
ports are numbers (no name lookups); VLAN tags are looked through.
Interface `any` captures on every interface of the network namespace (each packet once per
interface it crosses, as tcpdump -i any); its frames, and those of interfaces without an Ethernet
header (tun, WireGuard), are raw IP (--write then writes a raw-IP pcap).

SIGINT (Ctrl-C) and SIGTERM both stop the capture and print the full report; --write's pcap is
complete up to the last frame. A second signal quits at once.

Needs root or CAP_NET_RAW. Exit status: 0 done (at the end of --duration, or stopped by SIGINT
or SIGTERM); 1 --fail-on-finding was given and a finding was reported; 2 usage error: no such
interface, a filter that does not parse, an address for --prometheus that cannot be bound,
missing privileges, or --write failed (a full disk: the watch goes on, the report follows, the
file keeps what was written); 3 the interface went down or was deleted during the watch: the report
covers what was captured before.";

#[derive(clap::Args)]
pub struct WatchArgs {
    /// Interface to capture on, in this network namespace (`any` for all of them).
    #[arg(short = 'i', long, default_value = "any", value_name = "IFACE", value_hint = clap::ValueHint::Other)]
    interface: String,
    /// Capture filter run by the kernel, tcpdump-like: 'port 8080 and host 10.0.0.2'.
    #[arg(short = 'f', long, value_name = "EXPR")]
    filter: Option<String>,
    /// Stop after this long (10s, 5m); without it, run until Ctrl-C.
    #[arg(short = 'd', long, value_parser = parse_duration, value_name = "TIME")]
    duration: Option<Duration>,
    /// How often the live view (or a JSON line) is produced.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "TIME")]
    interval: Duration,
    /// Also write every captured frame to this pcap file.
    #[arg(short = 'w', long, value_name = "FILE")]
    write: Option<PathBuf>,
    /// Bytes kept of each frame: the engine needs the headers and the start of an HTTP message;
    /// raise it with --write to keep whole payloads.
    #[arg(short = 's', long, default_value_t = 2048, value_name = "BYTES")]
    snaplen: u32,
    /// Output format: `text` for people, `json` for machines (one line per interval).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Serve Prometheus metrics at http://ADDR/metrics (`:9464`, `127.0.0.1:9464`).
    #[arg(long, value_name = "ADDR")]
    prometheus: Option<String>,
    /// At the end, also write the report as one self-contained HTML file (with --write, its
    /// time-sequence graphs are drawn from that pcap).
    #[arg(long, value_name = "REPORT.html")]
    html: Option<String>,
    /// Exit with status 1 when the final report has a finding (for scripts).
    #[arg(long)]
    fail_on_finding: bool,
}

pub fn run(args: &WatchArgs) -> anyhow::Result<u8> {
    if args.interval < Duration::from_millis(10) {
        anyhow::bail!("--interval must be at least 10ms");
    }
    let metrics = args.prometheus.as_ref().map(|_| Metrics::new());
    let served = match (&args.prometheus, &metrics) {
        (Some(addr), Some(m)) => Some(tcpdoctor_watch::serve::serve(addr, m.registry())?),
        _ => None,
    };
    let config = Config {
        interface: args.interface.clone(),
        filter: args.filter.clone(),
        snaplen: args.snaplen,
        duration: args.duration,
        interval: args.interval,
        write: args.write.clone(),
    };
    let session = Session::open(config, metrics)?;
    let source = report::source(&args.interface, args.filter.as_deref());
    eprintln!("{}", report::note(&source, served, args.duration));

    // SIGINT (Ctrl-C) or SIGTERM: stop capturing, then the full report; a
    // second one quits at once.
    crate::interrupt::install(
        "tcpdoctor: stopping; the full report follows (Ctrl-C again to quit)\n",
    );
    let stop = &crate::interrupt::STOP;

    let stdout = io::stdout();
    let printer = report::Printer {
        json: matches!(args.format, Format::Json).then(|| {
            serde_json::json!({
                "interface": args.interface, "filter": args.filter,
                "interval_s": args.interval.as_secs_f64(),
                "duration_s": args.duration.map(|d| d.as_secs_f64()),
            })
        }),
        tty: stdout.is_terminal(),
        source,
    };
    let mut out = BufWriter::new(stdout.lock());
    let outcome = session.run(stop, |iv| printer.interval(&mut out, iv))?;

    if let Some(html) = args.html.as_deref() {
        let write = args.write.as_ref().and_then(|p| p.to_str());
        tcpdoctor_report_html::pass::write(
            &outcome.analysis,
            &outcome.latency_bins,
            write,
            &format!("live capture on {}", printer.source),
            &report::html_kind(&outcome),
            &tcpdoctor_report_html::pass::Outputs {
                html: Some(html),
                annotate: None,
            },
        )?;
    }
    printer.report(&mut out, &outcome)?;
    out.flush()?;
    if let Some(why) = &outcome.ended_early {
        eprintln!("tcpdoctor: {why}");
        return Ok(EXIT_CAPTURE_ENDED);
    }
    if let Some(why) = &outcome.write_failed {
        eprintln!("tcpdoctor: {why}");
        return Ok(crate::EXIT_INPUT);
    }
    if args.fail_on_finding && !outcome.analysis.findings.is_empty() {
        return Ok(EXIT_FINDING);
    }
    Ok(EXIT_OK)
}
