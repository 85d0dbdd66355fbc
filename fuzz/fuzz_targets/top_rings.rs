//! What `tcpdoctor top` reads from the kernel: the first byte picks the
//! reader (even: pages of ftrace's `trace_pipe_raw`, odd: a perf ring's
//! records), the rest is what was read. Every record found is decoded with
//! the layout of its type, from the committed format files.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tcpdoctor_top::decode::{common_type, Kind, Layout};
use tcpdoctor_top::format::Format;
use tcpdoctor_top::ftrace::{Item, Page, PAGE};
use tcpdoctor_top::record::{Record, Records};

const FORMATS: [(Kind, &str); 5] = [
    (
        Kind::SetState,
        include_str!("../../crates/top/src/testdata/inet_sock_set_state.format"),
    ),
    (
        Kind::Destroy,
        include_str!("../../crates/top/src/testdata/tcp_destroy_sock.format"),
    ),
    (
        Kind::Retransmit,
        include_str!("../../crates/top/src/testdata/tcp_retransmit_skb.format"),
    ),
    (
        Kind::Probe,
        include_str!("../../crates/top/src/testdata/tcp_probe.format"),
    ),
    (
        Kind::SendLength,
        include_str!("../../crates/top/src/testdata/sock_send_length.format"),
    ),
];

fn layouts() -> &'static [Layout] {
    static L: OnceLock<Vec<Layout>> = OnceLock::new();
    L.get_or_init(|| {
        FORMATS
            .iter()
            .filter_map(|(k, f)| Layout::new(*k, &Format::parse(f)))
            .collect()
    })
}

fn decode(raw: &[u8]) {
    if let Some(t) = common_type(raw) {
        for l in layouts().iter().filter(|l| l.id == t) {
            let _ = l.decode(raw);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    if sel % 2 == 0 {
        for chunk in rest.chunks(PAGE) {
            if let Some(page) = Page::parse(chunk) {
                for item in page {
                    if let Item::Event { raw, .. } = item {
                        decode(raw);
                    }
                }
            }
        }
    } else {
        for rec in Records::new(rest) {
            if let Record::Sample(s) = rec {
                decode(s.raw);
            }
        }
    }
});
