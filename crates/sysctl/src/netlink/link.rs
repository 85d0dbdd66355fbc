//! `RTM_NEWLINK`: `struct ifinfomsg` then attributes (linux/if_link.h). Only
//! what names an interface for the routes and qdiscs: index, name, MTU,
//! transmit queue length, and the kind of a virtual device (veth, bridge…).

use super::{attrs, ne_u32, need_fixed, Error};

/// `struct ifinfomsg`: family, pad, type (u16), index (i32), flags, change.
pub const IFINFOMSG_LEN: usize = 16;

const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_TXQLEN: u16 = 13;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    pub mtu: Option<u32>,
    pub txqlen: Option<u32>,
    /// IFLA_INFO_KIND: set for virtual devices only (veth, bridge, dummy…).
    pub kind: Option<String>,
}

/// Parses the payload of one RTM_NEWLINK message.
pub fn parse(payload: &[u8]) -> Result<Link, Error> {
    need_fixed(payload, IFINFOMSG_LEN, "ifinfomsg shorter than 16 bytes")?;
    let mut l = Link {
        index: ne_u32(&payload[4..8]),
        name: String::new(),
        mtu: None,
        txqlen: None,
        kind: None,
    };
    for a in attrs(&payload[IFINFOMSG_LEN..], IFINFOMSG_LEN) {
        let a = a?;
        match a.kind {
            IFLA_IFNAME => l.name = a.string(),
            IFLA_MTU => l.mtu = a.u32(),
            IFLA_TXQLEN => l.txqlen = a.u32(),
            IFLA_LINKINFO => {
                for i in attrs(a.value, 0) {
                    let i = i?;
                    if i.kind == IFLA_INFO_KIND {
                        l.kind = Some(i.string());
                    }
                }
            }
            _ => {}
        }
    }
    Ok(l)
}

#[cfg(all(test, target_endian = "little"))]
mod tests {
    use super::*;
    use crate::netlink::{messages, RTM_NEWLINK};

    #[test]
    fn recorded_links_have_names_and_kinds() {
        let buf = include_bytes!("../../fixtures/link.bin");
        let links: Vec<Link> = messages(buf)
            .map(|m| m.expect("well formed"))
            .filter(|m| m.kind == RTM_NEWLINK)
            .map(|m| parse(m.payload).expect("recorded links parse"))
            .collect();
        let names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["lo", "v1", "v0", "w1", "w0"]);
        let lo = &links[0];
        assert_eq!(lo.index, 1);
        assert_eq!(lo.kind, None);
        assert_eq!(lo.mtu, Some(65536));
        let v0 = &links[2];
        assert_eq!(v0.kind.as_deref(), Some("veth"));
        assert_eq!(v0.mtu, Some(1500));
        assert_eq!(v0.txqlen, Some(1000));
    }

    #[test]
    fn short_or_cut_links_never_panic() {
        let buf = include_bytes!("../../fixtures/link.bin");
        let m = messages(buf).next().expect("one").expect("valid");
        for end in 0..m.payload.len() {
            let _ = parse(&m.payload[..end]);
        }
        assert!(parse(&[0; 8]).is_err());
    }
}
