//! What the client measured (the symptom), shared by the built-in client's
//! runs ([`crate::run`]) and the real clients' ([`crate::ext`]).

use serde::Serialize;

use crate::flood::FloodReport;
use crate::peers::ClientResult;

/// The symptom, as the client measured it.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Metrics {
    pub requests: u64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    pub latency_max_ms: f64,
    pub requests_per_sec: f64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_s: f64,
    pub throughput_bytes_per_sec: f64,
    /// Which client measured it: `builtin`, `wrk`, `curl`.
    pub client: &'static str,
    pub errors: u64,
    /// With TLS: the handshake as curl measured it (`time_appconnect -
    /// time_connect`), p50 and max.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_handshake_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_handshake_max_ms: Option<f64>,
    /// The SYN flood sent meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syn_flood: Option<FloodReport>,
}

/// The metrics of the built-in client's (or curl's) run.
pub fn metrics(r: &ClientResult, client: &'static str) -> Metrics {
    let mut l: Vec<f64> = r.latencies.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    l.sort_by(f64::total_cmp);
    let pct = |p: f64| -> f64 {
        if l.is_empty() {
            return 0.0;
        }
        let i = ((p * l.len() as f64).ceil() as usize).clamp(1, l.len()) - 1;
        round3(l[i])
    };
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    Metrics {
        requests: l.len() as u64,
        latency_p50_ms: pct(0.5),
        latency_p99_ms: pct(0.99),
        latency_max_ms: l.last().copied().map_or(0.0, round3),
        requests_per_sec: round3(l.len() as f64 / secs),
        bytes_up: r.bytes_up,
        bytes_down: r.bytes_down,
        duration_s: round3(secs),
        throughput_bytes_per_sec: ((r.bytes_up + r.bytes_down) as f64 / secs).round(),
        client,
        errors: r.errors.len() as u64,
        ..Metrics::default()
    }
}

pub use tcpdoctor_engine::round3;
