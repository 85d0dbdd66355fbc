//! What a raw socket hands `ping` and `trace`: TCP replies and ICMP errors.
#![no_main]

use std::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use tcpdoctor_probe::packet::{parse_icmp4, parse_icmp6, parse_tcp4, parse_tcp6};

fuzz_target!(|data: &[u8]| {
    let from = Ipv6Addr::LOCALHOST;
    let _ = parse_tcp4(data);
    let _ = parse_icmp4(data);
    let _ = parse_tcp6(data, from);
    let _ = parse_icmp6(data, from);
});
