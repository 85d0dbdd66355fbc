//! `analyze FILE… --parquet DIR` on the committed captures: every capture its
//! own analysis, the row counts of `--format json`, the host from the folder,
//! and a corrupt capture reported, skipped and counted (exit status 2).

#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .output()
        .expect("run tcpdoctor")
}

fn read(dir: &Path, table: &str) -> Vec<RecordBatch> {
    let f = fs::File::open(dir.join(format!("{table}.parquet"))).unwrap();
    ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

fn strings(batches: &[RecordBatch], column: &str) -> Vec<String> {
    batches
        .iter()
        .flat_map(|b| {
            let c = b.column_by_name(column).unwrap().as_string::<i32>();
            (0..c.len())
                .map(|i| c.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_sweep_of_two_hosts_and_a_corrupt_capture() {
    let tmp = std::env::temp_dir().join(format!("tcpdoctor-parquet-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let caps = tmp.join("caps");
    let captures = [
        ("web-1", "nginx-nodelay-off.server.pcap"),
        ("web-1", "zero-window.server.pcap"),
        ("db-2", "upload-rcvbuf4k.server.pcap"),
    ];
    for (host, name) in captures {
        fs::create_dir_all(caps.join(host)).unwrap();
        fs::copy(fixture(name), caps.join(host).join(name)).unwrap();
    }
    fs::write(
        caps.join("db-2/broken.pcap"),
        b"\xd4\xc3\xb2\xa1 not really",
    )
    .unwrap();
    fs::write(caps.join("db-2/notes.txt"), b"not a capture, not picked up").unwrap();
    let out_dir = tmp.join("tables");
    let out = run(&[
        "analyze",
        caps.to_str().unwrap(),
        "--parquet",
        out_dir.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("broken.pcap") && stderr.contains("skipped"),
        "{stderr}"
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["files"], 4);
    assert_eq!(summary["failed"], 1);

    let (mut conns, mut exchanges, mut findings) = (0, 0, 0);
    for (_, name) in captures {
        let o = run(&[
            "analyze",
            "--format",
            "json",
            fixture(name).to_str().unwrap(),
        ]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        conns += v["capture"]["connections"].as_u64().unwrap();
        exchanges += v["capture"]["exchanges"].as_u64().unwrap();
        findings += (v["findings"].as_array().unwrap().len()
            + v["minor_findings"].as_array().unwrap().len()) as u64;
    }
    let rows = |t: &str| -> u64 { read(&out_dir, t).iter().map(|b| b.num_rows() as u64).sum() };
    assert_eq!(rows("connections"), conns);
    assert_eq!(rows("exchanges"), exchanges);
    assert_eq!(rows("findings"), findings);
    assert_eq!(summary["rows"]["exchanges"].as_u64(), Some(exchanges));

    let files = read(&out_dir, "files");
    let mut status: Vec<(String, String, String)> = strings(&files, "file")
        .into_iter()
        .zip(strings(&files, "host"))
        .zip(strings(&files, "status"))
        .map(|((f, h), s)| {
            let name = Path::new(&f)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (name, h, s)
        })
        .collect();
    status.sort();
    assert_eq!(
        status,
        [
            ("broken.pcap", "db-2", "failed"),
            ("nginx-nodelay-off.server.pcap", "web-1", "ok"),
            ("upload-rcvbuf4k.server.pcap", "db-2", "ok"),
            ("zero-window.server.pcap", "web-1", "ok"),
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    );
    let f = read(&out_dir, "findings");
    let kinds: Vec<(String, String)> = strings(&f, "host")
        .into_iter()
        .zip(strings(&f, "kind"))
        .collect();
    assert!(
        kinds.contains(&("web-1".into(), "nagle_delayed_ack".into())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("db-2".into(), "receive_window_limited".into())),
        "{kinds:?}"
    );

    // --host overrides the folder; several files without --parquet is a usage error.
    let one = fixture("nginx-nodelay-off.server.pcap");
    let out = run(&[
        "analyze",
        one.to_str().unwrap(),
        "--parquet",
        out_dir.to_str().unwrap(),
        "--host",
        "edge-7",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(strings(&read(&out_dir, "connections"), "host")[0], "edge-7");
    // Without --parquet, several files are one capture merged by time.
    let out = run(&["analyze", one.to_str().unwrap(), one.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let _ = fs::remove_dir_all(&tmp);
}

/// A directory swept into Parquet holds what `analyze DIR` reads: a gzip'd
/// capture, a rotated file without an ending (told by its first bytes); not
/// a hidden file nor notes.
#[test]
fn a_sweep_reads_what_analyze_dir_reads() {
    use std::io::Write;
    let tmp = std::env::temp_dir().join(format!("tcpdoctor-parquet-gz-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let caps = tmp.join("caps");
    fs::create_dir_all(&caps).unwrap();
    let raw = fs::read(fixture("nginx-nodelay-off.server.pcap")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    fs::write(caps.join("a.pcap.gz"), gz.finish().unwrap()).unwrap();
    fs::copy(
        fixture("upload-rcvbuf4k.server.pcap"),
        caps.join("rotated1"),
    )
    .unwrap();
    fs::copy(
        fixture("zero-window.server.pcap"),
        caps.join(".hidden.pcap"),
    )
    .unwrap();
    fs::write(caps.join("notes.txt"), b"not a capture").unwrap();
    let out_dir = tmp.join("tables");
    let out = run(&[
        "analyze",
        caps.to_str().unwrap(),
        "--parquet",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut files: Vec<String> = strings(&read(&out_dir, "files"), "file")
        .iter()
        .map(|f| {
            Path::new(f)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    files.sort();
    assert_eq!(files, ["a.pcap.gz", "rotated1"]);
    // The same connections as `analyze DIR` finds in them.
    let o = run(&["analyze", "--format", "json", caps.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows: u64 = read(&out_dir, "connections")
        .iter()
        .map(|b| b.num_rows() as u64)
        .sum();
    assert_eq!(rows, v["capture"]["connections"].as_u64().unwrap());
    let _ = fs::remove_dir_all(&tmp);
}

fn floats(batches: &[RecordBatch], column: &str) -> Vec<Option<f64>> {
    batches
        .iter()
        .flat_map(|b| {
            let c = b
                .column_by_name(column)
                .unwrap_or_else(|| panic!("no column {column}"))
                .as_primitive::<arrow_array::types::Float64Type>();
            (0..c.len())
                .map(|i| c.is_valid(i).then(|| c.value(i)))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn columns_need_no_quoting_and_the_phases_add_up() {
    let tmp = std::env::temp_dir().join(format!("tcpdoctor-parquet-phases-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let out = run(&[
        "analyze",
        fixture("nginx-nodelay-off.server.pcap").to_str().unwrap(),
        fixture("slow-start-warm.client.pcap").to_str().unwrap(),
        "--parquet",
        tmp.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No column is an SQL reserved word.
    for table in ["connections", "exchanges", "findings", "files"] {
        let b = read(&tmp, table);
        for field in b[0].schema().fields() {
            let name = field.name().to_ascii_uppercase();
            assert!(
                !["END", "ORDER", "GROUP", "SELECT", "FROM", "WHERE", "TABLE", "USER"]
                    .contains(&name.as_str()),
                "{table}.{}",
                field.name()
            );
        }
    }
    let c = read(&tmp, "connections");
    assert!(strings(&c, "end_state")
        .iter()
        .all(|e| ["fin", "rst", "open"].contains(&e.as_str())));
    // setup + request + wait + response = duration, row by row (times
    // rounded to µs); request_ack_ms lies within wait_ms.
    let e = read(&tmp, "exchanges");
    let col = |n: &str| floats(&e, n);
    let (setup, request, wait, response, duration, ack) = (
        col("setup_ms"),
        col("request_ms"),
        col("wait_ms"),
        col("response_ms"),
        col("duration_ms"),
        col("request_ack_ms"),
    );
    assert!(!duration.is_empty());
    let mut fresh = 0;
    for i in 0..duration.len() {
        let d = duration[i].unwrap();
        let sum = setup[i].unwrap() + request[i].unwrap() + wait[i].unwrap() + response[i].unwrap();
        assert!((sum - d).abs() < 0.01, "row {i}: {sum} vs {d}");
        if let Some(a) = ack[i] {
            assert!(
                a <= wait[i].unwrap() + 0.001,
                "row {i}: ack {a} after the response"
            );
        }
        fresh += usize::from(setup[i].unwrap() > 0.0);
    }
    assert!(fresh > 0, "no first exchange counts the connection's setup");
    let _ = fs::remove_dir_all(&tmp);
}
