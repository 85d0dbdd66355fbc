//! The tables' Arrow schemas: a stable interface, like the JSON document.
//! Columns are only ever added (at the end), never retyped or removed; a
//! rename bumps [`TABLE_SCHEMA`] (once: `end` to `end_state`). Integers are signed (Spark and Java have no unsigned types),
//! times are milliseconds as `float64` like the JSON, and every table starts
//! with the capture it came from: `file`, `host`, `capture_start`.

use std::sync::{Arc, OnceLock};

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use tcpdoctor_engine::budget::Part;

/// Written into each file's key-value metadata as `tcpdoctor.table_schema`.
///
/// 2: `connections.end` became `end_state` (`end` is a reserved word in
/// SQL); `exchanges.setup_ms` added.
pub const TABLE_SCHEMA: u32 = 2;

/// The four tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// One row per connection.
    Connections,
    /// One row per complete request/response exchange, its budget as columns.
    Exchanges,
    /// One row per finding (minor ones too, flagged), evidence as a list.
    Findings,
    /// One row per capture file: analysed, partly analysed or not readable.
    Files,
}

impl Table {
    pub const ALL: [Table; 4] = [
        Table::Connections,
        Table::Exchanges,
        Table::Findings,
        Table::Files,
    ];

    /// The table's name, and its file's stem (`connections.parquet`).
    pub fn name(self) -> &'static str {
        match self {
            Table::Connections => "connections",
            Table::Exchanges => "exchanges",
            Table::Findings => "findings",
            Table::Files => "files",
        }
    }

    pub fn schema(self) -> SchemaRef {
        static SCHEMAS: OnceLock<[SchemaRef; 4]> = OnceLock::new();
        let all = SCHEMAS.get_or_init(|| [connections(), exchanges(), findings(), files()]);
        all[self as usize].clone()
    }
}

/// The budget column of a part: `budget_<part>_ms`.
/// The budget parts whose columns sit together after the phases; parts
/// added later come last in the table, after `setup_ms` (columns are only
/// ever added at the end).
pub const BUDGET_BLOCK: usize = 13;

pub fn budget_column(p: Part) -> String {
    format!("budget_{}_ms", p.name())
}

fn f(name: &str, t: DataType, nullable: bool) -> Field {
    Field::new(name, t, nullable)
}

fn utf8(name: &str) -> Field {
    f(name, DataType::Utf8, false)
}

fn i64c(name: &str) -> Field {
    f(name, DataType::Int64, false)
}

fn ms(name: &str, nullable: bool) -> Field {
    f(name, DataType::Float64, nullable)
}

pub(crate) fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// `file`, `host`, `capture_start` (null when the file had no packet).
fn source() -> Vec<Field> {
    vec![
        utf8("file"),
        utf8("host"),
        f("capture_start", timestamp(), true),
    ]
}

/// The columns that name a connection (the same in `connections` and
/// `exchanges`, so the two join on source and `connection`).
fn connection_key() -> [Field; 5] {
    [
        i64c("connection"),
        utf8("client"),
        utf8("server"),
        utf8("server_ip"),
        f("server_port", DataType::Int32, false),
    ]
}

fn connections() -> SchemaRef {
    let mut v = source();
    v.extend(connection_key());
    v.extend([
        utf8("roles_from"),
        i64c("first_frame"),
        ms("start_ms", false),
        ms("duration_ms", false),
        ms("handshake_rtt_ms", true),
        ms("rtt_ms", true),
        f("syn_retransmissions", DataType::Int32, false),
        i64c("packets"),
        i64c("exchanges"),
        ms("exchange_mean_ms", true),
        ms("exchange_max_ms", true),
        i64c("bytes_client_to_server"),
        i64c("bytes_server_to_client"),
        i64c("retransmissions_client_to_server"),
        i64c("retransmissions_server_to_client"),
        f("max_in_flight_client_to_server", DataType::Int64, false),
        f("max_in_flight_server_to_client", DataType::Int64, false),
        f("mss_client_to_server", DataType::Int32, true),
        f("mss_server_to_client", DataType::Int32, true),
        f("min_window_client_to_server", DataType::Int64, true),
        f("min_window_server_to_client", DataType::Int64, true),
        utf8("end_state"),
        utf8("vantage"),
        i64c("duplicates"),
        ms("time_lost_ms", false),
        f(
            "delivery_rate_client_to_server_mbit_s",
            DataType::Float64,
            true,
        ),
        f(
            "delivery_rate_server_to_client_mbit_s",
            DataType::Float64,
            true,
        ),
    ]);
    Arc::new(Schema::new(v))
}

fn exchanges() -> SchemaRef {
    let mut v = source();
    v.extend(connection_key());
    v.extend([
        f("index", DataType::Int32, false),
        ms("start_ms", false),
        ms("duration_ms", false),
        i64c("request_bytes"),
        i64c("response_bytes"),
        ms("request_ms", true),
        ms("request_ack_ms", true),
        ms("wait_ms", true),
        ms("response_ms", true),
    ]);
    for p in &Part::ALL[..BUDGET_BLOCK] {
        v.push(ms(&budget_column(*p), false));
    }
    for name in [
        "request_first_frame",
        "request_last_frame",
        "request_ack_frame",
        "response_first_frame",
        "response_last_frame",
    ] {
        v.push(f(name, DataType::Int64, true));
    }
    v.push(ms("setup_ms", true));
    for p in &Part::ALL[BUDGET_BLOCK..] {
        v.push(ms(&budget_column(*p), false));
    }
    Arc::new(Schema::new(v))
}

/// An evidence entry: `struct<connection int64, frames list<int64>, delay_ms float64>`.
pub(crate) fn evidence_fields() -> Fields {
    Fields::from(vec![
        i64c("connection"),
        f("frames", DataType::List(frame_item()), false),
        ms("delay_ms", false),
    ])
}

pub(crate) fn frame_item() -> Arc<Field> {
    Arc::new(f("item", DataType::Int64, false))
}

pub(crate) fn evidence_item() -> Arc<Field> {
    Arc::new(f("item", DataType::Struct(evidence_fields()), false))
}

fn findings() -> SchemaRef {
    let mut v = source();
    v.extend([
        f("rank", DataType::Int32, false),
        f("minor", DataType::Boolean, false),
        utf8("kind"),
        utf8("culprit_endpoint"),
        utf8("culprit_role"),
        i64c("connections"),
        i64c("occurrences"),
        ms("typical_delay_ms", false),
        ms("total_delay_ms", false),
        f("share_of_time", DataType::Float64, false),
        f("evidence", DataType::List(evidence_item()), false),
        utf8("wireshark_filter"),
        utf8("explanation"),
        utf8("fix"),
        utf8("details"),
    ]);
    Arc::new(Schema::new(v))
}

fn files() -> SchemaRef {
    let mut v = source();
    v.extend([
        utf8("status"),
        f("error", DataType::Utf8, true),
        utf8("format"),
        i64c("packets"),
        i64c("tcp_packets"),
        i64c("bytes_on_wire"),
        ms("duration_ms", false),
        i64c("connections"),
        i64c("exchanges"),
        i64c("findings"),
        f(
            "warnings",
            DataType::List(Arc::new(f("item", DataType::Utf8, false))),
            false,
        ),
    ]);
    Arc::new(Schema::new(v))
}
