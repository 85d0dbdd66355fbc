//! `analyze` on the inputs people have: compressed captures (tcpdump -z,
//! rotation), several files at once, and selections of one capture.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example() -> PathBuf {
    root().join("examples/nginx-nagle.pcap")
}

fn run(args: &[&str], stdin: Option<Vec<u8>>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .env("LC_ALL", "C.UTF-8")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tcpdoctor");
    let writer = stdin.map(|bytes| {
        let mut pipe = child.stdin.take().unwrap();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        })
    });
    let out = child.wait_with_output().unwrap();
    if let Some(w) = writer {
        w.join().unwrap();
    }
    out
}

fn json_of(args: &[&str], stdin: Option<Vec<u8>>) -> String {
    let out = run(args, stdin);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcpdoctor-inputs-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn temp(name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir().join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn zstd(b: &[u8]) -> Vec<u8> {
    zstd::encode_all(b, 3).unwrap()
}

#[test]
fn gzip_and_zstd_give_byte_identical_json_from_files_and_stdin() {
    let raw = std::fs::read(example()).unwrap();
    let plain = json_of(
        &["analyze", "--format", "json", example().to_str().unwrap()],
        None,
    );
    for (name, bytes) in [("a.pcap.gz", gzip(&raw)), ("a.pcap.zst", zstd(&raw))] {
        let path = temp(name, &bytes);
        let from_file = json_of(
            &["analyze", "--format", "json", path.to_str().unwrap()],
            None,
        );
        assert!(
            from_file == plain,
            "{name}: differs from the plain capture's JSON"
        );
        let from_stdin = json_of(&["analyze", "--format", "json", "-"], Some(bytes));
        assert!(from_stdin == plain, "{name} on stdin: differs");
    }
}

#[test]
fn compression_is_told_by_content_not_name() {
    // A gzip capture named .pcap, and a plain one named .gz, both read.
    let raw = std::fs::read(example()).unwrap();
    let plain = json_of(
        &["analyze", "--format", "json", example().to_str().unwrap()],
        None,
    );
    let misnamed = temp("really-gzip.pcap", &gzip(&raw));
    let out = json_of(
        &["analyze", "--format", "json", misnamed.to_str().unwrap()],
        None,
    );
    assert!(out == plain);
    let text = run(&["analyze", misnamed.to_str().unwrap()], None);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("pcap (µs timestamps), gzip"), "{text}");
}

#[test]
fn corrupt_gzip_header_is_an_error_naming_the_offset() {
    let raw = std::fs::read(example()).unwrap();
    let mut bad = gzip(&raw);
    bad[3] = 0xE0; // reserved FLG bits (RFC 1952 §2.3.1): must be zero
    let path = temp("corrupt.pcap.gz", &bad);
    let out = run(&["analyze", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("gzip stream is corrupt at compressed byte"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn gzip_damaged_after_the_packets_is_analysed_with_a_warning() {
    let raw = std::fs::read(example()).unwrap();
    let mut bad = gzip(&raw);
    let n = bad.len();
    bad[n - 6] ^= 0xFF; // CRC-32 in the trailer
    let path = temp("crc.pcap.gz", &bad);
    let out = run(
        &["analyze", "--format", "json", path.to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = v["capture"]["warnings"].to_string();
    assert!(
        warnings.contains(&format!("corrupt at compressed byte {n}")),
        "{warnings}"
    );
    assert_eq!(v["capture"]["packets"], 922);
}

#[test]
fn gzip_cut_short_is_analysed_up_to_the_cut() {
    let raw = std::fs::read(example()).unwrap();
    let gz = gzip(&raw);
    let cut = gz.len() / 2;
    let out = run(
        &["analyze", "--format", "json", "-"],
        Some(gz[..cut].to_vec()),
    );
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = v["capture"]["warnings"].to_string();
    assert!(warnings.contains("truncated"), "{warnings}");
    assert!(
        warnings.contains(&format!("after {cut} compressed bytes")),
        "{warnings}"
    );
    let packets = v["capture"]["packets"].as_u64().unwrap();
    assert!(packets > 0 && packets < 922, "{packets}");
}
