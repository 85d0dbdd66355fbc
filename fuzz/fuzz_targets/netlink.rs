//! What rtnetlink hands `tcpdoctor sysctl`: the first byte picks the dump
//! (`byte % 3`: 0 routes, 1 interfaces, 2 qdiscs), the rest is one received
//! datagram. It goes through the dump scanner, the message parser, and every
//! message parsed is judged and rendered as the command would.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpdoctor_sysctl::netlink::{self, link, qdisc, route};
use tcpdoctor_sysctl::{build, text, Observed};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, datagram)) = data.split_first() else {
        return;
    };
    let want = match sel % 3 {
        0 => netlink::RTM_NEWROUTE,
        1 => netlink::RTM_NEWLINK,
        _ => netlink::RTM_NEWQDISC,
    };
    // The recorded fixtures use sequence 1.
    let Ok(chunk) = netlink::scan(datagram, 1, want) else {
        return;
    };
    let mut o = Observed::default();
    for p in chunk.payloads {
        match want {
            netlink::RTM_NEWROUTE => o.routes.extend(route::parse(p).ok()),
            netlink::RTM_NEWLINK => o.links.extend(link::parse(p).ok()),
            _ => o.qdiscs.extend(qdisc::parse(p).ok()),
        }
    }
    let report = build(&o);
    let _ = text::render(&report, text::TextOptions::default());
});
