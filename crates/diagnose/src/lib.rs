//! `tcpdoctor diagnose URL`: the troubleshooting workflow in one command.
//!
//! 1. the round trip to the server, with TCP SYN probes (as `hping3 -S`);
//! 2. a few requests in sequence on one keep-alive connection (the first one
//!    on a new connection is often spared what slows the others);
//! 3. a short concurrent load (as wrk);
//!
//! while capturing its own traffic (an `AF_PACKET` socket on the interface
//! the kernel routes to the server, filtered to packets between our source
//! address and the server's address and port) and feeding it to the analysis engine. The verdict puts the symptom
//! (latency, round trip) next to the mechanism that cost the time.
//!
//! Without root there is no capture: the timings, and what the kernel says
//! about our own connection (`TCP_INFO`), are reported, with what could not
//! be seen.
#![forbid(unsafe_code)]

pub mod render;
pub mod route;
pub mod tls;

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tcpdoctor_capture::write::{PcapNgWriter, PcapWriter};
use tcpdoctor_engine::model::{Analysis, LatencyBin};
use tcpdoctor_engine::{Engine, Options};
use tcpdoctor_live::{Capture, Filter, Stats};
use tcpdoctor_load::http::{Fed, Parser};
use tcpdoctor_load::{build_request, Live, RequestSpec, Target};
use tcpdoctor_probe::{Method, PingConfig, PingStats};
use tcpdoctor_report::{verdict, Symptom, Verdict};
use tcpdoctor_tcpinfo::TcpInfo;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    pub request: RequestSpec,
    /// SYN probes for the round trip.
    pub pings: u64,
    /// Requests in sequence on one connection, and the most time they may take.
    pub sequential: u32,
    pub sequential_budget: Duration,
    /// The concurrent load.
    pub connections: usize,
    pub threads: usize,
    pub load_duration: Duration,
    /// A request without an answer for this long is an error.
    pub timeout: Duration,
    /// Capture our own traffic (needs root); `false` measures only.
    pub capture: bool,
    /// Also write the capture as pcap.
    pub write: Option<PathBuf>,
    pub snaplen: u32,
    /// https://: how the server's certificate is trusted.
    pub tls: tcpdoctor_load::TlsOptions,
}

impl Plan {
    /// The defaults: 5 probes, up to 20 sequential requests in 3 s, then
    /// 10 connections on 2 threads for 2 s (3.6 s in all against a local
    /// nginx; at most about 7 s plus timeouts against a slow server).
    pub fn new(target: Target, request: RequestSpec) -> Plan {
        Plan {
            target,
            request,
            pings: 5,
            sequential: 20,
            sequential_budget: Duration::from_secs(3),
            connections: 10,
            threads: 2,
            load_duration: Duration::from_secs(2),
            timeout: Duration::from_secs(2),
            capture: true,
            write: None,
            snaplen: 512,
            tls: tcpdoctor_load::TlsOptions::default(),
        }
    }
}

/// Progress, for a line on the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    RoundTrip,
    Sequential,
    Load,
    Analysis,
}

impl Step {
    /// What the step is doing, for a progress line.
    pub fn doing(self) -> &'static str {
        match self {
            Step::RoundTrip => "measuring the round trip",
            Step::Sequential => "sending requests one by one",
            Step::Load => "running a short concurrent load",
            Step::Analysis => "analysing the captured traffic",
        }
    }
}

/// The round trip as measured.
#[derive(Debug, Clone)]
pub struct RoundTrip {
    /// `TCP SYN` (raw probes) or `connect()`.
    pub method: &'static str,
    /// Why `connect()` was timed instead of raw SYN probes.
    pub fallback_reason: Option<String>,
    pub stats: PingStats,
}

/// The requests sent one after the other.
#[derive(Debug, Clone, Default)]
pub struct Sequential {
    /// Each request's latency (ms), in order.
    pub latencies_ms: Vec<f64>,
    /// How many of them went over the first connection (the server may
    /// close it; the rest went over new ones).
    pub on_first_connection: usize,
    pub statuses: Vec<u16>,
    pub reconnects: u32,
    pub error: Option<String>,
    /// The kernel's view of the (last) connection, after the requests.
    pub tcp_info: Option<TcpInfo>,
    /// How the first connection and request began: connect, TLS, first byte.
    pub setup: Option<tls::Setup>,
}

impl Sequential {
    /// Median of the requests after the first on the first connection (the
    /// first on a connection may take a different path through the peer's
    /// ACK logic).
    pub fn median_after_first_ms(&self) -> Option<f64> {
        median(self.latencies_ms.get(1..self.on_first_connection)?)
    }
}

/// The capture of our own traffic.
#[derive(Debug, Clone)]
pub struct Captured {
    pub interface: String,
    /// Frames to or from the server kept for the analysis.
    pub frames: u64,
    pub kernel: Stats,
    pub written: Option<PathBuf>,
}

/// Everything `diagnose` found.
#[derive(Debug)]
pub struct Outcome {
    pub url: String,
    pub server: SocketAddr,
    pub round_trip: Option<RoundTrip>,
    pub round_trip_error: Option<String>,
    pub sequential: Sequential,
    pub load: Option<tcpdoctor_load::Report>,
    pub load_error: Option<String>,
    pub captured: Option<Captured>,
    pub analysis: Option<Analysis>,
    /// The exchange-latency distribution of the capture, for charts.
    pub latency_bins: Vec<LatencyBin>,
    pub verdict: Verdict,
    /// Hints from timing and TCP_INFO alone (when there was no capture).
    pub hints: Vec<String>,
    /// What this run could not see, and why.
    pub could_not_see: Vec<String>,
    /// The step an interrupt (Ctrl-C) ended; the later ones were skipped.
    pub interrupted: Option<Step>,
    pub elapsed: Duration,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::RoundTrip => "round_trip",
            Step::Sequential => "sequential",
            Step::Load => "load",
            Step::Analysis => "analysis",
        }
    }
}

/// Where `--write` goes, opened before anything is measured: a path that
/// cannot be written fails at once. `.pcapng` writes pcapng, anything else pcap.
pub struct Output {
    path: PathBuf,
    file: File,
}

impl Output {
    pub fn create(path: &std::path::Path) -> io::Result<Output> {
        let file = File::create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(Output {
            path: path.to_path_buf(),
            file,
        })
    }

    fn pcapng(&self) -> bool {
        self.path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("pcapng"))
    }
}

/// The capture file being written, in time order.
///
/// The kernel stamps a packet when it is received and hands it to packet
/// sockets from each CPU's backlog: on a busy loopback two CPUs deliver a
/// few frames out of stamp order. Frames are held until [`REORDER_NS`] of
/// capture time has passed beyond them (at most [`REORDER_MAX`] at once) and
/// written oldest first.
struct Writer {
    file: FileWriter,
    held: std::collections::BinaryHeap<Held>,
    newest: i64,
    seq: u64,
}

const REORDER_NS: i64 = 20_000_000;
const REORDER_MAX: usize = 1 << 16;

enum FileWriter {
    Pcap(PcapWriter<BufWriter<File>>),
    PcapNg(PcapNgWriter<BufWriter<File>>),
}

/// A frame waiting for its turn; the oldest is the greatest (the heap's top).
struct Held {
    ts: tcpdoctor_wire::Timestamp,
    seq: u64,
    data: Vec<u8>,
    orig_len: u32,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.ts, self.seq) == (other.ts, other.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.ts, other.seq).cmp(&(self.ts, self.seq))
    }
}

impl Writer {
    fn new(out: Output, link: tcpdoctor_wire::LinkType, snaplen: u32) -> io::Result<Writer> {
        let ng = out.pcapng();
        let w = BufWriter::new(out.file);
        let file = if ng {
            let mut w = PcapNgWriter::new(w)?;
            // Nanosecond timestamps (if_tsresol 9), as the ring gives them.
            w.add_interface(link, snaplen, 9)?;
            FileWriter::PcapNg(w)
        } else {
            FileWriter::Pcap(PcapWriter::new(w, link, snaplen)?)
        };
        Ok(Writer {
            file,
            held: std::collections::BinaryHeap::new(),
            newest: i64::MIN,
            seq: 0,
        })
    }

    fn write(
        &mut self,
        ts: tcpdoctor_wire::Timestamp,
        data: &[u8],
        orig_len: u32,
    ) -> io::Result<()> {
        self.newest = self.newest.max(ts.nanos());
        self.seq += 1;
        self.held.push(Held {
            ts,
            seq: self.seq,
            data: data.to_vec(),
            orig_len,
        });
        while let Some(top) = self.held.peek() {
            if top.ts.nanos() > self.newest - REORDER_NS && self.held.len() <= REORDER_MAX {
                break;
            }
            if let Some(h) = self.held.pop() {
                self.file.write(&h)?;
            }
        }
        Ok(())
    }

    fn finish(mut self) -> io::Result<()> {
        while let Some(h) = self.held.pop() {
            self.file.write(&h)?;
        }
        match self.file {
            FileWriter::Pcap(w) => w.into_inner().flush(),
            FileWriter::PcapNg(w) => w.into_inner().flush(),
        }
    }
}

impl FileWriter {
    fn write(&mut self, h: &Held) -> io::Result<()> {
        match self {
            FileWriter::Pcap(w) => w.write_packet(h.ts, &h.data, h.orig_len),
            FileWriter::PcapNg(w) => w.write_packet(
                0,
                u64::try_from(h.ts.nanos()).unwrap_or(0),
                &h.data,
                h.orig_len,
            ),
        }
    }
}

/// Runs the plan; `step` is told as each step starts. Errors only when
/// nothing can be measured (e.g. the request cannot be built); a server that
/// does not answer is reported in the outcome.
pub fn run(plan: &Plan, step: impl FnMut(Step)) -> io::Result<Outcome> {
    let output = match &plan.write {
        Some(p) if plan.capture => Some(Output::create(p)?),
        _ => None,
    };
    run_with(plan, output, &Live::default(), step)
}

/// [`run`], writing the capture to `output` (opened before: see [`Output`]),
/// and ending early when `interrupt` is stopped ([`Live::stop`], e.g. on
/// Ctrl-C): the step in progress ends with what it measured, the later ones
/// are skipped, and what was captured is analysed.
pub fn run_with(
    plan: &Plan,
    output: Option<Output>,
    interrupt: &Live,
    mut step: impl FnMut(Step),
) -> io::Result<Outcome> {
    let started = Instant::now();
    let server = plan.target.addr;
    let request = build_request(&plan.target, &plan.request)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let mut could_not_see = Vec::new();
    let mut interrupted = None;
    let note_stop = |s: Step, interrupted: &mut Option<Step>| {
        if interrupt.stopped() && interrupted.is_none() {
            *interrupted = Some(s);
        }
    };
    // https://: the certificate is checked once before anything is measured,
    // so that an untrusted one is a clear error rather than failed requests.
    let tls = tls::prepare(plan)?;

    // 1. Round trip, before the capture starts: the probes are not part of
    //    the traffic to explain.
    step(Step::RoundTrip);
    let (round_trip, round_trip_error) = measure_round_trip(plan, server, interrupt.stop_flag());
    note_stop(Step::RoundTrip, &mut interrupted);

    // 2. Capture from here on.
    let capture = if plan.capture && interrupted.is_none() {
        open_capture(plan, server, output, &mut could_not_see)
    } else if plan.capture {
        None
    } else {
        could_not_see.push(
            "no capture (--no-capture): which packets waited, and why, cannot be seen".into(),
        );
        None
    };

    let sequential = if interrupted.is_none() {
        step(Step::Sequential);
        sequential(plan, server, &request, tls.as_ref(), interrupt)
    } else {
        Sequential::default()
    };
    note_stop(Step::Sequential, &mut interrupted);

    let run_load = plan.connections > 0 && !plan.load_duration.is_zero() && interrupted.is_none();
    if run_load {
        step(Step::Load);
    }
    let (load, load_error) = if run_load {
        measure_load(plan, interrupt)
    } else {
        (None, None)
    };
    if run_load {
        note_stop(Step::Load, &mut interrupted);
    }

    step(Step::Analysis);
    let (captured, analysis, latency_bins) = match capture {
        Some(c) => close_capture(c, &mut could_not_see),
        None => (None, None, Vec::new()),
    };

    let rtt_ms = round_trip.as_ref().and_then(|r| r.stats.median_ms());
    let symptom = symptom(rtt_ms, round_trip.as_ref(), load.as_ref(), &sequential);
    let verdict = verdict(&symptom, analysis.as_ref());
    let hints = if analysis.is_none() {
        hints(rtt_ms, &sequential)
    } else {
        Vec::new()
    };
    Ok(Outcome {
        url: plan.target.url.clone(),
        server,
        round_trip,
        round_trip_error,
        sequential,
        load,
        load_error,
        captured,
        analysis,
        latency_bins,
        verdict,
        hints,
        could_not_see,
        interrupted,
        elapsed: started.elapsed(),
    })
}

/// Times the round trip to the server with `plan.pings` probes: what was
/// measured, or why nothing could be.
fn measure_round_trip(
    plan: &Plan,
    server: SocketAddr,
    stop: &AtomicBool,
) -> (Option<RoundTrip>, Option<String>) {
    let mut method = None;
    let ping = tcpdoctor_probe::ping(
        &PingConfig {
            target: server,
            count: Some(plan.pings),
            interval: Duration::from_millis(100),
            timeout: Duration::from_secs(1),
            connect_only: false,
        },
        stop,
        |e| {
            if let tcpdoctor_probe::PingEvent::Started(m) = e {
                method = Some(m.clone());
            }
        },
    );
    match ping {
        Ok(stats) => {
            let (name, reason) = match method {
                Some(Method::Connect { reason }) => ("connect()", Some(reason)),
                _ => ("TCP SYN", None),
            };
            (
                Some(RoundTrip {
                    method: name,
                    fallback_reason: reason,
                    stats,
                }),
                None,
            )
        }
        Err(e) => (None, Some(e.to_string())),
    }
}

/// Starts the capture; when it cannot start, says so in `could_not_see` and
/// removes the file it would have written.
fn open_capture(
    plan: &Plan,
    server: SocketAddr,
    output: Option<Output>,
    could_not_see: &mut Vec<String>,
) -> Option<Running> {
    let path = output.as_ref().map(|o| o.path.clone());
    match start_capture(plan, server, output) {
        Ok(c) => Some(c),
        Err(e) => {
            if let Some(p) = path {
                // Nothing will be written to it.
                let _ = std::fs::remove_file(p);
            }
            could_not_see.push(format!(
                "no capture ({e}): which packets waited, and why, cannot be seen; \
                 run as root (or with CAP_NET_RAW) for the diagnosis"
            ));
            None
        }
    }
}

/// Runs the load of the plan: its report, or why it failed.
fn measure_load(plan: &Plan, interrupt: &Live) -> (Option<tcpdoctor_load::Report>, Option<String>) {
    let config = tcpdoctor_load::Config {
        connections: plan.connections,
        threads: plan.threads.clamp(1, plan.connections),
        duration: plan.load_duration,
        timeout: plan.timeout,
        tls: plan.tls.clone(),
        ..tcpdoctor_load::Config::new(plan.target.clone(), plan.request.clone())
    };
    match tcpdoctor_load::run(&config, interrupt) {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// Ends the capture and analyses it; a failure is told in `could_not_see`.
fn close_capture(
    capture: Running,
    could_not_see: &mut Vec<String>,
) -> (Option<Captured>, Option<Analysis>, Vec<LatencyBin>) {
    // Let the last ACKs and FINs of the load's connections arrive.
    std::thread::sleep(Duration::from_millis(300));
    match capture.finish() {
        Ok((captured, analysis, bins)) => (Some(captured), Some(analysis), bins),
        Err(e) => {
            could_not_see.push(format!("the capture failed: {e}"));
            (None, None, Vec::new())
        }
    }
}

/// The symptom: the round trip, the latencies (of the load when it answered,
/// else of the one-by-one requests), and why nothing was answered.
fn symptom(
    rtt_ms: Option<f64>,
    round_trip: Option<&RoundTrip>,
    load: Option<&tcpdoctor_load::Report>,
    sequential: &Sequential,
) -> Symptom {
    let failure = match load {
        Some(l) if l.requests == 0 => l.main_error().map(|(what, _)| what.to_string()),
        _ => None,
    }
    .or_else(|| {
        sequential
            .latencies_ms
            .is_empty()
            .then(|| sequential.error.clone())
            .flatten()
    });
    let (p50, p99) = match load {
        Some(l) if l.requests > 0 => (Some(l.latency_at(0.5)), Some(l.latency_at(0.99))),
        _ => (
            median(&sequential.latencies_ms),
            sequential
                .latencies_ms
                .iter()
                .copied()
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x)))),
        ),
    };
    Symptom {
        rtt_ms,
        rtt_method: round_trip.map_or("", |r| r.method),
        p50_ms: p50,
        p99_ms: p99,
        failure,
    }
}

/// Requests one after another on one keep-alive connection, each timed.
fn sequential(
    plan: &Plan,
    server: SocketAddr,
    request: &[u8],
    tls: Option<&tls::Client>,
    interrupt: &Live,
) -> Sequential {
    let mut out = Sequential::default();
    let deadline = Instant::now() + plan.sequential_budget;
    let head = plan.request.method.eq_ignore_ascii_case("HEAD");
    let mut conn: Option<tls::Stream> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let mut parser = Parser::new(head);
    while out.latencies_ms.len() < plan.sequential as usize
        && Instant::now() < deadline
        && !interrupt.stopped()
    {
        let stream = match &mut conn {
            Some(s) => s,
            None => {
                if !out.latencies_ms.is_empty() {
                    out.reconnects += 1;
                }
                match tls::connect(server, plan.timeout, tls) {
                    Ok((s, setup)) => {
                        out.setup.get_or_insert(setup);
                        conn.insert(s)
                    }
                    Err(e) => {
                        out.error = Some(tcpdoctor_load::describe_error(&e, server));
                        break;
                    }
                }
            }
        };
        parser.reset();
        let t0 = Instant::now();
        let result = exchange(stream, request, &mut parser, &mut buf);
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        match result {
            Ok((status, keep_alive, first_byte)) => {
                if let Some(setup) = out.setup.as_mut().filter(|s| s.first_byte_ms.is_none()) {
                    setup.first_byte_ms = Some(first_byte.as_secs_f64() * 1e3);
                }
                out.latencies_ms.push(ms);
                out.statuses.push(status);
                if out.reconnects == 0 {
                    out.on_first_connection = out.latencies_ms.len();
                }
                out.tcp_info = TcpInfo::of(stream.tcp()).ok().or(out.tcp_info.take());
                if !keep_alive {
                    conn = None;
                }
            }
            Err(e) => {
                let what = match e.kind() {
                    io::ErrorKind::ConnectionReset
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionAborted => {
                        tcpdoctor_load::describe_error(&e, server)
                    }
                    _ => e.to_string(),
                };
                out.error = Some(format!("request {}: {what}", out.latencies_ms.len() + 1));
                break;
            }
        }
    }
    out
}

/// One request and its complete response: (status, keep-alive, time to
/// the response's first byte).
fn exchange(
    stream: &mut tls::Stream,
    request: &[u8],
    parser: &mut Parser,
    buf: &mut [u8],
) -> io::Result<(u16, bool, Duration)> {
    let t0 = Instant::now();
    let mut first_byte = None;
    stream.write_all(request)?;
    stream.flush()?;
    loop {
        let n = stream.read(buf)?;
        first_byte.get_or_insert_with(|| t0.elapsed());
        let first = first_byte.unwrap_or_default();
        if n == 0 {
            return match parser.finish_at_close() {
                Some(r) => Ok((r.status, false, first)),
                None => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection before the response was complete",
                )),
            };
        }
        match parser.feed(&buf[..n]) {
            Ok(Fed::Partial) => continue,
            Ok(Fed::Done(r)) => return Ok((r.status, r.keep_alive, first)),
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad response: {e}"),
                ))
            }
        }
    }
}

/// How long the capture keeps reading queued frames after it is asked to stop.
const DRAIN: Duration = Duration::from_millis(200);

/// The capture thread: frames to or from `server` go to the engine (and the
/// pcap file), in order, numbered as the file numbers them.
struct Running {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<io::Result<(Captured, Analysis, Vec<LatencyBin>)>>,
}

fn start_capture(plan: &Plan, server: SocketAddr, output: Option<Output>) -> io::Result<Running> {
    let (interface, local) = route::egress(server)?;
    // The kernel keeps only the connection's packets; the exact check (our
    // address too) is below.
    let filter = Filter::parse(&format!(
        "host {} and tcp port {}",
        server.ip(),
        server.port()
    ))
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("filter: {e}")))?;
    let mut cap = Capture::open(&interface, plan.snaplen, Some(&filter))?;
    let link = cap.link_type();
    let written = output.as_ref().map(|o| o.path.clone());
    let mut writer = match output {
        Some(out) => Some(Writer::new(out, link, cap.snaplen())?),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop_thread = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("capture".into())
        .spawn(move || {
            let mut engine = Engine::new(Options::default());
            let mut frames = 0u64;
            // Once asked to stop, what the kernel already queued is read for
            // at most DRAIN, then the capture ends, however busy the interface.
            let mut drain_until: Option<Instant> = None;
            loop {
                if drain_until.is_none() && stop_thread.load(Ordering::Relaxed) {
                    drain_until = Some(Instant::now() + DRAIN);
                }
                if drain_until.is_some_and(|t| Instant::now() >= t) {
                    break;
                }
                let frame = cap.next_frame(cap.delivery_delay())?;
                let Some(f) = frame else {
                    if drain_until.is_some() {
                        break;
                    }
                    continue;
                };
                let decoded = tcpdoctor_wire::decode(link, f.data);
                // Between our address and the server's port, either way.
                let ours = matches!(&decoded, Ok(Ok(seg))
                    if (seg.src == server.ip() && seg.src_port == server.port() && seg.dst == local)
                        || (seg.dst == server.ip() && seg.dst_port == server.port() && seg.src == local));
                if !ours {
                    continue;
                }
                frames += 1;
                if let Some(w) = writer.as_mut() {
                    w.write(f.ts, f.data, f.orig_len)?;
                }
                engine.push_decoded(f.ts, link, f.orig_len, decoded);
            }
            let kernel = cap.stats()?;
            if let Some(w) = writer {
                w.finish()?;
            }
            if kernel.dropped > 0 {
                engine.warn(format!(
                    "the kernel dropped {} of {} frames on {} while capturing: the analysis has holes",
                    kernel.dropped,
                    kernel.received,
                    cap.interface()
                ));
            }
            let captured = Captured {
                interface: cap.interface().to_string(),
                frames,
                kernel,
                written,
            };
            let (analysis, bins) = engine.finish_with_distribution();
            Ok((captured, analysis, bins))
        })?;
    Ok(Running { stop, thread })
}

impl Running {
    fn finish(self) -> io::Result<(Captured, Analysis, Vec<LatencyBin>)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| io::Error::other("the capture thread panicked"))?
    }
}

/// What timing and TCP_INFO alone suggest (no capture to prove it).
fn hints(rtt_ms: Option<f64>, seq: &Sequential) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(first), Some(rest)) = (seq.latencies_ms.first(), seq.median_after_first_ms()) {
        let rtt = rtt_ms.unwrap_or(0.0);
        if rest >= 30.0 && rest > 4.0 * first && rest > 10.0 * rtt.max(0.1) {
            out.push(format!(
                "the first request on the connection took {first:.2} ms and later ones {rest:.1} ms: \
                 the shape of Nagle's algorithm meeting a delayed ACK (a new Linux connection \
                 starts in quick-ACK mode, so its first response is spared)"
            ));
        }
    }
    if let Some(ti) = &seq.tcp_info {
        let mut s = format!(
            "the kernel's view of the sequential connection: srtt {:.2} ms, delayed-ACK timeout \
             (ato) {:.0} ms, {} retransmission(s)",
            f64::from(ti.rtt_us) / 1e3,
            f64::from(ti.ato_us) / 1e3,
            ti.total_retrans
        );
        if let (Some(busy), Some(rwnd)) = (ti.busy_us, ti.rwnd_limited_us) {
            if busy > 0 {
                s.push_str(&format!(
                    ", limited by the server's receive window {:.0}% of the time it had data in flight",
                    rwnd as f64 / busy as f64 * 100.0
                ));
            }
        }
        out.push(s);
    }
    out
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    })
}
