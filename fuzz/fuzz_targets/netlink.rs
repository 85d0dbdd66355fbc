//! What rtnetlink hands `tcpdoctor sysctl`: the first byte picks the dump
//! (`byte % 3`: 0 routes, 1 interfaces, 2 qdiscs), the rest is one received
//! datagram. It goes through the dump scanner, the message parser, and every
//! message parsed is judged and rendered as the command would
//! ([`tcpdoctor_sysctl::judge_datagram`]).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tcpdoctor_sysctl::judge_datagram(data);
});
