//! `tcpdoctor._native`: the analysis engine for Python. One function,
//! [`analyze`], reads captures (paths, directories of them, or one capture's
//! bytes; plain, gzip or zstd) with the GIL released and returns each table
//! as an Arrow IPC stream; the `tcpdoctor` package around it turns those
//! into `pyarrow.Table`s. Opening, merging several captures by time and
//! selecting packets are `tcpdoctor analyze`'s own (`tcpdoctor-input`).
#![forbid(unsafe_code)]

use std::io::{Cursor, ErrorKind};
use std::path::Path;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use tcpdoctor_engine::{Engine, Options};
use tcpdoctor_input::{listing, merge, parse_time, Input, Selection};
use tcpdoctor_table::{conclude, finish_into, ipc_stream, FileRow, Source, Status, Table, Tables};

/// Each table as an Arrow IPC stream.
type Streams = Vec<(Table, Vec<u8>)>;

/// What to read: captures by path (a directory stands for the captures in
/// it; several are merged by time), or one capture already in memory.
enum Capture {
    Paths(Vec<String>),
    Bytes(Vec<u8>),
}

/// The input opened, with the names its rows carry.
struct Opened {
    input: Input,
    file: String,
    host: String,
    /// Files of the directories given that are not captures.
    skipped: Vec<String>,
}

/// Why nothing was analysed.
enum Unread {
    /// A file could not be opened (missing, not permitted): `OSError`.
    Os(String),
    /// The input is not a capture that can be read: status "failed".
    Capture(String),
}

/// analyze(capture, file=None, host=None, max_open_connections=None, filter=None,
///         start=None, end=None) -> (status, error, {table: ipc bytes})
///
/// `capture` is the capture's bytes or a list of paths (files or directories;
/// several are merged by time, as `tcpdoctor analyze A B DIR` does). `filter`
/// is a capture filter (`port 443 and host 10.0.0.2`), `start` and `end` the
/// times of `--from` and `--to`. A file that cannot be opened raises OSError;
/// input that is no capture gives status "failed"; a capture that breaks part
/// way is analysed up to the break (status "partial").
#[pyfunction]
#[pyo3(signature = (capture, file = None, host = None, max_open_connections = None,
                    filter = None, start = None, end = None))]
#[allow(clippy::too_many_arguments)]
fn analyze<'py>(
    py: Python<'py>,
    capture: &Bound<'py, PyAny>,
    file: Option<String>,
    host: Option<String>,
    max_open_connections: Option<usize>,
    filter: Option<String>,
    start: Option<String>,
    end: Option<String>,
) -> PyResult<(String, Option<String>, Bound<'py, PyDict>)> {
    let capture = if let Ok(b) = capture.cast::<PyBytes>() {
        Capture::Bytes(b.as_bytes().to_vec())
    } else if let Ok(p) = capture.extract::<Vec<std::path::PathBuf>>() {
        Capture::Paths(p.iter().map(|p| p.to_string_lossy().into_owned()).collect())
    } else if let Ok(b) = capture.extract::<Vec<u8>>() {
        Capture::Bytes(b)
    } else {
        let p = capture.extract::<std::path::PathBuf>()?;
        Capture::Paths(vec![p.to_string_lossy().into_owned()])
    };
    if matches!(&capture, Capture::Paths(p) if p.is_empty()) {
        return Err(PyValueError::new_err("no capture given"));
    }
    let mut options = Options::default();
    if let Some(n) = max_open_connections {
        if n == 0 {
            return Err(PyValueError::new_err(
                "max_open_connections must be at least 1",
            ));
        }
        options.flow.max_open = n;
    }
    // The time window as given, for a selection that kept nothing.
    let window = (start.is_some() || end.is_some()).then(|| {
        [("from", &start), ("to", &end)]
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
            .collect::<Vec<_>>()
            .join(" ")
    });
    let selection = selection(filter, start, end).map_err(PyValueError::new_err)?;
    // The work, without the GIL: other Python threads (a thread pool, Spark's
    // Arrow writer) run meanwhile.
    let result = py.detach(move || -> Result<(Status, Streams), String> {
        let mut tables = Tables::default();
        let status = match open(capture, file, host) {
            Ok(opened) => analyze_into(opened, selection, window, options, &mut tables),
            Err(Unread::Os(why)) => return Err(why),
            Err(Unread::Capture(why)) => Status::Failed(why),
        };
        let mut out = Vec::new();
        for t in Table::ALL {
            let batch = tables.take(t);
            out.push((t, ipc_stream(&batch).map_err(|e| e.to_string())?));
        }
        Ok((status, out))
    });
    let (status, streams) = result.map_err(PyOSError::new_err)?;
    let dict = PyDict::new(py);
    for (t, bytes) in streams {
        dict.set_item(t.name(), PyBytes::new(py, &bytes))?;
    }
    Ok((
        status.name().to_string(),
        status.error().map(str::to_string),
        dict,
    ))
}

/// The packets to analyse, as `--filter`, `--from` and `--to` select them.
fn selection(
    filter: Option<String>,
    start: Option<String>,
    end: Option<String>,
) -> Result<Selection, String> {
    let filter = match filter {
        Some(text) => {
            let f = tcpdoctor_filter::Filter::parse(&text)
                .map_err(|e| format!("filter {text:?}: {e}"))?;
            Some((text, f))
        }
        None => None,
    };
    let time = |t: Option<String>, what: &str| {
        t.map(|t| parse_time(&t).map_err(|e| format!("{what}: {e:#}")))
            .transpose()
    };
    Ok(Selection {
        filter,
        from: time(start, "start")?,
        to: time(end, "end")?,
        connection: None,
    })
}

/// Opens the input as `tcpdoctor analyze` does: directories expanded into
/// their captures, several merged by time, gzip and zstd read as they are.
fn open(capture: Capture, file: Option<String>, host: Option<String>) -> Result<Opened, Unread> {
    match capture {
        Capture::Bytes(b) => {
            let file = file.unwrap_or_else(|| "<bytes>".into());
            let input =
                Input::read(Box::new(Cursor::new(b)), &file).map_err(|e| unread(&e, &[&file]))?;
            Ok(Opened {
                input,
                file,
                host: host.unwrap_or_default(),
                skipped: Vec::new(),
            })
        }
        Capture::Paths(paths) => {
            let expanded = merge::expand(&paths).map_err(|e| unread(&e, &[]))?;
            let found = expanded.paths;
            let file = file.unwrap_or_else(|| match found.len() {
                1 => found[0].clone(),
                n => format!("{} and {} more", found[0], n - 1),
            });
            let input = if found.len() > 1 {
                Input::open_many(&found)
            } else {
                Input::open(&found[0], &file)
            }
            .map_err(|e| unread(&e, &[&file, &found[0]]))?;
            Ok(Opened {
                input,
                host: host.unwrap_or_else(|| listing::host_of(Path::new(&found[0]))),
                file,
                skipped: expanded.skipped,
            })
        }
    }
}

/// An error opening the input: a file that cannot be opened, or input that
/// is no capture (its message without the file's name, which the row carries).
fn unread(e: &anyhow::Error, names: &[&str]) -> Unread {
    let why = format!("{e:#}");
    let not_there = e
        .root_cause()
        .downcast_ref::<std::io::Error>()
        .is_some_and(|io| {
            matches!(
                io.kind(),
                ErrorKind::NotFound | ErrorKind::PermissionDenied | ErrorKind::IsADirectory
            )
        });
    if not_there {
        return Unread::Os(why);
    }
    let why = names
        .iter()
        .find_map(|n| why.strip_prefix(&format!("{n}: ")))
        .map_or(why.clone(), str::to_string);
    Unread::Capture(why)
}

/// Feeds the selected packets to the engine and the rows to the tables.
fn analyze_into(
    opened: Opened,
    selection: Selection,
    window: Option<String>,
    options: Options,
    tables: &mut Tables,
) -> Status {
    let Opened {
        input,
        file,
        host,
        skipped,
    } = opened;
    let source = Source::new(&file, &host);
    let format = input.format();
    if let Some(link) = input.link_types().into_iter().find(|l| !l.is_supported()) {
        let why = format!("link type {} is not supported", link.to_raw());
        tables.push_file(FileRow {
            source,
            status: Status::Failed(why.clone()),
            format,
            analysis: None,
        });
        return Status::Failed(why);
    }
    let mut engine = Engine::new(Options {
        rows: true,
        ..options
    });
    let fed = input.feed(&mut engine, selection);
    for w in fed.warnings(window.as_deref()) {
        engine.warn(w);
    }
    if !skipped.is_empty() {
        engine.warn(format!(
            "skipped {} file(s) that are not captures: {}",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    let status = conclude(&mut engine, fed.stopped);
    finish_into(engine, source, status, format, tables)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add("TABLE_SCHEMA", tcpdoctor_table::TABLE_SCHEMA)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
