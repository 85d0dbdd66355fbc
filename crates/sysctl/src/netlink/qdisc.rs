//! `RTM_NEWQDISC`: `struct tcmsg` then attributes (linux/rtnetlink.h,
//! linux/pkt_sched.h): the kind of each queueing discipline, where it hangs,
//! its queue statistics, and the parameters of a token bucket filter (tbf),
//! whose queue is latency by design.

use super::{attrs, ne_u32, need_fixed, Error};

/// `struct tcmsg`: family, pad (3), ifindex (i32), handle, parent, info.
pub const TCMSG_LEN: usize = 20;

/// `TC_H_ROOT`: the qdisc attached at the root of the device's egress.
pub const PARENT_ROOT: u32 = 0xFFFF_FFFF;
/// `TC_H_INGRESS` (also clsact's parent).
pub const PARENT_INGRESS: u32 = 0xFFFF_FFF1;

const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_STATS2: u16 = 7;
const TCA_STATS_QUEUE: u16 = 3;
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;

/// `struct gnet_stats_queue` (linux/gen_stats.h).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub qlen: u32,
    pub backlog: u32,
    pub drops: u32,
    pub requeues: u32,
    pub overlimits: u32,
}

/// A token bucket filter's parameters (`struct tc_tbf_qopt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    /// Shaping rate, bytes per second (TCA_TBF_RATE64 when the u32 is too small).
    pub rate: u64,
    /// Bytes that may wait in the queue (`limit`, or derived from `latency`).
    pub limit: u32,
    /// Bucket size in scheduler ticks (`burst`); see [`crate::qdisc::Psched`].
    pub buffer_ticks: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qdisc {
    pub ifindex: u32,
    pub handle: u32,
    pub parent: u32,
    pub kind: String,
    pub tbf: Option<Tbf>,
    pub stats: Option<QueueStats>,
}

/// Parses the payload of one RTM_NEWQDISC message.
pub fn parse(payload: &[u8]) -> Result<Qdisc, Error> {
    need_fixed(payload, TCMSG_LEN, "tcmsg shorter than 20 bytes")?;
    let mut q = Qdisc {
        ifindex: ne_u32(&payload[4..8]),
        handle: ne_u32(&payload[8..12]),
        parent: ne_u32(&payload[12..16]),
        kind: String::new(),
        tbf: None,
        stats: None,
    };
    let mut options: &[u8] = &[];
    for a in attrs(&payload[TCMSG_LEN..], TCMSG_LEN) {
        let a = a?;
        match a.kind {
            TCA_KIND => q.kind = a.string(),
            TCA_OPTIONS => options = a.value,
            TCA_STATS2 => {
                for s in attrs(a.value, 0) {
                    let s = s?;
                    if s.kind == TCA_STATS_QUEUE && s.value.len() >= 20 {
                        let v = s.value;
                        q.stats = Some(QueueStats {
                            qlen: ne_u32(&v[0..4]),
                            backlog: ne_u32(&v[4..8]),
                            drops: ne_u32(&v[8..12]),
                            requeues: ne_u32(&v[12..16]),
                            overlimits: ne_u32(&v[16..20]),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    // Options are kind-specific; TCA_KIND may come in any order, so read them last.
    if q.kind == "tbf" {
        q.tbf = tbf(options)?;
    }
    Ok(q)
}

/// TCA_OPTIONS of a tbf: TCA_TBF_PARMS = `struct tc_tbf_qopt` { rate
/// (`struct tc_ratespec`, 12 bytes, the u32 rate last), peakrate (12),
/// limit, buffer, mtu }, and TCA_TBF_RATE64 above 4 GB/s.
fn tbf(options: &[u8]) -> Result<Option<Tbf>, Error> {
    let mut t: Option<Tbf> = None;
    let mut rate64 = None;
    for a in attrs(options, 0) {
        let a = a?;
        match a.kind {
            TCA_TBF_PARMS if a.value.len() >= 36 => {
                let v = a.value;
                t = Some(Tbf {
                    rate: u64::from(ne_u32(&v[8..12])),
                    limit: ne_u32(&v[24..28]),
                    buffer_ticks: ne_u32(&v[28..32]),
                });
            }
            TCA_TBF_RATE64 => rate64 = a.u64(),
            _ => {}
        }
    }
    if let (Some(t), Some(r)) = (t.as_mut(), rate64) {
        t.rate = r;
    }
    Ok(t)
}

#[cfg(all(test, target_endian = "little"))]
mod tests {
    use super::*;
    use crate::netlink::{messages, RTM_NEWQDISC};

    fn recorded() -> Vec<Qdisc> {
        messages(include_bytes!("../../fixtures/qdisc.bin"))
            .map(|m| m.expect("well formed"))
            .filter(|m| m.kind == RTM_NEWQDISC)
            .map(|m| parse(m.payload).expect("recorded qdiscs parse"))
            .collect()
    }

    #[test]
    fn kinds_and_parents_as_tc_set_them() {
        let qs = recorded();
        let kinds: Vec<(&str, u32)> = qs.iter().map(|q| (q.kind.as_str(), q.parent)).collect();
        assert!(kinds.contains(&("noqueue", PARENT_ROOT)));
        assert!(kinds.contains(&("pfifo_fast", PARENT_ROOT)));
        assert!(kinds.contains(&("tbf", PARENT_ROOT)));
        assert!(kinds.contains(&("htb", PARENT_ROOT)));
        assert!(kinds.contains(&("clsact", PARENT_INGRESS)));
        // tc qdisc add dev w0 parent 1:10 handle 10: pfifo limit 100
        let leaf = qs.iter().find(|q| q.kind == "pfifo").expect("pfifo leaf");
        assert_eq!(leaf.parent, 0x0001_0010);
        assert_eq!(leaf.handle, 0x0010_0000);
    }

    #[test]
    fn tbf_parameters() {
        // tc qdisc add dev v0 root tbf rate 10mbit burst 32kbit latency 50ms
        let qs = recorded();
        let q = qs.iter().find(|q| q.kind == "tbf").expect("tbf");
        let t = q.tbf.expect("tbf parameters");
        assert_eq!(t.rate, 1_250_000); // 10 Mbit/s in bytes/s
        assert_eq!(t.limit, 66_596); // rate x 50 ms + the 4 KB burst
        assert_eq!(t.buffer_ticks, 51_200); // 4096 B at 1.25 MB/s = 3.2768 ms, 15.625 ticks/us
        let s = q.stats.expect("stats");
        assert_eq!(s.drops, 0);
        assert_eq!(s.backlog, 0);
    }

    #[test]
    fn cut_qdiscs_never_panic() {
        let buf = include_bytes!("../../fixtures/qdisc.bin");
        for m in messages(buf) {
            let m = m.expect("valid");
            for end in 0..m.payload.len() {
                let _ = parse(&m.payload[..end]);
            }
        }
        assert!(parse(&[0; 19]).is_err());
    }
}
