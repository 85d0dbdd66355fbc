//! Tables from the committed captures: row counts agree with the analysis,
//! the Parquet files read back with their schema, bad input gives a `files`
//! row and nothing else.

use std::fs;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

fn analysis_of(path: &Path) -> Analysis {
    let mut engine = Engine::new(Options::default());
    let mut r = CaptureReader::new(fs::File::open(path).expect("fixture")).expect("capture");
    while let Some(p) = r.next_packet().expect("readable") {
        engine.push(p.ts, p.link, p.data, p.orig_len);
    }
    engine.finish()
}

#[test]
fn rows_agree_with_the_analysis() {
    for name in [
        "nginx-nodelay-off.server.pcap",
        "upload-rcvbuf4k.client.pcap",
        "jdk-nodelay.server.pcapng",
        "packet-loss.router.pcap",
    ] {
        let path = fixture(name);
        let a = analysis_of(&path);
        let mut t = Tables::default();
        let status = analyze_read(
            fs::File::open(&path).expect("fixture"),
            Source::new(name, "h1"),
            Options::default(),
            &mut t,
        );
        assert_eq!(status, Status::Ok, "{name}");
        assert_eq!(
            t.len(Table::Connections) as u64,
            a.capture.connections,
            "{name}"
        );
        assert_eq!(
            t.len(Table::Exchanges) as u64,
            a.capture.exchanges,
            "{name}"
        );
        assert_eq!(
            t.len(Table::Findings),
            a.findings.len() + a.minor_findings.len(),
            "{name}"
        );
        let conns = t.take(Table::Connections);
        let ids = conns
            .column_by_name("connection")
            .expect("column")
            .as_primitive::<Int64Type>();
        // Every connection once.
        let mut seen: Vec<i64> = ids.values().to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), conns.num_rows(), "{name}");
        // The listed connections' time lost matches their rows.
        let lost = conns
            .column_by_name("time_lost_ms")
            .expect("column")
            .as_primitive::<arrow_array::types::Float64Type>();
        for c in &a.connections {
            let i = ids
                .values()
                .iter()
                .position(|v| *v == c.id as i64)
                .expect("listed connection has a row");
            assert_eq!(lost.value(i), c.time_lost_ms, "{name} conn {}", c.id);
        }
        // Budget parts add up to the exchange's duration.
        let ex = t.take(Table::Exchanges);
        let dur = ex
            .column_by_name("duration_ms")
            .expect("column")
            .as_primitive::<arrow_array::types::Float64Type>();
        for row in 0..ex.num_rows() {
            let sum: f64 = Part::ALL
                .iter()
                .map(|p| {
                    ex.column_by_name(&schema::budget_column(*p))
                        .expect("budget column")
                        .as_primitive::<arrow_array::types::Float64Type>()
                        .value(row)
                })
                .sum();
            assert!(
                (sum - dur.value(row)).abs() < 0.01 + dur.value(row) * 1e-3,
                "{name} exchange {row}: parts {sum} vs {}",
                dur.value(row)
            );
        }
    }
}

#[test]
fn nagle_finding_with_its_evidence() {
    let path = fixture("nginx-nodelay-off.server.pcap");
    let a = analysis_of(&path);
    let mut t = Tables::default();
    analyze_read(
        fs::File::open(&path).expect("fixture"),
        Source::new("x.pcap", "web-1"),
        Options::default(),
        &mut t,
    );
    let f = t.take(Table::Findings);
    let kind = f.column_by_name("kind").expect("kind").as_string::<i32>();
    assert_eq!(kind.value(0), "nagle_delayed_ack");
    assert_eq!(kind.value(0), a.findings[0].kind);
    let host = f.column_by_name("host").expect("host").as_string::<i32>();
    assert_eq!(host.value(0), "web-1");
    let ev = f
        .column_by_name("evidence")
        .expect("evidence")
        .as_list::<i32>();
    let first = ev.value(0);
    let first = first.as_struct();
    assert_eq!(first.len(), a.findings[0].evidence.len());
    let frames = first.column(1).as_list::<i32>().value(0);
    let frames: Vec<i64> = frames.as_primitive::<Int64Type>().values().to_vec();
    let want: Vec<i64> = a.findings[0].evidence[0]
        .frames
        .iter()
        .map(|v| *v as i64)
        .collect();
    assert_eq!(frames, want);
    let start = f
        .column_by_name("capture_start")
        .expect("start")
        .as_primitive::<arrow_array::types::TimestampMicrosecondType>();
    assert_eq!(start.value(0), (a.capture.start_unix * 1e6).round() as i64);
}

#[test]
fn bad_input_gives_a_files_row_only() {
    let mut t = Tables::default();
    let s = analyze_read(
        &b"this is not a capture at all"[..],
        Source::new("junk.pcap", "h"),
        Options::default(),
        &mut t,
    );
    assert!(matches!(s, Status::Failed(_)), "{s:?}");
    assert_eq!(t.len(Table::Files), 1);
    assert_eq!(t.len(Table::Connections) + t.len(Table::Exchanges), 0);
    // Cut a real capture in the middle of a record: analysed up to there.
    let bytes = fs::read(fixture("nginx-nodelay-off.server.pcap")).expect("fixture");
    let s = analyze_read(
        &bytes[..bytes.len() / 2 + 3],
        Source::new("cut.pcap", "h"),
        Options::default(),
        &mut t,
    );
    assert!(matches!(s, Status::Partial(_)), "{s:?}");
    assert!(t.len(Table::Exchanges) > 0);
    let files = t.take(Table::Files);
    let status = files
        .column_by_name("status")
        .expect("status")
        .as_string::<i32>();
    assert_eq!((status.value(0), status.value(1)), ("failed", "partial"));
    let error = files
        .column_by_name("error")
        .expect("error")
        .as_string::<i32>();
    assert!(error.value(1).contains("truncated"), "{}", error.value(1));
}

#[test]
fn parquet_files_read_back_in_row_groups() {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-table-{}", std::process::id()));
    let mut sink = ParquetSink::create(&dir).expect("sink");
    let path = fixture("nginx-nodelay-off.server.pcap");
    let bytes = fs::read(&path).expect("fixture");
    // Enough copies for several batches and two row groups of exchanges.
    let mut copies = 0;
    while sink.rows[Table::Exchanges as usize] <= ROW_GROUP_ROWS as u64 {
        analyze_read(
            &bytes[..],
            Source::new(&format!("copy{copies}.pcap"), "h"),
            Options::default(),
            sink.tables(),
        );
        sink.flush_full().expect("write");
        copies += 1;
        assert!(
            sink.tables().len(Table::Exchanges) < BATCH_ROWS,
            "rows are written as they come"
        );
    }
    let rows = sink.finish().expect("close");
    assert_eq!(rows[Table::Files as usize], copies);
    for t in Table::ALL {
        let file = fs::File::open(dir.join(format!("{}.parquet", t.name()))).expect("written");
        let b = ParquetRecordBatchReaderBuilder::try_new(file).expect("parquet");
        assert_eq!(b.schema().fields(), t.schema().fields(), "{}", t.name());
        let meta = b.metadata().clone();
        let n: i64 = meta.row_groups().iter().map(|g| g.num_rows()).sum();
        assert_eq!(n as u64, rows[t as usize], "{}", t.name());
        if t == Table::Exchanges {
            assert!(meta.row_groups().len() >= 2);
        }
        let kv = meta.file_metadata().key_value_metadata().expect("metadata");
        assert!(kv.iter().any(|k| k.key == "tcpdoctor.table_schema"));
        let read: usize = b
            .build()
            .expect("reader")
            .map(|b| b.expect("batch").num_rows())
            .sum();
        assert_eq!(read as u64, rows[t as usize]);
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn empty_tables_are_empty_batches_with_the_schema() {
    let mut t = Tables::default();
    assert!(t.is_empty());
    for table in Table::ALL {
        let b = t.take(table);
        assert_eq!(b.num_rows(), 0);
        assert_eq!(b.schema(), table.schema());
        let ipc = ipc_stream(&b).expect("ipc");
        assert!(!ipc.is_empty());
    }
}

#[test]
fn parquet_tables_appear_only_when_finished() {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-staged-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let names = |dir: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    // Dropped before finish (an error part way): nothing is left, not even temporaries.
    let mut sink = ParquetSink::create(&dir).expect("sink");
    assert_eq!(names(&dir).len(), 4, "the temporary files");
    assert!(
        names(&dir).iter().all(|n| n.starts_with('.')),
        "{:?}",
        names(&dir)
    );
    let bytes = fs::read(fixture("nginx-nodelay-off.server.pcap")).expect("fixture");
    analyze_read(
        &bytes[..],
        Source::new("a.pcap", "h"),
        Options::default(),
        sink.tables(),
    );
    drop(sink);
    assert!(names(&dir).is_empty(), "{:?}", names(&dir));
    // Finished: the four tables under their names, and only them.
    let sink = ParquetSink::create(&dir).expect("sink");
    sink.finish().expect("finish");
    assert_eq!(
        names(&dir),
        [
            "connections.parquet",
            "exchanges.parquet",
            "files.parquet",
            "findings.parquet"
        ]
    );
    fs::remove_dir_all(&dir).expect("clean");
}
