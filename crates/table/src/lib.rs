//! An analysis as Arrow tables — `connections`, `exchanges`, `findings` and
//! `files` — for engines that read columnar data (DuckDB, Spark, pandas,
//! Polars), written as Parquet files or Arrow IPC streams.
//!
//! Rows are pushed as the engine produces them ([`Tables::push_rows`] with
//! what [`Engine::drain_rows`] returns, [`Tables::push_analysis`] at the end
//! of a capture) and leave as record batches; [`ParquetSink`] writes a batch
//! whenever a table holds [`BATCH_ROWS`] rows, so memory stays bounded by
//! the batch and the row group being encoded, whatever the number of files.
//! The schemas are in [`schema`] and docs/parquet.md; they only ever grow.
#![forbid(unsafe_code)]

pub mod schema;
pub mod sweep;

use std::io::{self, BufWriter, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{Array, ArrayRef, Int64Array, ListArray, RecordBatch, StringArray, StructArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::DataType;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use tcpdoctor_capture::{CaptureReader, ErrorKind};
use tcpdoctor_engine::budget::Part;
use tcpdoctor_engine::model::{Analysis, ConnectionSummary, ExchangeRow, Finding, Rows};
use tcpdoctor_engine::{Engine, Options};

pub use schema::{Table, TABLE_SCHEMA};

/// Rows a table holds before they leave as a record batch.
pub const BATCH_ROWS: usize = 8192;
/// Rows per Parquet row group (several batches).
pub const ROW_GROUP_ROWS: usize = 64 * 1024;

/// Where rows come from: the capture file, its host, its first packet's time.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub file: Arc<str>,
    pub host: Arc<str>,
    /// Unix time of the first packet, seconds.
    pub start_unix: Option<f64>,
}

impl Source {
    pub fn new(file: &str, host: &str) -> Source {
        Source {
            file: file.into(),
            host: host.into(),
            start_unix: None,
        }
    }
}

/// How a capture file went, for the `files` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Read to its end.
    Ok,
    /// Read up to a truncated or corrupt record; what came before is in the tables.
    Partial(String),
    /// Not read at all (not a capture, unreadable, unsupported); nothing in the tables.
    Failed(String),
}

impl Status {
    pub fn name(&self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Partial(_) => "partial",
            Status::Failed(_) => "failed",
        }
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            Status::Ok => None,
            Status::Partial(e) | Status::Failed(e) => Some(e),
        }
    }
}

/// One `files` row.
#[derive(Debug, Clone)]
pub struct FileRow {
    pub source: Source,
    pub status: Status,
    /// `pcap (µs timestamps)`, `pcapng`, or empty when not read.
    pub format: String,
    pub analysis: Option<FileCounts>,
}

/// A file's totals, from its [`Analysis`].
#[derive(Debug, Clone, Default)]
pub struct FileCounts {
    pub packets: u64,
    pub tcp_packets: u64,
    pub bytes_on_wire: u64,
    pub duration_ms: f64,
    pub connections: u64,
    pub exchanges: u64,
    pub findings: u64,
    pub warnings: Vec<String>,
}

impl FileCounts {
    pub fn of(a: &Analysis) -> FileCounts {
        let c = &a.capture;
        FileCounts {
            packets: c.packets,
            tcp_packets: c.tcp_packets,
            bytes_on_wire: c.bytes_on_wire,
            duration_ms: c.duration_ms,
            connections: c.connections,
            exchanges: c.exchanges,
            findings: (a.findings.len() + a.minor_findings.len()) as u64,
            warnings: c.warnings.clone(),
        }
    }
}

/// Rows waiting to become record batches, per table.
#[derive(Default)]
pub struct Tables {
    connections: Vec<(Arc<Source>, ConnectionSummary)>,
    exchanges: Vec<(Arc<Source>, ExchangeRow)>,
    findings: Vec<(Arc<Source>, bool, u32, Finding)>,
    files: Vec<FileRow>,
}

impl Tables {
    /// Connections and exchanges drained from the engine.
    pub fn push_rows(&mut self, source: &Arc<Source>, rows: Rows) {
        self.connections
            .extend(rows.connections.into_iter().map(|c| (source.clone(), c)));
        self.exchanges
            .extend(rows.exchanges.into_iter().map(|e| (source.clone(), e)));
    }

    /// A capture's findings (minor ones flagged), in the analysis' order.
    pub fn push_findings(&mut self, source: &Arc<Source>, a: &Analysis) {
        let major = a.findings.iter().map(|f| (false, f));
        let minor = a.minor_findings.iter().map(|f| (true, f));
        for (rank, (is_minor, f)) in major.chain(minor).enumerate() {
            let rank = u32::try_from(rank + 1).unwrap_or(u32::MAX);
            self.findings
                .push((source.clone(), is_minor, rank, f.clone()));
        }
    }

    pub fn push_file(&mut self, row: FileRow) {
        self.files.push(row);
    }

    /// A [`Tables`] holding this one's rows of `table`, which leave.
    pub fn split_off(&mut self, table: Table) -> Tables {
        let mut out = Tables::default();
        match table {
            Table::Connections => out.connections = std::mem::take(&mut self.connections),
            Table::Exchanges => out.exchanges = std::mem::take(&mut self.exchanges),
            Table::Findings => out.findings = std::mem::take(&mut self.findings),
            Table::Files => out.files = std::mem::take(&mut self.files),
        }
        out
    }

    /// Rows held for `table`.
    pub fn len(&self, table: Table) -> usize {
        match table {
            Table::Connections => self.connections.len(),
            Table::Exchanges => self.exchanges.len(),
            Table::Findings => self.findings.len(),
            Table::Files => self.files.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        Table::ALL.iter().all(|t| self.len(*t) == 0)
    }

    /// `table`'s rows as one record batch (possibly empty); the rows leave.
    pub fn take(&mut self, table: Table) -> RecordBatch {
        match table {
            Table::Connections => connections_batch(&std::mem::take(&mut self.connections)),
            Table::Exchanges => exchanges_batch(&std::mem::take(&mut self.exchanges)),
            Table::Findings => findings_batch(&std::mem::take(&mut self.findings)),
            Table::Files => files_batch(&std::mem::take(&mut self.files)),
        }
    }
}

/// Errors writing tables.
#[derive(Debug)]
pub enum Error {
    Io(io::Error),
    Parquet(parquet::errors::ParquetError),
    Arrow(arrow_schema::ArrowError),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Parquet(e) => write!(f, "parquet: {e}"),
            Error::Arrow(e) => write!(f, "arrow: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}
impl From<parquet::errors::ParquetError> for Error {
    fn from(e: parquet::errors::ParquetError) -> Self {
        // An I/O error of the file underneath (a full disk) is told as one,
        // not as "parquet: External: …".
        match e {
            parquet::errors::ParquetError::External(inner) => match inner.downcast::<io::Error>() {
                Ok(io) => Error::Io(*io),
                Err(other) => Error::Parquet(parquet::errors::ParquetError::External(other)),
            },
            e => Error::Parquet(e),
        }
    }
}
impl From<arrow_schema::ArrowError> for Error {
    fn from(e: arrow_schema::ArrowError) -> Self {
        Error::Arrow(e)
    }
}

/// Four Parquet files in a directory, written as rows arrive.
///
/// Rows are turned into record batches, encoded and compressed on a thread
/// of its own, so the analysis goes on meanwhile; at most [`IN_FLIGHT`]
/// batches wait for it.
pub struct ParquetSink {
    /// The files being written, under temporary names until [`ParquetSink::finish`].
    staged: Vec<tcpdoctor_capture::write::Staged>,
    tables: Tables,
    to_writer: Option<SyncSender<(Table, Tables)>>,
    writer: Option<JoinHandle<Result<(), Error>>>,
    rows: [u64; 4],
}

/// Batches handed to the writing thread and not written yet, at most.
pub const IN_FLIGHT: usize = 2;

impl ParquetSink {
    /// Creates (or replaces) `DIR/{connections,exchanges,findings,files}.parquet`.
    /// They are written under temporary names (`DIR/.connections.parquet.tmp.PID`)
    /// and renamed into place only when all four are complete; dropped before
    /// [`ParquetSink::finish`] or failing (a full disk), the sink removes them
    /// and leaves the files already in `DIR` as they were.
    pub fn create(dir: &Path) -> Result<ParquetSink, Error> {
        std::fs::create_dir_all(dir)?;
        let mut writers = Vec::new();
        let mut staged = Vec::new();
        for t in Table::ALL {
            let mut props = WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
                // Minimum and maximum per column chunk (what DuckDB and Spark
                // prune row groups with), not per page.
                .set_statistics_enabled(EnabledStatistics::Chunk)
                .set_key_value_metadata(Some(vec![KeyValue::new(
                    "tcpdoctor.table_schema".to_string(),
                    TABLE_SCHEMA.to_string(),
                )]));
            // Measurements and ids are nearly all distinct: a dictionary
            // costs hashing and is dropped anyway. Names, endpoints, kinds,
            // small integers and the capture's start repeat: they keep one.
            for field in t.schema().fields() {
                if matches!(field.data_type(), DataType::Float64 | DataType::Int64) {
                    props = props.set_column_dictionary_enabled(
                        ColumnPath::from(field.name().as_str()),
                        false,
                    );
                }
            }
            let props = props.build();
            let path = dir.join(format!("{}.parquet", t.name()));
            let file = tcpdoctor_capture::write::Staged::create(&path)?;
            let w = file.writer()?;
            staged.push(file);
            writers.push(ArrowWriter::try_new(
                BufWriter::new(w),
                t.schema(),
                Some(props),
            )?);
        }
        let (tx, rx) = sync_channel::<(Table, Tables)>(IN_FLIGHT);
        let writer = std::thread::spawn(move || -> Result<(), Error> {
            for (t, mut rows) in rx {
                writers[t as usize].write(&rows.take(t))?;
            }
            for w in writers {
                w.close()?;
            }
            Ok(())
        });
        Ok(ParquetSink {
            staged,
            tables: Tables::default(),
            to_writer: Some(tx),
            writer: Some(writer),
            rows: [0; 4],
        })
    }

    /// The rows waiting; push into it, then call [`ParquetSink::flush_full`].
    pub fn tables(&mut self) -> &mut Tables {
        &mut self.tables
    }

    /// Writes the tables that hold [`BATCH_ROWS`] rows or more.
    pub fn flush_full(&mut self) -> Result<(), Error> {
        for t in Table::ALL {
            if self.tables.len(t) >= BATCH_ROWS {
                self.write(t)?;
            }
        }
        Ok(())
    }

    fn write(&mut self, t: Table) -> Result<(), Error> {
        let n = self.tables.len(t);
        if n == 0 {
            return Ok(());
        }
        self.rows[t as usize] += n as u64;
        let rows = self.tables.split_off(t);
        let sent = self
            .to_writer
            .as_ref()
            .is_some_and(|tx| tx.send((t, rows)).is_ok());
        if sent {
            Ok(())
        } else {
            Err(self.stop_writer().err().unwrap_or_else(stopped))
        }
    }

    /// Closes the channel and waits for the writing thread's outcome.
    fn stop_writer(&mut self) -> Result<(), Error> {
        drop(self.to_writer.take());
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) | None => Err(stopped()),
        }
    }

    /// Writes what is left and closes the files; returns the rows per table
    /// in [`Table::ALL`] order.
    pub fn finish(mut self) -> Result<[u64; 4], Error> {
        for t in Table::ALL {
            self.write(t)?;
        }
        self.stop_writer()?;
        for file in self.staged.drain(..) {
            file.commit()?;
        }
        Ok(self.rows)
    }
}

fn stopped() -> Error {
    Error::Io(io::Error::other("the Parquet writing thread stopped"))
}

/// A record batch as an Arrow IPC stream (what `pyarrow.ipc.open_stream` reads).
pub fn ipc_stream(batch: &RecordBatch) -> Result<Vec<u8>, Error> {
    let mut w = arrow_ipc::writer::StreamWriter::try_new(Vec::new(), &batch.schema())?;
    w.write(batch)?;
    w.finish()?;
    Ok(w.into_inner()?)
}

/// Analyses one capture read from `src`, on this thread, into `tables`: its
/// connections, exchanges, findings and its `files` row. A capture that
/// cannot be read at all gives only the `files` row ([`Status::Failed`]); one
/// that breaks part way is analysed up to the break ([`Status::Partial`]).
pub fn analyze_read<R: Read>(
    src: R,
    source: Source,
    options: Options,
    tables: &mut Tables,
) -> Status {
    let mut reader = match CaptureReader::new(src) {
        Ok(r) => r,
        Err(e) => {
            let status = Status::Failed(e.to_string());
            tables.push_file(FileRow {
                source,
                status: status.clone(),
                format: String::new(),
                analysis: None,
            });
            return status;
        }
    };
    let format = reader.format().to_string();
    let mut engine = Engine::new(Options {
        rows: true,
        ..options
    });
    let stopped = loop {
        match reader.next_packet() {
            Ok(Some(p)) => engine.push(p.ts, p.link, p.data, p.orig_len),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    let status = conclude(&mut engine, stopped);
    finish_into(engine, source, status, format, tables)
}

/// Ends an analysis into `tables`: its connections, exchanges, findings and
/// `files` row, or only the `files` row when `status` (from [`conclude`]) failed.
pub fn finish_into(
    engine: Engine,
    mut source: Source,
    status: Status,
    format: String,
    tables: &mut Tables,
) -> Status {
    if let Status::Failed(_) = status {
        tables.push_file(FileRow {
            source,
            status: status.clone(),
            format,
            analysis: None,
        });
        return status;
    }
    source.start_unix = engine.start_unix();
    let source = Arc::new(source);
    let (analysis, rows) = engine.finish_with_rows();
    tables.push_rows(&source, rows);
    tables.push_findings(&source, &analysis);
    tables.push_file(FileRow {
        source: (*source).clone(),
        status: status.clone(),
        format,
        analysis: Some(FileCounts::of(&analysis)),
    });
    status
}

/// What an error that stopped reading means for the capture, as `analyze`
/// treats it: an I/O error, or a broken capture with no frame before the
/// break, fails it; otherwise what came before is analysed, with a warning.
pub fn conclude(engine: &mut Engine, stopped: Option<tcpdoctor_capture::CaptureError>) -> Status {
    let Some(e) = stopped else {
        return Status::Ok;
    };
    if e.kind == ErrorKind::Io || (engine.frames() == 0 && e.kind != ErrorKind::Truncated) {
        return Status::Failed(e.to_string());
    }
    let what = match e.kind {
        ErrorKind::Truncated => "the capture is truncated",
        _ => "the capture is corrupt",
    };
    let message = format!(
        "{what} at byte {} ({}); the {} packets before it were analysed",
        e.offset,
        e.detail,
        engine.frames()
    );
    engine.warn(message.clone());
    Status::Partial(message)
}

// --- rows to record batches -------------------------------------------------

/// The three source columns.
struct SourceCols {
    file: StringBuilder,
    host: StringBuilder,
    start: TimestampMicrosecondBuilder,
}

impl SourceCols {
    fn new() -> SourceCols {
        SourceCols {
            file: StringBuilder::new(),
            host: StringBuilder::new(),
            start: TimestampMicrosecondBuilder::new(),
        }
    }

    fn push(&mut self, s: &Source) {
        self.file.append_value(&*s.file);
        self.host.append_value(&*s.host);
        self.start
            .append_option(s.start_unix.map(|t| (t * 1e6).round() as i64));
    }

    fn finish(mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(self.file.finish()),
            Arc::new(self.host.finish()),
            Arc::new(self.start.finish().with_timezone("UTC")),
        ]
    }
}

/// The five columns that name a connection: its number in the file, the
/// client and server addresses, the server's address and port apart.
struct ConnectionCols {
    id: Int64Builder,
    client: StringBuilder,
    server: StringBuilder,
    server_ip: StringBuilder,
    server_port: Int32Builder,
}

impl ConnectionCols {
    fn new() -> ConnectionCols {
        ConnectionCols {
            id: Int64Builder::new(),
            client: StringBuilder::new(),
            server: StringBuilder::new(),
            server_ip: StringBuilder::new(),
            server_port: Int32Builder::new(),
        }
    }

    fn push(&mut self, id: u64, client: SocketAddr, server: SocketAddr) {
        self.id.append_value(i64_of(id));
        self.client.append_value(client.to_string());
        self.server.append_value(server.to_string());
        self.server_ip.append_value(server.ip().to_string());
        self.server_port.append_value(i32::from(server.port()));
    }

    fn finish(mut self) -> [ArrayRef; 5] {
        [
            Arc::new(self.id.finish()),
            Arc::new(self.client.finish()),
            Arc::new(self.server.finish()),
            Arc::new(self.server_ip.finish()),
            Arc::new(self.server_port.finish()),
        ]
    }
}

fn batch(table: Table, columns: Vec<ArrayRef>) -> RecordBatch {
    match RecordBatch::try_new(table.schema(), columns) {
        Ok(b) => b,
        // The builders below follow the schema column for column; a mismatch
        // is a bug in this file, caught by its tests.
        Err(e) => panic!("{} batch does not match its schema: {e}", table.name()),
    }
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn connections_batch(rows: &[(Arc<Source>, ConnectionSummary)]) -> RecordBatch {
    let mut src = SourceCols::new();
    let mut key = ConnectionCols::new();
    let mut roles_from = StringBuilder::new();
    let mut first_frame = Int64Builder::new();
    let (mut start, mut duration, mut hs_rtt, mut rtt) = (
        Float64Builder::new(),
        Float64Builder::new(),
        Float64Builder::new(),
        Float64Builder::new(),
    );
    let mut syn_retx = Int32Builder::new();
    let (mut packets, mut exchanges) = (Int64Builder::new(), Int64Builder::new());
    let (mut ex_mean, mut ex_max) = (Float64Builder::new(), Float64Builder::new());
    let mut ints: Vec<Int64Builder> = (0..6).map(|_| Int64Builder::new()).collect();
    let (mut mss_c, mut mss_s) = (Int32Builder::new(), Int32Builder::new());
    let (mut minw_c, mut minw_s) = (Int64Builder::new(), Int64Builder::new());
    let (mut end, mut vantage) = (StringBuilder::new(), StringBuilder::new());
    let mut duplicates = Int64Builder::new();
    let mut lost = Float64Builder::new();
    let (mut rate_c, mut rate_s) = (Float64Builder::new(), Float64Builder::new());
    for (s, c) in rows {
        src.push(s);
        key.push(c.id, c.client, c.server);
        roles_from.append_value(c.roles_from);
        first_frame.append_value(i64_of(c.first_frame));
        start.append_value(c.start_ms);
        duration.append_value(c.duration_ms);
        hs_rtt.append_option(c.handshake_rtt_ms);
        rtt.append_option(c.rtt_ms);
        syn_retx.append_value(i32::try_from(c.syn_retransmissions).unwrap_or(i32::MAX));
        packets.append_value(i64_of(c.packets));
        exchanges.append_value(i64_of(c.exchanges));
        ex_mean.append_option(c.exchange_latency_ms.map(|e| e.mean));
        ex_max.append_option(c.exchange_latency_ms.map(|e| e.max));
        let values = [
            c.bytes.client_to_server,
            c.bytes.server_to_client,
            c.retransmissions.client_to_server,
            c.retransmissions.server_to_client,
            u64::from(c.max_in_flight.client_to_server),
            u64::from(c.max_in_flight.server_to_client),
        ];
        for (b, v) in ints.iter_mut().zip(values) {
            b.append_value(i64_of(v));
        }
        mss_c.append_option(c.mss.client_to_server.map(i32::from));
        mss_s.append_option(c.mss.server_to_client.map(i32::from));
        minw_c.append_option(c.min_window.client_to_server.map(i64::from));
        minw_s.append_option(c.min_window.server_to_client.map(i64::from));
        end.append_value(c.end);
        vantage.append_value(c.vantage);
        duplicates.append_value(i64_of(c.duplicates));
        lost.append_value(c.time_lost_ms);
        rate_c.append_option(c.delivery_rate_mbit_s.client_to_server);
        rate_s.append_option(c.delivery_rate_mbit_s.server_to_client);
    }
    let mut cols = src.finish();
    cols.extend(key.finish());
    cols.extend::<[ArrayRef; 8]>([
        Arc::new(roles_from.finish()),
        Arc::new(first_frame.finish()),
        Arc::new(start.finish()),
        Arc::new(duration.finish()),
        Arc::new(hs_rtt.finish()),
        Arc::new(rtt.finish()),
        Arc::new(syn_retx.finish()),
        Arc::new(packets.finish()),
    ]);
    cols.push(Arc::new(exchanges.finish()));
    cols.push(Arc::new(ex_mean.finish()));
    cols.push(Arc::new(ex_max.finish()));
    for mut b in ints {
        cols.push(Arc::new(b.finish()));
    }
    cols.extend::<[ArrayRef; 8]>([
        Arc::new(mss_c.finish()),
        Arc::new(mss_s.finish()),
        Arc::new(minw_c.finish()),
        Arc::new(minw_s.finish()),
        Arc::new(end.finish()),
        Arc::new(vantage.finish()),
        Arc::new(duplicates.finish()),
        Arc::new(lost.finish()),
    ]);
    cols.push(Arc::new(rate_c.finish()));
    cols.push(Arc::new(rate_s.finish()));
    batch(Table::Connections, cols)
}

fn exchanges_batch(rows: &[(Arc<Source>, ExchangeRow)]) -> RecordBatch {
    let mut src = SourceCols::new();
    let mut key = ConnectionCols::new();
    let mut index = Int32Builder::new();
    let (mut start, mut duration) = (Float64Builder::new(), Float64Builder::new());
    let (mut req_bytes, mut resp_bytes) = (Int64Builder::new(), Int64Builder::new());
    let mut phases: Vec<Float64Builder> = (0..4).map(|_| Float64Builder::new()).collect();
    let mut parts: Vec<Float64Builder> = Part::ALL.iter().map(|_| Float64Builder::new()).collect();
    let mut frames: Vec<Int64Builder> = (0..5).map(|_| Int64Builder::new()).collect();
    let mut setup = Float64Builder::new();
    for (s, r) in rows {
        let e = &r.exchange;
        src.push(s);
        key.push(r.connection, r.client, r.server);
        index.append_value(i32::try_from(e.index).unwrap_or(i32::MAX));
        start.append_value(e.start_ms);
        duration.append_value(e.duration_ms);
        req_bytes.append_value(i64_of(e.request_bytes));
        resp_bytes.append_value(i64_of(e.response_bytes));
        for (b, v) in
            phases
                .iter_mut()
                .zip([e.request_ms, e.request_ack_ms, e.wait_ms, e.response_ms])
        {
            b.append_option(v);
        }
        for (b, p) in parts.iter_mut().zip(Part::ALL) {
            b.append_value(e.budget_ms.get(p.name()).unwrap_or(0.0));
        }
        for (b, v) in frames.iter_mut().zip(e.frames) {
            b.append_option(v.map(i64_of));
        }
        setup.append_option(e.setup_ms);
    }
    let mut cols = src.finish();
    cols.extend(key.finish());
    cols.extend::<[ArrayRef; 5]>([
        Arc::new(index.finish()),
        Arc::new(start.finish()),
        Arc::new(duration.finish()),
        Arc::new(req_bytes.finish()),
        Arc::new(resp_bytes.finish()),
    ]);
    let late = parts.split_off(schema::BUDGET_BLOCK);
    for mut b in phases.into_iter().chain(parts) {
        cols.push(Arc::new(b.finish()));
    }
    for mut b in frames {
        cols.push(Arc::new(b.finish()));
    }
    cols.push(Arc::new(setup.finish()));
    for mut b in late {
        cols.push(Arc::new(b.finish()));
    }
    batch(Table::Exchanges, cols)
}

fn findings_batch(rows: &[(Arc<Source>, bool, u32, Finding)]) -> RecordBatch {
    let mut src = SourceCols::new();
    let mut rank = Int32Builder::new();
    let mut minor = BooleanBuilder::new();
    let (mut kind, mut endpoint, mut role) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut conns, mut occ) = (Int64Builder::new(), Int64Builder::new());
    let (mut typical, mut total, mut share) = (
        Float64Builder::new(),
        Float64Builder::new(),
        Float64Builder::new(),
    );
    // Evidence: list<struct<connection, frames list<int64>, delay_ms>>.
    let mut ev_offsets = vec![0i32];
    let mut ev_conn = Vec::new();
    let mut ev_delay = Vec::new();
    let mut frame_offsets = vec![0i32];
    let mut frame_values = Vec::new();
    let (mut filter, mut explanation, mut fix, mut details) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    for (s, is_minor, r, f) in rows {
        src.push(s);
        rank.append_value(i32::try_from(*r).unwrap_or(i32::MAX));
        minor.append_value(*is_minor);
        kind.append_value(f.kind);
        endpoint.append_value(&f.culprit.endpoint);
        role.append_value(f.culprit.role);
        conns.append_value(i64_of(f.connections));
        occ.append_value(i64_of(f.occurrences));
        typical.append_value(f.typical_delay_ms);
        total.append_value(f.total_delay_ms);
        share.append_value(f.share_of_time);
        for e in &f.evidence {
            ev_conn.push(i64_of(e.connection));
            ev_delay.push(e.delay_ms);
            frame_values.extend(e.frames.iter().map(|v| i64_of(*v)));
            frame_offsets.push(offset(frame_values.len()));
        }
        ev_offsets.push(offset(ev_conn.len()));
        filter.append_value(&f.wireshark_filter);
        explanation.append_value(&f.explanation);
        fix.append_value(&f.fix);
        details.append_value(f.details.to_string());
    }
    let frames = ListArray::new(
        schema::frame_item(),
        OffsetBuffer::new(frame_offsets.into()),
        Arc::new(Int64Array::from(frame_values)),
        None,
    );
    let evidence = StructArray::new(
        schema::evidence_fields(),
        vec![
            Arc::new(Int64Array::from(ev_conn)) as ArrayRef,
            Arc::new(frames),
            Arc::new(arrow_array::Float64Array::from(ev_delay)),
        ],
        None,
    );
    let evidence = ListArray::new(
        schema::evidence_item(),
        OffsetBuffer::new(ev_offsets.into()),
        Arc::new(evidence),
        None,
    );
    let mut cols = src.finish();
    cols.extend::<[ArrayRef; 15]>([
        Arc::new(rank.finish()),
        Arc::new(minor.finish()),
        Arc::new(kind.finish()),
        Arc::new(endpoint.finish()),
        Arc::new(role.finish()),
        Arc::new(conns.finish()),
        Arc::new(occ.finish()),
        Arc::new(typical.finish()),
        Arc::new(total.finish()),
        Arc::new(share.finish()),
        Arc::new(evidence),
        Arc::new(filter.finish()),
        Arc::new(explanation.finish()),
        Arc::new(fix.finish()),
        Arc::new(details.finish()),
    ]);
    batch(Table::Findings, cols)
}

fn files_batch(rows: &[FileRow]) -> RecordBatch {
    let mut src = SourceCols::new();
    let (mut status, mut error, mut format) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let mut ints: Vec<Int64Builder> = (0..3).map(|_| Int64Builder::new()).collect();
    let mut duration = Float64Builder::new();
    let mut counts: Vec<Int64Builder> = (0..3).map(|_| Int64Builder::new()).collect();
    let mut warn_offsets = vec![0i32];
    let mut warn_values: Vec<String> = Vec::new();
    for r in rows {
        src.push(&r.source);
        status.append_value(r.status.name());
        error.append_option(r.status.error());
        format.append_value(&r.format);
        let a = r.analysis.clone().unwrap_or_default();
        for (b, v) in ints
            .iter_mut()
            .zip([a.packets, a.tcp_packets, a.bytes_on_wire])
        {
            b.append_value(i64_of(v));
        }
        duration.append_value(a.duration_ms);
        for (b, v) in counts
            .iter_mut()
            .zip([a.connections, a.exchanges, a.findings])
        {
            b.append_value(i64_of(v));
        }
        warn_values.extend(a.warnings);
        warn_offsets.push(offset(warn_values.len()));
    }
    let warnings = ListArray::new(
        Arc::new(arrow_schema::Field::new(
            "item",
            arrow_schema::DataType::Utf8,
            false,
        )),
        OffsetBuffer::new(warn_offsets.into()),
        Arc::new(StringArray::from(warn_values)),
        None,
    );
    let mut cols = src.finish();
    cols.extend::<[ArrayRef; 3]>([
        Arc::new(status.finish()),
        Arc::new(error.finish()),
        Arc::new(format.finish()),
    ]);
    for mut b in ints {
        cols.push(Arc::new(b.finish()));
    }
    cols.push(Arc::new(duration.finish()));
    for mut b in counts {
        cols.push(Arc::new(b.finish()));
    }
    cols.push(Arc::new(warnings));
    debug_assert!(cols.iter().all(|c| c.len() == rows.len()));
    batch(Table::Files, cols)
}

/// A list offset; a batch never nears 2^31 values ([`BATCH_ROWS`] rows of
/// at most [`Options::max_evidence`] entries each).
fn offset(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;
