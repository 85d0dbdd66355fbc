//! One phase of a case: set the path up, start the server, capture at the
//! vantage point, run the workload, feed the capture to the engine.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{bail, Context, Error, Result};
use serde::Serialize;
use tcpdoctor_capture::write::{PcapNgWriter, PcapWriter};
use tcpdoctor_engine::model::{Analysis, LatencyBin};
use tcpdoctor_engine::{Engine, Options};
use tcpdoctor_live::{Capture, LinkType, Timestamp};

use crate::cases::{Action, Peer, Setup};
use crate::ext;
use crate::flood;
pub use crate::metrics::round3;
use crate::metrics::{metrics, Metrics};
use crate::ns;
use crate::peers::{self, Server};
pub use crate::topo::server_addr;
use crate::topo::{Topology, Towards, Vantage};

/// What the capture held.
#[derive(Debug, Clone, Serialize)]
pub struct CaptureInfo {
    pub vantage: Vantage,
    pub namespace: String,
    pub interface: &'static str,
    pub packets: u64,
    pub kernel_drops: u64,
    pub written: Option<String>,
}

/// One phase's result.
pub struct Phase {
    pub rtt_ms: f64,
    pub metrics: Metrics,
    pub capture: CaptureInfo,
    pub analysis: Analysis,
    /// The exchange-latency distribution, for the HTML report's chart.
    pub latency_bins: Vec<LatencyBin>,
    pub delay_line_drops: u64,
    /// How long the built-in peers' threads waited for a CPU while runnable,
    /// per request (ms; the kernel's `run_delay`, 0 with external peers): on
    /// a busy machine a woken server or client waits a scheduler's slice.
    pub cpu_wait_ms_per_request: f64,
    /// A real server's time on a CPU and waiting for one during the
    /// workload, per request (ms; its threads' and its workers' `schedstat`):
    /// the kernel's account of the server's own time, beside the one the
    /// capture shows. None with the built-in server.
    pub server_cpu: Option<ServerCpu>,
}

/// A real server's CPU time during a phase's workload, per request.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ServerCpu {
    pub on_cpu_ms_per_request: f64,
    pub waiting_ms_per_request: f64,
}

pub struct PhaseOptions {
    pub vantage: Vantage,
    pub snaplen: u32,
    pub write: Option<PathBuf>,
    pub peer: Peer,
    /// Load with wrk (connections, seconds) instead of the built-in client.
    pub wrk: Option<(u32, u32)>,
    /// Say on stderr what the phase is doing as it goes, under this label
    /// (`before`, `after`); `None`: silent.
    pub progress: Option<&'static str>,
}

/// A progress line on stderr: `lab: before: capturing at the client…`.
pub fn say(label: Option<&str>, what: std::fmt::Arguments<'_>) {
    if let Some(l) = label {
        use std::io::Write;
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "lab: {l}: {what}");
    }
}

// iptables rules, one line each (split on white space).

/// The router's filter of its own ICMP "fragmentation needed".
const FRAG_NEEDED_RULE: &str = "OUTPUT -p icmp --icmp-type fragmentation-needed -j DROP";

/// The server's firewall drops every second SYN to the port: the first SYN
/// of each connection, whose retransmission then gets through.
const DROP_FIRST_SYN_RULE: &str =
    "INPUT -p tcp --dport 8080 --syn -m statistic --mode nth --every 2 --packet 0 -j DROP";

/// The server's firewall answers every second SYN to the port with an RST:
/// the port is closed to those connections.
const REJECT_SYN_RULE: &str = "INPUT -p tcp --dport 8080 --syn -m statistic --mode nth \
     --every 2 --packet 0 -j REJECT --reject-with tcp-reset";

/// The router resets every third request (a client segment with data) in
/// the server's name: its RST goes back to the client, with the router's TTL.
const RESET_BY_PATH_RULE: &str = "FORWARD -s 10.71.1.2 -p tcp --dport 8080 \
     -m length --length 100:65535 -m statistic --mode nth --every 3 --packet 2 \
     -j REJECT --reject-with tcp-reset";

/// The router drops every server→client packet (a blackout).
const BLACKOUT_RULE: &str = "FORWARD -s 10.71.2.2 -d 10.71.1.2 -p tcp -j DROP";

/// Adds (`-A`) or deletes (`-D`) `rule` in namespace `n`'s firewall.
fn iptables(n: &str, op: &str, rule: &str) -> Result<()> {
    let words: Vec<&str> = rule.split_whitespace().collect();
    Topology::iptables_in(n, op, &words)
}

/// The firewall rule that carries out a case's action for the whole
/// measurement, and the namespace that holds it.
fn action_rule(t: &Topology, action: Action) -> Option<(&str, &'static str)> {
    match action {
        Action::DropFirstSyn => Some((&t.server, DROP_FIRST_SYN_RULE)),
        Action::RejectEverySecondSyn => Some((&t.server, REJECT_SYN_RULE)),
        Action::ResetByPath => Some((&t.router, RESET_BY_PATH_RULE)),
        Action::None | Action::Blackout { .. } => None,
    }
}

/// Sets the path up for setup `s`, starts the server and measures the
/// round trip with it.
fn prepare(t: &mut Topology, s: &Setup, peer: Peer) -> Result<(Running, Duration)> {
    // The path.
    t.set_one_way(s.one_way);
    t.set_loss(0.0)?;
    t.set_rate(s.rate.as_deref())?;
    t.set_bottleneck(s.bottleneck)?;
    t.set_policer(s.policer)?;
    ns::sysctl(
        &t.server,
        "net.ipv4.tcp_congestion_control",
        s.server_cc.unwrap_or("bbr"),
    )?;
    ns::sysctl(
        &t.client,
        "net.ipv4.tcp_congestion_control",
        s.client_cc.unwrap_or("bbr"),
    )?;
    if let Some(rmem) = s.client_rmem {
        ns::sysctl(&t.client, "net.ipv4.tcp_rmem", rmem)?;
    }
    ns::sysctl(
        &t.server,
        "net.ipv4.tcp_slow_start_after_idle",
        if s.server_slow_start_after_idle {
            "1"
        } else {
            "0"
        },
    )?;
    // The path MTU towards the client, and whether the router's ICMP
    // "fragmentation needed" gets out (RFC 1191 path MTU discovery).
    let mtu = s.client_link_mtu.unwrap_or(1500).to_string();
    ns::run("ip", &["-n", &t.router, "link", "set", "ethc", "mtu", &mtu])?;
    // Absent unless a phase before added it.
    let _ = iptables(&t.router, "-D", FRAG_NEEDED_RULE);
    if s.filter_frag_needed {
        iptables(&t.router, "-A", FRAG_NEEDED_RULE)?;
    }
    ns::sysctl(
        &t.server,
        "net.ipv4.tcp_mtu_probing",
        if s.server_mtu_probing { "1" } else { "0" },
    )?;
    ns::sysctl(
        &t.server,
        "net.ipv4.tcp_syncookies",
        if s.server_syncookies { "1" } else { "0" },
    )?;
    let initcwnd = s.server_initcwnd.map(|n| n.to_string());
    let mut route = vec![
        "-n",
        &t.server,
        "route",
        "replace",
        "default",
        "via",
        "10.71.2.1",
    ];
    if let Some(n) = &initcwnd {
        route.extend(["initcwnd", n.as_str()]);
    }
    ns::run("ip", &route)?;

    // The server, and the round trip measured with it.
    let server = start_server(&t.server, s, peer)?;
    let rtt = match peers::measure_rtt(&t.client, server_addr(), 3) {
        Ok(rtt) => rtt,
        Err(e) => {
            server.stop();
            return Err(e);
        }
    };
    Ok((server, rtt))
}

/// Runs `tcpdoctor diagnose` from the client namespace against the case's
/// server (instead of the case's own client and capture).
pub fn diagnose_phase(
    t: &mut Topology,
    s: &Setup,
    peer: Peer,
    plan: tcpdoctor_diagnose::Plan,
) -> Result<tcpdoctor_diagnose::Outcome> {
    let (server, rtt) = prepare(t, s, peer)?;
    t.set_loss(s.loss)?;
    thread::sleep(rtt * 2 + Duration::from_millis(100));
    let outcome = ns::within(&t.client, move || {
        tcpdoctor_diagnose::run(&plan, |_| {}).context("diagnose")
    });
    t.set_loss(0.0)?;
    server.stop();
    outcome
}

/// Runs one phase on topology `t`.
pub fn phase(t: &mut Topology, s: &Setup, o: &PhaseOptions) -> Result<Phase> {
    say(
        o.progress,
        format_args!("setting the path up, starting the server"),
    );
    let (server, rtt) = prepare(t, s, o.peer)?;
    let waited0 = peers::run_delay_ns();
    say(
        o.progress,
        format_args!(
            "server up, round trip {:.2} ms; capturing at the {} while the workload runs",
            rtt.as_secs_f64() * 1e3,
            o.vantage.as_str()
        ),
    );
    t.set_loss(s.loss)?;
    if s.lose_first_request {
        t.lose_first_message(Towards::Server)?;
    }
    if s.lose_first_response {
        t.lose_first_message(Towards::Client)?;
    }
    if let Some((n, rule)) = action_rule(t, s.action) {
        iptables(n, "-A", rule)?;
    }
    // Let the measuring connections' last packets cross the path first.
    thread::sleep(rtt * 2 + Duration::from_millis(100));

    // The JVM compiles its hot code during the first seconds: warm it up
    // uncaptured, as one would before measuring a Java server.
    if let (Running::External(e), Some((c, _))) = (&server, o.wrk) {
        if e.what == "jdk" {
            warm_up(&t.client, e, c)?;
        }
    }
    let drops_before = t.delay.as_ref().map_or(0, |d| d.dropped());
    let (cap_ns, iface) = t.interface(o.vantage);
    let cap_ns = cap_ns.to_string();
    let cap = start_capture(&cap_ns, iface, o.snaplen, o.write.clone())?;
    let server_cpu0 = server.cpu_ns();

    // The workload (and what happens to the path meanwhile).
    let blackout = match s.action {
        Action::Blackout { at, length } => Some(blackout(t.router.clone(), at, length)),
        _ => None,
    };
    let flood = match s.syn_flood {
        Some(f) => {
            let h = ns::spawn_in(&t.client, "lab-syn-flood", move || {
                flood::send(server_addr(), f)
            })?;
            thread::sleep(f.client_after);
            Some(h)
        }
        None => None,
    };
    let result = match &server {
        Running::External(e) if s.tls.is_some() => {
            ext::curl_https(&t.client, e, s.client.connections * s.client.workers)
        }
        Running::External(e) if o.wrk.is_some() => {
            let (c, secs) = o.wrk.unwrap_or((4, 2));
            ext::wrk(&t.client, e, c, secs)
        }
        _ => match s.curl_post {
            Some(p) => ext::curl_post(&t.client, p),
            None => peers::run_client(&t.client, server_addr(), &s.client)
                .map(|r| metrics(&r, "builtin")),
        },
    };
    if let Some(b) = blackout {
        ns::join(b)?;
    }
    let flood = flood.map(ns::join);
    // The last ACKs and FINs.
    thread::sleep(rtt * 2 + Duration::from_millis(150));
    let (analysis, latency_bins, capture) = cap.finish()?;
    say(
        o.progress,
        format_args!(
            "workload done ({} packets captured), analysed: {}",
            capture.packets,
            analysis
                .findings
                .first()
                .map_or("no finding".to_string(), |f| format!("{} first", f.kind))
        ),
    );
    if let Some((n, rule)) = action_rule(t, s.action) {
        iptables(n, "-D", rule)?;
    }
    t.set_loss(0.0)?;
    let server_cpu = server.cpu_ns().zip(server_cpu0).map(|(n, n0)| n.since(n0));
    server.stop();
    let waited = peers::run_delay_ns().saturating_sub(waited0);
    let mut metrics = result?;
    let per_request = |ns: u64| round3(ns as f64 / 1e6 / metrics.requests.max(1) as f64);
    let cpu_wait_ms_per_request = waited as f64 / 1e6 / metrics.requests.max(1) as f64;
    let server_cpu = server_cpu.map(|c| ServerCpu {
        on_cpu_ms_per_request: per_request(c.on_cpu),
        waiting_ms_per_request: per_request(c.waiting),
    });
    metrics.syn_flood = flood.transpose()?;
    let capture = CaptureInfo {
        vantage: o.vantage,
        namespace: cap_ns,
        interface: iface,
        ..capture
    };
    Ok(Phase {
        rtt_ms: rtt.as_secs_f64() * 1e3,
        metrics,
        capture,
        analysis,
        latency_bins,
        delay_line_drops: t.delay.as_ref().map_or(0, |d| d.dropped()) - drops_before,
        cpu_wait_ms_per_request,
        server_cpu,
    })
}

enum Running {
    Builtin(Server),
    External(ext::External),
}

impl Running {
    /// A real server's CPU account so far (None for the built-in one, whose
    /// threads' waits are counted with the client's).
    fn cpu_ns(&self) -> Option<ext::CpuNs> {
        match self {
            Running::Builtin(_) => None,
            Running::External(e) => Some(e.cpu_ns()),
        }
    }

    fn stop(self) {
        match self {
            Running::Builtin(s) => s.stop(),
            Running::External(e) => e.stop(),
        }
    }
}

/// Runs wrk for 2 s at a time until one run is answered, for 30 s at most: a
/// JVM on a busy host may take longer than one run to answer its first
/// request (a run of the lab under a parallel CPU load saw none in 2 s).
fn warm_up(client_ns: &str, e: &ext::External, connections: u32) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match ext::wrk(client_ns, e, connections, 2) {
            Ok(_) => return Ok(()),
            Err(_) if Instant::now() < deadline => {}
            Err(err) => return Err(err).context("warming the server up (30 s)"),
        }
    }
}

fn start_server(server_ns: &str, s: &Setup, peer: Peer) -> Result<Running> {
    Ok(match peer {
        _ if s.tls.is_some() && peer != Peer::Nginx => {
            bail!("this case serves HTTPS, which only nginx does here (--peer nginx)")
        }
        Peer::Builtin => {
            Running::Builtin(Server::start(server_ns, server_addr(), s.server.clone())?)
        }
        Peer::Nginx => Running::External(ext::nginx(server_ns, s)?),
        Peer::Jdk => Running::External(ext::jdk(server_ns, s)?),
        Peer::Python => Running::External(ext::python(server_ns, s)?),
    })
}

/// Drops every server→client packet in the router from `at` for `length`.
fn blackout(router: String, at: Duration, length: Duration) -> thread::JoinHandle<Result<()>> {
    thread::spawn(move || {
        thread::sleep(at);
        iptables(&router, "-A", BLACKOUT_RULE)?;
        thread::sleep(length);
        iptables(&router, "-D", BLACKOUT_RULE)
    })
}

/// A capture running on its own threads: one reads frames from the kernel,
/// another feeds them to the engine (and the pcap file), so that analysis
/// never holds up the reading.
/// What the analysis thread hands back: the analysis, its latency
/// distribution and the name of the file written, if any.
type Analysed = (Analysis, Vec<LatencyBin>, Option<String>);

struct RunningCapture {
    stop: Arc<AtomicBool>,
    reader: thread::JoinHandle<Result<(u64, u64)>>,
    analyser: thread::JoinHandle<Result<Analysed>>,
}

struct Owned {
    ts: Timestamp,
    orig_len: u32,
    data: Vec<u8>,
}

fn start_capture(
    ns_name: &str,
    iface: &'static str,
    snaplen: u32,
    write: Option<PathBuf>,
) -> Result<RunningCapture> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Vec<Owned>>();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<()>>();
    let st = stop.clone();
    let reader = ns::spawn_in(ns_name, "lab-capture", move || {
        let mut cap = match Capture::open(iface, snaplen, None) {
            Ok(c) => {
                let _ = ready_tx.send(Ok(()));
                c
            }
            Err(e) => {
                let msg = format!("capturing on {iface}: {e}");
                let _ = ready_tx.send(Err(Error::msg(msg.clone())));
                return Err(Error::msg(msg));
            }
        };
        let mut batch = Vec::with_capacity(1024);
        let mut last_send = Instant::now();
        let mut packets = 0u64;
        loop {
            let stopping = st.load(Ordering::Relaxed);
            // Once stopping, read until the ring has handed over everything
            // captured so far (its last block comes when the kernel retires it).
            let wait = if stopping {
                cap.delivery_delay()
            } else {
                Duration::from_millis(20)
            };
            match cap.next_frame(wait)? {
                Some(f) => {
                    packets += 1;
                    batch.push(Owned {
                        ts: f.ts,
                        orig_len: f.orig_len,
                        data: f.data.to_vec(),
                    });
                }
                None if stopping => break,
                None => {}
            }
            if batch.len() >= 1024 || last_send.elapsed() > Duration::from_millis(20) {
                if !batch.is_empty() {
                    let _ = tx.send(std::mem::replace(&mut batch, Vec::with_capacity(1024)));
                }
                last_send = Instant::now();
            }
        }
        if !batch.is_empty() {
            let _ = tx.send(batch);
        }
        let stats = cap.stats()?;
        Ok((packets, stats.dropped))
    })?;
    ready_rx
        .recv()
        .context("the capture thread ended before starting")??;
    let analyser = thread::Builder::new()
        .name("lab-analysis".into())
        .spawn(move || {
            let mut engine = Engine::new(Options::default());
            let mut out = match &write {
                Some(p) => Some(Writer::create(p, snaplen)?),
                None => None,
            };
            // Frames are analysed once the capture ends, so that the engine
            // takes no CPU from the peers while they run (2 cores here).
            let batches: Vec<Vec<Owned>> = rx.iter().collect();
            for batch in batches {
                for f in &batch {
                    engine.push(f.ts, LinkType::Ethernet, &f.data, f.orig_len);
                    if let Some(w) = &mut out {
                        w.write(f.ts, &f.data, f.orig_len)?;
                    }
                }
            }
            if let Some(w) = out {
                w.finish()?;
            }
            let (analysis, bins) = engine.finish_with_distribution();
            Ok((analysis, bins, write.map(|p| p.display().to_string())))
        })?;
    Ok(RunningCapture {
        stop,
        reader,
        analyser,
    })
}

impl RunningCapture {
    fn finish(self) -> Result<(Analysis, Vec<LatencyBin>, CaptureInfo)> {
        self.stop.store(true, Ordering::Relaxed);
        let (packets, drops) = ns::join(self.reader)?;
        let (mut analysis, bins, written) = self
            .analyser
            .join()
            .map_err(|_| Error::msg("the analysis thread panicked"))??;
        if drops > 0 {
            analysis.capture.warnings.push(format!(
                "the kernel dropped {drops} packets during the capture: the analysis has holes"
            ));
        }
        Ok((
            analysis,
            bins,
            CaptureInfo {
                vantage: Vantage::Client,
                namespace: String::new(),
                interface: "",
                packets,
                kernel_drops: drops,
                written,
            },
        ))
    }
}

/// The capture file: pcap with nanosecond timestamps, or pcapng when the
/// name ends in `.pcapng`.
enum Writer {
    Pcap(PcapWriter<BufWriter<File>>),
    PcapNg(PcapNgWriter<BufWriter<File>>, u32),
}

impl Writer {
    fn create(p: &std::path::Path, snaplen: u32) -> Result<Writer> {
        let f =
            BufWriter::new(File::create(p).with_context(|| format!("creating {}", p.display()))?);
        Ok(if p.extension().is_some_and(|e| e == "pcapng") {
            let mut w = PcapNgWriter::new(f)?;
            let iface = w.add_interface(LinkType::Ethernet, snaplen, 9)?;
            Writer::PcapNg(w, iface)
        } else {
            Writer::Pcap(PcapWriter::new(f, LinkType::Ethernet, snaplen)?)
        })
    }

    fn write(&mut self, ts: Timestamp, data: &[u8], orig_len: u32) -> Result<()> {
        match self {
            Writer::Pcap(w) => w.write_packet(ts, data, orig_len)?,
            Writer::PcapNg(w, iface) => {
                w.write_packet(*iface, ts.nanos().max(0) as u64, data, orig_len)?
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        use std::io::Write;
        match self {
            Writer::Pcap(w) => w.into_inner().flush()?,
            Writer::PcapNg(w, _) => w.into_inner().flush()?,
        }
        Ok(())
    }
}
