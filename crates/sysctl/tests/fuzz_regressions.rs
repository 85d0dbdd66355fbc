//! Every input the netlink fuzz target ever crashed on (fuzz/regressions/netlink),
//! through the same path as the target: scanned, parsed, judged and rendered
//! without a panic. The fuzz target runs them too, but only in a fuzzing build.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use tcpdoctor_sysctl::netlink::{self, link, qdisc, route};
use tcpdoctor_sysctl::{build, text, Observed};

fn run(data: &[u8]) {
    let Some((&sel, datagram)) = data.split_first() else {
        return;
    };
    let want = match sel % 3 {
        0 => netlink::RTM_NEWROUTE,
        1 => netlink::RTM_NEWLINK,
        _ => netlink::RTM_NEWQDISC,
    };
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
}

#[test]
fn inputs_the_fuzzer_crashed_on_are_judged_without_a_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/netlink");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        run(&std::fs::read(e.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 1);
}
