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

pub const HELP: &str = "\
Examples:
  sudo tcpdoctor top                            every process's TCP, a table every second
  sudo tcpdoctor top --port 8080 --duration 30s what nginx on :8080 is doing, then a report
  sudo tcpdoctor top --pid 4242 --format json | tail -1 | jq '.findings[] | {kind, process}'
  sudo tcpdoctor top --duration 1m --html top.html  then the report as a web page too

Every interval: per process, bytes written and read per second, writes, retransmissions,
retransmission timeouts (RTO) and resets; then the busiest connections with their smoothed
round trip (and its minimum), congestion window, the peer's window (SND_WND) and ours
(RCV_WND). On Ctrl-C (or SIGTERM) or at the end of --duration, a report per process and
connection, with findings naming the process:
  retransmission_timeout  the socket entered the Loss state (its retransmission timer fired)
  packet_loss             segments re-sent by fast retransmit / SACK recovery
  syn_retransmit          a SYN, or a listener's SYN-ACK, sent again (setup waited 1 s, 3 s…)
  connection_reset        an RST sent or received on a connection
  zero_window             segments arriving while the peer advertised a window of 0 (slow reader)
  receive_window_limited  bytes in flight at >= 90% of the peer's window on >= 10 received
                          segments (>= 3 samples) and >= 20% of those with data in flight
  nagle_delayed_ack       a write's tail held unsent, with data in flight, until the peer's
                          pure ACK came >= 20 ms and two round trips after the write (also
                          named in the interval it shows, on connections still open)

What it reads: the kernel's TCP tracepoints (tcp:tcp_probe, tcp_retransmit_skb,
tcp_retransmit_synack, tcp_cong_state_set, tcp_send_reset, tcp_receive_reset, tcp_destroy_sock;
sock:inet_sock_set_state, sock_send_length, sock_recv_length, sock_rcvqueue_full,
sock_exceed_buf_limit), opened with perf_event_open on every CPU; no packet is copied and no
BPF program is loaded. Each record is decoded by the field offsets of the tracepoint's
/sys/kernel/tracing/events/*/*/format file; a field this kernel lacks is named in the report
(trace.missing_fields) and its numbers are left out. Bytes are what the processes wrote and
read (send/recv/sendfile returns); `acked` is what the peer acknowledged. The process of a
connection is the one that made its socket calls; events in softirq (received segments,
retransmission timers) are charged to it; a connection no call has named is looked up in
this network namespace's socket table. Tracepoints see every network namespace.

tcp:tcp_probe fires on every received segment; with --probe-every auto (the default) it is
taken on every one until they arrive faster than 20,000 a second, then on one in 8 while the
peer's window is open (RTT, cwnd and windows are the last sample's; segment counts
are scaled estimates) and on every segment at a zero window (an ftrace filter on snd_wnd
splits the two). sock:sock_recv_length (every read of every TCP socket on the host, whatever
the port) is taken as often: bytes and reads received are then scaled estimates too.
--probe-every 1 takes every segment and every read. Every other tracepoint is taken on every
hit.

--port N is filtered in the kernel (sport == N || dport == N) where the tracepoint has ports,
and here otherwise. Samples the kernel drops because the reader fell behind are counted
(`lost`, every interval): the counts then have holes.

Privileges: root, or CAP_PERFMON + CAP_BPF (tracepoints of every process, raw records) with
kernel.perf_event_paranoid <= 1 for a non-root user. tracefs must be mounted at
/sys/kernel/tracing; as root, top mounts it if it is not.

JSON (--format json): one object per interval and line ({\"type\": \"interval\", \"processes\",
\"connections\", \"lost\", ...}), then the report (schema 1) as the last line:
  {\"schema\": 1, \"command\": \"top\",
   \"trace\": {\"events\", \"lost\", \"duration_ms\", \"connections\", \"tracepoints\", \"missing_fields\",
             \"kernel_filters\", \"anomalies\": {\"truncated\", ...}, \"cpu_time_ms\"},
   \"processes\": [{\"pid\", \"command\", \"cmdline\", \"connections\", \"sent\", \"received\", \"acked\",
                  \"writes\", \"reads\", \"retransmits\", \"rto_episodes\", \"resets\"}],
   \"connections\": [{\"id\", \"local\", \"remote\", \"client\", \"server\", \"role\", \"pid\", \"command\",
                    \"bytes\": {\"sent\", \"received\", \"acked\"}, \"writes\": {\"count\", \"min\", \"max\",
                    \"mean\"}, \"srtt_ms\", \"srtt_min_ms\", \"cwnd\", \"snd_wnd\", \"rcv_wnd\",
                    \"retransmissions\", \"rto_episodes\", \"recovery_episodes\", \"resets_sent\", ...}],
   \"findings\": [{\"kind\", \"culprit\": {\"endpoint\", \"role\"}, \"process\": {\"pid\", \"command\"},
                 \"connections\", \"occurrences\", \"details\", \"evidence\": [{\"connection\", \"local\",
                 \"remote\", \"count\"}], \"explanation\", \"fix\"}]}

--prometheus ADDR serves /metrics (OpenMetrics text): tcpdoctor_top_events_total,
tcpdoctor_top_lost_samples_total, tcpdoctor_top_open_connections, and per command
tcpdoctor_top_written_bytes_total, tcpdoctor_top_read_bytes_total, tcpdoctor_top_writes_total,
tcpdoctor_top_retransmits_total (labelled by command, not pid: pids come and go).

--html FILE also writes the report as one self-contained HTML page (no script, nothing
loaded from the network; commands and command lines shown as text): the trace, the
findings with their explanation and fix, the processes and the connections, from the same
document as the JSON report. It is written at the end, under a temporary name next to FILE,
then renamed; a directory that does not exist or cannot be written is refused before the
trace starts.

Exit status: 0 done; 1 --fail-on-finding was given and a finding was reported; 2 usage error,
no tracepoints, an address for --prometheus that cannot be bound, an --html file that cannot
be written, or missing privileges.";

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
