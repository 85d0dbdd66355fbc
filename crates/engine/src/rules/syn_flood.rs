//! SYN flood: many handshakes to one server endpoint that no TCP client
//! would leave as they are.
//!
//! A client's TCP stack either completes a handshake or retries its SYN on
//! its retransmission timer (RFC 6298 2.1, RFC 9293 3.8.1). A flood — forged
//! source addresses, or a tool that writes SYNs on a raw socket — sends each
//! SYN once and never answers the SYN-ACK (RFC 4987 §2). So the mechanism,
//! seen from any vantage point, is: towards one endpoint, at least
//! [`MIN_HALF_OPEN`] handshakes that never completed, most of the attempts
//! to that endpoint, most of them a single SYN, at a rate no retrying client
//! makes. The cost falls on the legitimate clients: when the server's SYN
//! queue is full (`net.ipv4.tcp_max_syn_backlog`, SYN cookies off) their
//! SYNs are dropped too and wait for their retries; the engine folds those
//! SYN retries to the target into the flood's finding.
//!
//! State: a fixed-size counter per server endpoint (at most [`MAX_TARGETS`]; beyond that, attempts to new
//! endpoints are only counted), with a 1,024-register HyperLogLog of source
//! addresses made once an endpoint has [`EXACT_SOURCES`] half-open ones.

use std::net::{IpAddr, SocketAddr};

use crate::round3;
use crate::rule::{self, Detail};
use crate::text::{Said, Words};
use rustc_hash::FxHashMap;
use serde_json::json;
use tcpdoctor_flow::Connection;

/// Half-open connections to one endpoint before it can be called flooded.
pub const MIN_HALF_OPEN: u64 = 100;
/// Half-open attempts per second (over their span) at least.
pub const MIN_RATE: f64 = 20.0;
/// Server endpoints tracked at most (about 200 bytes each).
pub const MAX_TARGETS: usize = 16_384;
/// Source hashes held exactly before the estimator is made.
const EXACT_SOURCES: usize = 8;
/// Evidence kept per endpoint: (connection, frame of its SYN).
const SAMPLES: usize = 4;

/// What one server endpoint received.
#[derive(Debug, Default, Clone)]
pub struct Target {
    /// Connections a client's SYN opened.
    pub attempts: u64,
    /// Of those, never completed: no handshake ACK, no data.
    pub half_open: u64,
    /// Half-open with a single SYN (no retry).
    pub one_shot: u64,
    /// Half-open answered by a SYN-ACK, or refused by a RST from the server.
    pub answered: u64,
    pub refused: u64,
    /// First and last SYN of the half-open ones (ns).
    pub first_ns: i64,
    pub last_ns: i64,
    exact: [u64; EXACT_SOURCES],
    exact_len: u8,
    sketch: Option<Box<Sketch>>,
    pub samples: Vec<(u64, u64)>,
}

impl Target {
    /// Distinct source addresses of the half-open connections (estimated
    /// beyond a few: ±3%, 1 KB per endpoint).
    pub fn sources(&self) -> u64 {
        match &self.sketch {
            Some(s) => s.estimate(),
            None => self.exact_len as u64,
        }
    }

    fn add_source(&mut self, ip: IpAddr) {
        let h = hash_ip(ip);
        if let Some(s) = &mut self.sketch {
            s.insert(h);
            return;
        }
        let n = self.exact_len as usize;
        if self.exact[..n].contains(&h) {
            return;
        }
        if n < EXACT_SOURCES {
            self.exact[n] = h;
            self.exact_len += 1;
            return;
        }
        let mut s = Box::<Sketch>::default();
        for &x in &self.exact {
            s.insert(x);
        }
        s.insert(h);
        self.sketch = Some(s);
    }

    /// Half-open attempts per second over their span.
    pub fn rate(&self) -> f64 {
        let span = (self.last_ns - self.first_ns) as f64 / 1e9;
        if span <= 0.0 {
            f64::INFINITY
        } else {
            self.half_open as f64 / span
        }
    }

    /// Whether this endpoint was flooded (see the module's description).
    pub fn flooded(&self) -> bool {
        self.half_open >= MIN_HALF_OPEN
            && self.half_open * 2 >= self.attempts
            && self.one_shot * 10 >= self.half_open * 8
            && self.rate() >= MIN_RATE
    }
}

/// The per-endpoint counters.
#[derive(Debug, Default)]
pub struct Floods {
    targets: FxHashMap<SocketAddr, Target>,
    /// Attempts to endpoints beyond [`MAX_TARGETS`], not judged.
    pub untracked: u64,
}

impl Floods {
    /// Counts a closing connection.
    pub fn on_close(&mut self, conn: &Connection) {
        let hs = &conn.handshake;
        // Only connections a client's SYN opened.
        let Some(first) = hs.first_syn else {
            return;
        };
        let half_open =
            hs.ack.is_none() && conn.client.data_packets + conn.server.data_packets == 0;
        let server = conn.server.addr;
        if self.targets.len() >= MAX_TARGETS && !self.targets.contains_key(&server) {
            self.untracked += 1;
            return;
        }
        let t = self.targets.entry(server).or_default();
        t.attempts += 1;
        if !half_open {
            return;
        }
        t.half_open += 1;
        t.one_shot += u64::from(hs.syn_count <= 1);
        if hs.synack.is_some() {
            t.answered += 1;
        } else if conn.server.rst.is_some() {
            t.refused += 1;
        }
        let ts = first.ts.nanos();
        if t.half_open == 1 {
            t.first_ns = ts;
            t.last_ns = ts;
        } else {
            t.first_ns = t.first_ns.min(ts);
            t.last_ns = t.last_ns.max(ts);
        }
        t.add_source(conn.client.addr.ip());
        if t.samples.len() < SAMPLES {
            t.samples.push((conn.id, first.frame));
        }
    }

    /// The flooded endpoints, most half-open attempts first.
    pub fn flooded(&self) -> Vec<(SocketAddr, &Target)> {
        let mut v: Vec<(SocketAddr, &Target)> = self
            .targets
            .iter()
            .filter(|(_, t)| t.flooded())
            .map(|(a, t)| (*a, t))
            .collect();
        v.sort_by(|a, b| b.1.half_open.cmp(&a.1.half_open).then(a.0.cmp(&b.0)));
        v
    }

    /// Bytes held.
    pub fn state_bytes(&self) -> usize {
        self.targets.capacity() * (std::mem::size_of::<(SocketAddr, Target)>() + 1)
            + self.targets.values().filter(|t| t.sketch.is_some()).count()
                * std::mem::size_of::<Sketch>()
    }
}

const REGISTER_BITS: u32 = 10;
const REGISTERS: usize = 1 << REGISTER_BITS;

/// HyperLogLog (Flajolet et al. 2007) with 1,024 registers: about 3% error.
#[derive(Debug, Clone)]
struct Sketch {
    registers: [u8; REGISTERS],
}

impl Default for Sketch {
    fn default() -> Self {
        Sketch {
            registers: [0; REGISTERS],
        }
    }
}

impl Sketch {
    fn insert(&mut self, h: u64) {
        let idx = (h >> (64 - REGISTER_BITS)) as usize;
        let rest = h << REGISTER_BITS;
        let rank = (rest.leading_zeros() + 1).min(65 - REGISTER_BITS) as u8;
        let r = &mut self.registers[idx];
        *r = (*r).max(rank);
    }

    fn estimate(&self) -> u64 {
        let m = REGISTERS as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self.registers.iter().map(|&r| 2f64.powi(-(r as i32))).sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        let e = if raw <= 2.5 * m && zeros > 0 {
            // Few distinct values: linear counting.
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        e.round() as u64
    }
}

/// A well-mixed 64-bit hash of an address (SplitMix64's finaliser).
fn hash_ip(ip: IpAddr) -> u64 {
    let x = match ip {
        IpAddr::V4(a) => u64::from(u32::from(a)),
        IpAddr::V6(a) => {
            let v = u128::from(a);
            (v as u64) ^ ((v >> 64) as u64).rotate_left(29)
        }
    };
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The words of a `syn_flood` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep) = (s.a, s.typical, s.total, s.ep);
    let Detail::Flood(Flood {
        attempts,
        half_open,
        one_shot,
        answered,
        refused,
        sources,
        first_ns,
        last_ns,
        delayed,
    }) = &a.first
    else {
        return crate::text::no_words();
    };
    let span_s = (*last_ns - *first_ns).max(0) as f64 / 1e9;
    let rate = if span_s > 0.0 {
        *half_open as f64 / span_s
    } else {
        *half_open as f64
    };
    let share_answered = round3(*answered as f64 / (*half_open).max(1) as f64);
    let answered_text = if *answered * 2 >= *half_open {
        format!(
            "{ep} answered {pct:.0}% of them with a SYN-ACK (SYN cookies, or a SYN queue large enough): \
             it kept up",
            pct = share_answered * 100.0
        )
    } else {
        format!(
            "{ep} answered only {pct:.0}% of them{rst}: its SYN queue (`net.ipv4.tcp_max_syn_backlog`, \
             SYN cookies off) was full and it dropped the rest — legitimate clients' SYNs with them",
            pct = share_answered * 100.0,
            rst = if *refused > 0 {
                format!(" ({refused} refused with a RST)")
            } else {
                String::new()
            },
        )
    };
    let cost = if *delayed > 0 {
        format!(
            "{delayed} legitimate connection(s) to {ep} had to send their SYN again and waited \
             {typical:.0} ms each (median), {total:.0} ms in all."
        )
    } else {
        "No legitimate connection in this capture waited for a SYN retry.".to_string()
    };
    let explanation = format!(
        "A SYN flood hit {ep}: {half_open} connection attempts ({pct_half:.0}% of the {attempts} to it) never \
         completed their handshake, {pct_once:.0}% of them a single SYN never sent again — no client's TCP \
         stack behaves so (it retries on its timer, RFC 6298), forged or scripted SYNs do (RFC 4987) — from \
         {sources} distinct source address(es), {rate:.0} per second over {span_s:.1} s. {answered_text}. \
         {cost}",
        pct_half = 100.0 * *half_open as f64 / (*attempts).max(1) as f64,
        pct_once = 100.0 * *one_shot as f64 / (*half_open).max(1) as f64,
    );
    let fix = format!(
        "On {ep}'s host: keep SYN cookies on (`net.ipv4.tcp_syncookies=1`, Linux's default: it answers \
         without queueing when the SYN queue overflows) and raise `net.ipv4.tcp_max_syn_backlog`; \
         `nstat -az TcpExtTCPReqQFullDrop TcpExtTCPReqQFullDoCookies TcpExtSyncookiesSent` shows the \
         queue overflowing. Upstream: rate-limit SYNs per source (`iptables -m hashlimit`, nftables \
         `limit`), or terminate handshakes in front of the server (iptables SYNPROXY, a load balancer, \
         your provider's DDoS scrubbing). With {sources} source(s), blocking addresses is {block}.",
        block = if *sources <= 16 {
            "practical"
        } else {
            "not enough (they are likely forged)"
        },
    );
    (
        explanation,
        fix,
        json!({"attempts": attempts, "half_open": half_open, "single_syn": one_shot,
               "distinct_sources": sources, "syns_per_sec": round3(rate),
               "duration_ms": round3(span_s * 1e3), "share_answered": share_answered,
               "refused": refused, "legitimate_delayed": delayed}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn sketch_counts_distinct_sources_within_ten_percent() {
        for n in [20u32, 300, 5_000, 100_000] {
            let mut t = Target::default();
            for i in 0..n {
                // Each address twice: duplicates do not count.
                let ip = IpAddr::V4(Ipv4Addr::from(0xc612_0000 + i));
                t.add_source(ip);
                t.add_source(ip);
            }
            let est = t.sources() as f64;
            let err = (est - f64::from(n)).abs() / f64::from(n);
            assert!(err < 0.08, "{n} sources estimated as {est}");
        }
    }

    #[test]
    fn few_sources_are_exact() {
        let mut t = Target::default();
        for i in 0..5u32 {
            t.add_source(IpAddr::V4(Ipv4Addr::from(i)));
            t.add_source(IpAddr::V4(Ipv4Addr::from(i)));
        }
        assert_eq!(t.sources(), 5);
    }

    #[test]
    fn a_flood_needs_many_one_shot_half_open_attempts_at_a_rate() {
        let mut t = Target {
            attempts: 1000,
            half_open: 990,
            one_shot: 990,
            first_ns: 0,
            last_ns: 2_000_000_000,
            ..Target::default()
        };
        assert!(t.flooded());
        // Retried SYNs: clients that could not connect, not a flood.
        t.one_shot = 100;
        assert!(!t.flooded());
        t.one_shot = 990;
        // Most attempts completed: a busy server with some lost handshakes.
        t.attempts = 5000;
        assert!(!t.flooded());
        t.attempts = 1000;
        // Spread over a day: a slow scan, not a flood.
        t.last_ns = 86_400_000_000_000;
        assert!(!t.flooded());
    }
}

/// A flooded endpoint (made when the report is, from [`syn_flood::Floods`]).
#[derive(Debug, Clone)]
pub struct Flood {
    pub attempts: u64,
    pub half_open: u64,
    pub one_shot: u64,
    pub answered: u64,
    pub refused: u64,
    pub sources: u64,
    pub first_ns: i64,
    pub last_ns: i64,
    /// Legitimate connections to the target whose SYN had to be retried.
    pub delayed: u64,
}

impl rule::Fold for Flood {
    fn fold(self, a: &mut crate::Aggregate) {
        // The flood's counts are the endpoint's, made when the report is.
        let _ = a;
    }
}

/// Floods are judged per endpoint ([`Floods`]): nothing per connection.
#[derive(Debug, Default)]
pub struct NoState;

impl rule::Rule for NoState {}

/// The verdict's sentence of a `syn_flood` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    format!(
        "a SYN flood hits {}: handshakes that never complete, from forged or scripted sources; \
         legitimate clients whose SYNs were dropped with it wait ~{} each",
        c.ep, c.typ
    )
}

/// A flood the server did not keep up with (most of its SYNs unanswered) is
/// an outage in the making: reported whatever time it cost.
pub(crate) fn standing(a: &crate::Aggregate) -> rule::Standing {
    match &a.first {
        rule::Detail::Flood(f)
            if crate::round3(f.answered as f64 / f.half_open.max(1) as f64) < 0.5 =>
        {
            rule::Standing::Major
        }
        _ => rule::Standing::ByShare,
    }
}
