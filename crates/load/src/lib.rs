//! HTTP/1.1 load generation with a latency distribution.
//!
//! [`run`] opens `connections` keep-alive connections spread over `threads`
//! threads and sends the same pre-built request on each as soon as the previous
//! response is complete (the closed model of wrk), or, with a `rate`, on a fixed
//! schedule per connection, measuring each latency from the time the request
//! was *due*, not from when it could be sent (the open model of wrk2, which
//! corrects for coordinated omission). Latencies go into an HdrHistogram.
//!
//! Each thread runs one epoll loop (mio) over non-blocking sockets; the hot
//! path makes one `write` and one `read` per request, allocates nothing and
//! parses responses with the small hand-written parser in [`http`] (status
//! line, Content-Length, chunked, keep-alive/close): a general HTTP client
//! would cost more CPU than the server under test on a shared machine.
//!
//! [`report`] is what `tcpdoctor load` prints: wrk's text, and the JSON.
//!
//! ```no_run
//! use std::time::Duration;
//! use tcpdoctor_load::{run, Config, Live, RequestSpec, Target};
//! let target = Target::parse("http://127.0.0.1:8080/").unwrap();
//! let config = Config::new(target, RequestSpec::default());
//! let report = run(&Config { duration: Duration::from_secs(2), ..config }, &Live::default()).unwrap();
//! println!("{:.0} req/s, p50 {:.2} ms", report.requests_per_sec(), report.latency().p50);
//! ```
#![forbid(unsafe_code)]

pub mod http;

/// An I/O error in words, with the peer it came from (`connection refused by ADDR`).
pub use worker::describe as describe_error;
pub mod report;
mod target;
pub mod tls;
mod worker;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

pub use target::{build_request, RequestSpec, Target, TargetError};
pub use tls::TlsOptions;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub target: Target,
    pub request: RequestSpec,
    /// Connections kept open at once (spread over the threads).
    pub connections: usize,
    pub threads: usize,
    pub duration: Duration,
    /// Requests per second over all connections (open model); `None`: as fast as responses come.
    pub rate: Option<f64>,
    /// A request (or connect) without an answer for this long is counted as a timeout and its connection replaced.
    pub timeout: Duration,
    /// Reuse connections (HTTP/1.1 keep-alive). Without it every request opens a new connection
    /// and its latency includes the connection setup.
    pub keepalive: bool,
    /// HTTPS: how the server's certificate is trusted.
    pub tls: TlsOptions,
}

impl Config {
    /// wrk's defaults: 10 connections, 2 threads, 10 s, 2 s timeout, keep-alive.
    pub fn new(target: Target, request: RequestSpec) -> Config {
        Config {
            target,
            request,
            connections: 10,
            threads: 2,
            duration: Duration::from_secs(10),
            rate: None,
            timeout: Duration::from_secs(2),
            keepalive: true,
            tls: TlsOptions::default(),
        }
    }
}

/// Counters readable while the load runs, and a way to stop it early.
#[derive(Debug, Default)]
pub struct Live {
    requests: AtomicU64,
    errors: AtomicU64,
    stop: AtomicBool,
}

impl Live {
    /// Responses completed so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
    /// Errors of any kind so far.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
    /// Ask the run to end now; it returns what was measured.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
    /// Whether [`Live::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    /// The flag [`Live::stop`] sets, for code that waits on a plain flag.
    pub fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }
}

/// Errors by kind, as wrk counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Errors {
    /// Connections refused, unreachable, or failing to set up.
    pub connect: u64,
    /// Reads failing (e.g. reset by the peer), a connection closed before the response
    /// was complete, or a response that could not be parsed.
    pub read: u64,
    /// Writes failing (e.g. reset or broken pipe).
    pub write: u64,
    /// No complete response (or connection) within the timeout.
    pub timeout: u64,
    /// Responses with a status of 400 or above.
    pub status: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.status
    }
    fn add(&mut self, o: &Errors) {
        self.connect += o.connect;
        self.read += o.read;
        self.write += o.write;
        self.timeout += o.timeout;
        self.status += o.status;
    }
}

/// The open model's bookkeeping.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateReport {
    /// Requests per second asked for.
    pub target: f64,
    /// Requests sent more than [`LATE_AFTER`] after their scheduled time
    /// (the connection was still busy or the loop was behind).
    pub late_sends: u64,
    pub max_late: Duration,
}

/// A send counts as late beyond this (the loop wakes with millisecond granularity).
pub const LATE_AFTER: Duration = Duration::from_millis(2);

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
    pub stdev: f64,
    /// Share of latencies within one standard deviation of the mean (wrk's "+/- Stdev").
    pub within_stdev: f64,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Report {
    pub url: String,
    pub connections: usize,
    pub threads: usize,
    pub keepalive: bool,
    /// Wall time from the start to the end of the run.
    pub elapsed: Duration,
    /// Complete responses (any status).
    pub requests: u64,
    /// Bytes read (headers and bodies).
    pub bytes: u64,
    /// Connections established.
    pub connects: u64,
    pub errors: Errors,
    /// Responses by status code.
    pub status: BTreeMap<u16, u64>,
    pub rate: Option<RateReport>,
    /// Latencies in microseconds.
    pub histogram: Histogram<u64>,
    /// Errors by what happened, in words (`connection refused by ADDR`).
    pub error_causes: BTreeMap<String, u64>,
    /// HTTPS: TLS handshake times in microseconds (TCP established to TLS
    /// established), apart from the request latencies.
    pub tls_handshakes: Option<Histogram<u64>>,
    /// HTTPS: the first TLS failure, in words.
    pub tls_error: Option<String>,
}

impl Report {
    /// The most frequent error, in words, and how often it happened.
    pub fn main_error(&self) -> Option<(&str, u64)> {
        self.error_causes
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(k, n)| (k.as_str(), *n))
    }

    /// HTTPS: handshake time at a quantile (0..=1), in milliseconds.
    pub fn tls_handshake_at(&self, quantile: f64) -> Option<f64> {
        let h = self.tls_handshakes.as_ref().filter(|h| !h.is_empty())?;
        Some(h.value_at_quantile(quantile) as f64 / 1000.0)
    }

    pub fn requests_per_sec(&self) -> f64 {
        per_sec(self.requests, self.elapsed)
    }
    pub fn transfer_bytes_per_sec(&self) -> f64 {
        per_sec(self.bytes, self.elapsed)
    }
    /// Latency at a quantile (0..=1), in milliseconds; 0 when nothing completed.
    pub fn latency_at(&self, quantile: f64) -> f64 {
        if self.histogram.is_empty() {
            return 0.0;
        }
        self.histogram.value_at_quantile(quantile) as f64 / 1000.0
    }
    pub fn latency(&self) -> Latency {
        let h = &self.histogram;
        if h.is_empty() {
            return Latency::default();
        }
        let (mean, stdev) = (h.mean(), h.stdev());
        let (lo, hi) = (mean - stdev, mean + stdev);
        let within: u64 = h
            .iter_recorded()
            .filter(|v| {
                let x = v.value_iterated_to() as f64;
                x >= lo && x <= hi
            })
            .map(|v| v.count_at_value())
            .sum();
        Latency {
            p50: self.latency_at(0.50),
            p75: self.latency_at(0.75),
            p90: self.latency_at(0.90),
            p99: self.latency_at(0.99),
            p999: self.latency_at(0.999),
            max: h.max() as f64 / 1000.0,
            mean: mean / 1000.0,
            stdev: stdev / 1000.0,
            within_stdev: within as f64 / h.len() as f64,
        }
    }
}

fn per_sec(n: u64, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// Why a run could not start.
#[derive(Debug)]
pub enum LoadError {
    Config(String),
    Io(std::io::Error),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Config(m) => f.write_str(m),
            LoadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LoadError {}

impl From<TargetError> for LoadError {
    fn from(e: TargetError) -> Self {
        LoadError::Config(e.0)
    }
}

/// Run the load for `config.duration` (or until `live.stop()`), then report.
pub fn run(config: &Config, live: &Live) -> Result<Report, LoadError> {
    if config.connections == 0 {
        return Err(LoadError::Config(
            "at least one connection is needed".into(),
        ));
    }
    if config.threads == 0 {
        return Err(LoadError::Config("at least one thread is needed".into()));
    }
    if let Some(r) = config.rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(LoadError::Config(format!("rate must be above 0 (got {r})")));
        }
    }
    if config.timeout.is_zero() {
        return Err(LoadError::Config("timeout must be above 0".into()));
    }
    let request = build_request(
        &config.target,
        &RequestSpec {
            close: !config.keepalive,
            ..config.request.clone()
        },
    )?;
    let tls = if config.target.tls {
        let client =
            tls::client_config(&config.tls).map_err(|e| LoadError::Config(e.to_string()))?;
        let name =
            tls::server_name(&config.target.host).map_err(|e| LoadError::Config(e.to_string()))?;
        Some((client, name))
    } else {
        None
    };
    let threads = config.threads.min(config.connections);
    let start = Instant::now();
    let deadline = start + config.duration;
    let results: Vec<Result<worker::Outcome, std::io::Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                // Connections of thread t: a contiguous range of global indices.
                let first = config.connections * t / threads;
                let last = config.connections * (t + 1) / threads;
                let plan = worker::Plan {
                    addr: config.target.addr,
                    request: &request,
                    head_request: config.request.method.eq_ignore_ascii_case("HEAD"),
                    first,
                    count: last - first,
                    total: config.connections,
                    rate: config.rate,
                    timeout: config.timeout,
                    keepalive: config.keepalive,
                    start,
                    deadline,
                    tls: tls.clone(),
                };
                s.spawn(move || worker::run(&plan, live))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("a load thread panicked")))
            })
            .collect()
    });
    let mut report = Report {
        url: config.target.url.clone(),
        connections: config.connections,
        threads,
        keepalive: config.keepalive,
        elapsed: Duration::ZERO,
        requests: 0,
        bytes: 0,
        connects: 0,
        errors: Errors::default(),
        status: BTreeMap::new(),
        rate: config.rate.map(|target| RateReport {
            target,
            ..RateReport::default()
        }),
        histogram: worker::new_histogram(),
        error_causes: BTreeMap::new(),
        tls_handshakes: config.target.tls.then(worker::new_histogram),
        tls_error: None,
    };
    for r in results {
        let o = r.map_err(LoadError::Io)?;
        report.elapsed = report.elapsed.max(o.ended.duration_since(start));
        report.requests += o.requests;
        report.bytes += o.bytes;
        report.connects += o.connects;
        report.errors.add(&o.errors);
        for (k, n) in o.causes {
            *report.error_causes.entry(k).or_default() += n;
        }
        for (code, &n) in o.status.iter().enumerate() {
            if n > 0 {
                *report.status.entry(code as u16).or_default() += n;
            }
        }
        if let Some(rate) = report.rate.as_mut() {
            rate.late_sends += o.late_sends;
            rate.max_late = rate.max_late.max(o.max_late);
        }
        // Same bounds and precision on every thread: adding cannot fail.
        let _ = report.histogram.add(&o.histogram);
        if let Some(h) = report.tls_handshakes.as_mut() {
            let _ = h.add(&o.handshakes);
        }
        if report.tls_error.is_none() {
            report.tls_error = o.tls_error;
        }
    }
    Ok(report)
}
