#![recursion_limit = "256"]
//! `tcpdoctor top`: the kernel's own view of TCP, per process, from its
//! tracepoints. No packets are copied and no BPF program is compiled: the
//! socket calls' tracepoints and the sampled `tcp_probe` are opened with
//! `perf_event_open(PERF_TYPE_TRACEPOINT)` on every CPU, their raw records
//! landing in one mmap'd ring per CPU; every other tracepoint is read from a
//! tracefs instance of `top`'s own (`instance.rs`, pages parsed by
//! `ftrace.rs`: perf misses the events of a CPU's idle task on some
//! machines). Both are merged by time and decoded by the field offsets the
//! tracepoint's `format` file gives at startup.
//!
//! - `format.rs` parses format files; `decode.rs` turns raw records into
//!   events (addresses of either family, states, windows, bytes);
//!   `record.rs` walks the ring's records (samples, lost counts).
//! - `tracker.rs` (sans-IO) keeps connections and who owns them;
//!   `findings.rs` names mechanisms in `analyze`'s vocabulary;
//!   `text.rs` and `report.rs` render.
//! - `sys.rs` holds every system call (perf, mmap, poll, mount): the crate's
//!   only `unsafe` code.
//!
//! `tcp:tcp_probe` (every received segment) is sampled: one in
//! `probe_every` with the peer's window open, every one at a zero window
//! (two perf events split by an ftrace filter); so is
//! `sock:sock_recv_length` (every read of every TCP socket, one in
//! `probe_every`: bytes read are estimates then); every other tracepoint is
//! taken on every hit.
//!
//! Samples the kernel drops because a ring is full are counted and shown
//! every interval; a record that cannot be decoded is counted, never fatal.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

pub mod decode;
pub mod findings;
pub mod format;
pub mod ftrace;
pub mod html;
mod instance;
pub mod metrics;
pub mod nagle;
pub mod record;
pub mod report;
mod sys;
#[cfg(test)]
mod tests;
pub mod text;
pub mod tracker;

use decode::{Anomaly, Kind, Layout};
use record::{Record, Runs};
pub use report::Setup;
use tracker::{Filter, Final, Interval, ProcName, Stats, Tracker};

/// What to trace.
#[derive(Debug, Clone)]
pub struct Config {
    pub port: Option<u16>,
    pub pid: Option<u32>,
    pub interval: Duration,
    pub duration: Option<Duration>,
    /// Ring buffer pages per CPU (a power of two).
    pub ring_pages: usize,
    /// Rows per table in an interval.
    pub top: usize,
    /// `tcp:tcp_probe` (a record per received segment) is sampled: one
    /// segment in this many with the peer's window open, every segment
    /// showing it closed (1: every segment; 0: auto, every segment until
    /// they come faster than [`AUTO_RATE`] a second, then one in [`AUTO_EVERY`]).
    /// `sock:sock_recv_length` (a record per read) is taken one in as many.
    pub probe_every: u32,
}

/// `--probe-every auto`: past this many `tcp_probe` samples a second (window
/// open), one segment in [`AUTO_EVERY`] is taken; back to every segment when
/// the estimate falls below half of it.
pub const AUTO_RATE: f64 = 20_000.0;
pub const AUTO_EVERY: u32 = 8;

/// One interval, ready to render.
pub struct View<'a> {
    pub interval: &'a Interval,
    pub stats: &'a Stats,
    /// Samples lost in this interval.
    pub lost: u64,
    pub secs: f64,
    pub elapsed: f64,
    names: &'a FxHashMap<u32, ProcName>,
}

impl View<'_> {
    pub fn name(&self, pid: u32) -> Option<String> {
        self.names.get(&pid).map(|n| n.command.clone())
    }

    pub fn text(&self) -> String {
        text::interval(
            self.interval,
            self.secs,
            self.elapsed,
            self.stats,
            self.lost,
            &|p| self.name(p),
        )
    }

    pub fn json(&self) -> serde_json::Value {
        report::interval(self.interval, self.elapsed, self.stats, self.lost, &|p| {
            self.name(p)
        })
    }
}

/// The end of a trace.
pub struct Outcome {
    pub report: Final,
    pub setup: Setup,
    /// CPU time this process used (user + system).
    pub cpu: Duration,
    /// Wall-clock time traced.
    pub elapsed: Duration,
}

impl Outcome {
    pub fn json(&self) -> serde_json::Value {
        report::final_doc(
            &self.report,
            &self.setup,
            self.cpu.as_secs_f64() * 1e3,
            self.elapsed.as_secs_f64() * 1e3,
        )
    }

    pub fn text(&self) -> String {
        text::final_report(&self.report, self.elapsed.as_secs_f64())
    }
}

/// Open tracepoints, enabled.
pub struct Session {
    config: Config,
    rings: Vec<sys::Ring>,
    /// Events writing into another event's ring (kept open).
    others: Vec<sys::Event>,
    /// The sampled streams (`tcp_probe` with the window open, reads), as
    /// (is a ring's own event, index in `rings` or `others`): their period
    /// changes in auto mode.
    sampled: Vec<(bool, usize)>,
    /// Their period now, and their samples this interval.
    probe_period: u32,
    probe_samples: u64,
    layouts: ByType,
    pub setup: Setup,
    tracker: Tracker,
    lost_now: u64,
    /// Per ring: the record cut in two where its unread bytes wrap.
    joints: Vec<Vec<u8>>,
    /// The tracefs instance the tracepoints that [`by_ftrace`] are read
    /// through, and per CPU the pages read from it in one drain.
    instance: Option<instance::Instance>,
    pages: Vec<Vec<u8>>,
    /// Thread → process, for events read through ftrace (their record names
    /// the thread); emptied every interval.
    tgids: FxHashMap<u32, u32>,
}

/// Whether a stream is read through `top`'s tracefs instance rather than a
/// perf event: every stream of every hit of a tracepoint that fires in the
/// kernel's own context (timers, a segment's softirq), where a CPU's idle
/// task may be running. The socket calls' (`sock_send_length`,
/// `sock_recv_length`: many, in the caller's context) and the sampled
/// `tcp_probe` (a perf period) stay with perf.
pub fn by_ftrace(kind: Kind, stream: &Stream) -> bool {
    !stream.sampled && stream.period == 1 && !matches!(kind, Kind::SendLength | Kind::RecvLength)
}

fn err(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, msg)
}

/// Where tracefs is, mounting it if it is not.
fn tracefs() -> io::Result<PathBuf> {
    for dir in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        let events = Path::new(dir).join("events/tcp");
        match std::fs::metadata(&events) {
            Ok(m) if m.is_dir() => return Ok(PathBuf::from(dir)),
            // Mounted, and readable by root only (its usual mode, 0700).
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "?".into());
                return Err(err(
                    e.kind(),
                    format!(
                        "{}: permission denied: the tracepoints' formats are read from \
                         tracefs, which only root may read here; run as root (sudo), or give \
                         this user read access to tracefs and CAP_PERFMON with \
                         kernel.perf_event_paranoid at 1 or below (now {paranoid})",
                        events.display()
                    ),
                ));
            }
            _ => {}
        }
    }
    sys::mount_tracefs().map_err(|e| {
        let msg = if e.kind() == io::ErrorKind::PermissionDenied {
            // Not root: the mount is the first thing refused.
            "tracefs is not mounted, and mounting it needs root (permission denied): run as \
             root (sudo), or have root mount it (mount -t tracefs nodev /sys/kernel/tracing) \
             and give this user read access to tracefs and CAP_PERFMON"
                .to_string()
        } else {
            format!(
                "tracefs is not mounted and mounting it failed ({e}); as root: \
                 mount -t tracefs nodev /sys/kernel/tracing"
            )
        };
        err(e.kind(), msg)
    })?;
    let dir = PathBuf::from("/sys/kernel/tracing");
    if dir.join("events/tcp").is_dir() {
        Ok(dir)
    } else {
        Err(err(
            io::ErrorKind::NotFound,
            "tracefs has no events/tcp: this kernel has no TCP tracepoints".into(),
        ))
    }
}

/// `0-3,5` → [0, 1, 2, 3, 5].
pub fn parse_cpu_list(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                    if b >= a && b - a < 4096 {
                        out.extend(a..=b);
                    }
                }
            }
            None => {
                if let Ok(a) = part.trim().parse() {
                    out.push(a);
                }
            }
        }
    }
    out
}

/// The kernel-side filter of one tracepoint (ftrace filter syntax).
pub fn kernel_filter(kind: Kind, layout: &Layout, port: Option<u16>) -> Option<String> {
    let mut parts = Vec::new();
    if matches!(kind, Kind::SendLength | Kind::RecvLength | Kind::SetState)
        && layout.field(decode::Slot::Protocol).is_some()
    {
        parts.push("protocol == 6".to_string());
    }
    // Every socket's destroy passes, whatever its port: the tracker then
    // knows an address another socket freed (its writes have no ports to
    // filter on) before a connection of the port is born there, even when
    // no state change is seen (a BPF program on `inet_sock_set_state` can
    // hide them). One event per socket closed on the host.
    if let Some(p) = port.filter(|_| kind != Kind::Destroy) {
        if kind.has_ports(layout) {
            parts.push(format!("(sport == {p} || dport == {p})"));
        }
    }
    (!parts.is_empty()).then(|| parts.join(" && "))
}

/// One perf event to open on a tracepoint: a sample every `period` hits
/// that pass `filter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    pub period: u64,
    pub filter: Option<String>,
    /// The stream is only right with its filter (a sampled `tcp_probe`
    /// split by window): a kernel that refuses it is an error.
    pub needs_filter: bool,
    /// `tcp_probe` with the window open: its period is the sampling rate.
    pub sampled: bool,
}

/// The perf events one tracepoint is read through. Every tracepoint but
/// `tcp_probe` and `sock_recv_length` is one stream with every hit; with
/// `probe_every` > 1, `tcp_probe` is two disjoint streams: segments showing
/// the peer's window open, one in `probe_every` (the numbers of a
/// connection, sampled), and every segment showing it closed (zero windows,
/// counted and timed); `sock_recv_length` one stream, one read in
/// `probe_every`. `probe_every` 0 (auto) samples them too, starting at
/// every segment and every read.
pub fn streams(kind: Kind, layout: &Layout, port: Option<u16>, probe_every: u32) -> Vec<Stream> {
    let base = kernel_filter(kind, layout, port);
    // Reads are sampled with the segments (one per received segment or
    // two, on every socket of the host, whatever the port): bytes and
    // reads are then scaled estimates, the reading process still known.
    if kind == Kind::RecvLength && probe_every != 1 {
        return vec![Stream {
            period: u64::from(probe_every.max(1)),
            filter: base,
            needs_filter: false,
            sampled: true,
        }];
    }
    let split =
        kind == Kind::Probe && probe_every != 1 && layout.field(decode::Slot::SndWnd).is_some();
    if !split {
        return vec![Stream {
            period: 1,
            filter: base,
            needs_filter: false,
            sampled: false,
        }];
    }
    let with = |w: &str| {
        Some(
            base.as_ref()
                .map_or_else(|| w.to_string(), |b| format!("{b} && {w}")),
        )
    };
    vec![
        Stream {
            // Auto (0) starts with every segment.
            period: u64::from(probe_every.max(1)),
            filter: with("snd_wnd != 0"),
            needs_filter: true,
            sampled: true,
        },
        Stream {
            period: 1,
            filter: with("snd_wnd == 0"),
            needs_filter: true,
            sampled: false,
        },
    ]
}

fn privilege_hint(e: &io::Error) -> String {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    format!(
        "{e}: tracing every process's TCP needs root, or CAP_PERFMON (and CAP_SYS_ADMIN or \
         CAP_BPF for tracepoints on older kernels), with kernel.perf_event_paranoid at {paranoid} \
         (above 1 an unprivileged user cannot trace other processes; -1 allows all)"
    )
}

/// Opens one stream of a tracepoint on one CPU and sets its filter; notes
/// the filter per (tracepoint, period).
fn open_stream(
    stream: &Stream,
    id: u32,
    cpu: u32,
    layout: &Layout,
    wakeup: u32,
    notes: &mut FxHashMap<(Kind, u64), String>,
) -> io::Result<sys::Event> {
    let label = layout.kind.label();
    let ev =
        sys::Event::open(id, cpu, record::SAMPLE_TYPE, stream.period, wakeup).map_err(|e| {
            let msg = if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
                privilege_hint(&e)
            } else {
                e.to_string()
            };
            err(
                e.kind(),
                format!("perf_event_open {label} on cpu {cpu}: {msg}"),
            )
        })?;
    if let Some(f) = &stream.filter {
        let every = if stream.period > 1 {
            format!(" (one in {})", stream.period)
        } else {
            String::new()
        };
        let note = match ev.set_filter(f) {
            Ok(()) => format!("{label}: {f}{every}"),
            Err(e) if stream.needs_filter => {
                return Err(err(
                    e.kind(),
                    format!(
                    "{label}: the kernel refused the filter `{f}` ({e}); run with --probe-every 1"
                ),
                ))
            }
            Err(e) => format!("{label}: kernel refused `{f}` ({e}); filtered in user space"),
        };
        notes.insert((layout.kind, stream.period), note);
    }
    Ok(ev)
}

/// `top`'s tracefs instance with every stream [`by_ftrace`] enabled in it
/// (their filters noted); `None`, with a note, when no instance can be made
/// here: every stream is then read through perf.
fn open_instance(
    root: &Path,
    kb_per_cpu: usize,
    order: &[u32],
    layouts: &FxHashMap<u32, Layout>,
    config: &Config,
    setup: &mut Setup,
    notes: &mut FxHashMap<(Kind, u64), String>,
) -> io::Result<Option<instance::Instance>> {
    let inst = match instance::Instance::create(root, kb_per_cpu) {
        Ok(i) => i,
        Err(e) => {
            setup.ftrace_note = Some(format!(
                "no tracefs instance of its own ({e}): every tracepoint is read through perf, \
                 which on some machines misses the events of a CPU's idle task"
            ));
            return Ok(None);
        }
    };
    let mut names = Vec::new();
    for id in order {
        let layout = &layouts[id];
        let (system, event) = layout.kind.tracepoint();
        let label = layout.kind.label();
        for stream in streams(layout.kind, layout, config.port, config.probe_every) {
            if !by_ftrace(layout.kind, &stream) {
                continue;
            }
            if let Some(f) = &stream.filter {
                let note = match inst.filter(system, event, f) {
                    Ok(()) => format!("{label}: {f}"),
                    Err(e) if stream.needs_filter => {
                        return Err(err(
                            e.kind(),
                            format!(
                                "{label}: the kernel refused the filter `{f}` ({e}); run with \
                                 --probe-every 1"
                            ),
                        ))
                    }
                    Err(e) => {
                        format!("{label}: kernel refused `{f}` ({e}); filtered in user space")
                    }
                };
                notes.insert((layout.kind, stream.period), note);
            }
            if let Err(e) = inst.enable(system, event) {
                setup.ftrace_note = Some(format!(
                    "enabling {label} in the tracefs instance failed ({e}): every tracepoint is \
                     read through perf"
                ));
                return Ok(None);
            }
            names.push(label.clone());
        }
    }
    setup.ftrace = names;
    setup.ftrace_instance = Some(inst.dir().display().to_string());
    Ok(Some(inst))
}

/// The online CPUs; an error when none can be read.
fn online_cpus() -> io::Result<Vec<u32>> {
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| parse_cpu_list(&s))
        .unwrap_or_default();
    if cpus.is_empty() {
        return Err(err(
            io::ErrorKind::NotFound,
            "cannot read the online CPUs (/sys/devices/system/cpu/online)".into(),
        ));
    }
    Ok(cpus)
}

/// The layouts of the tracepoints this kernel has, by type id, and their
/// ids in [`Kind::ALL`]'s order; what is missing is noted in `setup`. An
/// error when none exists.
fn load_layouts(root: &Path, setup: &mut Setup) -> io::Result<(FxHashMap<u32, Layout>, Vec<u32>)> {
    let mut layouts = FxHashMap::default();
    let mut order = Vec::new();
    for kind in Kind::ALL {
        let (s, n) = kind.tracepoint();
        let path = root.join("events").join(s).join(n).join("format");
        let Ok(text) = std::fs::read_to_string(&path) else {
            setup.unavailable.push(kind.label());
            continue;
        };
        let Some(layout) = Layout::new(kind, &format::Format::parse(&text)) else {
            setup.unavailable.push(kind.label());
            continue;
        };
        if !layout.missing.is_empty() {
            setup
                .missing_fields
                .push(format!("{}: {}", kind.label(), layout.missing.join(", ")));
        }
        setup.tracepoints.push(kind.label());
        order.push(layout.id);
        layouts.insert(layout.id, layout);
    }
    if order.is_empty() {
        return Err(err(
            io::ErrorKind::NotFound,
            format!(
                "none of the TCP tracepoints exist on this kernel ({} has no {}): \
                 top needs at least one of them",
                root.join("events").display(),
                Kind::ALL.map(|k| k.label()).join(", ")
            ),
        ));
    }
    Ok((layouts, order))
}

/// The perf events [`open_rings`] opens: as [`Session`]'s fields of the same names.
struct PerfEvents {
    rings: Vec<sys::Ring>,
    others: Vec<sys::Event>,
    sampled: Vec<(bool, usize)>,
}

/// The perf events of every stream not read through the tracefs instance
/// (all when `with_instance` is false), on every CPU in `cpus`: each CPU's
/// first event maps a ring of `pages` pages (woken at `wakeup` bytes), the
/// others write into it.
#[allow(clippy::too_many_arguments)]
fn open_rings(
    cpus: &[u32],
    order: &[u32],
    layouts: &FxHashMap<u32, Layout>,
    config: &Config,
    with_instance: bool,
    pages: usize,
    wakeup: u32,
    filter_notes: &mut FxHashMap<(Kind, u64), String>,
) -> io::Result<PerfEvents> {
    let mut rings = Vec::new();
    let mut others = Vec::new();
    let mut sampled = Vec::new();
    for &cpu in cpus {
        let mut ring: Option<sys::Ring> = None;
        for id in order {
            let layout = &layouts[id];
            for stream in streams(layout.kind, layout, config.port, config.probe_every) {
                if with_instance && by_ftrace(layout.kind, &stream) {
                    continue;
                }
                let ev = open_stream(&stream, *id, cpu, layout, wakeup, filter_notes)?;
                if stream.sampled {
                    sampled.push(match &ring {
                        None => (true, rings.len()),
                        Some(_) => (false, others.len()),
                    });
                }
                match &ring {
                    None => {
                        ring = Some(sys::Ring::map(ev, pages).map_err(|e| {
                            err(e.kind(), format!("mmap of the perf ring on cpu {cpu}: {e}"))
                        })?)
                    }
                    Some(r) => {
                        ev.set_output(r).map_err(|e| {
                            err(
                                e.kind(),
                                format!("PERF_EVENT_IOC_SET_OUTPUT on cpu {cpu}: {e}"),
                            )
                        })?;
                        others.push(ev);
                    }
                }
            }
        }
        if let Some(r) = ring {
            rings.push(r);
        }
    }
    Ok(PerfEvents {
        rings,
        others,
        sampled,
    })
}

impl Session {
    /// Opens every tracepoint on every online CPU and enables them.
    pub fn open(config: Config) -> io::Result<Session> {
        let root = tracefs()?;
        let cpus = online_cpus()?;
        let mut setup = Setup {
            cpus: cpus.len() as u32,
            ..Setup::default()
        };
        let (layouts, order) = load_layouts(&root, &mut setup)?;
        let pages = config.ring_pages.max(1).next_power_of_two();
        let page = 4096usize;
        setup.ring_bytes_per_cpu = pages * page;
        let wakeup = (pages * page / 4) as u32;
        let mut filter_notes = FxHashMap::default();
        let instance = open_instance(
            &root,
            setup.ring_bytes_per_cpu / 1024,
            &order,
            &layouts,
            &config,
            &mut setup,
            &mut filter_notes,
        )?;
        let PerfEvents {
            rings,
            others,
            sampled,
        } = open_rings(
            &cpus,
            &order,
            &layouts,
            &config,
            instance.is_some(),
            pages,
            wakeup,
            &mut filter_notes,
        )?;
        let mut notes: Vec<((Kind, u64), String)> = filter_notes.into_iter().collect();
        notes.sort();
        setup.kernel_filters = notes.into_iter().map(|(_, n)| n).collect();
        setup.probe_auto = config.probe_every == 0;
        setup.probe_every = if setup.probe_auto {
            AUTO_EVERY
        } else {
            config.probe_every
        };
        for r in &rings {
            r.event().enable()?;
        }
        for e in &others {
            e.enable()?;
        }
        let mut instance = instance;
        if let Some(inst) = &mut instance {
            inst.start(&cpus).map_err(|e| {
                err(
                    e.kind(),
                    format!(
                        "starting the tracefs instance {}: {e}",
                        inst.dir().display()
                    ),
                )
            })?;
        }
        sys::fix_mmap_threshold();
        let mut tracker = Tracker::new(Filter {
            port: config.port,
            pid: config.pid,
        });
        let probe_period = config.probe_every.max(1);
        tracker.probe_every = probe_period;
        let cong = Kind::CongState.label();
        tracker.states_traced = !setup.unavailable.contains(&cong)
            && !setup.missing_fields.iter().any(|m| m.starts_with(&cong));
        tracker.stats.max_sample_rate =
            std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
                .ok()
                .and_then(|s| s.trim().parse().ok());
        Ok(Session {
            config,
            rings,
            others,
            sampled,
            probe_period,
            probe_samples: 0,
            layouts: ByType::new(layouts),
            setup,
            tracker,
            lost_now: 0,
            joints: Vec::new(),
            pages: Vec::new(),
            instance,
            tgids: FxHashMap::default(),
        })
    }

    /// Reads every ring, decodes, feeds the tracker in time order: each
    /// ring is in time order (the events of one CPU), so their records are
    /// merged in place, the earliest first, without copying them out; the
    /// memory this takes does not grow with a burst. The instance's pages
    /// (one CPU's events each, on perf's clock) are read first and merged
    /// the same way.
    fn drain(&mut self) {
        let Session {
            rings,
            layouts,
            tracker,
            lost_now,
            probe_samples,
            joints,
            instance,
            pages,
            tgids,
            setup,
            ..
        } = self;
        if let Some(inst) = instance.as_mut() {
            // At most a ring's worth a CPU: what a drain holds stays bounded.
            read_pages(
                inst,
                pages,
                (setup.ring_bytes_per_cpu / ftrace::PAGE).max(1),
            );
        }
        joints.resize_with(rings.len(), || Vec::with_capacity(1 << 16));
        let mut heads: Vec<(Source<'_>, Option<record::Sample<'_>>)> =
            Vec::with_capacity(rings.len() + pages.len());
        let mut ends = Vec::with_capacity(rings.len());
        for (ring, joint) in rings.iter().zip(joints.iter_mut()) {
            let (a, b, head) = ring.unread();
            ends.push(head);
            let mut src = Source::Perf(Runs::new(record::rejoin(a, b, joint)));
            // A source with nothing to give is left out: the merge below
            // looks at every source for every sample.
            if let Some(first) = src.next_sample(&mut tracker.stats, lost_now) {
                heads.push((src, Some(first)));
            }
        }
        for (cpu, bytes) in pages.iter().enumerate() {
            let mut src = Source::Ftrace(FtracePages::new(bytes, cpu as u32));
            if let Some(first) = src.next_sample(&mut tracker.stats, lost_now) {
                heads.push((src, Some(first)));
            }
        }
        // Every record is decoded into this one event, in place.
        let mut ev = decode::Event::blank(Kind::Destroy);
        loop {
            // The earliest next sample; on a tie, the first source's. Samples
            // wait here undecoded (a borrowed slice, not an event).
            let mut best: Option<(usize, u64)> = None;
            for (i, (_, h)) in heads.iter().enumerate() {
                if let Some(s) = h {
                    if best.is_none_or(|(_, bt)| s.time_ns < bt) {
                        best = Some((i, s.time_ns));
                    }
                }
            }
            let Some((i, _)) = best else { break };
            let (src, head) = &mut heads[i];
            if let Some(s) = head.take() {
                let tgids = matches!(src, Source::Ftrace(_)).then_some(&mut *tgids);
                dispatch(&s, layouts, tracker, probe_samples, tgids, &mut ev);
            }
            *head = src.next_sample(&mut tracker.stats, lost_now);
        }
        drop(heads);
        for (ring, head) in rings.iter_mut().zip(ends) {
            ring.release(head);
        }
        for pid in self.tracker.take_unnamed() {
            self.tracker.name(pid, proc_name(pid));
        }
    }

    /// `--probe-every auto`: one `tcp_probe` sample in [`AUTO_EVERY`] while
    /// segments arrive faster than [`AUTO_RATE`] a second, every one below
    /// half of it. Called after a drain, so that the samples already read
    /// were taken at the period the tracker weighs them by.
    fn adapt_probe_period(&mut self, secs: f64) {
        let samples = std::mem::take(&mut self.probe_samples);
        if self.probe_period > 1 {
            self.tracker.stats.probe_sampled_intervals += 1;
        }
        if !self.setup.probe_auto || secs <= 0.0 {
            return;
        }
        let segments_per_s = samples as f64 * f64::from(self.probe_period) / secs;
        let want = if segments_per_s > AUTO_RATE {
            AUTO_EVERY
        } else if segments_per_s < AUTO_RATE / 2.0 {
            1
        } else {
            self.probe_period
        };
        if want == self.probe_period {
            return;
        }
        let mut ok = true;
        for &(own, i) in &self.sampled {
            let ev = if own {
                self.rings.get(i).map(|r| r.event())
            } else {
                self.others.get(i)
            };
            if let Some(ev) = ev {
                ok &= ev.set_period(u64::from(want)).is_ok();
            }
        }
        if ok {
            self.probe_period = want;
            self.tracker.probe_every = want;
        }
    }

    /// Owners of connections no socket call has named yet, from the socket
    /// table of this network namespace (sock_diag + /proc/PID/fd).
    fn look_up_owners(&mut self) {
        let ownerless = self.tracker.ownerless();
        if ownerless.is_empty() {
            return;
        }
        let query = tcpdoctor_sockets::Query {
            states: u32::MAX,
            port: self.config.port,
            pid: None,
            owners_only: true,
        };
        let Ok(snap) = tcpdoctor_sockets::snapshot(&query) else {
            return;
        };
        let mut by: FxHashMap<(SocketAddr, Option<SocketAddr>), u32> = FxHashMap::default();
        for s in &snap.sockets {
            let Some(p) = &s.process else { continue };
            let remote = (s.remote.port() != 0).then_some(s.remote);
            by.insert((s.local, remote), p.pid);
            if remote.is_none() {
                // A listener on 0.0.0.0 / :: serves every local address.
                by.insert((SocketAddr::new(s.local.ip(), s.local.port()), None), p.pid);
            }
        }
        for (sk, local, remote) in ownerless {
            let pid = by.get(&(local, remote)).copied().or_else(|| {
                remote.is_none().then(|| {
                    snap.sockets.iter().find_map(|s| {
                        (s.local.port() == local.port() && s.remote.port() == 0)
                            .then(|| s.process.as_ref().map(|p| p.pid))
                            .flatten()
                    })
                })?
            });
            if let Some(pid) = pid {
                self.tracker.set_owner(sk, pid);
            }
        }
        for pid in self.tracker.take_unnamed() {
            self.tracker.name(pid, proc_name(pid));
        }
    }

    /// Traces until `stop` is set or the duration ends, calling `each` every interval.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        mut each: impl FnMut(&View<'_>) -> io::Result<()>,
    ) -> io::Result<Outcome> {
        sys::stop_on_sigterm();
        let start = Instant::now();
        let interval = self.config.interval.max(Duration::from_millis(100));
        let mut next = start + interval;
        let mut last = start;
        loop {
            let now = Instant::now();
            let done = stop.load(Ordering::SeqCst)
                || sys::SIGTERM.load(Ordering::SeqCst)
                || self
                    .config
                    .duration
                    .is_some_and(|d| now.duration_since(start) >= d);
            if done {
                break;
            }
            let until_tick = next.saturating_duration_since(now);
            let until_end = self
                .config
                .duration
                .map_or(until_tick, |d| (start + d).saturating_duration_since(now));
            let wait = until_tick.min(until_end).min(Duration::from_millis(100));
            sys::Ring::poll(&self.rings, wait.as_millis() as i32)?;
            self.drain();
            let now = Instant::now();
            if now >= next {
                self.look_up_owners();
                let iv = self.tracker.interval(self.config.top);
                let view = View {
                    interval: &iv,
                    stats: &self.tracker.stats,
                    lost: self.lost_now,
                    secs: now.duration_since(last).as_secs_f64(),
                    elapsed: now.duration_since(start).as_secs_f64(),
                    names: &self.tracker.names,
                };
                each(&view)?;
                self.lost_now = 0;
                self.tgids.clear();
                let secs = now.duration_since(last).as_secs_f64();
                self.adapt_probe_period(secs);
                last = now;
                while next <= now {
                    next += interval;
                }
            }
        }
        for r in &self.rings {
            let _ = r.event().disable();
        }
        for e in &self.others {
            let _ = e.disable();
        }
        if let Some(inst) = &self.instance {
            inst.stop();
        }
        self.drain();
        self.look_up_owners();
        let _ = self.tracker.interval(self.config.top);
        Ok(Outcome {
            report: self.tracker.finish(),
            setup: self.setup,
            cpu: sys::cpu_time(),
            elapsed: start.elapsed(),
        })
    }
}

/// The layouts by tracepoint id: `common_type` is a `u16`, so a table
/// indexed by it finds a record's layout without hashing.
struct ByType {
    layouts: Vec<Layout>,
    /// Index into `layouts` + 1 (0: no such tracepoint), by id.
    index: Vec<u8>,
}

impl ByType {
    fn new(map: FxHashMap<u32, Layout>) -> ByType {
        let mut layouts: Vec<Layout> = map.into_values().collect();
        layouts.retain(|l| l.id <= u32::from(u16::MAX));
        layouts.sort_by_key(|l| l.id);
        let top = layouts.last().map_or(0, |l| l.id as usize + 1);
        let mut index = vec![0u8; top];
        for (i, l) in layouts.iter().enumerate() {
            index[l.id as usize] = u8::try_from(i + 1).unwrap_or(0);
        }
        ByType { layouts, index }
    }

    fn get(&self, id: u32) -> Option<&Layout> {
        let i = *self.index.get(id as usize)?;
        self.layouts.get(usize::from(i).checked_sub(1)?)
    }
}

/// Where samples come from: a perf ring's records, or the pages read from
/// the tracefs instance for one CPU.
enum Source<'a> {
    Perf(Runs<'a>),
    Ftrace(FtracePages<'a>),
}

impl<'a> Source<'a> {
    /// The next sample; the records before it (lost samples, throttling,
    /// malformed records) are counted on the way.
    fn next_sample(
        &mut self,
        stats: &mut tracker::Stats,
        lost_now: &mut u64,
    ) -> Option<record::Sample<'a>> {
        match self {
            Source::Perf(runs) => next_sample(runs, stats, lost_now),
            Source::Ftrace(pages) => pages.next_sample(stats, lost_now),
        }
    }
}

/// The events of the pages read from one CPU's `trace_pipe_raw`, in order.
struct FtracePages<'a> {
    bytes: &'a [u8],
    cpu: u32,
    page: Option<ftrace::Page<'a>>,
}

impl<'a> FtracePages<'a> {
    fn new(bytes: &'a [u8], cpu: u32) -> FtracePages<'a> {
        FtracePages {
            bytes,
            cpu,
            page: None,
        }
    }

    /// As a sample: the thread the record names stands for the process
    /// until [`dispatch`] looks it up.
    fn next_sample(
        &mut self,
        stats: &mut tracker::Stats,
        lost_now: &mut u64,
    ) -> Option<record::Sample<'a>> {
        loop {
            if let Some(page) = &mut self.page {
                match page.next() {
                    Some(ftrace::Item::Event { time_ns, raw }) => {
                        let tid = decode::common_pid(raw).unwrap_or(0);
                        return Some(record::Sample {
                            pid: tid,
                            tid,
                            time_ns,
                            cpu: self.cpu,
                            raw,
                        });
                    }
                    Some(ftrace::Item::Malformed) => stats.bad_records += 1,
                    None => self.page = None,
                }
                continue;
            }
            if self.bytes.is_empty() {
                return None;
            }
            let (page, rest) = self.bytes.split_at(self.bytes.len().min(ftrace::PAGE));
            self.bytes = rest;
            match ftrace::Page::parse(page) {
                Some(p) => {
                    if let Some(n) = p.missed {
                        // A hole of unknown size counts as one.
                        stats.lost += n.max(1);
                        *lost_now += n.max(1);
                    }
                    self.page = Some(p);
                }
                None => stats.bad_records += 1,
            }
        }
    }
}

/// Reads the pages each CPU's pipe of `inst` has ready into `pages` (one
/// buffer per CPU, emptied first), at most `max_pages` per CPU: the rest
/// waits for the next drain.
fn read_pages(inst: &mut instance::Instance, pages: &mut Vec<Vec<u8>>, max_pages: usize) {
    pages.resize_with(inst.cpus(), Vec::new);
    let mut page = [0u8; ftrace::PAGE];
    for (i, buf) in pages.iter_mut().enumerate() {
        buf.clear();
        for _ in 0..max_pages {
            match inst.read(i, &mut page) {
                Ok(n) if n > 0 => {
                    // A short read is a page's start: pad it to a page.
                    buf.extend_from_slice(&page[..n]);
                    buf.resize(
                        buf.len() + (ftrace::PAGE - n % ftrace::PAGE) % ftrace::PAGE,
                        0,
                    );
                }
                _ => break,
            }
        }
    }
}

/// The next sample of a ring; the records before it (lost samples,
/// throttling, malformed records) are counted on the way.
fn next_sample<'a>(
    runs: &mut Runs<'a>,
    stats: &mut tracker::Stats,
    lost_now: &mut u64,
) -> Option<record::Sample<'a>> {
    for rec in runs.by_ref() {
        match rec {
            Record::Sample(s) => return Some(s),
            Record::Lost(n) => {
                stats.lost += n;
                *lost_now += n;
            }
            Record::Malformed => stats.bad_records += 1,
            Record::Throttle => stats.throttled += 1,
            Record::Other(_) => {}
        }
    }
    if runs.broken() {
        stats.bad_records += 1;
    }
    None
}

/// Decodes one sample and hands it to the tracker; a record that does not
/// decode is counted.
/// `tgids`: for a sample read through ftrace, whose pid is the thread's:
/// the process it belongs to, looked up when the event is a call of its own.
/// `ev`: the event every record is decoded into.
fn dispatch(
    s: &record::Sample<'_>,
    layouts: &ByType,
    tracker: &mut Tracker,
    probe_samples: &mut u64,
    tgids: Option<&mut FxHashMap<u32, u32>>,
    ev: &mut decode::Event,
) {
    let stats = &mut tracker.stats;
    let Some(layout) = decode::common_type(s.raw).and_then(|t| layouts.get(t)) else {
        stats.unknown_type += 1;
        return;
    };
    match layout.decode_into(s.raw, ev) {
        Ok(()) => {
            if matches!(ev.detail, decode::Detail::Probe(p) if p.snd_wnd != Some(0)) {
                *probe_samples += 1;
            }
            let pid = match tgids {
                Some(cache) if s.tid != 0 && ev.in_process_context() => tgid(cache, s.tid),
                _ => s.pid,
            };
            tracker.handle(s.time_ns, pid, ev);
        }
        Err(Anomaly::Truncated) => stats.truncated += 1,
        Err(Anomaly::Family) => stats.other_family += 1,
        Err(Anomaly::UnknownType) => stats.unknown_type += 1,
        Err(Anomaly::BadRecord) => stats.bad_records += 1,
    }
}

/// The process (thread group) of thread `tid`, from `/proc/TID/status`
/// (`tid` itself once the thread is gone: a single-threaded process's).
fn tgid(cache: &mut FxHashMap<u32, u32>, tid: u32) -> u32 {
    if let Some(&p) = cache.get(&tid) {
        return p;
    }
    let p = std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid);
    if cache.len() >= 1 << 16 {
        cache.clear();
    }
    cache.insert(tid, p);
    p
}

/// `/proc/PID/comm`, `cmdline` and `cgroup` (empty once the process has exited).
fn proc_name(pid: u32) -> ProcName {
    let command = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            let s: Vec<String> = b
                .split(|&c| c == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            s.join(" ")
        })
        .unwrap_or_default();
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map(|s| cgroup_path(&s))
        .unwrap_or_default();
    ProcName {
        command,
        cmdline,
        cgroup,
    }
}

/// The cgroup of a `/proc/PID/cgroup` text: the unified hierarchy's path
/// (`0::/system.slice/nginx.service`) where there is one, else the first
/// line's.
pub fn cgroup_path(text: &str) -> String {
    let path = |l: &str| l.splitn(3, ':').nth(2).map(str::to_string);
    text.lines()
        .find(|l| l.starts_with("0::"))
        .and_then(path)
        .or_else(|| text.lines().next().and_then(path))
        .unwrap_or_default()
}
