//! Properties of the reply parsers: untrusted bytes from raw sockets never
//! panic, and a segment built for a probe is read back as built.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use tcpdoctor_probe::packet::{
    parse_icmp4, parse_icmp6, parse_tcp4, parse_tcp6, tcp_checksum, tcp_segment, FLAG_ACK, FLAG_SYN,
};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
        let from = Ipv6Addr::LOCALHOST;
        let _ = parse_tcp4(&buf);
        let _ = parse_tcp6(&buf, from);
        let _ = parse_icmp4(&buf);
        let _ = parse_icmp6(&buf, from);
    }

    #[test]
    fn arbitrary_bytes_behind_a_valid_ipv4_header_never_panic(
        proto in prop_oneof![Just(1u8), Just(6u8), any::<u8>()],
        ihl in 5u8..16,
        rest in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut b = vec![0u8; usize::from(ihl) * 4];
        b[0] = 0x40 | ihl;
        let total = (b.len() + rest.len()) as u16;
        b[2..4].copy_from_slice(&total.to_be_bytes());
        b[8] = 64;
        b[9] = proto;
        b.extend_from_slice(&rest);
        let _ = parse_tcp4(&b);
        let _ = parse_icmp4(&b);
    }

    #[test]
    fn a_probe_segment_reads_back_as_built(
        sport in any::<u16>(), dport in any::<u16>(), seq in any::<u32>(), syn in any::<bool>(),
        src6 in any::<u128>(), dst6 in any::<u128>(),
    ) {
        let (src, dst) = (IpAddr::V6(Ipv6Addr::from(src6)), IpAddr::V6(Ipv6Addr::from(dst6)));
        let flags = if syn { FLAG_SYN } else { FLAG_ACK };
        let seg = tcp_segment(src, dst, sport, dport, seq, flags, syn.then_some(1460));
        // The checksum over the whole segment, its own field included, folds to zero.
        prop_assert_eq!(tcp_checksum(src, dst, &seg), 0);
        let r = parse_tcp6(&seg, Ipv6Addr::from(src6)).expect("own segment parses");
        prop_assert_eq!((r.sport, r.dport, r.seq, r.flags), (sport, dport, seq, flags));
        let v4 = tcp_segment(
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            sport, dport, seq, flags, None);
        prop_assert_eq!(v4.len(), 20);
    }
}
