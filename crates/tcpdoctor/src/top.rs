//! `tcpdoctor top`: the kernel's own view of TCP per process, from its
//! tracepoints (the work is in `tcpdoctor-top`).

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tcpdoctor_capture::write::Staged;
use tcpdoctor_top::{Config, Session};

use crate::load::parse_duration;
use crate::{Format, EXIT_FINDING, EXIT_OK};

pub const HELP: &str = include_str!("../help/top.txt");

#[derive(clap::Args)]
pub struct TopArgs {
    /// Only connections with this local or remote port (filtered in the kernel).
    #[arg(short = 'p', long, value_name = "PORT")]
    port: Option<u16>,
    /// Only connections owned by this process.
    #[arg(long, value_name = "PID")]
    pid: Option<u32>,
    /// How often the table (or a JSON line) is produced.
    #[arg(short = 'i', long, default_value = "1s", value_parser = parse_duration, value_name = "TIME")]
    interval: Duration,
    /// Stop after this long (10s, 5m); without it, run until Ctrl-C.
    #[arg(short = 'd', long, value_parser = parse_duration, value_name = "TIME")]
    duration: Option<Duration>,
    /// Output format: `text` for people, `json` for machines (a line per interval, then the report).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Processes and connections listed per interval.
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,
    /// Ring buffer per CPU, in 4 KiB pages (a power of two; more if samples are lost).
    #[arg(long, default_value_t = 512, value_name = "PAGES")]
    ring_pages: usize,
    /// Take tcp:tcp_probe (a record per received segment: RTT, cwnd, windows) on one segment in
    /// N while the peer's window is open, on every segment at a zero window; 1: every segment;
    /// auto: every segment until they come faster than 20,000 a second, then one in 8.
    #[arg(long, default_value = "auto", value_parser = parse_every, value_name = "N|auto")]
    probe_every: u32,
    /// Serve Prometheus metrics at http://ADDR/metrics (`:9465`, `127.0.0.1:9465`).
    #[arg(long, value_name = "ADDR")]
    prometheus: Option<String>,
    /// Exit with status 1 when the report has a finding (for scripts).
    #[arg(long)]
    fail_on_finding: bool,
    /// Also write the final report as a self-contained HTML page (findings with their
    /// explanation and fix, processes, connections: what the JSON report holds), at the end
    /// of the trace. Refused before tracing starts if its directory cannot be written.
    #[arg(long, value_name = "REPORT.html")]
    html: Option<PathBuf>,
}

/// `auto` → 0, else N in 1..=2^20.
fn parse_every(s: &str) -> Result<u32, String> {
    if s == "auto" {
        return Ok(0);
    }
    match s.parse::<u32>() {
        Ok(n) if (1..=1 << 20).contains(&n) => Ok(n),
        _ => Err("N between 1 and 1048576, or auto".into()),
    }
}

/// Refuses, before the trace, a page that could not be written: `path` a
/// directory, or its directory missing or not writable (the staged file is
/// created there and dropped, which removes it).
fn check_writable(path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        anyhow::bail!("--html {}: is a directory", path.display());
    }
    Staged::create(path).with_context(|| "--html: cannot write the page there")?;
    Ok(())
}

/// Writes `page` under a temporary name next to `path`, renamed once
/// complete and synced: a full disk leaves no half-written page under the
/// name asked for.
fn write_page(path: &Path, page: &str) -> anyhow::Result<()> {
    let staged = Staged::create(path)?;
    staged.writer()?.write_all(page.as_bytes())?;
    staged.commit().context("--html")
}

pub fn run(args: &TopArgs) -> anyhow::Result<u8> {
    if args.interval < Duration::from_millis(100) {
        anyhow::bail!("--interval must be at least 100ms");
    }
    if args.ring_pages == 0 || args.ring_pages > 1 << 16 {
        anyhow::bail!("--ring-pages must be between 1 and 65536 (rounded up to a power of two)");
    }
    if let Some(pid) = args.pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            anyhow::bail!("--pid {pid}: no such process");
        }
    }
    if let Some(path) = &args.html {
        check_writable(path)?;
    }
    let mut metrics = args
        .prometheus
        .as_ref()
        .map(|_| tcpdoctor_top::metrics::Metrics::new());
    let served = match (&args.prometheus, &metrics) {
        (Some(addr), Some(m)) => Some(tcpdoctor_watch::serve::serve(addr, m.registry())?),
        _ => None,
    };
    let session = Session::open(Config {
        port: args.port,
        pid: args.pid,
        interval: args.interval,
        duration: args.duration,
        ring_pages: args.ring_pages,
        top: args.top,
        probe_every: args.probe_every,
    })
    .map_err(|e| anyhow::anyhow!("opening the TCP tracepoints: {e}"))?;
    for note in session.setup.notes(args.port, served, args.duration) {
        eprintln!("{note}");
    }

    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    // SIGINT here; SIGTERM ends the trace too (Session::run).
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("tcpdoctor: stopping; the report follows (Ctrl-C again to quit)");
    });

    let input = serde_json::json!({
        "port": args.port, "pid": args.pid,
        "interval_s": args.interval.as_secs_f64(),
        "duration_s": args.duration.map(|d| d.as_secs_f64()),
    });
    let stdout = io::stdout();
    let tty = stdout.is_terminal();
    let mut out = BufWriter::new(stdout.lock());
    let format = args.format;
    let outcome = session.run(&stop, |view| {
        if let Some(m) = metrics.as_mut() {
            m.update(view);
        }
        match format {
            Format::Json => {
                let mut doc = view.json();
                tcpdoctor_report::stamp(&mut doc, "top", input.clone());
                serde_json::to_writer(&mut out, &doc)?;
                out.write_all(b"\n")?;
            }
            Format::Text => {
                if tty {
                    out.write_all(b"\x1b[H\x1b[2J")?;
                }
                out.write_all(view.text().as_bytes())?;
                out.write_all(b"\n")?;
            }
        }
        out.flush()
    })?;
    let mut doc = outcome.json();
    tcpdoctor_report::stamp(&mut doc, "top", input);
    // A page that cannot be written (a full disk) fails the command after
    // the report: the trace is not lost with it.
    let written = args.html.as_deref().map_or(Ok(()), |path| {
        write_page(path, &tcpdoctor_top::html::render(&doc))
    });
    match format {
        Format::Json => {
            serde_json::to_writer(&mut out, &doc)?;
            out.write_all(b"\n")?;
        }
        Format::Text => out.write_all(outcome.text().as_bytes())?,
    }
    out.flush()?;
    written?;
    if args.fail_on_finding && !outcome.report.findings.is_empty() {
        return Ok(EXIT_FINDING);
    }
    Ok(EXIT_OK)
}
