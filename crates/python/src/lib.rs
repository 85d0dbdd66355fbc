//! `tcpdoctor._native`: the analysis engine for Python. One function,
//! [`analyze`], reads a capture (a path or its bytes) with the GIL released
//! and returns each table as an Arrow IPC stream; the `tcpdoctor` package
//! around it turns those into `pyarrow.Table`s.
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::BufReader;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use tcpdoctor_engine::Options;
use tcpdoctor_table::{analyze_read, ipc_stream, Source, Status, Table, Tables};

/// Each table as an Arrow IPC stream.
type Streams = Vec<(Table, Vec<u8>)>;

/// What to read: a file by path, or a capture already in memory.
enum Capture {
    Path(std::path::PathBuf),
    Bytes(Vec<u8>),
}

/// analyze(capture, file, host, max_open_connections) -> (status, error, {table: ipc bytes})
///
/// `capture` is a path (str or os.PathLike) or the capture's bytes. A
/// capture that is not one at all, or cannot be opened, raises; one that
/// breaks part way is analysed up to the break (status "partial").
#[pyfunction]
#[pyo3(signature = (capture, file, host, max_open_connections = None))]
fn analyze<'py>(
    py: Python<'py>,
    capture: &Bound<'py, PyAny>,
    file: String,
    host: String,
    max_open_connections: Option<usize>,
) -> PyResult<(String, Option<String>, Bound<'py, PyDict>)> {
    let capture = if let Ok(b) = capture.cast::<PyBytes>() {
        Capture::Bytes(b.as_bytes().to_vec())
    } else if let Ok(b) = capture.extract::<Vec<u8>>() {
        Capture::Bytes(b)
    } else {
        Capture::Path(capture.extract::<std::path::PathBuf>()?)
    };
    let mut options = Options::default();
    if let Some(n) = max_open_connections {
        if n == 0 {
            return Err(PyValueError::new_err(
                "max_open_connections must be at least 1",
            ));
        }
        options.flow.max_open = n;
    }
    // The work, without the GIL: other Python threads (a thread pool, Spark's
    // Arrow writer) run meanwhile.
    let result = py.detach(move || -> Result<(Status, Streams), String> {
        let mut tables = Tables::default();
        let source = Source::new(&file, &host);
        let status = match capture {
            Capture::Bytes(b) => analyze_read(&b[..], source, options, &mut tables),
            Capture::Path(p) => {
                let f = File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                analyze_read(
                    BufReader::with_capacity(1 << 20, f),
                    source,
                    options,
                    &mut tables,
                )
            }
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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add("TABLE_SCHEMA", tcpdoctor_table::TABLE_SCHEMA)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
