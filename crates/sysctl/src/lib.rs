//! The kernel settings that bound TCP latency and windows, of the network
//! namespace the calling thread runs in, each with what it does and a
//! judgement when its value is suspicious.
//!
//! Three sources, read by [`read()`] and judged by pure functions:
//!
//! - sysctls under `/proc/sys` ([`settings`]): the receive and send buffers and
//!   the windows they allow (with the bandwidth-delay product at 10, 50 and
//!   100 ms, see [`window`]), loss recovery and timers, listen queues,
//!   congestion control. `/proc/sys/net` shows the values of the reader's
//!   namespace; a setting the kernel does not have there is reported absent.
//! - routes over rtnetlink ([`route`], parsed by [`netlink::route`]): IPv4 and
//!   IPv6, every table but `local`, with the metrics TCP takes from its route
//!   (initcwnd, initrwnd, quickack, rto_min, mtu, advmss, congctl, ecn).
//! - queueing disciplines over rtnetlink ([`qdisc`]): a shaping qdisc (tbf)
//!   holds packets back by design; a FIFO without AQM lets queues grow.
//!
//! Nothing here needs privileges. Everything but [`read()`] (and the netlink
//! socket calls of `tcpdoctor-netlink` it uses) is free of I/O, so each rule is unit-tested on values
//! and each parser on bytes recorded from a real kernel.
//!
//! # JSON (`tcpdoctor sysctl --format json`), schema 1
//!
//! ```text
//! { "schema": 1, "namespace": "net:[4026532177]", "namespace_name": "web"|null,
//!   "initial_namespace": false|true|null, "kernel": "6.18.44",
//!   "summary": {"warn": N, "note": N},
//!   "settings": [{"name", "value"|null, "group", "scope": "namespace"|"host",
//!                 "meaning", "severity": "ok"|"note"|"warn", "judgement"|null, "fix"|null}],
//!   "routes": [{"family": "inet"|"inet6", "type", "dst", "dev", "gateway", "table",
//!               "priority", "protocol", "nexthops"?, "metrics": {…}, "locked": [..],
//!               "findings": [{"severity", "subject", "judgement", "fix"}]}],
//!   "qdiscs": [{"dev", "kind", "handle", "parent", "meaning", "tbf"?, "stats"?, "findings": [..]}],
//!   "errors": ["…"] }
//! ```
//!
//! Route metrics appear only when set; `rto_min_ms` is in milliseconds,
//! `features` is a list (`["ecn"]`). Fields are only ever added.
#![forbid(unsafe_code)]

pub mod netlink;
pub mod qdisc;
pub mod read;
pub mod route;
pub mod settings;
pub mod text;
pub use tcpdoctor_units as units;
pub mod window;

pub use read::read;
pub use settings::{Reading, Setting, Snapshot};

use serde::Serialize;

/// How much a value deserves a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Fine, or the kernel's default with no better choice in general.
    Ok,
    /// Worth knowing: a deliberate non-default, or a default that costs latency in some uses.
    Note,
    /// Likely to cost latency or throughput: the judgement says how much, the fix how to undo it.
    Warn,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Note => "note",
            Severity::Warn => "WARN",
        }
    }
}

/// The network namespace the values were read in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Namespace {
    /// As /proc/self/ns/net reads: "net:[4026532177]".
    pub id: String,
    /// Its name under /run/netns (`ip netns`), if it has one.
    pub name: Option<String>,
    /// Whether it is the host's (initial) namespace; None when that cannot be told.
    pub initial: Option<bool>,
}

/// A finding on a route or a qdisc.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// What it is about: a metric name (`initcwnd`) or the qdisc kind.
    pub subject: String,
    pub judgement: String,
    pub fix: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub warn: usize,
    pub note: usize,
}

/// Everything `tcpdoctor sysctl` reports, ready for text or JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: u32,
    pub namespace: String,
    pub namespace_name: Option<String>,
    pub initial_namespace: Option<bool>,
    pub kernel: Option<String>,
    pub summary: Summary,
    pub settings: Vec<Setting>,
    pub routes: Vec<route::RouteReport>,
    pub qdiscs: Vec<qdisc::QdiscReport>,
    /// What could not be read (a failed netlink dump); the rest is still reported.
    pub errors: Vec<String>,
}

/// What was read, before judging: the input of [`build`].
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub snapshot: Snapshot,
    /// The kernel release string (`uname -r`).
    pub release: Option<String>,
    pub routes: Vec<netlink::route::Route>,
    pub links: Vec<netlink::link::Link>,
    pub qdiscs: Vec<netlink::qdisc::Qdisc>,
    pub psched: qdisc::Psched,
    pub errors: Vec<String>,
}

/// One received rtnetlink datagram through what `sysctl` does with it: the
/// first byte picks the dump (`byte % 3`: 0 routes, 1 interfaces, 2 qdiscs),
/// the rest is scanned (sequence 1, as the recorded fixtures), every message
/// parsed is judged, and the report rendered as text. What the netlink fuzz
/// target feeds, and the regression test of its crashes; `None` when the
/// datagram is not a dump of that kind.
pub fn judge_datagram(data: &[u8]) -> Option<String> {
    let (&sel, datagram) = data.split_first()?;
    let want = match sel % 3 {
        0 => netlink::RTM_NEWROUTE,
        1 => netlink::RTM_NEWLINK,
        _ => netlink::RTM_NEWQDISC,
    };
    let chunk = netlink::scan(datagram, 1, want).ok()?;
    let mut o = Observed::default();
    for p in chunk.payloads {
        match want {
            netlink::RTM_NEWROUTE => o.routes.extend(netlink::route::parse(p).ok()),
            netlink::RTM_NEWLINK => o.links.extend(netlink::link::parse(p).ok()),
            _ => o.qdiscs.extend(netlink::qdisc::parse(p).ok()),
        }
    }
    Some(text::render(&build(&o), text::TextOptions::default()))
}

/// Judges what was read: pure, so the whole report can be built from values.
pub fn build(o: &Observed) -> Report {
    let settings = settings::judge(&o.snapshot);
    let routes = route::judge(&o.routes, &o.links, &o.snapshot.namespace);
    let qdiscs = qdisc::judge(&o.qdiscs, &o.links, o.psched, &o.snapshot.namespace);
    let mut summary = Summary::default();
    let severities = settings
        .iter()
        .map(|s| s.severity)
        .chain(
            routes
                .iter()
                .flat_map(|r| r.findings.iter().map(|f| f.severity)),
        )
        .chain(
            qdiscs
                .iter()
                .flat_map(|q| q.findings.iter().map(|f| f.severity)),
        );
    for s in severities {
        match s {
            Severity::Warn => summary.warn += 1,
            Severity::Note => summary.note += 1,
            Severity::Ok => {}
        }
    }
    let ns = &o.snapshot.namespace;
    Report {
        schema: 1,
        namespace: ns.id.clone(),
        namespace_name: ns.name.clone(),
        initial_namespace: ns.initial,
        kernel: o.release.clone(),
        summary,
        settings,
        routes,
        qdiscs,
        errors: o.errors.clone(),
    }
}

/// Prefixes a command with `ip netns exec NAME` when it must run in a named
/// namespace other than the host's.
pub(crate) fn in_namespace(ns: &Namespace, command: String) -> String {
    match (&ns.name, ns.initial) {
        (Some(name), Some(false) | None) => format!("ip netns exec {name} {command}"),
        _ => command,
    }
}
