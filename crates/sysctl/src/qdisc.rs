//! The queueing discipline of each interface. A shaper (tbf, htb) holds
//! packets back by design and its queue is delay; an emulator (netem) adds
//! delay on purpose; a FIFO without active queue management lets a queue
//! grow to its full length under load (bufferbloat).

use std::collections::HashMap;

use serde::Serialize;

use crate::netlink::link::Link;
use crate::netlink::qdisc::{Qdisc, QueueStats, PARENT_INGRESS, PARENT_ROOT};
use crate::units::{bytes, duration, rate, short};
use crate::{in_namespace, Finding, Namespace, Severity};

/// The packet scheduler's clock (/proc/net/psched): tbf's bucket size comes
/// in its ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Psched {
    pub ticks_per_us: f64,
}

impl Default for Psched {
    /// Linux since 2.6.25: t2us 1000, us2t 64, 1 µs clock: 15.625 ticks per µs.
    fn default() -> Psched {
        Psched {
            ticks_per_us: 15.625,
        }
    }
}

impl Psched {
    /// Parses /proc/net/psched ("000003e8 00000040 000f4240 3b9aca00") the
    /// way iproute2's tc_core_init does.
    pub fn parse(text: &str) -> Option<Psched> {
        let v: Vec<u64> = text
            .split_whitespace()
            .take(3)
            .map(|h| u64::from_str_radix(h, 16).ok())
            .collect::<Option<_>>()?;
        let [mut t2us, us2t, clock_res] = <[u64; 3]>::try_from(v).ok()?;
        if us2t == 0 || clock_res == 0 {
            return None;
        }
        if clock_res == 1_000_000_000 {
            t2us = us2t;
        }
        let factor = clock_res as f64 / 1e6;
        let ticks_per_us = t2us as f64 / us2t as f64 * factor;
        (ticks_per_us > 0.0).then_some(Psched { ticks_per_us })
    }
}

/// A token bucket filter as `tc` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TbfReport {
    pub rate_bits_per_s: u64,
    pub burst_bytes: u64,
    /// Bytes the queue holds before dropping.
    pub limit_bytes: u32,
    /// The wait of the last packet of a full queue, beyond the burst (tc's `lat`).
    pub latency_ms: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StatsReport {
    pub qlen: u32,
    pub backlog_bytes: u32,
    pub drops: u32,
    pub overlimits: u32,
    pub requeues: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QdiscReport {
    pub dev: String,
    pub kind: String,
    /// "8001:" as tc prints it.
    pub handle: String,
    /// "root", "ingress" or a class ("1:10").
    pub parent: String,
    pub meaning: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tbf: Option<TbfReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<StatsReport>,
    pub findings: Vec<Finding>,
}

/// Judges every qdisc of every interface, in dump order.
pub fn judge(qdiscs: &[Qdisc], links: &[Link], psched: Psched, ns: &Namespace) -> Vec<QdiscReport> {
    let by_index: HashMap<u32, &Link> = links.iter().map(|l| (l.index, l)).collect();
    qdiscs
        .iter()
        .map(|q| {
            let link = by_index.get(&q.ifindex).copied();
            let dev = link.map_or_else(|| format!("if{}", q.ifindex), |l| l.name.clone());
            let tbf = q.tbf.filter(|t| t.rate > 0).map(|t| {
                let burst_us = f64::from(t.buffer_ticks) / psched.ticks_per_us;
                let burst = (t.rate as f64 * burst_us / 1e6).round() as u64;
                let queue_us = f64::from(t.limit) / t.rate as f64 * 1e6;
                TbfReport {
                    rate_bits_per_s: t.rate.saturating_mul(8),
                    burst_bytes: burst,
                    limit_bytes: t.limit,
                    latency_ms: ((queue_us - burst_us).max(0.0) / 1000.0 * 100.0).round() / 100.0,
                }
            });
            let parent = parent_name(q.parent);
            let findings = findings(q, &dev, &parent, tbf, link.and_then(|l| l.txqlen), ns);
            QdiscReport {
                kind: q.kind.clone(),
                handle: handle_name(q.handle),
                parent,
                meaning: meaning(&q.kind),
                tbf,
                stats: q.stats.map(stats),
                findings,
                dev,
            }
        })
        .collect()
}

fn stats(s: QueueStats) -> StatsReport {
    StatsReport {
        qlen: s.qlen,
        backlog_bytes: s.backlog,
        drops: s.drops,
        overlimits: s.overlimits,
        requeues: s.requeues,
    }
}

/// "8001:" or "1:10" (hex, as tc prints handles); "0:" for none.
pub fn handle_name(h: u32) -> String {
    let (major, minor) = (h >> 16, h & 0xffff);
    if minor == 0 {
        format!("{major:x}:")
    } else {
        format!("{major:x}:{minor:x}")
    }
}

fn parent_name(p: u32) -> String {
    match p {
        PARENT_ROOT => "root".into(),
        PARENT_INGRESS => "ingress".into(),
        p => handle_name(p),
    }
}

/// One line on what a qdisc kind does to latency.
pub fn meaning(kind: &str) -> &'static str {
    match kind {
        "noqueue" => "no queue: packets go straight to the device",
        "pfifo_fast" => "three-band FIFO without active queue management",
        "pfifo" | "bfifo" => "FIFO without active queue management",
        "fq_codel" => "fair queueing with CoDel: keeps every flow's queue short",
        "fq" => "per-flow fair queueing with pacing",
        "cake" => "shaper with per-flow fairness and active queue management",
        "codel" | "pie" | "fq_pie" => "active queue management: keeps queueing delay short",
        "sfq" => "stochastic fair queueing between flows",
        "tbf" => "token bucket filter: shapes to a rate; what exceeds it waits in a queue",
        "htb" => "hierarchical token bucket: shapes classes of traffic to rates",
        "hfsc" | "cbq" => "class-based shaper",
        "netem" => "network emulator: adds delay, loss or reordering on purpose",
        "mq" | "mqprio" => "one child qdisc per hardware transmit queue",
        "ingress" | "clsact" => "filter hook (tc filters, eBPF); no queue",
        "prio" => "strict priority bands",
        _ => "",
    }
}

fn findings(
    q: &Qdisc,
    dev: &str,
    parent: &str,
    tbf: Option<TbfReport>,
    txqlen: Option<u32>,
    ns: &Namespace,
) -> Vec<Finding> {
    let here = if parent == "root" {
        "root".to_string()
    } else {
        format!("parent {parent} handle {}", handle_name(q.handle))
    };
    let delete = in_namespace(ns, format!("tc qdisc del dev {dev} {here}"));
    let held = q
        .stats
        .filter(|s| s.overlimits > 0 || s.drops > 0)
        .map(|s| {
            format!(
                " So far it held packets back {} times and dropped {}.",
                s.overlimits, s.drops
            )
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    match q.kind.as_str() {
        "tbf" => {
            let text = match tbf {
                Some(t) => {
                    let bits = t.rate_bits_per_s as f64;
                    format!(
                        "shapes {dev} to {}: what exceeds it waits in a queue of up to {} — up to {} ms of added delay (burst {}) — and is dropped beyond.{held} If the shaping is wanted, shorten its queue: {}.",
                        rate(bits),
                        bytes(u64::from(t.limit_bytes)),
                        short(t.latency_ms),
                        bytes(t.burst_bytes),
                        in_namespace(
                            ns,
                            format!(
                                "tc qdisc change dev {dev} {here} tbf rate {} burst {} latency 5ms",
                                tc_rate(t.rate_bits_per_s),
                                t.burst_bytes.max(1600)
                            )
                        )
                    )
                }
                None => format!("shapes {dev} to a fixed rate: what exceeds it waits in its queue.{held}"),
            };
            out.push(Finding {
                severity: Severity::Warn,
                subject: "tbf".into(),
                judgement: text,
                fix: Some(delete),
            });
        }
        "netem" => out.push(Finding {
            severity: Severity::Warn,
            subject: "netem".into(),
            judgement: format!(
                "emulates a network on {dev}: it adds delay, loss or reordering on purpose (a lab tool; `tc qdisc show dev {dev}` shows how much).{held}"
            ),
            fix: Some(delete),
        }),
        "htb" | "hfsc" | "cbq" if parent == "root" => out.push(Finding {
            severity: Severity::Note,
            subject: q.kind.clone(),
            judgement: format!(
                "shapes traffic on {dev} by class: a class at its rate waits in its queue (`tc -s class show dev {dev}` shows rates, backlog and drops).{held}"
            ),
            fix: None,
        }),
        "pfifo_fast" | "pfifo" | "bfifo" if parent == "root" => {
            let queue = match txqlen.filter(|&n| n > 0) {
                Some(n) => {
                    let bits = f64::from(n) * 1514.0 * 8.0;
                    format!(
                        " ({n} full-size packets: {} at 100 Mbit/s, {} at 1 Gbit/s)",
                        duration(bits / 100e6),
                        duration(bits / 1e9)
                    )
                }
                None => String::new(),
            };
            out.push(Finding {
                severity: Severity::Note,
                subject: q.kind.clone(),
                judgement: format!(
                    "a plain FIFO: when {dev} is the bottleneck its queue fills{queue} and every packet waits behind it; fq_codel keeps it short.{held}"
                ),
                fix: Some(in_namespace(ns, format!("tc qdisc replace dev {dev} root fq_codel"))),
            });
        }
        _ => {}
    }
    out
}

/// A rate in tc's syntax: "10mbit", "1gbit", "1500kbit", "12345bit".
fn tc_rate(bits: u64) -> String {
    for (unit, div) in [
        ("gbit", 1_000_000_000),
        ("mbit", 1_000_000),
        ("kbit", 1_000),
    ] {
        if bits >= div && bits.is_multiple_of(div) {
            return format!("{}{unit}", bits / div);
        }
    }
    format!("{bits}bit")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::qdisc::Tbf;

    fn link(index: u32, name: &str) -> Link {
        Link {
            index,
            name: name.into(),
            mtu: Some(1500),
            txqlen: Some(1000),
            kind: None,
        }
    }

    fn qdisc(kind: &str, tbf: Option<Tbf>) -> Qdisc {
        Qdisc {
            ifindex: 3,
            handle: 0x8003_0000,
            parent: PARENT_ROOT,
            kind: kind.into(),
            tbf,
            stats: Some(QueueStats::default()),
        }
    }

    #[test]
    fn psched_as_tc_reads_it() {
        let p = Psched::parse("000003e8 00000040 000f4240 3b9aca00\n").expect("parses");
        assert_eq!(p.ticks_per_us, 15.625);
        assert_eq!(Psched::parse("zz"), None);
        assert_eq!(Psched::parse("1 0 1"), None);
    }

    #[test]
    fn tbf_warns_with_rate_queue_and_delay() {
        // tc qdisc add dev v0 root tbf rate 10mbit burst 32kbit latency 50ms
        let q = qdisc(
            "tbf",
            Some(Tbf {
                rate: 1_250_000,
                limit: 66_596,
                buffer_ticks: 51_200,
            }),
        );
        let ns = Namespace {
            id: "net:[7]".into(),
            name: Some("lab".into()),
            initial: Some(false),
        };
        let got = judge(&[q], &[link(3, "v0")], Psched::default(), &ns).remove(0);
        let t = got.tbf.expect("tbf");
        assert_eq!(t.rate_bits_per_s, 10_000_000);
        assert_eq!(t.burst_bytes, 4096);
        assert_eq!(t.latency_ms, 50.0);
        assert_eq!(got.handle, "8003:");
        assert_eq!(got.parent, "root");
        let f = &got.findings[0];
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.judgement.contains("shapes v0 to 10 Mbit/s"),
            "{}",
            f.judgement
        );
        assert!(
            f.judgement.contains("up to 50 ms of added delay"),
            "{}",
            f.judgement
        );
        assert!(f.judgement.contains(
            "ip netns exec lab tc qdisc change dev v0 root tbf rate 10mbit burst 4096 latency 5ms"
        ));
        assert_eq!(
            f.fix.as_deref(),
            Some("ip netns exec lab tc qdisc del dev v0 root")
        );
    }

    #[test]
    fn fifo_root_is_a_note_with_queue_delay_and_noqueue_is_fine() {
        let got = judge(
            &[qdisc("pfifo_fast", None), qdisc("noqueue", None)],
            &[link(3, "eth0")],
            Psched::default(),
            &Namespace::default(),
        );
        let f = &got[0].findings[0];
        assert_eq!(f.severity, Severity::Note);
        assert!(
            f.judgement.contains("121 ms at 100 Mbit/s"),
            "{}",
            f.judgement
        );
        assert_eq!(
            f.fix.as_deref(),
            Some("tc qdisc replace dev eth0 root fq_codel")
        );
        assert!(got[1].findings.is_empty());
        assert_eq!(
            got[1].meaning,
            "no queue: packets go straight to the device"
        );
    }

    #[test]
    fn a_fifo_leaf_of_a_shaper_is_not_judged_twice() {
        let mut leaf = qdisc("pfifo", None);
        leaf.parent = 0x0001_0010;
        leaf.handle = 0x0010_0000;
        let got = judge(&[leaf], &[], Psched::default(), &Namespace::default()).remove(0);
        assert_eq!(got.parent, "1:10");
        assert_eq!(got.handle, "10:");
        assert_eq!(got.dev, "if3");
        assert!(got.findings.is_empty());
    }

    #[test]
    fn tc_rates() {
        assert_eq!(tc_rate(10_000_000), "10mbit");
        assert_eq!(tc_rate(1_000_000_000), "1gbit");
        assert_eq!(tc_rate(1_500_000), "1500kbit");
        assert_eq!(tc_rate(999), "999bit");
    }
}
