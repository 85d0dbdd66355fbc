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

pub const HELP: &str = include_str!("../help/watch.txt");

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
