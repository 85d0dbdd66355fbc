//! Prometheus metrics of `top --prometheus` (OpenMetrics text, served by
//! `tcpdoctor-watch`'s /metrics server). Per process by command name only
//! (a pid label would grow without bound as processes come and go).

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::View;

/// Distinct commands labelled; the rest are summed under `other`.
const MAX_COMMANDS: usize = 200;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProcLabels {
    command: String,
}

pub struct Metrics {
    registry: Arc<Registry>,
    events: Counter,
    lost: Counter,
    written: Family<ProcLabels, Counter>,
    read: Family<ProcLabels, Counter>,
    writes: Family<ProcLabels, Counter>,
    retransmits: Family<ProcLabels, Counter>,
    open: Gauge,
    last_events: u64,
    commands: rustc_hash::FxHashSet<String>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let events = Counter::default();
        let lost = Counter::default();
        let written = Family::<ProcLabels, Counter>::default();
        let read = Family::<ProcLabels, Counter>::default();
        let writes = Family::<ProcLabels, Counter>::default();
        let retransmits = Family::<ProcLabels, Counter>::default();
        let open = Gauge::default();
        registry.register(
            "tcpdoctor_top_events",
            "Tracepoint events decoded",
            events.clone(),
        );
        registry.register(
            "tcpdoctor_top_lost_samples",
            "Samples the kernel dropped because a ring was full",
            lost.clone(),
        );
        registry.register(
            "tcpdoctor_top_written_bytes",
            "Bytes processes wrote to TCP sockets, by command",
            written.clone(),
        );
        registry.register(
            "tcpdoctor_top_read_bytes",
            "Bytes processes read from TCP sockets, by command",
            read.clone(),
        );
        registry.register(
            "tcpdoctor_top_writes",
            "Writes (send, write, sendfile) to TCP sockets, by command",
            writes.clone(),
        );
        registry.register(
            "tcpdoctor_top_retransmits",
            "Segments retransmitted on the command's connections",
            retransmits.clone(),
        );
        registry.register(
            "tcpdoctor_top_open_connections",
            "TCP connections open",
            open.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            events,
            lost,
            written,
            read,
            writes,
            retransmits,
            open,
            last_events: 0,
            commands: Default::default(),
        }
    }

    pub fn registry(&self) -> Arc<Registry> {
        Arc::clone(&self.registry)
    }

    /// Adds an interval's counts.
    pub fn update(&mut self, view: &View<'_>) {
        self.events
            .inc_by(view.stats.events.saturating_sub(self.last_events));
        self.last_events = view.stats.events;
        self.lost.inc_by(view.lost);
        self.open
            .set(i64::try_from(view.interval.open).unwrap_or(i64::MAX));
        for p in &view.interval.processes {
            let mut command = p
                .command
                .clone()
                .or_else(|| p.pid.and_then(|pid| view.name(pid)))
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| "unknown".into());
            if !self.commands.contains(&command) {
                if self.commands.len() >= MAX_COMMANDS {
                    command = "other".into();
                } else {
                    self.commands.insert(command.clone());
                }
            }
            let l = ProcLabels { command };
            self.written.get_or_create(&l).inc_by(p.delta.sent);
            self.read.get_or_create(&l).inc_by(p.delta.received);
            self.writes.get_or_create(&l).inc_by(p.delta.writes);
            self.retransmits
                .get_or_create(&l)
                .inc_by(p.delta.retransmits);
        }
    }
}
