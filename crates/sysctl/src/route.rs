//! Routes and the metrics TCP takes from them when a connection opens:
//! `ip route add 10.0.0.0/8 dev eth0 initcwnd 4 quickack 1 rto_min 50ms`
//! changes every connection to those addresses, whatever the sysctls say.
//! Judged here, with an `ip route change` that keeps the rest of the route.

use serde::Serialize;
use std::collections::HashMap;

use crate::netlink::link::Link;
use crate::netlink::route::{
    Metrics, Nexthop, Route, AF_INET6, RTAX_ADVMSS, RTAX_CC_ALGO, RTAX_CWND, RTAX_FEATURE_ECN,
    RTAX_HOPLIMIT, RTAX_INITCWND, RTAX_INITRWND, RTAX_MTU, RTAX_REORDERING, RTAX_RTT, RTAX_RTTVAR,
    RTAX_SSTHRESH, RTAX_WINDOW, TABLE_DEFAULT, TABLE_LOCAL, TABLE_MAIN,
};
use crate::units::bytes;
use crate::window::{at_rtts, LONG_FAT_WINDOW};
use crate::{in_namespace, Finding, Namespace, Severity};

/// RFC 6928's initial window, Linux's default (TCP_INIT_CWND).
const INIT_CWND: u32 = 10;
/// Linux's default minimum RTO, ms.
const RTO_MIN_MS: u32 = 200;
/// A typical MSS (1500-byte MTU, IPv4, timestamps) for "N segments ≈ bytes".
const TYPICAL_MSS: u32 = 1448;

/// The metrics set on a route, named as `ip route` names them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MetricsReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advmss: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initcwnd: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initrwnd: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quickack: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rto_min_ms: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congctl: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwnd: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssthresh: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reordering: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hoplimit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rttvar_ms: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fastopen_no_cookie: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NexthopReport {
    pub dev: Option<String>,
    pub gateway: Option<String>,
    pub weight: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteReport {
    /// "inet" or "inet6".
    pub family: &'static str,
    /// unicast, blackhole, unreachable…
    #[serde(rename = "type")]
    pub kind: String,
    /// "default", "10.84.1.0/24", "10.0.0.1" (a host route, as `ip route` prints it).
    pub dst: String,
    pub dev: Option<String>,
    pub gateway: Option<String>,
    /// "main", "default" or the number.
    pub table: String,
    /// The route's preference (`metric` in `ip route`).
    pub priority: Option<u32>,
    pub protocol: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nexthops: Vec<NexthopReport>,
    pub metrics: MetricsReport,
    /// Metrics locked against TCP's own updates (`mtu lock 1400`).
    pub locked: Vec<&'static str>,
    pub findings: Vec<Finding>,
    /// The route as `ip route` would print it, metrics included.
    #[serde(skip)]
    pub spec: String,
}

/// Judges every route but those of the local table (the host's own
/// addresses and broadcasts), in dump order.
pub fn judge(routes: &[Route], links: &[Link], ns: &Namespace) -> Vec<RouteReport> {
    let names: HashMap<u32, &str> = links.iter().map(|l| (l.index, l.name.as_str())).collect();
    routes
        .iter()
        .filter(|r| r.table != TABLE_LOCAL)
        .map(|r| report(r, &names, ns))
        .collect()
}

fn dev_name(names: &HashMap<u32, &str>, index: u32) -> String {
    names
        .get(&index)
        .map_or_else(|| format!("if{index}"), |n| n.to_string())
}

fn report(r: &Route, names: &HashMap<u32, &str>, ns: &Namespace) -> RouteReport {
    let m = &r.metrics;
    let metrics = MetricsReport {
        mtu: m.mtu,
        advmss: m.advmss,
        window: m.window,
        initcwnd: m.initcwnd,
        initrwnd: m.initrwnd,
        quickack: m.quickack,
        rto_min_ms: m.rto_min,
        congctl: m.congctl.clone(),
        features: m.features.map(features),
        cwnd: m.cwnd,
        ssthresh: m.ssthresh,
        reordering: m.reordering,
        hoplimit: m.hoplimit,
        // The kernel keeps RTT × 8 and RTT variance × 4 (as `ip route` divides them).
        rtt_ms: m.rtt.map(|v| v / 8),
        rttvar_ms: m.rttvar.map(|v| v / 4),
        fastopen_no_cookie: m.fastopen_no_cookie,
    };
    let locked = LOCKABLE
        .iter()
        .filter(|(rtax, _)| m.locked(*rtax))
        .map(|(_, name)| *name)
        .collect();
    // `ip route change` replaces every metric of the route: a fix that
    // corrected one metric and restated the others as they are would undo the
    // other fixes when run after them. Every fix is the route with all of the
    // warnings' edits made, the metrics that are fine (and their locks) kept:
    // run in any order, the fixes leave the route without warnings.
    let all = std::cell::RefCell::new(r.metrics.clone());
    let mut findings = findings(r, |edit| {
        edit(&mut all.borrow_mut());
        String::new()
    });
    let ip = if r.family == AF_INET6 {
        "ip -6 route change"
    } else {
        "ip route change"
    };
    let fixed = in_namespace(
        ns,
        format!("{ip} {}", command(r, &all.borrow(), names))
            .trim_end()
            .to_string(),
    );
    for f in &mut findings {
        if f.fix.is_some() {
            f.fix = Some(fixed.clone());
        }
    }
    RouteReport {
        family: if r.family == AF_INET6 {
            "inet6"
        } else {
            "inet"
        },
        kind: route_type(r.kind),
        dst: destination(r),
        dev: r.oif.map(|i| dev_name(names, i)),
        gateway: r.gateway.map(|g| g.to_string()),
        table: table(r.table),
        priority: r.priority,
        protocol: protocol(r.protocol),
        nexthops: r
            .nexthops
            .iter()
            .map(|n| NexthopReport {
                dev: Some(dev_name(names, n.oif)),
                gateway: n.gateway.map(|g| g.to_string()),
                weight: n.weight,
            })
            .collect(),
        metrics,
        locked,
        findings,
        spec: command(r, &r.metrics, names),
    }
}

const LOCKABLE: [(u16, &str); 11] = [
    (RTAX_MTU, "mtu"),
    (RTAX_WINDOW, "window"),
    (RTAX_RTT, "rtt"),
    (RTAX_RTTVAR, "rttvar"),
    (RTAX_SSTHRESH, "ssthresh"),
    (RTAX_CWND, "cwnd"),
    (RTAX_ADVMSS, "advmss"),
    (RTAX_REORDERING, "reordering"),
    (RTAX_HOPLIMIT, "hoplimit"),
    (RTAX_INITCWND, "initcwnd"),
    (RTAX_INITRWND, "initrwnd"),
];

fn features(bits: u32) -> Vec<String> {
    let mut out = Vec::new();
    if bits & RTAX_FEATURE_ECN != 0 {
        out.push("ecn".to_string());
    }
    let rest = bits & !RTAX_FEATURE_ECN;
    if rest != 0 {
        out.push(format!("0x{rest:x}"));
    }
    out
}

/// `ip route`'s destination: "default", a prefix, or a bare host address.
pub fn destination(r: &Route) -> String {
    let full = if r.family == AF_INET6 { 128 } else { 32 };
    match r.dst {
        None if r.dst_len == 0 => "default".into(),
        None => format!(
            "{}/{}",
            if r.family == AF_INET6 {
                "::"
            } else {
                "0.0.0.0"
            },
            r.dst_len
        ),
        Some(a) if r.dst_len == full => a.to_string(),
        Some(a) => format!("{a}/{}", r.dst_len),
    }
}

fn table(t: u32) -> String {
    match t {
        TABLE_MAIN => "main".into(),
        TABLE_DEFAULT => "default".into(),
        TABLE_LOCAL => "local".into(),
        n => n.to_string(),
    }
}

/// rtm_type as `ip route` names it (linux/rtnetlink.h RTN_*).
fn route_type(t: u8) -> String {
    match t {
        1 => "unicast",
        2 => "local",
        3 => "broadcast",
        4 => "anycast",
        5 => "multicast",
        6 => "blackhole",
        7 => "unreachable",
        8 => "prohibit",
        9 => "throw",
        10 => "nat",
        _ => return t.to_string(),
    }
    .into()
}

/// rtm_protocol as /etc/iproute2/rt_protos names it.
fn protocol(p: u8) -> String {
    match p {
        0 => "unspec",
        1 => "redirect",
        2 => "kernel",
        3 => "boot",
        4 => "static",
        9 => "ra",
        11 => "zebra",
        12 => "bird",
        16 => "dhcp",
        18 => "keepalived",
        42 => "babel",
        186 => "bgp",
        187 => "isis",
        188 => "ospf",
        189 => "rip",
        _ => return p.to_string(),
    }
    .into()
}

/// The route as `ip route change` takes it, with `metrics` (which replace
/// all of the route's metrics: every one is written out).
fn command(r: &Route, metrics: &Metrics, names: &HashMap<u32, &str>) -> String {
    let mut w: Vec<String> = Vec::new();
    if r.kind != 1 {
        w.push(route_type(r.kind));
    }
    w.push(destination(r));
    if let Some(id) = r.nh_id {
        w.push(format!("nhid {id}"));
    } else if r.nexthops.is_empty() {
        if let Some(g) = r.gateway {
            w.push(format!("via {g}"));
        }
        if let Some(i) = r.oif {
            w.push(format!("dev {}", dev_name(names, i)));
        }
    }
    if r.table != TABLE_MAIN {
        w.push(format!("table {}", table(r.table)));
    }
    if r.protocol != 3 {
        w.push(format!("proto {}", protocol(r.protocol)));
    }
    // ip route picks scope link for a unicast route without a gateway and
    // global otherwise; say so only when the route differs (IPv4 only).
    if r.family != AF_INET6 && r.kind == 1 {
        let implied = if r.gateway.is_none() && r.nexthops.is_empty() && r.nh_id.is_none() {
            253
        } else {
            0
        };
        if r.scope != implied {
            w.push(format!(
                "scope {}",
                match r.scope {
                    0 => "global".to_string(),
                    200 => "site".to_string(),
                    253 => "link".to_string(),
                    254 => "host".to_string(),
                    s => s.to_string(),
                }
            ));
        }
    }
    if let Some(s) = r.prefsrc {
        w.push(format!("src {s}"));
    }
    if let Some(p) = r.priority {
        w.push(format!("metric {p}"));
    }
    w.extend(metric_words(metrics));
    if r.nh_id.is_none() {
        for n in &r.nexthops {
            w.push(nexthop(n, names));
        }
    }
    w.join(" ")
}

fn nexthop(n: &Nexthop, names: &HashMap<u32, &str>) -> String {
    let mut s = String::from("nexthop");
    if let Some(g) = n.gateway {
        s.push_str(&format!(" via {g}"));
    }
    s.push_str(&format!(
        " dev {} weight {}",
        dev_name(names, n.oif),
        n.weight
    ));
    s
}

/// The metrics in `ip route` syntax, `lock` where locked.
fn metric_words(m: &Metrics) -> Vec<String> {
    let mut w = Vec::new();
    let mut num = |name: &str, rtax: u16, v: Option<u32>| {
        if let Some(v) = v {
            let lock = if m.locked(rtax) { "lock " } else { "" };
            w.push(format!("{name} {lock}{v}"));
        }
    };
    num("mtu", RTAX_MTU, m.mtu);
    num("advmss", RTAX_ADVMSS, m.advmss);
    num("window", RTAX_WINDOW, m.window);
    num("cwnd", RTAX_CWND, m.cwnd);
    num("ssthresh", RTAX_SSTHRESH, m.ssthresh);
    num("reordering", RTAX_REORDERING, m.reordering);
    num("hoplimit", RTAX_HOPLIMIT, m.hoplimit);
    num("initcwnd", RTAX_INITCWND, m.initcwnd);
    num("initrwnd", RTAX_INITRWND, m.initrwnd);
    if let Some(v) = m.rtt {
        w.push(format!("rtt {}ms", v / 8));
    }
    if let Some(v) = m.rttvar {
        w.push(format!("rttvar {}ms", v / 4));
    }
    if let Some(v) = m.quickack {
        w.push(format!("quickack {v}"));
    }
    // ip route locks rto_min by itself.
    if let Some(v) = m.rto_min {
        w.push(format!("rto_min {v}ms"));
    }
    if let Some(f) = m.features {
        if f & RTAX_FEATURE_ECN != 0 {
            w.push("features ecn".into());
        }
    }
    if let Some(c) = &m.congctl {
        let lock = if m.locked(RTAX_CC_ALGO) { "lock " } else { "" };
        w.push(format!("congctl {lock}{c}"));
    }
    if let Some(v) = m.fastopen_no_cookie {
        w.push(format!("fastopen_no_cookie {v}"));
    }
    w
}

/// The MSS a segment count is multiplied by: the route's advmss, else its
/// MTU less headers, else a typical Ethernet MSS.
fn mss(r: &Route) -> u32 {
    let headers = if r.family == AF_INET6 { 72 } else { 52 };
    r.metrics
        .advmss
        .or(r.metrics.mtu.map(|m| m.saturating_sub(headers)))
        .filter(|&m| m > 0)
        .unwrap_or(TYPICAL_MSS)
}

/// The findings on one route. `fix` is given each warning's edit of the
/// metrics (what it returns is replaced by the route with every edit made).
fn findings(r: &Route, fix: impl Fn(&dyn Fn(&mut Metrics)) -> String) -> Vec<Finding> {
    let m = &r.metrics;
    let mss = mss(r);
    let mut out = Vec::new();
    let mut add = |severity, subject: &str, judgement: String, fix: Option<String>| {
        out.push(Finding {
            severity,
            subject: subject.into(),
            judgement,
            fix,
        })
    };
    initial_window_findings(m, mss, &mut add, &fix);
    timer_findings(m, &mut add, &fix);
    window_findings(m, mss, &mut add, &fix);
    segment_size_findings(r, &mut add, &fix);
    option_findings(m, &mut add);
    out
}

/// The findings on the first flights: initcwnd and initrwnd.
fn initial_window_findings(
    m: &Metrics,
    mss: u32,
    add: &mut impl FnMut(Severity, &str, String, Option<String>),
    fix: &impl Fn(&dyn Fn(&mut Metrics)) -> String,
) {
    // initcwnd 0 means "unset" to the kernel.
    if let Some(n) = m.initcwnd.filter(|&n| n > 0) {
        if n < INIT_CWND {
            add(
                Severity::Warn,
                "initcwnd",
                format!(
                    "initcwnd {n}: new connections on this route send only {} (≈ {}) in their first round trip, against {INIT_CWND} by default (RFC 6928): a response larger than that waits an extra round trip, and one more for each doubling.",
                    segments(n),
                    bytes(u64::from(n) * u64::from(mss))
                ),
                Some(fix(&|m| m.initcwnd = Some(INIT_CWND))),
            );
        } else if n > INIT_CWND {
            add(
                Severity::Note,
                "initcwnd",
                format!(
                    "initcwnd {n}: a first flight of ≈ {} without waiting for an ACK: fewer round trips for large responses, and a burst a shallow queue on the path may drop.",
                    bytes(u64::from(n.saturating_mul(mss)))
                ),
                None,
            );
        }
    }
    if let Some(n) = m.initrwnd.filter(|&n| n > 0) {
        if n < INIT_CWND {
            add(
                Severity::Warn,
                "initrwnd",
                format!(
                    "initrwnd {n}: this host's first window lets a peer send only {} (≈ {}) before the next window update: uploads start slowly.",
                    segments(n),
                    bytes(u64::from(n) * u64::from(mss))
                ),
                Some(fix(&|m| m.initrwnd = None)),
            );
        } else {
            add(
                Severity::Note,
                "initrwnd",
                format!(
                    "initrwnd {n}: this host's first advertised window is {} (≈ {}) instead of what tcp_rmem's start allows: a peer's first flights are not held back by the window (its own initcwnd still applies).",
                    segments(n),
                    bytes(u64::from(n.saturating_mul(mss)))
                ),
                None,
            );
        }
    }
}

/// The findings on when ACKs and retransmissions leave: quickack and rto_min.
fn timer_findings(
    m: &Metrics,
    add: &mut impl FnMut(Severity, &str, String, Option<String>),
    fix: &impl Fn(&dyn Fn(&mut Metrics)) -> String,
) {
    if m.quickack.is_some_and(|q| q != 0) {
        add(
            Severity::Note,
            "quickack",
            "quickack 1: delayed ACKs are off for this route: every segment is acknowledged at once, so a Nagle-held segment never waits the peer's 40 ms delayed-ACK timer (good for request/response); bulk transfers send more ACKs.".into(),
            None,
        );
    }
    if let Some(ms) = m.rto_min {
        if ms > RTO_MIN_MS {
            add(
                Severity::Warn,
                "rto_min",
                format!(
                    "rto_min {ms} ms: every retransmission timeout on this route waits at least {ms} ms (default {RTO_MIN_MS} ms), so a lost tail or a lost retransmission stalls connections that long."
                ),
                Some(fix(&|m| m.rto_min = None)),
            );
        } else if ms < RTO_MIN_MS {
            add(
                Severity::Note,
                "rto_min",
                format!(
                    "rto_min {ms} ms: retransmission timeouts may fire after {ms} ms instead of {RTO_MIN_MS} ms: faster recovery from a lost tail, spurious retransmissions if the round trip jumps above that."
                ),
                None,
            );
        }
    }
}

/// The findings on the windows' limits: window, cwnd and ssthresh.
fn window_findings(
    m: &Metrics,
    mss: u32,
    add: &mut impl FnMut(Severity, &str, String, Option<String>),
    fix: &impl Fn(&dyn Fn(&mut Metrics)) -> String,
) {
    if let Some(w) = m.window {
        let win = u64::from(w);
        let text = format!(
            "window {w}: the receive window on this route is clamped to {}: {}.",
            bytes(win),
            at_rtts(win)
        );
        if win < LONG_FAT_WINDOW {
            add(
                Severity::Warn,
                "window",
                text,
                Some(fix(&|m| m.window = None)),
            );
        } else {
            add(Severity::Note, "window", text, None);
        }
    }
    if let Some(c) = m.cwnd {
        if m.locked(RTAX_CWND) {
            add(
                Severity::Warn,
                "cwnd",
                format!(
                    "cwnd lock {c}: the congestion window can never exceed {} (≈ {}): {}.",
                    segments(c),
                    bytes(u64::from(c.saturating_mul(mss))),
                    at_rtts(u64::from(c.saturating_mul(mss)))
                ),
                Some(fix(&|m| m.cwnd = None)),
            );
        }
    }
    if let Some(s) = m.ssthresh {
        add(
            Severity::Note,
            "ssthresh",
            format!(
                "ssthresh {s}: slow start ends at {}; growth is linear after that.",
                segments(s)
            ),
            None,
        );
    }
}

/// The findings on the size of segments: mtu and advmss.
fn segment_size_findings(
    r: &Route,
    add: &mut impl FnMut(Severity, &str, String, Option<String>),
    fix: &impl Fn(&dyn Fn(&mut Metrics)) -> String,
) {
    let m = &r.metrics;
    if let Some(mtu) = m.mtu {
        let floor = if r.family == AF_INET6 { 1280 } else { 576 };
        let locked = if m.locked(RTAX_MTU) {
            " (locked: path MTU discovery will not change it)"
        } else {
            ""
        };
        if mtu < floor {
            add(
                Severity::Warn,
                "mtu",
                format!("mtu {mtu}: below the protocol minimum ({floor}){locked}: every segment is small."),
                Some(fix(&|m| m.mtu = None)),
            );
        } else {
            add(
                Severity::Note,
                "mtu",
                format!("mtu {mtu}: the path MTU of this route is set to {mtu}{locked}."),
                None,
            );
        }
    }
    if let Some(a) = m.advmss {
        if a < 536 {
            add(
                Severity::Warn,
                "advmss",
                format!("advmss {a}: peers are told to send segments of at most {a} bytes: many more packets for the same data."),
                Some(fix(&|m| m.advmss = None)),
            );
        } else {
            add(
                Severity::Note,
                "advmss",
                format!("advmss {a}: the MSS announced to peers on this route is {a} bytes."),
                None,
            );
        }
    }
}

/// The findings on the route's other settings: congctl, ECN, reordering
/// and fastopen_no_cookie.
fn option_findings(m: &Metrics, add: &mut impl FnMut(Severity, &str, String, Option<String>)) {
    if let Some(cc) = &m.congctl {
        let mut text = format!(
            "congctl {cc}: connections on this route use {cc}, whatever net.ipv4.tcp_congestion_control says."
        );
        if cc == "reno" {
            text.push_str(
                " reno halves its window on every loss and regains one segment per round trip.",
            );
        }
        add(Severity::Note, "congctl", text, None);
    }
    if m.features.is_some_and(|f| f & RTAX_FEATURE_ECN != 0) {
        add(
            Severity::Note,
            "features",
            "features ecn: connections on this route ask for ECN (RFC 3168), whatever net.ipv4.tcp_ecn says.".into(),
            None,
        );
    }
    if let Some(n) = m.reordering {
        add(
            Severity::Note,
            "reordering",
            format!("reordering {n}: {n} duplicate ACKs before a segment is taken for lost."),
            None,
        );
    }
    if m.fastopen_no_cookie.is_some_and(|v| v != 0) {
        add(
            Severity::Note,
            "fastopen_no_cookie",
            "fastopen_no_cookie 1: TCP Fast Open data is sent and accepted without a cookie on this route.".into(),
            None,
        );
    }
}

/// `1 segment`, `2 segments`.
fn segments(n: u32) -> String {
    if n == 1 {
        "1 segment".into()
    } else {
        format!("{n} segments")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::route::{RTAX_RTO_MIN, TABLE_MAIN};
    use std::net::IpAddr;

    fn route(dst: &str, len: u8, metrics: Metrics) -> Route {
        let dst: IpAddr = dst.parse().expect("ip");
        Route {
            family: if dst.is_ipv6() { AF_INET6 } else { 2 },
            dst_len: len,
            dst: Some(dst),
            table: TABLE_MAIN,
            protocol: 3,
            scope: if dst.is_ipv6() { 0 } else { 253 },
            kind: 1,
            oif: Some(3),
            gateway: None,
            priority: if dst.is_ipv6() { Some(1024) } else { None },
            prefsrc: None,
            metrics,
            nexthops: vec![],
            nh_id: None,
        }
    }

    fn links() -> Vec<Link> {
        vec![Link {
            index: 3,
            name: "v0".into(),
            mtu: Some(1500),
            txqlen: Some(1000),
            kind: Some("veth".into()),
        }]
    }

    fn judged(r: Route, ns: &Namespace) -> RouteReport {
        judge(&[r], &links(), ns).remove(0)
    }

    fn finding<'a>(r: &'a RouteReport, subject: &str) -> &'a Finding {
        r.findings
            .iter()
            .find(|f| f.subject == subject)
            .unwrap_or_else(|| panic!("no {subject} finding"))
    }

    fn e2e_metrics() -> Metrics {
        Metrics {
            lock: 1 << RTAX_RTO_MIN,
            initcwnd: Some(4),
            initrwnd: Some(20),
            quickack: Some(1),
            rto_min: Some(50),
            ..Metrics::default()
        }
    }

    #[test]
    fn every_fix_makes_every_edit_and_keeps_the_rest() {
        // Each fix used to restate the route with its own metric fixed and
        // the other bad ones kept: run one after another, they undid each other.
        let m = Metrics {
            lock: (1 << RTAX_RTO_MIN) | (1 << RTAX_MTU),
            initcwnd: Some(2),
            initrwnd: Some(2),
            quickack: Some(1),
            rto_min: Some(50),
            mtu: Some(1500),
            ..Metrics::default()
        };
        let r = judged(route("10.84.1.0", 24, m), &Namespace::default());
        let warned: Vec<&Finding> = r
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Warn)
            .collect();
        assert_eq!(warned.len(), 2, "{:?}", r.findings);
        let want =
            "ip route change 10.84.1.0/24 dev v0 mtu lock 1500 initcwnd 10 quickack 1 rto_min 50ms";
        for f in warned {
            assert_eq!(f.fix.as_deref(), Some(want), "{}", f.subject);
        }
        // The route as fixed has no warning left.
        let fixed = Metrics {
            lock: (1 << RTAX_RTO_MIN) | (1 << RTAX_MTU),
            initcwnd: Some(10),
            quickack: Some(1),
            rto_min: Some(50),
            mtu: Some(1500),
            ..Metrics::default()
        };
        let r = judged(route("10.84.1.0", 24, fixed), &Namespace::default());
        assert!(r.findings.iter().all(|f| f.severity != Severity::Warn));
        assert_eq!(r.spec, want.trim_start_matches("ip route change "));
    }

    #[test]
    fn one_segment_is_said_in_the_singular() {
        let m = Metrics {
            initcwnd: Some(1),
            initrwnd: Some(1),
            ..Metrics::default()
        };
        let r = judged(route("10.84.1.0", 24, m), &Namespace::default());
        assert!(finding(&r, "initcwnd")
            .judgement
            .contains("send only 1 segment (≈"));
        assert!(finding(&r, "initrwnd")
            .judgement
            .contains("send only 1 segment (≈"));
    }

    #[test]
    fn small_initcwnd_warns_and_the_fix_keeps_the_other_metrics() {
        let r = judged(route("10.84.1.0", 24, e2e_metrics()), &Namespace::default());
        assert_eq!(r.dst, "10.84.1.0/24");
        assert_eq!(r.dev.as_deref(), Some("v0"));
        assert_eq!(
            r.spec,
            "10.84.1.0/24 dev v0 initcwnd 4 initrwnd 20 quickack 1 rto_min 50ms"
        );
        let f = finding(&r, "initcwnd");
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.judgement.contains("only 4 segments (≈ 5.66 KB)"),
            "{}",
            f.judgement
        );
        assert_eq!(
            f.fix.as_deref(),
            Some("ip route change 10.84.1.0/24 dev v0 initcwnd 10 initrwnd 20 quickack 1 rto_min 50ms")
        );
        assert_eq!(finding(&r, "quickack").severity, Severity::Note);
        assert!(finding(&r, "quickack")
            .judgement
            .contains("delayed ACKs are off"));
        assert_eq!(finding(&r, "rto_min").severity, Severity::Note);
        assert_eq!(finding(&r, "initrwnd").severity, Severity::Note);
        assert_eq!(r.metrics.rto_min_ms, Some(50));
        assert!(r.locked.is_empty(), "rto_min's lock is implied");
    }

    #[test]
    fn raised_rto_min_warns_and_the_fix_removes_it() {
        let mut r = route(
            "10.0.0.0",
            8,
            Metrics {
                rto_min: Some(300),
                lock: 1 << RTAX_RTO_MIN,
                ..Metrics::default()
            },
        );
        r.gateway = Some("10.84.0.254".parse().expect("ip"));
        r.scope = 0;
        let ns = Namespace {
            id: "net:[5]".into(),
            name: Some("web".into()),
            initial: Some(false),
        };
        let rep = judged(r, &ns);
        let f = finding(&rep, "rto_min");
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(
            f.fix.as_deref(),
            Some("ip netns exec web ip route change 10.0.0.0/8 via 10.84.0.254 dev v0")
        );
    }

    #[test]
    fn ipv6_fix_names_family_and_metric() {
        let r = judged(
            route(
                "fd84:1::",
                64,
                Metrics {
                    initcwnd: Some(4),
                    congctl: Some("reno".into()),
                    features: Some(RTAX_FEATURE_ECN),
                    ..Metrics::default()
                },
            ),
            &Namespace::default(),
        );
        assert_eq!(r.family, "inet6");
        assert_eq!(
            finding(&r, "initcwnd").fix.as_deref(),
            Some("ip -6 route change fd84:1::/64 dev v0 metric 1024 initcwnd 10 features ecn congctl reno")
        );
        assert_eq!(r.metrics.features, Some(vec!["ecn".to_string()]));
        assert!(finding(&r, "congctl").judgement.contains("reno halves"));
        assert_eq!(finding(&r, "features").severity, Severity::Note);
    }

    #[test]
    fn no_metrics_no_findings_and_local_table_left_out() {
        let plain = route("10.84.0.0", 24, Metrics::default());
        let mut local = route("10.84.0.1", 32, Metrics::default());
        local.table = TABLE_LOCAL;
        let got = judge(&[plain, local], &links(), &Namespace::default());
        assert_eq!(got.len(), 1);
        assert!(got[0].findings.is_empty());
        assert_eq!(serde_plain(&got[0].metrics), "{}");
    }

    #[test]
    fn locked_mtu_window_and_cwnd() {
        let r = judged(
            route(
                "10.84.2.0",
                24,
                Metrics {
                    lock: (1 << RTAX_MTU) | (1 << RTAX_CWND),
                    mtu: Some(1400),
                    window: Some(65535),
                    cwnd: Some(4),
                    advmss: Some(1360),
                    ..Metrics::default()
                },
            ),
            &Namespace::default(),
        );
        assert_eq!(r.locked, vec!["mtu", "cwnd"]);
        assert!(finding(&r, "mtu").judgement.contains("locked"));
        assert_eq!(finding(&r, "window").severity, Severity::Warn);
        assert_eq!(finding(&r, "cwnd").severity, Severity::Warn);
        assert_eq!(finding(&r, "advmss").severity, Severity::Note);
        assert!(r
            .spec
            .contains("mtu lock 1400 advmss 1360 window 65535 cwnd lock 4"));
    }

    #[test]
    fn destinations_as_ip_prints_them() {
        let mut r = route("10.0.0.1", 32, Metrics::default());
        assert_eq!(destination(&r), "10.0.0.1");
        r.dst = None;
        r.dst_len = 0;
        assert_eq!(destination(&r), "default");
    }

    fn serde_plain(m: &MetricsReport) -> String {
        serde_json::to_string(m).expect("json")
    }
}
