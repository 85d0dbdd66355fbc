//! `analyze FILE… --parquet DIR`: many captures, each analysed on its own,
//! into four Parquet tables. Rows leave for the files as each batch of
//! frames is analysed, so memory is one capture's open connections plus a
//! row group, however many captures there are. A capture that cannot be
//! read is reported (standard error and the `files` table) and skipped.

use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tcpdoctor_engine::{Engine, Options};
use tcpdoctor_table::{conclude, FileCounts, FileRow, ParquetSink, Source, Status, Table};

use crate::{open_input, AnalyzeArgs, Format, EXIT_FINDING, EXIT_INPUT, EXIT_OK};
use tcpdoctor_input::listing::{expand, host_of};

pub fn run(args: &AnalyzeArgs, dir: &Path) -> anyhow::Result<u8> {
    let files = expand(&args.files)?;
    if files.is_empty() {
        anyhow::bail!(
            "no capture found in {} (directories are searched for pcap and pcapng files, \
             plain or compressed, told by their names or first bytes)",
            args.files.join(" ")
        );
    }
    let started = Instant::now();
    let mut sink =
        ParquetSink::create(dir).with_context(|| format!("--parquet {}", dir.display()))?;
    let mut failed = 0u64;
    let mut partial = 0u64;
    let mut findings = 0u64;
    let mut bytes_read = 0u64;
    let mut packets = 0u64;
    for file in &files {
        let name = file.to_string_lossy().into_owned();
        let host = args.host.clone().unwrap_or_else(|| host_of(file));
        bytes_read += std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        let status = one(args, &name, &host, &mut sink)?;
        match &status.0 {
            Status::Ok => {}
            Status::Partial(why) => {
                partial += 1;
                eprintln!("tcpdoctor: {name}: {why}");
            }
            Status::Failed(why) => {
                failed += 1;
                eprintln!("tcpdoctor: {name}: {why}; skipped");
            }
        }
        findings += status.1;
        packets += status.2;
        sink.flush_full()?;
    }
    let rows = sink.finish()?;
    let secs = started.elapsed().as_secs_f64();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let n = files.len() as u64;
    match args.format {
        Format::Json => {
            let doc = serde_json::json!({
                "parquet": dir.display().to_string(),
                "files": n,
                "partial": partial,
                "failed": failed,
                "packets": packets,
                "bytes": bytes_read,
                "seconds": (secs * 1e3).round() / 1e3,
                "rows": Table::ALL.iter().map(|t| (t.name().to_string(), rows[*t as usize].into()))
                    .collect::<serde_json::Map<String, serde_json::Value>>(),
            });
            writeln!(out, "{doc}")?;
        }
        Format::Text => {
            writeln!(
                out,
                "tcpdoctor: {} → {} in {secs:.2} s ({} packets, {:.1} MB)",
                captures(n),
                dir.display(),
                packets,
                bytes_read as f64 / 1e6
            )?;
            for t in Table::ALL {
                writeln!(
                    out,
                    "  {:<12} {:>9} rows  {}",
                    t.name(),
                    rows[t as usize],
                    dir.join(format!("{}.parquet", t.name())).display()
                )?;
            }
            let mut problems = Vec::new();
            if partial > 0 {
                problems.push(format!("{} read only up to a break", captures(partial)));
            }
            if failed > 0 {
                problems.push(format!("{} not readable", captures(failed)));
            }
            if !problems.is_empty() {
                writeln!(
                    out,
                    "  {} (see files.parquet: status, error)",
                    problems.join(", ")
                )?;
            }
        }
    }
    out.flush()?;
    if failed == n {
        eprintln!("tcpdoctor: no capture could be read; the tables are empty");
        return Ok(EXIT_INPUT);
    }
    if failed > 0 {
        eprintln!(
            "tcpdoctor: {failed} of {n} captures could not be read; the tables hold the other {}",
            n - failed
        );
        return Ok(EXIT_INPUT);
    }
    if args.fail_on_finding && findings > 0 {
        return Ok(EXIT_FINDING);
    }
    Ok(EXIT_OK)
}

/// `1 capture`, `2 captures`.
fn captures(n: u64) -> String {
    format!("{n} capture{}", if n == 1 { "" } else { "s" })
}

/// Analyses one capture into the sink: its status, findings, packets. An
/// error is returned only when the tables cannot be written.
fn one(
    args: &AnalyzeArgs,
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
    let input = match open_input(name, name) {
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
    let mut engine = Engine::new(Options {
        rows: true,
        max_connections: args.max_connections,
        flow: tcpdoctor_engine::FlowConfig {
            max_open: usize::try_from(args.max_open_connections).unwrap_or(usize::MAX),
            ..tcpdoctor_engine::FlowConfig::default()
        },
        ..Options::default()
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
