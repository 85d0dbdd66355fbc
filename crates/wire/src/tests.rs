use super::*;
use crate::build::FrameSpec;
use proptest::prelude::*;

fn spec() -> FrameSpec {
    FrameSpec {
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.0.0.2".parse().unwrap(),
        src_port: 40000,
        dst_port: 80,
        seq: 1000,
        ack: 2000,
        flags: TcpFlags::SYN,
        window: 64240,
        mss: Some(1460),
        window_scale: Some(7),
        payload_len: 0,
    }
}

#[test]
fn ethernet_syn_with_options() {
    let f = spec().ethernet();
    let seg = decode(LinkType::Ethernet, &f).unwrap().unwrap();
    assert_eq!(seg.src.to_string(), "10.0.0.1");
    assert_eq!(seg.dst_port, 80);
    assert_eq!(seg.seq, 1000);
    assert!(seg.flags.syn() && !seg.flags.ack());
    assert_eq!(seg.options().mss, Some(1460));
    assert_eq!(seg.options().window_scale, Some(7));
    assert_eq!(seg.window, 64240);
    assert_eq!(seg.seq_len(), 1);
}

#[test]
fn ethernet_padding_is_not_payload() {
    // A pure ACK is 54 bytes; Ethernet pads it to 60. The 6 bytes are not data.
    let mut s = spec();
    s.flags = TcpFlags::ACK;
    s.mss = None;
    s.window_scale = None;
    let f = s.ethernet();
    assert_eq!(f.len(), 60);
    let seg = decode(LinkType::Ethernet, &f).unwrap().unwrap();
    assert_eq!(seg.payload_len, 0);
    assert!(seg.payload.is_empty());
}

#[test]
fn snaplen_truncated_payload_keeps_ip_length() {
    let mut s = spec();
    s.flags = TcpFlags::ACK | TcpFlags::PSH;
    s.payload_len = 1448;
    let f = s.ethernet();
    let seg = decode(LinkType::Ethernet, &f[..128]).unwrap().unwrap();
    assert_eq!(seg.payload_len, 1448);
    assert_eq!(seg.payload.len(), 128 - 14 - 20 - 28);
}

#[test]
fn a_total_length_beyond_the_frame_is_held_to_the_frame() {
    // A SYN-ACK whose IPv4 total length says 4148 where the wire carried 66
    // bytes (nDPI's tls_invalid_reads.pcap): its "payload" is not data.
    let mut s = spec();
    s.flags = TcpFlags::SYN | TcpFlags::ACK;
    let mut f = s.ethernet();
    let wire = f.len() as u32;
    f[16..18].copy_from_slice(&4148u16.to_be_bytes());
    let seg = decode_frame(LinkType::Ethernet, &f, wire).unwrap().unwrap();
    assert_eq!(seg.payload_len, 0);
    assert!(seg.length_clamped);
    // decode alone believes the header.
    assert_eq!(
        decode(LinkType::Ethernet, &f).unwrap().unwrap().payload_len,
        4148 - 20 - 28
    );
    // A frame cut by the snaplen keeps the length its header and the wire agree on.
    let mut s = spec();
    s.flags = TcpFlags::ACK | TcpFlags::PSH;
    s.payload_len = 1448;
    let f = s.ethernet();
    let seg = decode_frame(LinkType::Ethernet, &f[..128], f.len() as u32)
        .unwrap()
        .unwrap();
    assert_eq!(seg.payload_len, 1448);
    assert!(!seg.length_clamped);
    // An original length below the captured one is the record's lie, not the header's.
    let seg = decode_frame(LinkType::Ethernet, &f, 60).unwrap().unwrap();
    assert_eq!(seg.payload_len, 1448);
}

#[test]
fn vlan_and_qinq() {
    let f = spec().ethernet();
    let mut q = f[..12].to_vec();
    q.extend_from_slice(&[0x88, 0xA8, 0, 10, 0x81, 0x00, 0, 20]);
    q.extend_from_slice(&f[12..]);
    let seg = decode(LinkType::Ethernet, &q).unwrap().unwrap();
    assert_eq!(seg.dst_port, 80);
}

#[test]
fn ipv6_with_extension_header() {
    let mut s = spec();
    s.src = "2001:db8::1".parse().unwrap();
    s.dst = "2001:db8::2".parse().unwrap();
    s.payload_len = 10;
    let ip = s.ip_packet();
    // Insert an 8-byte destination-options header after the fixed header.
    let mut p = ip[..40].to_vec();
    p[6] = 60;
    let plen = u16::from_be_bytes([p[4], p[5]]) + 8;
    p[4..6].copy_from_slice(&plen.to_be_bytes());
    p.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
    p.extend_from_slice(&ip[40..]);
    let seg = decode(LinkType::RawIp, &p).unwrap().unwrap();
    assert_eq!(seg.src.to_string(), "2001:db8::1");
    assert_eq!(seg.payload_len, 10);
}

#[test]
fn cooked_and_loopback_links() {
    let ip = spec().ip_packet();
    let mut sll = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&ip);
    assert!(decode(LinkType::LinuxSll, &sll).unwrap().is_ok());
    let mut sll2 = vec![
        0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0,
    ];
    sll2.extend_from_slice(&ip);
    assert!(decode(LinkType::LinuxSll2, &sll2).unwrap().is_ok());
    let mut null = 2u32.to_le_bytes().to_vec();
    null.extend_from_slice(&ip);
    assert!(decode(LinkType::Null, &null).unwrap().is_ok());
    let mut lo = 2u32.to_be_bytes().to_vec();
    lo.extend_from_slice(&ip);
    assert!(decode(LinkType::Loop, &lo).unwrap().is_ok());
}

#[test]
fn errors_name_the_layer() {
    let f = spec().ethernet();
    assert_eq!(
        decode(LinkType::Ethernet, &f[..10]).unwrap_err(),
        DecodeError::Truncated(Layer::Link)
    );
    assert_eq!(
        decode(LinkType::Ethernet, &f[..30]).unwrap_err(),
        DecodeError::Truncated(Layer::Ipv4)
    );
    assert_eq!(
        decode(LinkType::Ethernet, &f[..40]).unwrap_err(),
        DecodeError::Truncated(Layer::Tcp)
    );
    assert_eq!(
        decode(LinkType::Unknown(147), &f).unwrap_err(),
        DecodeError::UnsupportedLink(147)
    );
    let mut bad = f.clone();
    bad[14] = 0x43; // IHL 3
    assert!(matches!(
        decode(LinkType::Ethernet, &bad),
        Err(DecodeError::Malformed(Layer::Ipv4, _))
    ));
    let mut arp = f;
    arp[12] = 0x08;
    arp[13] = 0x06;
    assert_eq!(decode(LinkType::Ethernet, &arp).unwrap(), Err(Skip::NotIp));
}

#[test]
fn sack_and_timestamps() {
    let opts = [
        1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 6, 1, 1, 5, 10, 0, 0, 0, 100, 0, 0, 0, 200,
    ];
    let o = TcpOptions::parse(&opts);
    assert_eq!(o.timestamps, Some((5, 6)));
    assert_eq!(o.sack.as_slice(), &[(100, 200)]);
    assert!(!o.malformed);
    assert_eq!(TcpOptions::timestamps(&opts), Some((5, 6)));
    let aligned = [1, 1, 8, 10, 0, 0, 1, 0, 0, 0, 0, 7];
    assert_eq!(TcpOptions::timestamps(&aligned), Some((256, 7)));
    assert_eq!(TcpOptions::timestamps(&[]), None);
    assert_eq!(TcpOptions::timestamps(&[1, 1, 8, 10, 0]), None);
    let bad = TcpOptions::parse(&[2, 9, 0]);
    assert!(bad.malformed);
}

proptest! {
    #[test]
    fn decode_never_panics(link in 0u32..300, bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(LinkType::from_raw(link), &bytes);
    }

    #[test]
    fn mutated_real_frames_never_panic(at in 0usize..80, val in any::<u8>(), cut in 0usize..80) {
        let mut s = spec();
        s.payload_len = 20;
        let mut f = s.ethernet();
        let at = at % f.len();
        f[at] = val;
        f.truncate(f.len() - cut.min(f.len()));
        if let Ok(Ok(seg)) = decode(LinkType::Ethernet, &f) {
            prop_assert!(seg.payload.len() <= seg.payload_len as usize);
        }
    }
}
