//! The analysis engine: frames in, named causes out.
//!
//! [`Engine`] is sans-IO: the caller pushes each captured frame with its
//! timestamp ([`Engine::push`]) and takes the [`model::Analysis`] at the end
//! ([`Engine::finish`]). Files, live capture and the lab all drive it the same
//! way, so every diagnosis can be reproduced from a capture.
//!
//! Memory stays bounded by the connections open at once: per-connection state
//! lives in the flow tracker and is folded into fixed-size aggregates when a
//! connection closes; the connection list keeps only the
//! [`Options::max_connections`] connections that lost the most time (a heap:
//! a closing connection is summarised only if it makes the list). A connection
//! gets its diagnosis state ([`ConnState`], about 1.8 KB) only once it shows
//! more than a plain handshake.
#![forbid(unsafe_code)]

mod aggregate;
pub mod budget;
pub mod histogram;
pub mod http;
pub mod model;
mod ring;
mod rule;
pub mod rules;
mod text;
mod whatif;

use rustc_hash::FxHashMap;
use std::collections::BinaryHeap;
use std::net::SocketAddr;

use tcpdoctor_flow::{Analyzer, Config, Connection, Dir, Exchange, Segment, Tracker};
/// The connection tracker's settings ([`Options::flow`]) and its default cap on open connections.
pub use tcpdoctor_flow::{Config as FlowConfig, DEFAULT_MAX_OPEN};
use tcpdoctor_wire::{decode_frame, DecodeError, Decoded, LinkType, Skip, Timestamp};

use aggregate::{claim_once, fold_listen_queue, fold_syn_floods, AggKey, Aggregate};
use histogram::Histogram;
use model::*;
use ring::Ring;
use rule::{endpoint_of, Blame, Kind, Occurrence};

/// How many leading bytes of a segment's payload the engine may look at
/// (HTTP heads, to name the software in a fix; TLS records; a message
/// broker's frames, to tell where its messages end).
pub fn payload_needed(payload: &[u8]) -> usize {
    // Most segments are ACKs: nothing to look at.
    if payload.is_empty() {
        return 0;
    }
    http::head_len(payload)
        .max(rules::tls::payload_needed(payload))
        .max(tcpdoctor_flow::message_prefix(payload))
}

/// Engine settings.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// How many connections the `connections` list keeps (those that lost the most time).
    pub max_connections: usize,
    /// Evidence entries kept per finding.
    pub max_evidence: usize,
    /// Findings that cost less than this share of the exchanges' time are
    /// reported apart, as minor.
    pub min_share: f64,
    /// Keep each completed exchange (server, duration) for
    /// [`Engine::drain_exchanges`]: live views read them every interval.
    pub live: bool,
    /// Keep a row for every connection as it closes and every complete
    /// exchange, for [`Engine::drain_rows`] (tables of every connection and
    /// exchange, not just the listed ones). The caller drains them as it goes.
    pub rows: bool,
    pub flow: Config,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_connections: 1000,
            max_evidence: 8,
            min_share: 0.01,
            live: false,
            rows: false,
            flow: Config::default(),
        }
    }
}

/// The analysis engine.
pub struct Engine {
    tracker: Tracker<Diagnoser>,
    frames: u64,
    tcp_packets: u64,
    bytes_on_wire: u64,
    first_ts: Option<Timestamp>,
    last_ts: Timestamp,
    links: Vec<LinkType>,
    non_tcp: u64,
    fragments: u64,
    undecodable: Vec<Count>,
    /// Segments whose IP header claimed more than the frame held, and the
    /// first of them (`TcpSegment::length_clamped`).
    clamped: (u64, u64),
    warnings: Vec<String>,
}

impl Engine {
    pub fn new(options: Options) -> Engine {
        Engine {
            tracker: Tracker::new(Diagnoser::new(options), options.flow),
            frames: 0,
            tcp_packets: 0,
            bytes_on_wire: 0,
            first_ts: None,
            last_ts: Timestamp::default(),
            links: Vec::new(),
            non_tcp: 0,
            fragments: 0,
            undecodable: Vec::new(),
            clamped: (0, 0),
            warnings: Vec::new(),
        }
    }

    /// Feeds the next captured frame. Frames are numbered in the order pushed.
    pub fn push(&mut self, ts: Timestamp, link: LinkType, data: &[u8], orig_len: u32) {
        self.push_decoded(ts, link, orig_len, decode_frame(link, data, orig_len));
    }

    /// Feeds a frame that was already decoded (by [`tcpdoctor_wire::decode`],
    /// possibly on another thread). Of a segment's payload the engine reads
    /// only the first [`payload_needed`] bytes.
    pub fn push_decoded(
        &mut self,
        ts: Timestamp,
        link: LinkType,
        orig_len: u32,
        decoded: Decoded<'_>,
    ) {
        let skip = match decoded {
            Ok(Ok(seg)) => return self.push_segment(ts, link, orig_len, &seg),
            Ok(Err(skip)) => Ok(skip),
            Err(e) => Err(e),
        };
        let frame = self.count(ts, link, orig_len);
        match skip {
            Ok(Skip::Fragment) => self.fragments += 1,
            Ok(_) => self.non_tcp += 1,
            Err(e) => self.undecodable(frame, e),
        }
    }

    /// [`Engine::push_decoded`] for a frame decoded to a TCP segment, by reference.
    pub fn push_segment(
        &mut self,
        ts: Timestamp,
        link: LinkType,
        orig_len: u32,
        seg: &tcpdoctor_wire::TcpSegment<'_>,
    ) {
        let frame = self.count(ts, link, orig_len);
        self.tcp_packets += 1;
        if seg.length_clamped {
            self.clamped.0 += 1;
            if self.clamped.1 == 0 {
                self.clamped.1 = frame;
            }
        }
        self.tracker.push(frame, ts, seg);
    }

    /// Counts a frame; returns its number.
    #[inline]
    fn count(&mut self, ts: Timestamp, link: LinkType, orig_len: u32) -> u64 {
        self.frames += 1;
        self.bytes_on_wire += u64::from(orig_len);
        if self.first_ts.is_none() {
            self.first_ts = Some(ts);
            self.tracker.analyzer_mut().t0_ns = ts.nanos();
        }
        self.last_ts = self.last_ts.max(ts);
        // Nearly every frame has the link type of the one before.
        if self.links.last() != Some(&link) && !self.links.contains(&link) {
            self.links.push(link);
        }
        self.frames
    }

    fn undecodable(&mut self, frame: u64, e: DecodeError) {
        let reason = match e {
            DecodeError::UnsupportedLink(raw) => {
                format!("link type {raw} is not supported")
            }
            other => other.to_string(),
        };
        match self.undecodable.iter_mut().find(|c| c.reason == reason) {
            Some(c) => c.count += 1,
            None => self.undecodable.push(Count {
                reason,
                count: 1,
                first_frame: frame,
            }),
        }
    }

    /// Records a problem with the capture itself, reported with the analysis.
    pub fn warn(&mut self, message: String) {
        self.warnings.push(message);
    }

    /// Frames pushed so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Connections held in memory now.
    pub fn open_connections(&self) -> usize {
        self.tracker.open_connections()
    }

    /// Bytes held for connections now, approximately: the tracker's slots,
    /// table and queues, the full states of the connections that have one,
    /// the diagnosis states (without what their lists hold), and the
    /// connection list.
    pub fn state_bytes(&self) -> usize {
        self.tracker.state_bytes() + self.tracker.analyzer().state_bytes()
    }

    /// What has been found so far, without closing anything: for live views.
    /// Rules that conclude when a connection closes (window, loss, latency)
    /// show here once their connection has closed; the rest as they happen.
    pub fn progress(&self) -> Progress {
        let d = self.tracker.analyzer();
        let mut findings: Vec<LiveFinding> = d
            .aggregates
            .values()
            .map(|a| LiveFinding {
                kind: a.kind.name(),
                culprit: a.culprit.clone(),
                connections: a.connections,
                occurrences: a.occurrences,
                typical_delay_ms: round3(a.delays.quantile_ms(0.5)),
                total_delay_ms: round3(a.total_ns as f64 / 1e6),
                share_of_time: 0.0,
            })
            .collect();
        findings.sort_by(|a, b| {
            b.total_delay_ms
                .total_cmp(&a.total_delay_ms)
                .then(a.kind.cmp(b.kind))
                .then(a.culprit.endpoint.cmp(&b.culprit.endpoint))
        });
        // Shares as `finish` computes them: of the exchanges' time, or of
        // the capture's span when there is no exchange.
        let exchange_ns = d.exchange_hist.sum_ns() + i128::from(d.extra_stake_ns);
        let denominator = if exchange_ns > 0 {
            exchange_ns as f64
        } else {
            self.first_ts
                .map_or(0, |first| self.last_ts.since(first))
                .max(0) as f64
        };
        for f in &mut findings {
            f.share_of_time = if denominator > 0.0 {
                round3((f.total_delay_ms * 1e6 / denominator).min(1.0))
            } else {
                0.0
            };
        }
        let min_share = d.options.min_share;
        let (findings, minor_findings): (Vec<LiveFinding>, Vec<LiveFinding>) = findings
            .into_iter()
            .partition(|f| f.share_of_time >= min_share);
        Progress {
            minor_findings,
            frames: self.frames,
            tcp_packets: self.tcp_packets,
            bytes_on_wire: self.bytes_on_wire,
            open_connections: self.tracker.unclosed_connections() as u64,
            closed_connections: d.connection_count,
            exchanges: d.exchange_hist.count(),
            exchange_time_ms: round3(d.exchange_hist.sum_ns() as f64 / 1e6),
            findings,
            exchanges_not_kept: d.live_overflow,
        }
    }

    /// The exchanges completed since the last call, as (server, duration in
    /// ns), oldest first; only with [`Options::live`]. At most
    /// [`LIVE_EXCHANGES`] are held between calls; the rest are counted in
    /// [`Progress::exchanges_not_kept`].
    pub fn drain_exchanges(&mut self) -> std::vec::Drain<'_, (SocketAddr, i64)> {
        self.tracker.analyzer_mut().live_exchanges.drain(..)
    }

    /// The connections closed and the complete exchanges since the last call,
    /// in the order they ended; only with [`Options::rows`]. Start times are
    /// made relative to the capture's first packet, as in [`Engine::finish`].
    pub fn drain_rows(&mut self) -> Rows {
        let d = self.tracker.analyzer_mut();
        let rows = Rows {
            connections: std::mem::take(&mut d.row_connections),
            exchanges: std::mem::take(&mut d.row_exchanges),
        };
        relative_rows(rows)
    }

    /// Unix time of the first packet pushed, seconds; `None` before any.
    pub fn start_unix(&self) -> Option<f64> {
        self.first_ts.map(|t| t.nanos() as f64 / 1e9)
    }

    /// [`Engine::finish`], and the rows (with [`Options::rows`]) of the
    /// connections and exchanges not drained yet, those it closed included.
    pub fn finish_with_rows(self) -> (Analysis, Rows) {
        let (analysis, _, rows) = self.finish_all();
        (analysis, rows)
    }

    /// Closes every open connection and builds the result.
    pub fn finish(self) -> Analysis {
        self.finish_with_distribution().0
    }

    /// [`Engine::finish`], and the exchange-latency distribution for charts:
    /// the non-empty bins, each with the budget of its exchanges (summed).
    pub fn finish_with_distribution(self) -> (Analysis, Vec<LatencyBin>) {
        let (analysis, bins, _) = self.finish_all();
        (analysis, bins)
    }

    fn finish_all(mut self) -> (Analysis, Vec<LatencyBin>, Rows) {
        let peak = self.tracker.peak_open_connections() as u64;
        let closed_early = self.tracker.closed_early();
        self.warn_closed_early();
        if let (n @ 1.., first) = self.clamped {
            self.warnings.push(format!(
                "{n} TCP segment(s) had an IP total length beyond the frame's length on the wire \
                 (a malformed header; the first is frame {first}): their payload was taken as what \
                 the frame could hold, as Wireshark does"
            ));
        }
        let mut d = self.tracker.finish();
        if let (n @ 1.., first) = d.one_way {
            self.warnings.push(format!(
                "{n} of {} connection(s) were captured one way only (data from one side, no \
                 packet from the other: asymmetric routing, or a tap or filter that sees one \
                 direction; the first is connection {first}): without the other side's ACKs, \
                 who waited on whom cannot be told there, and none of their pauses is counted",
                d.connection_count
            ));
        }
        let rows = relative_rows(Rows {
            connections: std::mem::take(&mut d.row_connections),
            exchanges: std::mem::take(&mut d.row_exchanges),
        });
        let latency_budget = budget_summary(&mut d);
        let bins = latency_bins(&d);
        let first = self.first_ts.unwrap_or_default();
        let exchange_total_ns = d.exchange_hist.sum_ns() + i128::from(d.extra_stake_ns);
        let capture_ns = self.last_ts.since(first);
        let denominator = if exchange_total_ns > 0 {
            exchange_total_ns as f64
        } else {
            capture_ns as f64
        };
        let (findings, minor_findings) = findings(&mut d, denominator);
        let mut connections = std::mem::take(&mut d.summaries);
        connections.sort_by_key(|c| c.id);
        let h = &d.exchange_hist;
        let vantage = d
            .vantages
            .iter()
            .max_by_key(|(k, n)| (k.0 != "unknown", *n, k.0, k.1))
            .map(|(k, n)| Vantage {
                place: k.0,
                from: k.1,
                connections: *n,
                of: d.connection_count,
            });
        let delayed_ack = delayed_acks(&d);
        let capture = CaptureSummary {
            delayed_ack,
            vantage,
            duplicates: d.duplicates,
            latency_budget,
            packets: self.frames,
            tcp_packets: self.tcp_packets,
            connections: d.connection_count,
            peak_open_connections: peak,
            connections_closed_early: closed_early,
            connections_listed: connections.len() as u64,
            share_total_ms: round3(denominator / 1e6),
            duration_ms: round3(capture_ns as f64 / 1e6),
            start_unix: first.nanos() as f64 / 1e9,
            bytes_on_wire: self.bytes_on_wire,
            link_types: self.links.iter().map(|l| l.name().to_string()).collect(),
            stray_tcp_packets: d.stray_packets,
            non_tcp: self.non_tcp,
            fragments: self.fragments,
            undecodable: self.undecodable,
            exchanges: h.count(),
            exchange_latency_ms: (h.count() > 0).then(|| Percentiles {
                p50: round3(h.quantile_ms(0.5)),
                p90: round3(h.quantile_ms(0.9)),
                p99: round3(h.quantile_ms(0.99)),
                max: round3(h.quantile_ms(1.0)),
                mean: round3(h.mean_ns() / 1e6),
            }),
            warnings: self.warnings,
        };
        let analysis = Analysis {
            minor_findings,
            schema: 1,
            capture,
            connections,
            findings,
        };
        (analysis, bins, rows)
    }

    /// Says in a warning when `--max-open-connections` bit.
    fn warn_closed_early(&mut self) {
        let closed_early = self.tracker.closed_early();
        let grace_cut = self.tracker.grace_cut_short();
        if closed_early + grace_cut > 0 {
            let max = self.tracker.analyzer().options.flow.max_open;
            let mut w = format!(
                "more than {max} connections were open at once (--max-open-connections {max}): "
            );
            if closed_early > 0 {
                w.push_str(&format!(
                    "{closed_early} were closed early (the idlest first, half-open ones before \
                     the rest) and summarised as they stood; later packets of theirs counted as \
                     new connections"
                ));
            }
            if grace_cut > 0 {
                if closed_early > 0 {
                    w.push_str("; ");
                }
                w.push_str(&format!(
                    "{grace_cut} closed connections were freed before their grace period for \
                     trailing packets"
                ));
            }
            self.warnings.push(w);
        }
    }
}

/// Rows as [`Engine::drain_rows`] gives them: the summaries' exchange lists
/// emptied (the exchanges have rows of their own). Start times are relative
/// to the capture's first packet already (the diagnoser knows it).
fn relative_rows(mut rows: Rows) -> Rows {
    for c in &mut rows.connections {
        c.slowest_exchanges = Vec::new();
    }
    rows
}

/// The findings, the minor ones apart: each aggregate in words, failed
/// requests first, then by time lost.
fn findings(d: &mut Diagnoser, denominator: f64) -> (Vec<Finding>, Vec<Finding>) {
    fold_listen_queue(&mut d.aggregates, d.options.max_evidence);
    fold_syn_floods(&mut d.aggregates, &d.floods, d.options.max_evidence);
    d.bulks.name_fillers(&mut d.aggregates);
    for a in d.aggregates.values_mut() {
        if a.kind == Kind::ClientDelay {
            a.preconnects = d
                .preconnects
                .get(&a.culprit_addr.ip())
                .copied()
                .unwrap_or(0);
        }
    }
    for (key, agg) in d.aggregates.iter_mut() {
        if key.kind == Kind::TlsHandshake {
            agg.flagged = d.tls_handshakes.get(&key.endpoint).copied().unwrap_or(0);
        }
    }
    let mut findings: Vec<(Finding, rule::Standing)> = d
        .aggregates
        .drain()
        .map(|(_, a)| {
            let standing = rules::standing(&a);
            let prediction = rules::fix_parts(a.kind)
                .get(rules::fix_choice(&a))
                .and_then(|parts| {
                    let servers = (!a.servers_overflow).then_some(a.servers.as_slice());
                    d.whatifs.predict(parts, servers, &d.exchange_hist)
                });
            (text::finding(a, denominator, prediction), standing)
        })
        .collect();
    // Failed requests first (they are reported whatever time they took),
    // then by time lost.
    findings.sort_by(|(a, _), (b, _)| {
        rules::failure_name(b.kind)
            .cmp(&rules::failure_name(a.kind))
            .then(b.total_delay_ms.total_cmp(&a.total_delay_ms))
            .then(a.kind.cmp(b.kind))
    });
    let (major, minor): (Vec<_>, Vec<_>) =
        findings
            .into_iter()
            .partition(|(f, standing)| match standing {
                rule::Standing::ByShare => {
                    f.share_of_time >= d.options.min_share && f.total_delay_ms >= MIN_MAJOR_MS
                }
                rule::Standing::Major => true,
                rule::Standing::Minor => false,
            });
    let strip = |v: Vec<(Finding, rule::Standing)>| v.into_iter().map(|(f, _)| f).collect();
    (strip(major), strip(minor))
}

/// Each endpoint's delayed-ACK timer, the endpoints with most ACKs first.
fn delayed_acks(d: &Diagnoser) -> Vec<DelayedAck> {
    let mut delayed_ack: Vec<DelayedAck> = d
        .delayed_acks
        .iter()
        .map(|(addr, (role, samples, n))| {
            let mut v = samples.clone();
            v.sort_unstable();
            let typical = round3(v[v.len() / 2] as f64 / 1e6);
            DelayedAck {
                endpoint: if addr.port() == 0 {
                    format!("{}:*", fmt_ip(*addr))
                } else {
                    addr.to_string()
                },
                role,
                acks: *n,
                typical_ms: typical,
                matches: rules::nagle::delayed_ack_os(typical),
            }
        })
        .collect();
    delayed_ack.sort_by(|a, b| b.acks.cmp(&a.acks).then(a.endpoint.cmp(&b.endpoint)));
    delayed_ack
}

/// The exchange-latency histogram in groups of [`BUDGET_BUCKET`] buckets
/// (about 6% wide), empty groups left out, each with its budget sums.
fn latency_bins(d: &Diagnoser) -> Vec<LatencyBin> {
    let h = &d.exchange_hist;
    let mut bins = Vec::new();
    for (g, sums) in d.bucket_budgets.iter().enumerate() {
        let range = g * BUDGET_BUCKET..((g + 1) * BUDGET_BUCKET).min(Histogram::BUCKETS);
        let count: u64 = range.clone().map(|b| h.bucket_count(b)).sum();
        if count == 0 {
            continue;
        }
        bins.push(LatencyBin {
            low_ms: histogram::bucket_low_us(range.start) / 1e3,
            high_ms: histogram::bucket_low_us(range.end) / 1e3,
            count,
            parts_ms: text::budget_parts(sums, 1.0),
        });
    }
    bins
}

/// A finding that cost less than this in all is not why anything was slow,
/// whatever share of a sub-millisecond exchange it is (loopback).
const MIN_MAJOR_MS: f64 = 1.0;

/// Exchanges held for [`Engine::drain_exchanges`] between two calls.
pub const LIVE_EXCHANGES: usize = 1 << 20;

/// The latency budget of the median exchange, of all of them, and per server.
fn budget_summary(d: &mut Diagnoser) -> Option<LatencyBudget> {
    let h = &d.exchange_hist;
    let line = |sums: &budget::Split, n: u64| BudgetLine {
        exchanges: n,
        total_ms: round3(sums.iter().sum::<i64>() as f64 / n.max(1) as f64 / 1e6),
        parts_ms: text::budget_parts(sums, n.max(1) as f64),
    };
    let median_bucket = h.quantile_bucket(0.5)?;
    let coarse = median_bucket / BUDGET_BUCKET;
    let median = d.bucket_budgets[coarse];
    let median_n = (coarse * BUDGET_BUCKET..(coarse + 1) * BUDGET_BUCKET)
        .map(|b| h.bucket_count(b))
        .sum();
    let mut all = [0i64; budget::PARTS];
    for sums in &d.bucket_budgets {
        for (m, v) in all.iter_mut().zip(sums) {
            *m += v;
        }
    }
    Some(LatencyBudget {
        median: line(&median, median_n),
        mean: line(&all, h.count()),
        servers: d
            .per_server
            .sorted()
            .into_iter()
            .take(20)
            .map(|(server, sums, n)| {
                let l = line(&sums, n);
                ServerBudget {
                    server,
                    exchanges: n,
                    total_ms: l.total_ms,
                    parts_ms: l.parts_ms,
                }
            })
            .collect(),
    })
}

/// Milliseconds as a person reads them: "1.25 s", "42.0 ms", "0.35 ms".
pub fn fmt_ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1e3)
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.2} ms")
    }
}

pub use tcpdoctor_units::round3;

/// Latency buckets (0.8% wide) grouped per budget sum: small enough to stay in cache.
const BUDGET_BUCKET: usize = 8;
/// Delayed-ACK fingerprints kept: endpoints, and samples per endpoint.
const MAX_ACK_ENDPOINTS: usize = 256;
const MAX_ACK_SAMPLES: usize = 1024;
/// Exchanges listed per connection (the slowest).
const SLOWEST: usize = 5;

/// Per-connection diagnosis state: nothing until the connection shows more
/// than a plain handshake (the rules have nothing to look at before that, and a
/// SYN flood's half-open connections stay this small), then [`Heavy`], boxed.
#[derive(Default)]
pub struct ConnState {
    heavy: Option<Box<Heavy>>,
}

/// What the rules keep for one connection.
#[derive(Default)]
pub(crate) struct Heavy {
    ring: Ring,
    /// Every rule's state ([`rules::States`], in registry order).
    rules: rules::States,
    time_lost_ns: i64,
    /// Time lost per finding (aggregate) on this connection, to claim
    /// overlapping time once when it closes.
    lost: Vec<(AggKey, i64)>,
    exchanges: u64,
    exchange_sum_ns: i64,
    exchange_max_ns: i64,
    /// The slowest few exchanges, for the connection's summary.
    slowest: Vec<(Exchange, budget::Split)>,
    /// The shortest of `slowest` once it is full: faster exchanges skip the list.
    slowest_floor_ns: i64,
    /// Intervals the rules explained, for the budget of the exchange in progress.
    claims: budget::Claims,
    /// What bounded the rate of the larger messages, per direction.
    limits: budget::Limits,
    /// The place of the connection's path among the bases ([`whatif::Bases`]).
    path: Option<usize>,
    /// Counted among its path's open connections; and its close noted.
    opened: bool,
    close_noted: bool,
    /// The row of the connection's server among the what-if counts
    /// ([`whatif::WhatIfs`]), noted when first counted.
    row: Option<usize>,
}

impl Heavy {
    /// The shortest of the slowest exchanges kept.
    fn fastest_of_slowest(&self) -> i64 {
        self.slowest
            .iter()
            .map(|e| e.0.duration_ns())
            .min()
            .unwrap_or(0)
    }

    /// Back to the state of a new connection, keeping the lists' memory.
    fn reset(&mut self) {
        let Heavy {
            ring,
            rules,
            time_lost_ns,
            lost,
            exchanges,
            exchange_sum_ns,
            exchange_max_ns,
            slowest,
            slowest_floor_ns,
            claims,
            limits,
            path,
            opened,
            close_noted,
            row,
        } = self;
        // The ring's packets are read only below `pushed`: not cleared.
        ring.pushed = 0;
        *rules = Default::default();
        *time_lost_ns = 0;
        lost.clear();
        *exchanges = 0;
        *exchange_sum_ns = 0;
        *exchange_max_ns = 0;
        slowest.clear();
        *slowest_floor_ns = 0;
        claims.clear();
        *limits = budget::Limits::default();
        *path = None;
        *opened = false;
        *close_noted = false;
        *row = None;
    }
}

/// Endpoints whose TLS handshakes are counted, at most.
const MAX_TLS_ENDPOINTS: usize = 4096;

/// Diagnosis states kept for reuse, at most.
const SPARE_HEAVY: usize = 1024;

/// A diagnosis state in its box: spare ones are kept boxed, to be reused
/// without allocating.
type HeavyBox = Box<Heavy>;

/// `state`'s diagnosis state, made (from `spare` if there is one) if it has
/// none yet; `open` counts the states made.
#[inline]
fn heavy<'s>(
    spare: &mut Vec<HeavyBox>,
    open: &mut usize,
    state: &'s mut ConnState,
) -> &'s mut Heavy {
    if state.heavy.is_none() {
        *open += 1;
        state.heavy = Some(new_heavy(spare));
    }
    match state.heavy.as_deref_mut() {
        Some(h) => h,
        None => unreachable!("made just above"),
    }
}

#[cold]
#[inline(never)]
fn new_heavy(spare: &mut Vec<HeavyBox>) -> HeavyBox {
    spare.pop().unwrap_or_default()
}

pub(crate) struct Diagnoser {
    options: Options,
    aggregates: FxHashMap<AggKey, Aggregate>,
    /// The [`Options::max_connections`] connections that lost the most time
    /// so far, the least of them on top: a closing connection is summarised
    /// only if it beats that one.
    listed: BinaryHeap<Listed>,
    /// Their summaries, where [`Listed::at`] says.
    summaries: Vec<ConnectionSummary>,
    connection_count: u64,
    stray_packets: u64,
    exchange_hist: Histogram,
    /// Budget sums of the exchanges in each group of [`BUDGET_BUCKET`] latency
    /// buckets (±3%): the median exchange's budget is the mean of its group.
    bucket_budgets: Vec<budget::Split>,
    per_server: budget::PerServer,
    /// Diagnosis states of closed connections, for reuse without allocating.
    spare_heavy: Vec<HeavyBox>,
    /// Open connections with a diagnosis state.
    heavy_open: usize,
    /// Connections per (place, how it was told): a handful of distinct values.
    vantages: Vec<((&'static str, &'static str), u64)>,
    /// Per ACK sender: role, the first waits seen, how many in all.
    delayed_acks: FxHashMap<SocketAddr, (&'static str, Vec<i64>, u64)>,
    duplicates: u64,
    /// Connections whose data was captured one way only ([`Connection::seen_one_way`]),
    /// and the first of them.
    one_way: (u64, u64),
    scratch: Vec<Occurrence>,
    /// Completed exchanges not yet drained (with [`Options::live`]).
    live_exchanges: Vec<(SocketAddr, i64)>,
    live_overflow: u64,
    /// Handshakes per server endpoint, for SYN floods.
    floods: rules::syn_flood::Floods,
    /// Time lost outside complete exchanges (a share's total is the
    /// exchanges' time and this; see [`Diagnoser::claim_once`]).
    extra_stake_ns: i64,
    /// TLS handshakes per server endpoint and per client address (port 0):
    /// a `tls_handshake` finding must be the pattern, not a few outliers.
    tls_handshakes: FxHashMap<SocketAddr, u64>,
    /// Rows not yet drained (with [`Options::rows`]).
    row_connections: Vec<ConnectionSummary>,
    row_exchanges: Vec<ExchangeRow>,
    /// Each path's base round trips, for the budget's queueing.
    bases: whatif::Bases,
    /// Exchanges as they took and without each finding's parts.
    whatifs: whatif::WhatIfs,
    /// Each client address's largest transfers: what may fill a queue.
    bulks: whatif::Bulks,
    /// The capture's first packet (ns): start times are relative to it.
    t0_ns: i64,
    /// Per client address: connections it completed a handshake on and
    /// never sent a request (pre-connects, pools opening ahead of use).
    preconnects: FxHashMap<std::net::IpAddr, u64>,
}

impl Diagnoser {
    fn new(options: Options) -> Diagnoser {
        Diagnoser {
            options,
            aggregates: FxHashMap::default(),
            listed: BinaryHeap::new(),
            summaries: Vec::new(),
            connection_count: 0,
            stray_packets: 0,
            exchange_hist: Histogram::default(),
            bucket_budgets: vec![[0; budget::PARTS]; Histogram::BUCKETS / BUDGET_BUCKET + 1],
            per_server: budget::PerServer::default(),
            spare_heavy: Vec::new(),
            heavy_open: 0,
            vantages: Vec::new(),
            delayed_acks: FxHashMap::default(),
            duplicates: 0,
            one_way: (0, 0),
            scratch: Vec::new(),
            live_exchanges: Vec::new(),
            live_overflow: 0,
            floods: Default::default(),
            extra_stake_ns: 0,
            tls_handshakes: FxHashMap::default(),
            row_connections: Vec::new(),
            row_exchanges: Vec::new(),
            bases: Default::default(),
            whatifs: Default::default(),
            bulks: Default::default(),
            t0_ns: 0,
            preconnects: FxHashMap::default(),
        }
    }

    fn record(&mut self, conn: &Connection, state: &mut ConnState, o: Occurrence) {
        let (addr, role) = match o.culprit {
            Blame::Side(d) => endpoint_of(conn, d),
            // The path to this server: one finding per server endpoint.
            Blame::Network(_) => (conn.server.addr, "network"),
        };
        // A client's ports are ephemeral; refusals are per server address
        // (a scan of many ports is one finding).
        let by_address = role == "client" || o.kind == Kind::ConnectionRefused;
        let endpoint = if by_address {
            SocketAddr::new(addr.ip(), 0)
        } else {
            addr
        };
        let key = AggKey {
            kind: o.kind,
            role,
            endpoint,
        };
        let state = heavy(&mut self.spare_heavy, &mut self.heavy_open, state);
        if let Some((part, from, to)) = o.span {
            state.claims.claim(part, from, to);
        }
        state.time_lost_ns += o.delay_ns;
        // Counted once per connection and finding (kind, role, endpoint): both
        // ends of one connection can each be the culprit of the same kind.
        let first_in_conn = match state.lost.iter_mut().find(|(k, _)| *k == key) {
            Some((_, ns)) => {
                *ns += o.delay_ns;
                false
            }
            None => {
                state.lost.push((key.clone(), o.delay_ns));
                true
            }
        };
        let agg = self
            .aggregates
            .entry(key)
            .or_insert_with(|| Aggregate::new(o.kind, addr, role, o.detail.clone()));
        if !agg.servers_overflow && !agg.servers.contains(&conn.server.addr) {
            if agg.servers.len() < whatif::MAX_AGG_SERVERS {
                agg.servers.push(conn.server.addr);
            } else {
                agg.servers_overflow = true;
            }
        }
        if first_in_conn {
            agg.connections += 1;
            if by_address && agg.culprit_addr != addr && !agg.culprit.endpoint.ends_with('*') {
                agg.culprit.endpoint = format!("{}:*", fmt_ip(addr));
            }
        }
        agg.occurrences += 1;
        agg.delays.record(o.delay_ns);
        agg.total_ns += o.delay_ns;
        if agg.evidence.len() < self.options.max_evidence {
            agg.evidence.push(Evidence {
                connection: conn.id,
                tcp_stream: conn.id.saturating_sub(1),
                frames: o.frames.clone(),
                delay_ms: round3(o.delay_ns as f64 / 1e6),
            });
        }
        if agg.ladder.is_none() {
            let rows = match o.ladder {
                Some(rows) => rows,
                None => state.ring.rows(o.ladder_from, &o.notes),
            };
            agg.ladder = Some(Ladder {
                connection: conn.id,
                client: conn.client.addr.to_string(),
                server: conn.server.addr.to_string(),
                rows,
            });
        }
        o.detail.fold(agg);
    }
}

impl Diagnoser {
    /// Counts a TLS handshake of the connection's server and client: a
    /// `tls_handshake` finding must be their pattern, not a few outliers.
    fn count_tls_handshake(&mut self, conn: &Connection) {
        for addr in [conn.server.addr, SocketAddr::new(conn.client.addr.ip(), 0)] {
            if self.tls_handshakes.len() < MAX_TLS_ENDPOINTS
                || self.tls_handshakes.contains_key(&addr)
            {
                *self.tls_handshakes.entry(addr).or_default() += 1;
            }
        }
    }

    /// Records the occurrences the rules left in `scratch`.
    #[cold]
    fn record_scratch(&mut self, conn: &Connection, state: &mut ConnState) {
        let mut out = std::mem::take(&mut self.scratch);
        self.record_all(&mut out, conn, state);
        self.scratch = out;
    }

    /// Records the occurrences `out` holds, in order, leaving it empty.
    fn record_all(&mut self, out: &mut Vec<Occurrence>, conn: &Connection, state: &mut ConnState) {
        for o in out.drain(..) {
            self.record(conn, state, o);
        }
    }

    /// Counts a delayed ACK of the endpoint sending in `d`.
    #[cold]
    fn delayed_ack(&mut self, conn: &Connection, d: Dir, wait: i64) {
        let (addr, role) = endpoint_of(conn, d);
        let key = if role == "client" {
            SocketAddr::new(addr.ip(), 0)
        } else {
            addr
        };
        if self.delayed_acks.len() < MAX_ACK_ENDPOINTS || self.delayed_acks.contains_key(&key) {
            let e = self
                .delayed_acks
                .entry(key)
                .or_insert_with(|| (role, Vec::new(), 0));
            e.2 += 1;
            if e.1.len() < MAX_ACK_SAMPLES {
                e.1.push(wait);
            }
        }
    }
}

pub(crate) fn fmt_ip(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    }
}

impl Diagnoser {
    /// A live run's exchange, for its interval's figures.
    fn note_live(&mut self, server: SocketAddr, d: i64) {
        if self.live_exchanges.len() < LIVE_EXCHANGES {
            self.live_exchanges.push((server, d));
        } else {
            self.live_overflow += 1;
        }
    }

    fn state_bytes(&self) -> usize {
        use std::mem::size_of;
        (self.heavy_open + self.spare_heavy.len()) * size_of::<Heavy>()
            + self.listed.capacity() * size_of::<Listed>()
            + self.summaries.capacity() * size_of::<ConnectionSummary>()
            + self.floods.state_bytes()
    }

    /// Gives `state`'s diagnosis state back for reuse.
    fn release(&mut self, state: &mut ConnState) {
        if let Some(mut h) = state.heavy.take() {
            self.heavy_open -= 1;
            if self.spare_heavy.len() < SPARE_HEAVY {
                h.reset();
                self.spare_heavy.push(h);
            }
        }
    }
}

impl Analyzer for Diagnoser {
    type Conn = ConnState;

    #[inline]
    fn segment(&mut self, conn: &Connection, state: &mut ConnState, seg: &Segment<'_>) {
        let h = heavy(&mut self.spare_heavy, &mut self.heavy_open, state);
        if conn.handshake.ack.is_some_and(|m| m.frame == seg.frame) {
            // The handshake's round trips are known: the path's base.
            self.bases.learn(&mut h.path, conn);
        }
        if !h.opened {
            h.opened = true;
            self.bases.opened(&mut h.path, conn);
        }
        if (seg.flags.fin() || seg.flags.rst()) && !h.close_noted {
            h.close_noted = true;
            self.bases.closed(h.path, conn, seg.ts.nanos());
        }
        if seg.len > 0 {
            // Read by the idle rule, on data only.
            h.claims.closed_elsewhere_ns = self.bases.closed_elsewhere(h.path, conn);
        }
        h.ring.push(seg);
        let Heavy {
            ring,
            rules,
            claims,
            ..
        } = &mut *h;
        let mut cx = rule::SegmentCx {
            out: &mut self.scratch,
            claims,
            ring,
            window_blocked: rules.window.blocked(seg.dir),
            delayed_ack: None,
        };
        rules.on_segment(&mut cx, conn, seg);
        if let Some((d, wait)) = cx.delayed_ack {
            self.delayed_ack(conn, d, wait);
        }
        if !self.scratch.is_empty() {
            self.record_scratch(conn, state);
        }
        let Heavy { rules, claims, .. } = heavy(&mut self.spare_heavy, &mut self.heavy_open, state);
        rules.after_segment(claims, conn, seg);
    }

    fn compact_segment(&mut self, _: &Connection, _: &mut ConnState, _: &Segment<'_>) {
        // A connection that closes as a plain handshake: no rule concludes
        // anything from a SYN, a SYN-ACK or RST and an ACK with an open window
        // (one that shows more is expanded first, and its handshake replayed
        // then, to a full diagnosis state).
    }

    fn exchange(&mut self, conn: &Connection, state: &mut ConnState, ex: &Exchange) {
        let h = heavy(&mut self.spare_heavy, &mut self.heavy_open, state);
        let step = h.rules.tls.on_exchange(conn, ex, &mut h.claims);
        if let Some(pauses) = step.pauses() {
            h.rules.idle.before_messages(pauses);
        }
        let (inside, longest, cork_holds) = h.rules.idle.take_exchange();
        let buffered = h.rules.congestion.take_exchange();
        // A TLS handshake's rounds are not the application's exchanges: the
        // first exchange after them carries their time.
        let opened;
        let (ex, tls) = match step {
            rules::tls::Step::Handshake => return,
            rules::tls::Step::Opened(e, o) => {
                opened = *e;
                (&opened, Some(o))
            }
            rules::tls::Step::Trimmed(e, ..) => {
                opened = *e;
                (&opened, None)
            }
            rules::tls::Step::Plain => (ex, None),
        };
        // A close-delimited response ends, for its client, at the server's FIN.
        let extended;
        let (ex, close_wait) = match h.rules.framing.extend(conn, ex, &mut h.claims) {
            Some((e, wait)) => {
                extended = e;
                (&extended, wait)
            }
            None => (ex, 0),
        };
        let expect_unanswered = h.rules.framing.expect_unanswered();
        // One context for both hooks (its budget filled in between): the
        // occurrences go to the scratch list, taken out of `self` meanwhile.
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut cx = rule::ExchangeCx {
            out: &mut scratch,
            inside,
            longest,
            cork_holds,
            split: [0; budget::PARTS],
            tls,
            base: budget::Base::default(),
            close_wait,
            expect_unanswered,
            duration_ns: 0,
        };
        h.rules.on_exchange(&mut cx, conn, ex);
        if !cx.out.is_empty() {
            self.record_all(cx.out, conn, state);
        }
        if !ex.is_complete() {
            self.scratch = scratch;
            return;
        }
        let h = heavy(&mut self.spare_heavy, &mut self.heavy_open, state);
        cx.base = self.bases.learn(&mut h.path, conn);
        cx.split = h
            .claims
            .split(conn, ex, cx.base)
            .unwrap_or([0; budget::PARTS]);
        h.limits.note(conn, ex, &cx.split, (inside, buffered));
        let d = ex.duration_ns();
        cx.duration_ns = d;
        let split = cx.split;
        h.rules.on_budget(&mut cx, conn, ex);
        if tls.is_some() {
            self.count_tls_handshake(conn);
        }
        if !cx.out.is_empty() {
            self.record_all(cx.out, conn, state);
        }
        self.scratch = scratch;
        let state = heavy(&mut self.spare_heavy, &mut self.heavy_open, state);
        let bucket = Histogram::bucket(d);
        self.exchange_hist.record_in(bucket, d);
        let policer = &state.rules.policer;
        self.whatifs.record(
            conn.server.addr,
            &mut state.row,
            (d, bucket),
            &split,
            || whatif::slow_start_ns(conn, ex),
            || policer.policed_ns(ex),
        );
        if self.options.live {
            self.note_live(conn.server.addr, d);
        }
        let sums = &mut self.bucket_budgets[bucket.min(Histogram::BUCKETS - 1) / BUDGET_BUCKET];
        for (s, v) in sums.iter_mut().zip(&split) {
            *s += v;
        }
        self.per_server.add(conn.server.addr, &split);
        if self.options.rows {
            self.row_exchanges.push(ExchangeRow {
                connection: conn.id,
                client: conn.client.addr,
                server: conn.server.addr,
                exchange: text::exchange_summary(ex, &split, self.t0_ns),
            });
        }
        state.exchanges += 1;
        state.exchange_sum_ns += d;
        state.exchange_max_ns = state.exchange_max_ns.max(d);
        if state.slowest.len() < SLOWEST {
            state.slowest.push((*ex, split));
            // The floor matters once the list is full.
            if state.slowest.len() == SLOWEST {
                state.slowest_floor_ns = state.fastest_of_slowest();
            }
        } else if d > state.slowest_floor_ns {
            if let Some(min) = state.slowest.iter_mut().min_by_key(|e| e.0.duration_ns()) {
                *min = (*ex, split);
            }
            state.slowest_floor_ns = state.fastest_of_slowest();
        }
    }

    fn close(&mut self, conn: &Connection, state: &mut ConnState) {
        if !conn.is_substantial() {
            // Trailing ACKs or RSTs of a connection already closed and freed.
            self.stray_packets += conn.packets;
            self.release(state);
            return;
        }
        self.floods.on_close(conn);
        self.bulks.on_close(conn);
        if conn.handshake.ack.is_some() && conn.client.data_packets == 0 {
            let ip = conn.client.addr.ip();
            if self.preconnects.len() < MAX_TLS_ENDPOINTS || self.preconnects.contains_key(&ip) {
                *self.preconnects.entry(ip).or_default() += 1;
            }
        }
        let mut cx = rule::CloseCx {
            out: &mut self.scratch,
            restart_lost_ns: 0,
        };
        match state.heavy.as_deref_mut() {
            Some(h) => h.rules.on_close(&mut cx, conn),
            None => rules::States::on_close_light(&mut cx, conn),
        }
        if !self.scratch.is_empty() {
            self.record_scratch(conn, state);
        }
        if let Some(h) = state.heavy.as_deref_mut() {
            self.extra_stake_ns += claim_once(h, conn, &mut self.aggregates);
        }
        self.connection_count += 1;
        let v = text::vantage(conn);
        // The same literals most of the time: their addresses tell first.
        let same = |a: &str, b: &str| std::ptr::eq(a, b) || a == b;
        match self
            .vantages
            .iter_mut()
            .find(|(k, _)| same(k.0, v.0) && same(k.1, v.1))
        {
            Some((_, n)) => *n += 1,
            None => self.vantages.push((v, 1)),
        }
        self.duplicates += conn.client.duplicates + conn.server.duplicates;
        let one_way = |d: Dir| conn.half(d).data_packets > 0 && conn.seen_one_way(d);
        if one_way(Dir::ClientToServer) || one_way(Dir::ServerToClient) {
            if self.one_way.0 == 0 {
                self.one_way.1 = conn.id;
            }
            self.one_way.0 += 1;
        }
        // Summarise only connections that make the list.
        let rank = Rank {
            time_lost_ms: state.heavy.as_ref().map_or(0.0, |h| ms_f(h.time_lost_ns)),
            duration_ms: ms_f(conn.duration_ns()),
            id: conn.id,
        };
        if self.options.rows {
            self.row_connections.push(text::connection_summary(
                conn,
                state.heavy.as_deref(),
                self.t0_ns,
            ));
        }
        let keep = self.options.max_connections;
        let listed = keep > 0
            && (self.listed.len() < keep
                || self
                    .listed
                    .peek()
                    .is_some_and(|least| rank.beats(&least.rank)));
        if listed {
            let summary = text::connection_summary(conn, state.heavy.as_deref(), self.t0_ns);
            if self.listed.len() < keep {
                self.listed.push(Listed {
                    rank,
                    at: self.summaries.len(),
                });
                self.summaries.push(summary);
            } else if let Some(mut least) = self.listed.peek_mut() {
                // The new one takes the place of the one that drops off.
                self.summaries[least.at] = summary;
                least.rank = rank;
            }
        }
        self.release(state);
    }
}

/// Where a connection stands in the list: more time lost first, then longer,
/// then earlier.
#[derive(Debug, Clone, Copy)]
struct Rank {
    time_lost_ms: f64,
    duration_ms: f64,
    id: u64,
}

impl Rank {
    /// `Less`: `self` ranks before `other`.
    fn order(&self, other: &Rank) -> std::cmp::Ordering {
        other
            .time_lost_ms
            .total_cmp(&self.time_lost_ms)
            .then(other.duration_ms.total_cmp(&self.duration_ms))
            .then(self.id.cmp(&other.id))
    }

    fn beats(&self, other: &Rank) -> bool {
        self.order(other).is_lt()
    }
}

/// A listed connection; the greatest is the one that ranks last.
struct Listed {
    rank: Rank,
    /// Its summary's place in `Diagnoser::summaries`.
    at: usize,
}

impl PartialEq for Listed {
    fn eq(&self, other: &Self) -> bool {
        self.rank.order(&other.rank).is_eq()
    }
}

impl Eq for Listed {}

impl PartialOrd for Listed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Listed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank.order(&other.rank)
    }
}

fn ms_f(ns: i64) -> f64 {
    round3(ns as f64 / 1e6)
}
