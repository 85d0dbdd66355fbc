//! Untrusted input never panics: arbitrary bytes as rtnetlink replies, and
//! arbitrary strings as sysctl values, all the way to the rendered report.

use proptest::prelude::*;
use tcpdoctor_sysctl::netlink::{self, link, qdisc, route};
use tcpdoctor_sysctl::settings::{self, Reading, Snapshot};
use tcpdoctor_sysctl::{build, text, Observed};

fn render(o: &Observed) -> String {
    let r = build(o);
    text::render(&r, text::TextOptions::default())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn arbitrary_datagrams(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut o = Observed::default();
        for want in [netlink::RTM_NEWROUTE, netlink::RTM_NEWLINK, netlink::RTM_NEWQDISC] {
            if let Ok(c) = netlink::scan(&data, 1, want) {
                for p in c.payloads {
                    o.routes.extend(route::parse(p).ok());
                    o.links.extend(link::parse(p).ok());
                    o.qdiscs.extend(qdisc::parse(p).ok());
                }
            }
        }
        // The payload parsers on the raw bytes too, without a header.
        o.routes.extend(route::parse(&data).ok());
        o.links.extend(link::parse(&data).ok());
        o.qdiscs.extend(qdisc::parse(&data).ok());
        render(&o);
    }

    #[test]
    fn arbitrary_sysctl_values(values in proptest::collection::vec("[-0-9 \t]{0,24}|.{0,12}", 64)) {
        let mut snapshot = Snapshot::default();
        for (name, v) in settings::names().zip(values.iter().cycle()) {
            snapshot.values.insert(name.to_string(), Reading::Value(v.clone()));
        }
        for release in [None, Some("3.10.0"), Some("6.18.4")] {
            snapshot.kernel = release.and_then(tcpdoctor_sysctl::window::Kernel::parse);
            let o = Observed { snapshot: snapshot.clone(), ..Observed::default() };
            render(&o);
        }
    }
}

/// Every recorded fixture, bit-flipped one byte at a time, still parses or fails cleanly.
#[test]
fn flipped_fixtures() {
    let fixtures: [(&[u8], u16); 4] = [
        (
            include_bytes!("../fixtures/route4.bin"),
            netlink::RTM_NEWROUTE,
        ),
        (
            include_bytes!("../fixtures/route6.bin"),
            netlink::RTM_NEWROUTE,
        ),
        (include_bytes!("../fixtures/link.bin"), netlink::RTM_NEWLINK),
        (
            include_bytes!("../fixtures/qdisc.bin"),
            netlink::RTM_NEWQDISC,
        ),
    ];
    for (buf, want) in fixtures {
        for i in 0..buf.len() {
            let mut b = buf.to_vec();
            b[i] ^= 0xff;
            let Ok(c) = netlink::scan(&b, 1, want) else {
                continue;
            };
            let (mut routes, mut links, mut qdiscs) = (vec![], vec![], vec![]);
            for p in c.payloads {
                routes.extend(route::parse(p).ok());
                links.extend(link::parse(p).ok());
                qdiscs.extend(qdisc::parse(p).ok());
            }
            // The judgements of what parsed (the sysctl part has no bytes to flip).
            let ns = Default::default();
            let _ = tcpdoctor_sysctl::route::judge(&routes, &links, &ns);
            let _ = tcpdoctor_sysctl::qdisc::judge(&qdiscs, &links, Default::default(), &ns);
        }
    }
}
