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

mod compressed {
    use super::*;
    use std::io::{Cursor, Write};

    fn gzip(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    fn zstd(b: &[u8]) -> Vec<u8> {
        zstd::encode_all(b, 3).unwrap()
    }

    /// Every packet through `decompressed`, as the binary reads.
    fn read_via(bytes: Vec<u8>) -> (Compression, Vec<(i64, usize)>, Option<CaptureError>) {
        let (src, c) = decompressed(Cursor::new(bytes)).unwrap();
        let mut out = Vec::new();
        let mut r = match CaptureReader::new(src) {
            Ok(r) => r,
            Err(e) => return (c, out, Some(e)),
        };
        loop {
            match r.next_packet() {
                Ok(Some(p)) => out.push((p.ts.nanos(), p.data.len())),
                Ok(None) => return (c, out, None),
                Err(e) => return (c, out, Some(e)),
            }
        }
    }

    fn plain(n: usize) -> Vec<(i64, usize)> {
        let (c, pkts, err) = read_via(pcap_bytes(n));
        assert_eq!(c, Compression::None);
        assert!(err.is_none());
        pkts
    }

    #[test]
    fn gzip_and_zstd_read_like_the_plain_capture() {
        let raw = pcap_bytes(300);
        let want = plain(300);
        for (bytes, kind) in [
            (gzip(&raw), Compression::Gzip),
            (zstd(&raw), Compression::Zstd),
        ] {
            let (c, pkts, err) = read_via(bytes);
            assert_eq!(c, kind);
            assert!(err.is_none(), "{kind}: {err:?}");
            assert_eq!(pkts, want, "{kind}");
        }
    }

    #[test]
    fn concatenated_members_and_frames_are_one_stream() {
        // `cat a.gz b.gz`: gzip -d reads both members; so do we. Same for zstd frames.
        let raw = pcap_bytes(40);
        let (head, tail) = raw.split_at(raw.len() / 2);
        for (bytes, kind) in [
            ([gzip(head), gzip(tail)].concat(), Compression::Gzip),
            ([zstd(head), zstd(tail)].concat(), Compression::Zstd),
        ] {
            let (_, pkts, err) = read_via(bytes);
            assert!(err.is_none(), "{kind}: {err:?}");
            assert_eq!(pkts, plain(40), "{kind}");
        }
    }

    #[test]
    fn a_stream_cut_short_is_truncated_after_the_whole_packets() {
        let raw = pcap_bytes(300);
        for (bytes, kind) in [(gzip(&raw), "gzip"), (zstd(&raw), "zstd")] {
            let cut = bytes.len() * 2 / 3;
            let (_, pkts, err) = read_via(bytes[..cut].to_vec());
            let e = err.expect("a cut stream is an error");
            assert_eq!(e.kind, ErrorKind::Truncated, "{kind}: {e}");
            assert!(
                e.detail.contains(&format!("after {cut} compressed bytes")),
                "{e}"
            );
            // zstd decodes whole blocks (up to 128 KB): a cut may leave none.
            assert!(pkts.len() < 300, "{kind}: {}", pkts.len());
            assert!(kind == "zstd" || !pkts.is_empty());
            assert_eq!(pkts[..], plain(300)[..pkts.len()]);
        }
    }

    #[test]
    fn damaged_data_is_corrupt_and_says_where() {
        let raw = pcap_bytes(300);
        // A broken gzip header (reserved flag bits set): nothing read.
        let mut bad = gzip(&raw);
        bad[3] = 0xE0;
        let (_, pkts, err) = read_via(bad);
        let e = err.expect("an error");
        assert_eq!(e.kind, ErrorKind::Corrupt);
        assert!(pkts.is_empty());
        assert!(
            e.detail
                .contains("gzip stream is corrupt at compressed byte"),
            "{e}"
        );
        // A wrong CRC-32 in the trailer: every packet read, then the error.
        let mut bad = gzip(&raw);
        let n = bad.len();
        bad[n - 6] ^= 0xFF;
        let (_, pkts, err) = read_via(bad);
        let e = err.expect("an error");
        assert_eq!(e.kind, ErrorKind::Corrupt, "{e}");
        assert_eq!(pkts.len(), 300);
        assert!(
            e.detail.contains(&format!("compressed byte {n}")),
            "names the trailer's end: {e}"
        );
        // zstd: a reserved bit set in the frame header descriptor (RFC 8878 §3.1.1.1.1).
        let mut bad = zstd(&raw);
        bad[4] |= 0x08;
        let (_, _, err) = read_via(bad);
        let e = err.expect("an error");
        assert!(
            matches!(e.kind, ErrorKind::Corrupt | ErrorKind::Truncated),
            "{e}"
        );
        assert!(e.detail.contains("zstd stream"), "{e}");
    }

    #[test]
    fn short_and_odd_inputs_pass_through() {
        for bytes in [vec![], vec![0x1f], vec![0x28, 0xb5, 0x2f]] {
            let (c, pkts, err) = read_via(bytes.clone());
            assert_eq!(c, Compression::None, "{bytes:?}");
            assert!(pkts.is_empty());
            assert_eq!(err.map(|e| e.kind), Some(ErrorKind::NotACapture));
        }
        // Just the two gzip magic bytes: a gzip stream that ends at once.
        let (c, _, err) = read_via(vec![0x1f, 0x8b]);
        assert_eq!(c, Compression::Gzip);
        assert!(err.is_some());
    }

    #[test]
    fn other_compressions_are_named_not_misread() {
        for (magic, name) in [
            (&[0x04u8, 0x22, 0x4d, 0x18, 0][..], "lz4"),
            (&[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0], "xz"),
            (b"BZh91AY", "bzip2"),
        ] {
            let e = decompressed(Cursor::new(magic.to_vec()))
                .err()
                .expect("refused");
            assert!(e.to_string().contains(name), "{e}");
        }
    }

    /// A reader that hands out one byte at a time (a slow pipe).
    struct Trickle(Cursor<Vec<u8>>);
    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(1);
            self.0.read(&mut buf[..n])
        }
    }

    #[test]
    fn magic_split_across_reads_is_still_recognised() {
        let raw = pcap_bytes(20);
        let (src, c) = decompressed(Trickle(Cursor::new(zstd(&raw)))).unwrap();
        assert_eq!(c, Compression::Zstd);
        let mut r = CaptureReader::new(src).unwrap();
        let mut n = 0;
        while r.next_packet().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 20);
    }
}

fn scratch_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tcpdoctor-staged-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn staged_file_appears_only_when_committed() {
    use std::io::Write;
    let d = scratch_dir("commit");
    let path = d.join("out.pcap");
    let staged = write::Staged::create(&path).unwrap();
    let tmp = staged.temporary_path().to_path_buf();
    assert_eq!(tmp.parent(), Some(d.as_path()));
    let mut w = std::io::BufWriter::new(staged.writer().unwrap());
    w.write_all(b"complete").unwrap();
    w.flush().unwrap();
    assert!(!path.exists(), "the final name appears before the commit");
    staged.commit().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"complete");
    assert!(!tmp.exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn staged_file_dropped_leaves_the_old_file_and_no_temporary() {
    use std::io::Write;
    let d = scratch_dir("drop");
    let path = d.join("report.html");
    std::fs::write(&path, b"old").unwrap();
    let staged = write::Staged::create(&path).unwrap();
    let tmp = staged.temporary_path().to_path_buf();
    staged.writer().unwrap().write_all(b"half").unwrap();
    assert!(tmp.exists());
    drop(staged); // an error before the commit
    assert!(!tmp.exists(), "the temporary file is left behind");
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn staged_errors_name_the_final_path() {
    let d = scratch_dir("missing");
    let path = d.join("no-such-dir").join("out.pcapng");
    let e = write::Staged::create(&path).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(
        e.to_string().starts_with(&path.display().to_string()),
        "{e}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}
