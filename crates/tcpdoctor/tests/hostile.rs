//! `analyze --max-open-connections` on a SYN flood written on the fly.

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tcpdoctor_capture::write::PcapWriter;
use tcpdoctor_wire::build::FrameSpec;
use tcpdoctor_wire::{LinkType, TcpFlags, Timestamp};

/// `n` SYNs from distinct sources to one server, one a millisecond, never answered.
fn flood(name: &str, n: u32) -> PathBuf {
    let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet, 65535).unwrap();
    for i in 0..n {
        let f = FrameSpec {
            src: IpAddr::V4(Ipv4Addr::from(0xC612_0000 | i)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 80)),
            src_port: 40000 + (i % 1000) as u16,
            dst_port: 80,
            seq: i.wrapping_mul(2_654_435_761),
            ack: 0,
            flags: TcpFlags::SYN,
            window: 512,
            mss: None,
            window_scale: None,
            payload_len: 0,
        }
        .ethernet();
        let ts = Timestamp::from_nanos(1_700_000_000_000_000_000 + i64::from(i) * 1_000_000);
        w.write_packet(ts, &f, f.len() as u32).unwrap();
    }
    let path = std::env::temp_dir().join(format!("tcpdoctor-{}-{name}.pcap", std::process::id()));
    std::fs::write(&path, w.into_inner()).unwrap();
    path
}

fn analyze(path: &Path, extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["analyze", "--format", "json", path.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn max_open_connections_bites_and_the_analysis_says_so() {
    let path = flood("cap", 2000);
    let capped = analyze(&path, &["--max-open-connections", "500"]);
    let free = analyze(&path, &[]);
    std::fs::remove_file(&path).unwrap();
    let c = &capped["capture"];
    assert_eq!(c["connections"], 2000);
    assert_eq!(c["peak_open_connections"], 500);
    assert_eq!(c["connections_closed_early"], 1500);
    let warnings = c["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1);
    let w = warnings[0].as_str().unwrap();
    assert!(w.contains("--max-open-connections 500"), "{w}");
    // Without the cap (2 s of capture: nothing idles out), nothing is closed early.
    let f = &free["capture"];
    assert_eq!(f["connections"], 2000);
    assert_eq!(f["peak_open_connections"], 2000);
    assert_eq!(f["connections_closed_early"], 0);
    assert!(f["warnings"].as_array().unwrap().is_empty());
}

#[test]
fn max_open_connections_must_be_positive() {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["analyze", "-", "--max-open-connections", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
