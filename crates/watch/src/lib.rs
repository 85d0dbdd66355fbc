//! Live diagnosis: frames from a live capture go into the same engine as
//! `analyze`, and every interval the watcher says what it has found so far.
//!
//! [`Watcher`] is sans-IO: it is fed frames ([`Watcher::push`]) and asked for
//! an [`Interval`] whenever the caller's clock says one has passed
//! ([`Watcher::tick`]), with the kernel's drop counter of the capture. It
//! keeps the exchange latencies of the interval in a fixed-size histogram and
//! per-server statistics for at most [`MAX_SERVERS`] servers, so its memory
//! does not grow with the length of the watch. [`Metrics`] mirrors the same
//! figures for Prometheus, [`serve`] exposes them over HTTP, [`capture`]
//! runs the whole loop on a live interface and [`report`] is what
//! `tcpdoctor watch` prints.
//!
//! ```
//! use tcpdoctor_watch::{KernelCounters, Watcher};
//! let mut w = Watcher::new(None);
//! // w.push(ts, link, frame, orig_len) for each frame, then once a second:
//! let iv = w.tick(1.0, KernelCounters::default());
//! assert_eq!(iv.packets, 0);
//! let analysis = w.finish(); // the full analysis, as `analyze` gives it
//! assert!(analysis.findings.is_empty());
//! ```
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use tcpdoctor_engine::round3;

use rustc_hash::FxHashMap;
use serde::Serialize;
use tcpdoctor_engine::histogram::Histogram;
use tcpdoctor_engine::model::{Analysis, LatencyBin, LiveFinding};
use tcpdoctor_engine::{Engine, Options};
use tcpdoctor_wire::{LinkType, Timestamp};

pub mod capture;
pub mod metrics;
pub mod report;
pub mod serve;
pub mod view;

pub use metrics::Metrics;

/// Servers with their own statistics in an interval (and their own label in
/// the metrics); exchanges with further servers are counted under "other".
pub const MAX_SERVERS: usize = 200;

/// Servers listed in an interval's `top_servers`.
const TOP_SERVERS: usize = 5;

/// The capture's kernel counters, cumulative since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelCounters {
    /// Frames that reached the capture socket, dropped ones included.
    pub received: u64,
    /// Frames the kernel dropped because the reader fell behind.
    pub dropped: u64,
}

/// What one interval of the watch saw, and the findings so far.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    /// 1 for the first interval.
    pub interval: u64,
    /// Seconds since the watch started, at the end of this interval.
    pub t_s: f64,
    /// Frames analysed in this interval.
    pub packets: u64,
    pub packets_per_sec: f64,
    /// Frames the kernel dropped in this interval, and since the start: a
    /// capture with drops has holes, and the findings may miss what fell in them.
    pub kernel_drops: u64,
    pub kernel_drops_total: u64,
    /// Request/response exchanges completed in this interval, and their
    /// duration (request start to response end); `null` without exchanges.
    pub exchanges: u64,
    pub exchange_latency_ms: Option<Latency>,
    /// The findings so far, largest time lost first; those under 1% of the
    /// exchanges' time are in `minor_findings`, as in the final analysis.
    pub findings: Vec<LiveFinding>,
    pub minor_findings: Vec<LiveFinding>,
    pub open_connections: u64,
    /// The busiest servers of this interval.
    pub top_servers: Vec<ServerStat>,
}

/// Percentiles of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// One server's exchanges in an interval.
#[derive(Debug, Clone, Serialize)]
pub struct ServerStat {
    /// `ip:port`, or `other` for the servers past [`MAX_SERVERS`].
    pub server: String,
    pub exchanges: u64,
    pub mean_ms: f64,
    pub max_ms: f64,
}

#[derive(Default, Clone, Copy)]
struct ServerAcc {
    count: u64,
    sum_ns: i128,
    max_ns: i64,
}

/// The live diagnosis of a stream of frames.
pub struct Watcher {
    engine: Engine,
    metrics: Option<Metrics>,
    intervals: u64,
    last_t_s: f64,
    frames_at_tick: u64,
    drops_at_tick: u64,
    hist: Histogram,
    servers: FxHashMap<SocketAddr, ServerAcc>,
    other: ServerAcc,
    /// The buffer an interval's exchanges are moved into, reused across ticks.
    scratch: Vec<(SocketAddr, i64)>,
}

impl Watcher {
    /// A watcher whose engine keeps completed exchanges for the intervals;
    /// with `metrics`, each tick also updates them.
    pub fn new(metrics: Option<Metrics>) -> Watcher {
        Watcher {
            engine: Engine::new(Options {
                live: true,
                ..Options::default()
            }),
            metrics,
            intervals: 0,
            last_t_s: 0.0,
            frames_at_tick: 0,
            drops_at_tick: 0,
            hist: Histogram::default(),
            servers: FxHashMap::default(),
            other: ServerAcc::default(),
            scratch: Vec::new(),
        }
    }

    /// Feeds one captured frame.
    #[inline]
    pub fn push(&mut self, ts: Timestamp, link: LinkType, data: &[u8], orig_len: u32) {
        self.engine.push(ts, link, data, orig_len);
    }

    /// Frames fed so far.
    pub fn frames(&self) -> u64 {
        self.engine.frames()
    }

    /// Ends an interval at `t_s` seconds since the start of the watch, given
    /// the capture's cumulative kernel counters.
    pub fn tick(&mut self, t_s: f64, kernel: KernelCounters) -> Interval {
        self.intervals += 1;
        let elapsed = (t_s - self.last_t_s).max(1e-9);
        self.last_t_s = t_s;

        self.hist = Histogram::default();
        self.servers.clear();
        self.other = ServerAcc::default();
        let mut drained = 0u64;
        // Take the exchanges out first: the engine's buffer is borrowed while
        // draining, the accumulators are ours.
        let mut exchanges = std::mem::take(&mut self.scratch);
        exchanges.extend(self.engine.drain_exchanges());
        for &(server, ns) in &exchanges {
            drained += 1;
            self.hist.record(ns);
            let acc = if self.servers.len() < MAX_SERVERS || self.servers.contains_key(&server) {
                self.servers.entry(server).or_default()
            } else {
                &mut self.other
            };
            acc.count += 1;
            acc.sum_ns += i128::from(ns);
            acc.max_ns = acc.max_ns.max(ns);
        }

        let progress = self.engine.progress();
        let frames = progress.frames;
        let packets = frames - self.frames_at_tick;
        self.frames_at_tick = frames;
        let kernel_drops = kernel.dropped.saturating_sub(self.drops_at_tick);
        self.drops_at_tick = self.drops_at_tick.max(kernel.dropped);

        if let Some(m) = &mut self.metrics {
            m.record_interval(packets, kernel_drops, &progress, &exchanges);
        }
        exchanges.clear();
        self.scratch = exchanges;

        let latency = (drained > 0).then(|| Latency {
            p50: round3(self.hist.quantile_ms(0.5)),
            p90: round3(self.hist.quantile_ms(0.9)),
            p99: round3(self.hist.quantile_ms(0.99)),
            max: round3(self.hist.max_ns() as f64 / 1e6),
        });
        let mut top: Vec<ServerStat> = self
            .servers
            .iter()
            .map(|(addr, acc)| server_stat(addr.to_string(), acc))
            .collect();
        if self.other.count > 0 {
            top.push(server_stat("other".into(), &self.other));
        }
        top.sort_by(|a, b| {
            b.exchanges
                .cmp(&a.exchanges)
                .then_with(|| a.server.cmp(&b.server))
        });
        top.truncate(TOP_SERVERS);

        Interval {
            interval: self.intervals,
            t_s: round3(t_s),
            packets,
            packets_per_sec: (packets as f64 / elapsed).round(),
            kernel_drops,
            kernel_drops_total: kernel.dropped,
            exchanges: drained,
            exchange_latency_ms: latency,
            findings: progress.findings,
            minor_findings: progress.minor_findings,
            open_connections: progress.open_connections,
            top_servers: top,
        }
    }

    /// Records a problem with the capture, reported with the analysis.
    pub fn warn(&mut self, message: String) {
        self.engine.warn(message);
    }

    /// Closes every open connection and builds the full analysis.
    pub fn finish(self) -> Analysis {
        self.engine.finish()
    }

    /// [`Watcher::finish`], and the exchange-latency distribution for charts
    /// (the HTML report).
    pub fn finish_with_distribution(self) -> (Analysis, Vec<LatencyBin>) {
        self.engine.finish_with_distribution()
    }
}

fn server_stat(server: String, acc: &ServerAcc) -> ServerStat {
    ServerStat {
        server,
        exchanges: acc.count,
        mean_ms: round3(acc.sum_ns as f64 / acc.count.max(1) as f64 / 1e6),
        max_ms: round3(acc.max_ns as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests;
