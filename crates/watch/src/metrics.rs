//! The watch's figures as Prometheus metrics, in the OpenMetrics text format
//! of the `prometheus-client` crate.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `tcpdoctor_packets_total` | counter | |
//! | `tcpdoctor_sysctl_drops_total` | counter | |
//! | `tcpdoctor_exchanges_total` | counter | |
//! | `tcpdoctor_exchange_duration_seconds` | histogram | `server` |
//! | `tcpdoctor_time_lost_seconds_total` | counter | `kind`, `culprit`, `role` |
//! | `tcpdoctor_finding_occurrences_total` | counter | `kind`, `culprit`, `role` |
//! | `tcpdoctor_open_connections` | gauge | |
//!
//! Label sets are bounded: at most [`MAX_SERVERS`] servers get their own
//! `server` label (the rest are `other`), and findings have one label set per
//! kind and culprit, which the engine already bounds.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use rustc_hash::{FxHashMap, FxHashSet};
use tcpdoctor_engine::model::Progress;

use crate::MAX_SERVERS;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    kind: String,
    culprit: String,
    role: String,
}

type HistogramFamily = Family<ServerLabels, Histogram, fn() -> Histogram>;

/// Bucket bounds per doubling of the exchange histogram.
const PER_DOUBLING: i32 = 8;
/// Doublings covered, from [`LOWEST_BOUND_S`].
const DOUBLINGS: i32 = 16;
const LOWEST_BOUND_S: f64 = 0.0001;

/// The exchange histogram's upper bounds: 100 µs to ~6.5 s, eight per
/// doubling (each bucket 9% wider than the last, rounded to three significant
/// digits). `histogram_quantile` interpolates inside one bucket, so its
/// quantiles are within a bucket's width (under 10%) of the live view's,
/// which come from the engine's finer histogram; with buckets that doubled,
/// a p99 of 44–56 ms read as 86 ms.
pub fn exchange_buckets() -> Vec<f64> {
    (0..=PER_DOUBLING * DOUBLINGS)
        .map(|k| {
            let v = LOWEST_BOUND_S * 2f64.powf(f64::from(k) / f64::from(PER_DOUBLING));
            let scale = 10f64.powi(2 - v.log10().floor() as i32);
            (v * scale).round() / scale
        })
        .collect()
}

fn exchange_histogram() -> Histogram {
    Histogram::new(exchange_buckets())
}

/// The metrics of one watch, updated once per interval.
pub struct Metrics {
    registry: Arc<Registry>,
    packets: Counter,
    drops: Counter,
    exchanges: Counter,
    durations: HistogramFamily,
    time_lost: Family<FindingLabels, Counter<f64, AtomicU64>>,
    occurrences: Family<FindingLabels, Counter>,
    open: Gauge,
    /// (time lost in ms, occurrences) already counted, per finding.
    counted: FxHashMap<FindingLabels, (f64, u64)>,
    servers: FxHashSet<SocketAddr>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let packets = Counter::default();
        let drops = Counter::default();
        let exchanges = Counter::default();
        let durations: HistogramFamily = Family::new_with_constructor(exchange_histogram);
        let time_lost = Family::<FindingLabels, Counter<f64, AtomicU64>>::default();
        let occurrences = Family::<FindingLabels, Counter>::default();
        let open = Gauge::default();
        registry.register(
            "tcpdoctor_packets",
            "Frames captured and analysed",
            packets.clone(),
        );
        registry.register(
            "tcpdoctor_sysctl_drops",
            "Frames the kernel dropped because the capture fell behind",
            drops.clone(),
        );
        registry.register(
            "tcpdoctor_exchanges",
            "Request/response exchanges completed",
            exchanges.clone(),
        );
        registry.register(
            "tcpdoctor_exchange_duration_seconds",
            "Request start to response end, per server endpoint",
            durations.clone(),
        );
        registry.register(
            "tcpdoctor_time_lost_seconds",
            "Time lost to each diagnosed mechanism (kind), by the endpoint responsible (culprit, role)",
            time_lost.clone(),
        );
        registry.register(
            "tcpdoctor_finding_occurrences",
            "Occurrences of each diagnosed mechanism",
            occurrences.clone(),
        );
        registry.register(
            "tcpdoctor_open_connections",
            "TCP connections open in the watched traffic",
            open.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            packets,
            drops,
            exchanges,
            durations,
            time_lost,
            occurrences,
            open,
            counted: FxHashMap::default(),
            servers: FxHashSet::default(),
        }
    }

    /// The registry, for [`crate::serve`] or [`Metrics::encode`].
    pub fn registry(&self) -> Arc<Registry> {
        Arc::clone(&self.registry)
    }

    /// The registry in the OpenMetrics text format, histogram buckets with
    /// their `le` label last.
    pub fn encode(registry: &Registry) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, registry);
        le_last(&out)
    }

    /// Adds one interval: its frames, drops, completed exchanges (server,
    /// ns), and the findings so far (counted as the increase since the last
    /// interval).
    pub(crate) fn record_interval(
        &mut self,
        packets: u64,
        drops: u64,
        progress: &Progress,
        exchanges: &[(SocketAddr, i64)],
    ) {
        self.packets.inc_by(packets);
        self.drops.inc_by(drops);
        self.exchanges.inc_by(exchanges.len() as u64);
        let mut current: Option<(SocketAddr, Histogram)> = None;
        for &(server, ns) in exchanges {
            let same = matches!(&current, Some((s, _)) if *s == server);
            if !same {
                let known = self.servers.contains(&server);
                if !known && self.servers.len() < MAX_SERVERS {
                    self.servers.insert(server);
                }
                let label = if known || self.servers.contains(&server) {
                    server.to_string()
                } else {
                    "other".to_string()
                };
                let h = self
                    .durations
                    .get_or_create_owned(&ServerLabels { server: label });
                current = Some((server, h));
            }
            if let Some((_, h)) = &current {
                h.observe(ns as f64 / 1e9);
            }
        }
        for f in progress.findings.iter().chain(&progress.minor_findings) {
            let labels = FindingLabels {
                kind: f.kind.to_string(),
                culprit: f.culprit.endpoint.clone(),
                role: f.culprit.role.to_string(),
            };
            let before = self.counted.get(&labels).copied().unwrap_or((0.0, 0));
            let lost = (f.total_delay_ms - before.0).max(0.0);
            let occ = f.occurrences.saturating_sub(before.1);
            self.time_lost.get_or_create(&labels).inc_by(lost / 1e3);
            self.occurrences.get_or_create(&labels).inc_by(occ);
            self.counted.insert(
                labels,
                (before.0.max(f.total_delay_ms), before.1.max(f.occurrences)),
            );
        }
        self.open
            .set(i64::try_from(progress.open_connections).unwrap_or(i64::MAX));
    }
}

/// prometheus-client writes a bucket's `le` label first
/// (`x_bucket{le="0.1",server="a"}`); Prometheus' own client libraries write
/// it last (`x_bucket{server="a",le="0.1"}`), the order people and scripts
/// look for. Both are the same series to a scraper.
fn le_last(text: &str) -> String {
    const LE: &str = "_bucket{le=\"";
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let moved = line.find(LE).and_then(|i| {
            let le_start = i + "_bucket{".len();
            // le="VALUE": a number or +Inf, no quote inside.
            let value_end = le_start + 4 + line[le_start + 4..].find('"')?;
            let rest = line[value_end + 1..].strip_prefix(',')?;
            let close = rest.find('}')?;
            Some(format!(
                "{}{},{}{}",
                &line[..le_start],
                &rest[..close],
                &line[le_start..=value_end],
                &rest[close..]
            ))
        });
        match moved {
            Some(l) => out.push_str(&l),
            None => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{exchange_buckets, le_last};

    #[test]
    fn buckets_rise_by_under_ten_percent() {
        let b = exchange_buckets();
        assert_eq!(b.len(), 129);
        assert_eq!(b[0], 0.0001);
        assert_eq!(b[8], 0.0002);
        assert!((b[128] - 6.55).abs() < 1e-9, "{}", b[128]);
        for w in b.windows(2) {
            assert!(w[1] > w[0] && w[1] / w[0] < 1.1, "{w:?}");
        }
    }

    #[test]
    fn bucket_le_label_goes_last() {
        let text = "# TYPE x histogram\nx_sum{server=\"a:1\"} 2.0\nx_bucket{le=\"0.1\",server=\"a:1\"} 1\nx_bucket{le=\"+Inf\",server=\"[::1]:80\"} 3\nx_bucket{le=\"1.0\"} 1\n# EOF\n";
        assert_eq!(
            le_last(text),
            "# TYPE x histogram\nx_sum{server=\"a:1\"} 2.0\nx_bucket{server=\"a:1\",le=\"0.1\"} 1\nx_bucket{server=\"[::1]:80\",le=\"+Inf\"} 3\nx_bucket{le=\"1.0\"} 1\n# EOF\n"
        );
    }
}
