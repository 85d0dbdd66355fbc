//! Many captures, each analysed on its own, into the four Parquet tables
//! (`analyze FILE… --parquet DIR`). Rows leave for the files as each batch
//! of frames is analysed, so memory is one capture's open connections plus
//! a row group, however many captures there are. A capture that cannot be
//! read is reported (standard error and the `files` table) and skipped.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tcpdoctor_engine::{Engine, Options as EngineOptions};
use tcpdoctor_input::listing::{expand, host_of};
use tcpdoctor_input::Input;

use crate::{conclude, FileCounts, FileRow, ParquetSink, Source, Status, Table};

/// How the captures of a sweep are analysed.
pub struct Options {
    /// The `host` column (default: the name of each capture's directory).
    pub host: Option<String>,
    /// Connections kept for each capture's analysis (the JSON `connections` list).
    pub max_connections: usize,
    /// Connections tracked at once, at most.
    pub max_open_connections: u64,
}

/// What a sweep did: its captures, what became of them, and the rows
/// written.
pub struct Sweep {
    /// The directory the tables are in.
    pub dir: PathBuf,
    /// Captures swept, read only up to a break, and not read at all.
    pub files: u64,
    pub partial: u64,
    pub failed: u64,
    /// Findings reported over every capture.
    pub findings: u64,
    pub packets: u64,
    /// Bytes of the capture files.
    pub bytes: u64,
    pub seconds: f64,
    /// Rows written to each table ([`Table`] order).
    pub rows: [u64; 4],
}

/// Sweeps the captures `args` name (files, directories searched for
/// captures, globs) into the tables under `dir`; `open` opens one capture by
/// its name (`-`: standard input). An error is returned when there is no
/// capture to sweep or the tables cannot be written; a capture that cannot be
/// read is reported on standard error and counted.
pub fn sweep(
    args: &[String],
    dir: &Path,
    opts: &Options,
    open: impl Fn(&str) -> anyhow::Result<Input>,
) -> anyhow::Result<Sweep> {
    let files = expand(args)?;
    if files.is_empty() {
        anyhow::bail!(
            "no capture found in {} (directories are searched for pcap and pcapng files, \
             plain or compressed, told by their names or first bytes)",
            args.join(" ")
        );
    }
    let started = Instant::now();
    let mut sink =
        ParquetSink::create(dir).with_context(|| format!("--parquet {}", dir.display()))?;
    let mut s = Sweep {
        dir: dir.to_path_buf(),
        files: files.len() as u64,
        partial: 0,
        failed: 0,
        findings: 0,
        packets: 0,
        bytes: 0,
        seconds: 0.0,
        rows: [0; 4],
    };
    for file in &files {
        let name = file.to_string_lossy().into_owned();
        let host = opts.host.clone().unwrap_or_else(|| host_of(file));
        s.bytes += std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        let status = one(opts, &open, &name, &host, &mut sink)?;
        match &status.0 {
            Status::Ok => {}
            Status::Partial(why) => {
                s.partial += 1;
                eprintln!("tcpdoctor: {name}: {why}");
            }
            Status::Failed(why) => {
                s.failed += 1;
                eprintln!("tcpdoctor: {name}: {why}; skipped");
            }
        }
        s.findings += status.1;
        s.packets += status.2;
        sink.flush_full()?;
    }
    s.rows = sink.finish()?;
    s.seconds = started.elapsed().as_secs_f64();
    Ok(s)
}

impl Sweep {
    /// The JSON document: the directory, the captures, packets, bytes,
    /// seconds and each table's rows.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "parquet": self.dir.display().to_string(),
            "files": self.files,
            "partial": self.partial,
            "failed": self.failed,
            "packets": self.packets,
            "bytes": self.bytes,
            "seconds": (self.seconds * 1e3).round() / 1e3,
            "rows": Table::ALL.iter().map(|t| (t.name().to_string(), self.rows[*t as usize].into()))
                .collect::<serde_json::Map<String, serde_json::Value>>(),
        })
    }

    /// The text summary: captures to the directory, each table's rows and
    /// file, and the captures read in part or not at all.
    pub fn text(&self, out: &mut impl Write) -> io::Result<()> {
        let dir = &self.dir;
        writeln!(
            out,
            "tcpdoctor: {} → {} in {:.2} s ({} packets, {:.1} MB)",
            captures(self.files),
            dir.display(),
            self.seconds,
            self.packets,
            self.bytes as f64 / 1e6
        )?;
        for t in Table::ALL {
            writeln!(
                out,
                "  {:<12} {:>9} rows  {}",
                t.name(),
                self.rows[t as usize],
                dir.join(format!("{}.parquet", t.name())).display()
            )?;
        }
        let mut problems = Vec::new();
        if self.partial > 0 {
            problems.push(format!(
                "{} read only up to a break",
                captures(self.partial)
            ));
        }
        if self.failed > 0 {
            problems.push(format!("{} not readable", captures(self.failed)));
        }
        if !problems.is_empty() {
            writeln!(
                out,
                "  {} (see files.parquet: status, error)",
                problems.join(", ")
            )?;
        }
        Ok(())
    }
}

/// `1 capture`, `2 captures`.
fn captures(n: u64) -> String {
    format!("{n} capture{}", if n == 1 { "" } else { "s" })
}

/// Analyses one capture into the sink: its status, findings, packets. An
/// error is returned only when the tables cannot be written.
fn one(
    opts: &Options,
    open: &impl Fn(&str) -> anyhow::Result<Input>,
    name: &str,
    host: &str,
    sink: &mut ParquetSink,
) -> anyhow::Result<(Status, u64, u64)> {
    // Standard input is named as the text report names it.
    let label = if name == "-" { "<stdin>" } else { name };
    let mut source = Source::new(label, host);
    let failed = |sink: &mut ParquetSink, source: Source, why: String, format: String| {
        sink.tables().push_file(FileRow {
            source,
            status: Status::Failed(why.clone()),
            format,
            analysis: None,
        });
        Ok((Status::Failed(why), 0, 0))
    };
    let input = match open(name) {
        Ok(i) => i,
        Err(e) => {
            // The message already names the file.
            let why = format!("{e:#}");
            let why = why
                .strip_prefix(&format!("{name}: "))
                .unwrap_or(&why)
                .to_string();
            return failed(sink, source, why, String::new());
        }
    };
    let format = input.format().to_string();
    if let Some(link) = input.link_types().into_iter().next() {
        if !link.is_supported() {
            let why = format!("link type {} is not supported", link.to_raw());
            return failed(sink, source, why, format);
        }
    }
    let mut engine = Engine::new(EngineOptions {
        rows: true,
        max_connections: opts.max_connections,
        flow: tcpdoctor_engine::FlowConfig {
            max_open: usize::try_from(opts.max_open_connections).unwrap_or(usize::MAX),
            ..tcpdoctor_engine::FlowConfig::default()
        },
        ..EngineOptions::default()
    });
    // The source gets its start time with the first rows (they need packets).
    let mut shared: Option<Arc<Source>> = None;
    let mut write_error = None;
    let fed = input.feed_with(&mut engine, Default::default(), |engine| {
        let rows = engine.drain_rows();
        if rows.connections.is_empty() && rows.exchanges.is_empty() {
            return;
        }
        let src = shared.get_or_insert_with(|| {
            Arc::new(Source {
                start_unix: engine.start_unix(),
                ..source.clone()
            })
        });
        sink.tables().push_rows(src, rows);
        if write_error.is_none() {
            if let Err(e) = sink.flush_full() {
                write_error = Some(e);
            }
        }
    });
    if let Some(e) = write_error {
        return Err(e).context("writing the Parquet tables");
    }
    let status = conclude(&mut engine, fed.stopped);
    if let Status::Failed(why) = status {
        return failed(sink, source, why, format);
    }
    source.start_unix = engine.start_unix();
    let shared = shared.unwrap_or_else(|| Arc::new(source.clone()));
    let (analysis, rows) = engine.finish_with_rows();
    let tables = sink.tables();
    tables.push_rows(&shared, rows);
    tables.push_findings(&shared, &analysis);
    tables.push_file(FileRow {
        source,
        status: status.clone(),
        format,
        analysis: Some(FileCounts::of(&analysis)),
    });
    let findings = analysis.findings.len() as u64;
    Ok((status, findings, analysis.capture.packets))
}
