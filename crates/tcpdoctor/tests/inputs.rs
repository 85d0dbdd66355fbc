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
    // The document without `input`, which names the files it was asked
    // to read (and their format): the rest must not depend on how it was read.
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_object_mut().unwrap().remove("input");
    v.to_string()
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

/// The example split at `at` packets into two pcap files (the second gzip'd,
/// as `tcpdump -C N -z gzip` leaves all but the newest).
fn halves(at: usize) -> (PathBuf, PathBuf) {
    halves_of(&example(), at, "rot")
}

/// `capture` split so, its halves named `NAME-0.pcap.gz` and `NAME-1.pcap`.
fn halves_of(capture: &Path, at: usize, name: &str) -> (PathBuf, PathBuf) {
    use tcpdoctor_capture::write::PcapWriter;
    use tcpdoctor_capture::CaptureReader;
    let raw = std::fs::read(capture).unwrap();
    let mut r = CaptureReader::new(&raw[..]).unwrap();
    let link = r.link_type().unwrap();
    let mut a = PcapWriter::new(Vec::new(), link, 65535).unwrap();
    let mut b = PcapWriter::new(Vec::new(), link, 65535).unwrap();
    let mut n = 0;
    while let Some(p) = r.next_packet().unwrap() {
        let w = if n < at { &mut a } else { &mut b };
        w.write_packet(p.ts, p.data, p.orig_len).unwrap();
        n += 1;
    }
    (
        temp(&format!("{name}-0.pcap.gz"), &gzip(&a.into_inner())),
        temp(&format!("{name}-1.pcap"), &b.into_inner()),
    )
}

/// `analyze --format json` of one capture, parsed.
fn analyze_json(capture: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&json_of(
        &["analyze", "--format", "json", capture.to_str().unwrap()],
        None,
    ))
    .unwrap()
}

/// tcpdump writes a few timestamps out of order (packets taken on two
/// CPUs): in `fixtures/policer.client.pcap` frame 2046 is 91 ns older than
/// frame 2045. Cut there, as `tcpdump -C` may, the second file starts a
/// moment before the first ends; its packets are the same connections going
/// on, not a second view of them, and the halves read as the whole.
#[test]
fn rotated_halves_cut_at_a_step_back_in_time_give_the_whole() {
    let capture = root().join("fixtures/policer.client.pcap");
    let whole: serde_json::Value = analyze_json(&capture);
    let (a, b) = halves_of(&capture, 2045, "step-back");
    let merged: serde_json::Value = serde_json::from_str(&json_of(
        &[
            "analyze",
            "--format",
            "json",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
        ],
        None,
    ))
    .unwrap();
    let files = &merged["inputs"]["files"];
    assert_eq!(files[1]["second_views"], 0, "{files}");
    assert_eq!(files[1]["packets"], 897);
    let strip = |v: serde_json::Value| {
        let mut v = without(without(v, "inputs"), "input");
        v["capture"].as_object_mut().unwrap().remove("format");
        v
    };
    assert_eq!(strip(merged), strip(whole));
}

fn without(mut v: serde_json::Value, key: &str) -> serde_json::Value {
    v.as_object_mut().unwrap().remove(key);
    v
}

#[test]
fn rotated_halves_give_the_findings_of_the_whole() {
    let whole: serde_json::Value = serde_json::from_str(&json_of(
        &["analyze", "--format", "json", example().to_str().unwrap()],
        None,
    ))
    .unwrap();
    let (a, b) = halves(461);
    // In either order on the command line: the merge is by time.
    for args in [[&a, &b], [&b, &a]] {
        let merged: serde_json::Value = serde_json::from_str(&json_of(
            &[
                "analyze",
                "--format",
                "json",
                args[0].to_str().unwrap(),
                args[1].to_str().unwrap(),
            ],
            None,
        ))
        .unwrap();
        let files = &merged["inputs"]["files"];
        assert_eq!(
            files[0]["packets"].as_u64().unwrap() + files[1]["packets"].as_u64().unwrap(),
            922
        );
        assert_eq!(merged["inputs"]["connections_in_several_files"], 0);
        assert_eq!(without(merged, "inputs"), whole);
    }
}

#[test]
fn a_directory_reads_like_its_files() {
    let (a, b) = halves(300);
    let files = json_of(
        &[
            "analyze",
            "--format",
            "json",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
        ],
        None,
    );
    let d = dir().join("rotated");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(&a, d.join("a.pcap.gz")).unwrap();
    std::fs::copy(&b, d.join("b.pcap")).unwrap();
    let from_dir: serde_json::Value = analyze_json(&d);
    let files: serde_json::Value = serde_json::from_str(&files).unwrap();
    assert_eq!(without(from_dir, "inputs"), without(files, "inputs"));
}

#[test]
fn a_directory_with_notes_skips_them_and_says_so() {
    let d = dir().join("with-notes");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(example(), d.join("capture.pcap")).unwrap();
    std::fs::write(d.join("NOTES.txt"), "taken on the client, 10:02\n").unwrap();
    let alone: serde_json::Value = serde_json::from_str(&json_of(
        &["analyze", "--format", "json", example().to_str().unwrap()],
        None,
    ))
    .unwrap();
    let out = run(&["analyze", "--format", "json", d.to_str().unwrap()], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("skipped 1 file that is not a capture") && err.contains("NOTES.txt"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["skipped_files"].as_array().unwrap().len(), 1);
    assert_eq!(v["findings"], alone["findings"]);
    let text = run(&["analyze", d.to_str().unwrap()], None);
    assert!(text.status.success());
    assert!(String::from_utf8_lossy(&text.stdout).contains("SKIPPED  1 file not a capture"));
    // A damaged capture is still an error.
    std::fs::write(d.join("broken.pcap"), b"not a capture at all").unwrap();
    let out = run(&["analyze", d.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn stdin_does_not_merge_with_files() {
    let out = run(&["analyze", "-", example().to_str().unwrap()], Some(vec![]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be merged"));
}

fn analysis(args: &[&str]) -> serde_json::Value {
    let path = example();
    let mut all = vec!["analyze", "--format", "json"];
    all.extend_from_slice(args);
    all.push(path.to_str().unwrap());
    serde_json::from_str(&json_of(&all, None)).unwrap()
}

#[test]
fn connection_selects_one_connection_and_keeps_its_id() {
    let whole = analysis(&[]);
    let conn = whole["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == 4)
        .unwrap()
        .clone();
    let one = analysis(&["--connection", "4"]);
    assert_eq!(one["capture"]["connections"], 1);
    assert_eq!(one["capture"]["packets"], conn["packets"]);
    let c = &one["connections"][0];
    assert_eq!(c["id"], 4);
    assert_eq!(c["client"], conn["client"]);
    assert_eq!(c["exchanges"], conn["exchanges"]);
    assert_eq!(one["findings"][0]["kind"], "nagle_delayed_ack");
    assert_eq!(one["findings"][0]["evidence"][0]["connection"], 4);
    assert_eq!(one["selection"]["connection"], 4);
    // The filter on the same endpoints selects the same packets.
    let client = conn["client"].as_str().unwrap();
    let port = client.rsplit(':').next().unwrap();
    let filtered = analysis(&["--filter", &format!("tcp port {port}")]);
    assert_eq!(filtered["capture"]["packets"], conn["packets"]);
    assert_eq!(
        filtered["findings"],
        one["findings"]
            .clone()
            .as_array()
            .map(|f| {
                // Evidence names the connection by its number in each run.
                let mut f = f.clone();
                for x in &mut f {
                    for e in x["evidence"].as_array_mut().unwrap() {
                        e["connection"] = 1.into();
                    }
                }
                serde_json::Value::Array(f)
            })
            .unwrap()
    );
    let out = run(
        &["analyze", "--connection", "99", example().to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn from_and_to_cut_a_window_relative_or_absolute() {
    let whole = analysis(&[]);
    let start = whole["capture"]["start_unix"].as_f64().unwrap();
    let rel = analysis(&["--from", "1", "--to", "1.5"]);
    let abs = analysis(&[
        "--from",
        &format!("@{:.6}", start + 1.0),
        "--to",
        &format!("@{:.6}", start + 1.5),
    ]);
    let n = rel["capture"]["packets"].as_u64().unwrap();
    assert!(n > 0 && n < 922, "{n}");
    assert_eq!(abs["capture"]["packets"], n);
    assert!(rel["capture"]["duration_ms"].as_f64().unwrap() <= 500.0);
    let empty = analysis(&["--from", "100"]);
    assert_eq!(empty["capture"]["packets"], 0);
    assert!(empty["capture"]["warnings"]
        .to_string()
        .contains("nothing falls in the window (from 100): the 922 packets read span"));
    // The text says so too, with no empty link-type list in the capture line.
    let out = run(
        &["analyze", "--from", "99", example().to_str().unwrap()],
        None,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("nothing falls in the window (from 99)"),
        "{text}"
    );
    assert!(!text.contains(",  ·"), "{text}");
    let out = run(
        &[
            "analyze",
            "--from",
            "yesterday",
            example().to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn each_end_of_a_connection_counts_it_for_its_own_finding() {
    // Both ends of one connection are Nagle culprits: each finding counts
    // the connection once, and the words agree with the count.
    let capture = root().join("fixtures/corpus/sv-tls-tor-bl.pcap");
    let v: serde_json::Value = analyze_json(&capture);
    let all: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .chain(v["minor_findings"].as_array().unwrap())
        .collect();
    let nagle: Vec<_> = all
        .iter()
        .filter(|f| f["kind"] == "nagle_delayed_ack")
        .collect();
    assert_eq!(nagle.len(), 2);
    for f in all {
        assert!(f["connections"].as_u64().unwrap() >= 1, "{f}");
    }
    let out = run(&["analyze", capture.to_str().unwrap()], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("29 occurrences on 1 connection,"), "{text}");
    assert!(!text.contains("connection(s), typically"), "{text}");
}
