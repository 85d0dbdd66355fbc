use super::write::{PcapNgWriter, PcapWriter};
use super::*;
use proptest::prelude::*;

fn pcap_bytes(n: usize) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet, 65535).unwrap();
    for i in 0..n {
        let data = vec![i as u8; 60 + i];
        w.write_packet(
            Timestamp::from_nanos(1_700_000_000_123_456_789 + i as i64),
            &data,
            1514,
        )
        .unwrap();
    }
    w.into_inner()
}

fn read_all(bytes: &[u8]) -> (Vec<(i64, usize, LinkType)>, Option<CaptureError>) {
    let mut out = Vec::new();
    let mut r = match CaptureReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (out, Some(e)),
    };
    loop {
        match r.next_packet() {
            Ok(Some(p)) => out.push((p.ts.nanos(), p.data.len(), p.link)),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

#[test]
fn pcap_nanosecond_round_trip() {
    let (pkts, err) = read_all(&pcap_bytes(3));
    assert!(err.is_none());
    assert_eq!(pkts.len(), 3);
    assert_eq!(pkts[0].0, 1_700_000_000_123_456_789);
    assert_eq!(pkts[2].1, 62);
}

#[test]
fn pcap_microsecond_big_endian() {
    let mut b = Vec::new();
    b.extend_from_slice(&0xA1B2_C3D4u32.to_be_bytes());
    b.extend_from_slice(&[
        0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0, 113,
    ]);
    b.extend_from_slice(&10u32.to_be_bytes());
    b.extend_from_slice(&5u32.to_be_bytes());
    b.extend_from_slice(&3u32.to_be_bytes());
    b.extend_from_slice(&3u32.to_be_bytes());
    b.extend_from_slice(&[1, 2, 3]);
    let (pkts, err) = read_all(&b);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(pkts, vec![(10_000_005_000, 3, LinkType::LinuxSll)]);
}

#[test]
fn truncated_pcap_keeps_what_was_read() {
    let b = pcap_bytes(3);
    let (pkts, err) = read_all(&b[..b.len() - 5]);
    assert_eq!(pkts.len(), 2);
    let err = err.unwrap();
    assert_eq!(err.kind, ErrorKind::Truncated);
    assert_eq!(err.offset, 24 + 76 + 77);
}

#[test]
fn corrupt_record_length_is_named() {
    let mut b = pcap_bytes(1);
    b[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let (_, err) = read_all(&b);
    let err = err.unwrap();
    assert_eq!(err.kind, ErrorKind::Corrupt);
    assert_eq!(err.offset, 24);
}

#[test]
fn not_a_capture() {
    let (_, err) = read_all(b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(err.unwrap().kind, ErrorKind::NotACapture);
    let (_, err) = read_all(b"");
    assert_eq!(err.unwrap().kind, ErrorKind::NotACapture);
}

#[test]
fn pcapng_interfaces_resolutions_and_unknown_blocks() {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let a = w.add_interface(LinkType::Ethernet, 0, 6).unwrap();
    let b = w.add_interface(LinkType::LinuxSll2, 0, 9).unwrap();
    w.write_unknown_block(0x0BAD, b"ignore me").unwrap();
    w.write_packet(a, 1_000_001, &[1; 61], 61).unwrap();
    w.write_packet(b, 2_000_000_007, &[2; 20], 40).unwrap();
    let bin = w.add_interface(LinkType::RawIp, 0, 0x80 | 10).unwrap();
    w.write_packet(bin, 3 * 1024, &[3; 4], 4).unwrap();
    let (pkts, err) = read_all(&w.into_inner());
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        pkts,
        vec![
            (1_000_001_000, 61, LinkType::Ethernet),
            (2_000_000_007, 20, LinkType::LinuxSll2),
            (3_000_000_000, 4, LinkType::RawIp)
        ]
    );
}

#[test]
fn pcapng_packet_before_interface_is_corrupt() {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_packet(0, 1, &[1; 4], 4).unwrap();
    let (_, err) = read_all(&w.into_inner());
    assert_eq!(err.unwrap().kind, ErrorKind::Corrupt);
}

/// A reader that hands out one byte at a time, like a slow pipe.
struct Trickle<'a>(&'a [u8]);
impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0.is_empty() || buf.is_empty() {
            return Ok(0);
        }
        buf[0] = self.0[0];
        self.0 = &self.0[1..];
        Ok(1)
    }
}

#[test]
fn reads_from_a_trickling_pipe() {
    let b = pcap_bytes(5);
    let mut r = CaptureReader::new(Trickle(&b)).unwrap();
    let mut n = 0;
    while r.next_packet().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 5);
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = read_all(&bytes);
    }

    #[test]
    fn corrupted_captures_never_panic(at in 0usize..400, val in any::<u8>(), ng in any::<bool>()) {
        let mut b = if ng {
            let mut w = PcapNgWriter::new(Vec::new()).unwrap();
            let i = w.add_interface(LinkType::Ethernet, 0, 9).unwrap();
            for k in 0..4u64 { w.write_packet(i, k, &[7; 50], 50).unwrap(); }
            w.into_inner()
        } else {
            pcap_bytes(4)
        };
        let at = at % b.len();
        b[at] = val;
        let _ = read_all(&b);
    }
}

#[test]
fn pcapng_comment_round_trip() {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let eth = w.add_interface(LinkType::Ethernet, 65535, 9).unwrap();
    for (i, comment) in [None, Some("tcpdoctor: held ✓"), Some("abcd")]
        .into_iter()
        .enumerate()
    {
        let data = vec![i as u8; 61 + i];
        w.write_packet_with_comment(eth, 1_000 + i as u64, &data, 1514, comment)
            .unwrap();
    }
    let bytes = w.into_inner();
    assert_eq!(bytes.len() % 4, 0);
    let (pkts, err) = read_all(&bytes);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(pkts.len(), 3);
    assert_eq!(pkts[1].1, 62);
    assert_eq!(pkts[2].0, 1_002);
}
