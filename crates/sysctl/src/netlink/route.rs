//! `RTM_NEWROUTE`: `struct rtmsg` then attributes (linux/rtnetlink.h), with
//! the route metrics of `RTA_METRICS` (`RTAX_*`) that TCP reads when it opens
//! a connection on the route (initcwnd, initrwnd, quickack, rto_min…).

use std::net::IpAddr;

use super::{attrs, ne_u16, ne_u32, need_fixed, Attr, Error};

/// `struct rtmsg`: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
pub const RTMSG_LEN: usize = 12;

pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 10;

/// Tables with names (linux/rtnetlink.h `RT_TABLE_*`).
pub const TABLE_DEFAULT: u32 = 253;
pub const TABLE_MAIN: u32 = 254;
pub const TABLE_LOCAL: u32 = 255;

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_METRICS: u16 = 8;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_VIA: u16 = 18;
const RTA_NH_ID: u16 = 30;

/// The `RTAX_*` metrics (linux/rtnetlink.h), as `ip route` names them.
/// All are u32 except `congctl` (a string); `rto_min` is in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    /// RTAX_LOCK: bit N set = metric N is locked (TCP will not change it).
    pub lock: u32,
    pub mtu: Option<u32>,
    pub window: Option<u32>,
    pub rtt: Option<u32>,
    pub rttvar: Option<u32>,
    pub ssthresh: Option<u32>,
    pub cwnd: Option<u32>,
    pub advmss: Option<u32>,
    pub reordering: Option<u32>,
    pub hoplimit: Option<u32>,
    pub initcwnd: Option<u32>,
    pub features: Option<u32>,
    pub rto_min: Option<u32>,
    pub initrwnd: Option<u32>,
    pub quickack: Option<u32>,
    pub congctl: Option<String>,
    pub fastopen_no_cookie: Option<u32>,
}

pub const RTAX_MTU: u16 = 2;
pub const RTAX_WINDOW: u16 = 3;
pub const RTAX_RTT: u16 = 4;
pub const RTAX_RTTVAR: u16 = 5;
pub const RTAX_SSTHRESH: u16 = 6;
pub const RTAX_CWND: u16 = 7;
pub const RTAX_ADVMSS: u16 = 8;
pub const RTAX_REORDERING: u16 = 9;
pub const RTAX_HOPLIMIT: u16 = 10;
pub const RTAX_INITCWND: u16 = 11;
pub const RTAX_FEATURES: u16 = 12;
pub const RTAX_RTO_MIN: u16 = 13;
pub const RTAX_INITRWND: u16 = 14;
pub const RTAX_QUICKACK: u16 = 15;
pub const RTAX_CC_ALGO: u16 = 16;
pub const RTAX_FASTOPEN_NO_COOKIE: u16 = 17;
const RTAX_LOCK: u16 = 1;

/// RTAX_FEATURES bits (linux/rtnetlink.h); only ECN can be set from userspace.
pub const RTAX_FEATURE_ECN: u32 = 1 << 0;

impl Metrics {
    /// Whether metric `rtax` is locked (`ip route … mtu lock 1400`).
    pub fn locked(&self, rtax: u16) -> bool {
        rtax < 32 && self.lock & (1 << rtax) != 0
    }

    pub fn is_empty(&self) -> bool {
        *self == Metrics::default()
    }
}

/// One next hop of a multipath route (`struct rtnexthop` and its attributes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nexthop {
    pub oif: u32,
    /// `ip route` weight: rtnh_hops + 1.
    pub weight: u16,
    pub gateway: Option<IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub family: u8,
    pub dst_len: u8,
    /// None: the default route (or a zero-length prefix).
    pub dst: Option<IpAddr>,
    pub table: u32,
    pub protocol: u8,
    pub scope: u8,
    /// rtm_type: RTN_UNICAST, RTN_LOCAL, RTN_BLACKHOLE…
    pub kind: u8,
    pub oif: Option<u32>,
    pub gateway: Option<IpAddr>,
    pub priority: Option<u32>,
    pub prefsrc: Option<IpAddr>,
    pub metrics: Metrics,
    pub nexthops: Vec<Nexthop>,
    /// A route through a nexthop object (`ip route … nhid N`).
    pub nh_id: Option<u32>,
}

/// Parses the payload of one RTM_NEWROUTE message.
pub fn parse(payload: &[u8]) -> Result<Route, Error> {
    need_fixed(payload, RTMSG_LEN, "rtmsg shorter than 12 bytes")?;
    let mut r = Route {
        family: payload[0],
        dst_len: payload[1],
        dst: None,
        table: u32::from(payload[4]),
        protocol: payload[5],
        scope: payload[6],
        kind: payload[7],
        oif: None,
        gateway: None,
        priority: None,
        prefsrc: None,
        metrics: Metrics::default(),
        nexthops: Vec::new(),
        nh_id: None,
    };
    for a in attrs(&payload[RTMSG_LEN..], RTMSG_LEN) {
        let a = a?;
        match a.kind {
            RTA_DST => r.dst = a.ip(),
            RTA_OIF => r.oif = a.u32(),
            RTA_GATEWAY => r.gateway = a.ip(),
            RTA_VIA => r.gateway = via(&a),
            RTA_PRIORITY => r.priority = a.u32(),
            RTA_PREFSRC => r.prefsrc = a.ip(),
            // The u8 in rtmsg holds only tables below 256; RTA_TABLE holds all.
            RTA_TABLE => r.table = a.u32().unwrap_or(r.table),
            RTA_METRICS => r.metrics = metrics(a.value)?,
            RTA_MULTIPATH => r.nexthops = multipath(a.value)?,
            RTA_NH_ID => r.nh_id = a.u32(),
            _ => {}
        }
    }
    Ok(r)
}

/// RTA_VIA: `struct rtvia` = family (u16), then the address.
fn via(a: &Attr<'_>) -> Option<IpAddr> {
    super::ip_from(a.value.get(2..)?)
}

fn metrics(buf: &[u8]) -> Result<Metrics, Error> {
    let mut m = Metrics::default();
    for a in attrs(buf, 0) {
        let a = a?;
        let v = a.u32();
        match a.kind {
            RTAX_LOCK => m.lock = v.unwrap_or(0),
            RTAX_MTU => m.mtu = v,
            RTAX_WINDOW => m.window = v,
            RTAX_RTT => m.rtt = v,
            RTAX_RTTVAR => m.rttvar = v,
            RTAX_SSTHRESH => m.ssthresh = v,
            RTAX_CWND => m.cwnd = v,
            RTAX_ADVMSS => m.advmss = v,
            RTAX_REORDERING => m.reordering = v,
            RTAX_HOPLIMIT => m.hoplimit = v,
            RTAX_INITCWND => m.initcwnd = v,
            RTAX_FEATURES => m.features = v,
            RTAX_RTO_MIN => m.rto_min = v,
            RTAX_INITRWND => m.initrwnd = v,
            RTAX_QUICKACK => m.quickack = v,
            RTAX_CC_ALGO => m.congctl = Some(a.string()),
            RTAX_FASTOPEN_NO_COOKIE => m.fastopen_no_cookie = v,
            _ => {}
        }
    }
    Ok(m)
}

/// RTA_MULTIPATH: `struct rtnexthop` (len u16, flags u8, hops u8, ifindex
/// i32), each followed by its own attributes (RTA_GATEWAY, RTA_VIA).
fn multipath(buf: &[u8]) -> Result<Vec<Nexthop>, Error> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off + 8 <= buf.len() {
        let len = ne_u16(&buf[off..off + 2]) as usize;
        if len < 8 || off + len > buf.len() {
            return Err(Error {
                offset: off,
                what: "rtnexthop length out of bounds",
            });
        }
        let mut nh = Nexthop {
            oif: ne_u32(&buf[off + 4..off + 8]),
            weight: u16::from(buf[off + 3]) + 1,
            gateway: None,
        };
        for a in attrs(&buf[off + 8..off + len], off + 8) {
            let a = a?;
            match a.kind {
                RTA_GATEWAY => nh.gateway = a.ip(),
                RTA_VIA => nh.gateway = via(&a),
                _ => {}
            }
        }
        out.push(nh);
        off += super::align(len);
    }
    Ok(out)
}

#[cfg(all(test, target_endian = "little"))]
mod tests {
    use super::*;
    use crate::netlink::{scan, RTM_NEWROUTE};

    /// Every route of a recorded dump (fixtures/capture.sh).
    fn routes(fixture: &[u8]) -> Vec<Route> {
        let mut out = Vec::new();
        for m in crate::netlink::messages(fixture) {
            let m = m.expect("recorded dumps are well formed");
            if m.kind == RTM_NEWROUTE {
                out.push(parse(m.payload).expect("recorded routes parse"));
            }
        }
        out
    }

    fn find<'a>(rs: &'a [Route], dst: &str, len: u8) -> &'a Route {
        let want: IpAddr = dst.parse().expect("address");
        rs.iter()
            .find(|r| r.dst == Some(want) && r.dst_len == len)
            .unwrap_or_else(|| panic!("no route {dst}/{len}"))
    }

    #[test]
    fn ipv4_metrics_as_ip_route_set_them() {
        let rs = routes(include_bytes!("../../fixtures/route4.bin"));
        // ip route add 10.84.1.0/24 dev v0 initcwnd 4 initrwnd 20 quickack 1 rto_min 50ms
        let r = find(&rs, "10.84.1.0", 24);
        assert_eq!(r.family, AF_INET);
        assert_eq!(r.table, TABLE_MAIN);
        assert_eq!(r.gateway, None);
        assert!(r.oif.is_some());
        assert_eq!(r.metrics.initcwnd, Some(4));
        assert_eq!(r.metrics.initrwnd, Some(20));
        assert_eq!(r.metrics.quickack, Some(1));
        assert_eq!(r.metrics.rto_min, Some(50));
        // iproute2 always locks rto_min.
        assert!(r.metrics.locked(RTAX_RTO_MIN));
        assert!(!r.metrics.locked(RTAX_INITCWND));

        // ip route add 10.84.2.0/24 via 10.84.0.2 dev v0 table 100 mtu lock 1400 advmss 1360 window 65535 congctl reno
        let r = find(&rs, "10.84.2.0", 24);
        assert_eq!(r.table, 100);
        assert_eq!(r.gateway, Some("10.84.0.2".parse().expect("ip")));
        assert_eq!(r.metrics.mtu, Some(1400));
        assert!(r.metrics.locked(RTAX_MTU));
        assert_eq!(r.metrics.advmss, Some(1360));
        assert_eq!(r.metrics.window, Some(65535));
        assert_eq!(r.metrics.congctl.as_deref(), Some("reno"));

        // Multipath: two next hops, weights 1 and 2.
        let r = find(&rs, "10.84.3.0", 24);
        assert_eq!(r.oif, None);
        assert_eq!(r.nexthops.len(), 2);
        assert_eq!(
            r.nexthops[0].gateway,
            Some("10.84.0.2".parse().expect("ip"))
        );
        assert_eq!(r.nexthops[0].weight, 1);
        assert_eq!(
            r.nexthops[1].gateway,
            Some("10.85.0.2".parse().expect("ip"))
        );
        assert_eq!(r.nexthops[1].weight, 2);
        assert_ne!(r.nexthops[0].oif, r.nexthops[1].oif);

        // The default route: no RTA_DST, prefix length 0.
        let d = rs
            .iter()
            .find(|r| r.dst_len == 0 && r.table == TABLE_MAIN)
            .expect("default route");
        assert_eq!(d.dst, None);
        assert_eq!(d.gateway, Some("10.84.0.254".parse().expect("ip")));
        assert_eq!(d.metrics.rto_min, Some(300));

        // The kernel's own routes carry no metrics; the local table is there too.
        let k = find(&rs, "10.84.0.0", 24);
        assert!(k.metrics.is_empty());
        assert!(k.prefsrc.is_some());
        assert!(rs.iter().any(|r| r.table == TABLE_LOCAL));
    }

    #[test]
    fn ipv6_metrics_features_and_congctl() {
        let rs = routes(include_bytes!("../../fixtures/route6.bin"));
        // ip -6 route add fd84:1::/64 dev v0 initcwnd 4 congctl reno features ecn
        let r = find(&rs, "fd84:1::", 64);
        assert_eq!(r.family, AF_INET6);
        assert_eq!(r.metrics.initcwnd, Some(4));
        assert_eq!(r.metrics.congctl.as_deref(), Some("reno"));
        assert_eq!(r.metrics.features, Some(RTAX_FEATURE_ECN));
        assert_eq!(r.priority, Some(1024));
        // ip -6 route add fd84:2::/64 via fd84::2 dev v0 rto_min 50ms quickack 1
        let r = find(&rs, "fd84:2::", 64);
        assert_eq!(r.gateway, Some("fd84::2".parse().expect("ip")));
        assert_eq!(r.metrics.rto_min, Some(50));
        assert_eq!(r.metrics.quickack, Some(1));
    }

    #[test]
    fn a_whole_dump_scans_to_done() {
        let buf = include_bytes!("../../fixtures/route4.bin");
        let c = scan(buf, 1, RTM_NEWROUTE).expect("valid");
        assert!(c.done);
        assert!(c.error.is_none());
        assert_eq!(c.payloads.len(), routes(buf).len());
    }

    #[test]
    fn every_cut_of_a_route_is_an_error_or_a_route() {
        let buf = include_bytes!("../../fixtures/route4.bin");
        let c = scan(buf, 1, RTM_NEWROUTE).expect("valid");
        for p in &c.payloads {
            for end in 0..p.len() {
                // Cut anywhere: an error or a shorter route, never a panic.
                let _ = parse(&p[..end]);
            }
        }
        assert!(parse(&[2, 24, 0]).is_err());
    }

    #[test]
    fn multipath_with_a_bad_length_is_refused() {
        let mut m = vec![0u8; 8];
        m[0] = 64; // longer than the buffer
        assert!(multipath(&m).is_err());
        m[0] = 4; // shorter than rtnexthop
        assert!(multipath(&m).is_err());
    }
}
