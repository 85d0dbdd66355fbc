//! Rendering an [`Analysis`]: a text report read top-down (capture, latency,
//! findings with a ladder diagram each, connections) or the JSON document.
#![forbid(unsafe_code)]

use std::io::{self, Write};

pub mod annotate;
mod style;
mod verdict;
pub use style::{text_styled, Style};
pub use verdict::{verdict, Symptom, Verdict};

use tcpdoctor_engine::model::{
    Analysis, CaptureSummary, ConnectionSummary, Finding, Ladder, LatencyBudget, Vantage,
};

/// Text report settings.
#[derive(Debug, Clone, Copy)]
pub struct TextOptions {
    /// Connections shown in the table (the ones that lost the most time).
    pub connections: usize,
    /// Terminal width for wrapping prose.
    pub width: usize,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            connections: 10,
            width: 100,
        }
    }
}

/// Writes the JSON document (schema 1) on one line, then a newline (pipe it
/// through `jq .` to read it).
pub fn json(a: &Analysis, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, a)?;
    out.write_all(b"\n")
}

/// [`json`], with [`stamp`]'s fields: which command made it, from what.
pub fn json_stamped(
    a: &Analysis,
    command: &str,
    input: serde_json::Value,
    out: &mut impl Write,
) -> io::Result<()> {
    json_stamped_with(a, command, input, Vec::new(), out)
}

/// [`json_stamped`] with more members after the analysis's own (`inputs`,
/// `selection`). The analysis is written as it serialises — its times are
/// already rounded to the microsecond ([`tcpdoctor_engine::round3`]) — and
/// the members after it are stamped: no tree of the whole document is built
/// (a million-packet capture's document is megabytes).
pub fn json_stamped_with(
    a: &Analysis,
    command: &str,
    input: serde_json::Value,
    extra: Vec<(&str, serde_json::Value)>,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut doc = serde_json::to_vec(a)?;
    if doc.last() == Some(&b'}') {
        doc.pop();
    }
    out.write_all(&doc)?;
    let mut tail = serde_json::Map::new();
    for (k, v) in extra {
        tail.insert(k.to_string(), v);
    }
    let mut tail = serde_json::Value::Object(tail);
    stamp(&mut tail, command, input);
    if let serde_json::Value::Object(m) = tail {
        for (k, v) in m {
            if k == "schema" {
                continue; // the analysis names its own
            }
            out.write_all(b",")?;
            serde_json::to_writer(&mut *out, &k)?;
            out.write_all(b":")?;
            serde_json::to_writer(&mut *out, &v)?;
        }
    }
    out.write_all(b"}\n")
}

/// The version every JSON document names (`tool_version`).
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What every `--format json` document carries, whatever the command:
/// `schema` (its version, 1; kept if the document has one), `tool_version`,
/// `command` and `input` (what it was asked: file, URL, options). Its floats
/// are rounded to 6 decimals: nanoseconds in milliseconds, microseconds in
/// seconds, the precision they were measured with (no `0.023866000000000002`).
pub fn stamp(doc: &mut serde_json::Value, command: &str, input: serde_json::Value) {
    round_floats(doc);
    if let serde_json::Value::Object(m) = doc {
        m.entry("schema").or_insert(serde_json::json!(1));
        m.insert("tool_version".into(), serde_json::json!(TOOL_VERSION));
        m.insert("command".into(), serde_json::json!(command));
        m.insert("input".into(), input);
    }
}

/// Rounds every float in `v` to 6 decimals (integers are left alone).
pub fn round_floats(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64() {
                let r = (f * 1e6).round() / 1e6;
                if let Some(x) = serde_json::Number::from_f64(r) {
                    *n = x;
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(round_floats),
        serde_json::Value::Object(m) => m.values_mut().for_each(round_floats),
        _ => {}
    }
}

/// What share of the time a finding lost: of the exchanges' time, or, when
/// no exchange completed, said so (the share is then of the time lost
/// outside exchanges, which the finding may be all of).
pub fn share_words(f: &Finding, no_exchange: bool) -> String {
    if no_exchange {
        "no exchange completed".into()
    } else {
        format!("{:.0}% of exchange time", f.share_of_time * 100.0)
    }
}

/// When the findings lost far more than the median exchange accounts for
/// (a few slow exchanges, or time outside exchanges: a stalled transfer, a
/// setup that waited), the median line alone would mislead: this says so.
pub fn median_caveat(a: &Analysis) -> Option<String> {
    let c = &a.capture;
    let b = c.latency_budget.as_ref()?;
    let lost: f64 = a
        .findings
        .iter()
        .map(|f| f.total_delay_ms)
        .sum::<f64>()
        .min(c.share_total_ms.max(0.0));
    let typical = b.median.total_ms * c.exchanges as f64;
    if a.findings.is_empty() || lost < 100.0 || lost <= 2.0 * typical {
        return None;
    }
    let slowest = c
        .exchange_latency_ms
        .as_ref()
        .map(|p| format!(" (the slowest exchange took {})", fmt_ms(p.max)))
        .unwrap_or_default();
    Some(format!(
        "but the findings below lost {} in all: the time went to a few slow exchanges{slowest} or \
         outside exchanges, not to the median one",
        fmt_ms(lost)
    ))
}

/// `1 connection`, `2 connections`: a count and its noun (plural by `s`).
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Writes the text report: the capture in a few lines, the findings ordered by
/// time lost, the minor ones, then the slowest connections.
pub fn text(
    a: &Analysis,
    source: &str,
    format: &str,
    opts: TextOptions,
    out: &mut impl Write,
) -> io::Result<()> {
    let c = &a.capture;
    writeln!(out, "tcpdoctor: {source}")?;
    let links = if c.link_types.is_empty() {
        String::new()
    } else {
        format!(", {}", c.link_types.join(", "))
    };
    writeln!(
        out,
        "capture    {format}{links} · {} packets ({} TCP) · {} · {:.3} s",
        c.packets,
        c.tcp_packets,
        count(c.connections, "connection"),
        c.duration_ms / 1e3
    )?;
    if let Some(b) = &c.latency_budget {
        budget(b, out)?;
        if let Some(note) = median_caveat(a) {
            wrap(&note, "           ", "           ", opts.width, out)?;
        }
    }
    exchanges(c, out)?;
    if let Some(v) = &c.vantage {
        vantage(v, c.duplicates, out)?;
    }
    capture_notes(c, out)?;
    writeln!(out)?;
    findings(&a.findings, c.exchanges == 0, opts, out)?;
    minor_findings(&a.minor_findings, out)?;
    writeln!(out)?;
    connections(a, opts, out)
}

/// The median exchange, split into parts that add up to it: the four largest
/// (each at least 0.5% of it) by name, the rest as "other".
fn budget(b: &LatencyBudget, out: &mut impl Write) -> io::Result<()> {
    let mut parts: Vec<(&str, f64)> = b.median.parts_ms.iter().collect();
    parts.sort_by(|x, y| y.1.total_cmp(&x.1));
    let total = b.median.total_ms.max(f64::MIN_POSITIVE);
    let mut shown: Vec<String> = Vec::new();
    let mut other = 0.0;
    for (i, (name, v)) in parts.iter().enumerate() {
        if i < 4 && *v >= 0.005 * total {
            shown.push(format!("{} {}", fmt_ms(*v), name));
        } else {
            other += *v;
        }
    }
    if other > 0.0 {
        shown.push(format!("{} other", fmt_ms(other)));
    }
    writeln!(
        out,
        "budget     exchanges around the median take {} = {}",
        fmt_ms(b.median.total_ms),
        shown.join(" + ")
    )
}

/// How many request/response exchanges completed, and their latency percentiles.
fn exchanges(c: &CaptureSummary, out: &mut impl Write) -> io::Result<()> {
    match &c.exchange_latency_ms {
        Some(p) => writeln!(
            out,
            "exchanges  {} request/response · latency p50 {} · p90 {} · p99 {} · max {}",
            c.exchanges,
            fmt_ms(p.p50),
            fmt_ms(p.p90),
            fmt_ms(p.p99),
            fmt_ms(p.max)
        ),
        None => writeln!(
            out,
            "exchanges  none complete (no request followed by a response)"
        ),
    }
}

/// Where the capture was taken, and the duplicate segments that implies.
fn vantage(v: &Vantage, duplicates: u64, out: &mut impl Write) -> io::Result<()> {
    let place = match v.place {
        "client" => "at the client or on its link",
        "server" => "at the server or on its link",
        "between" => "between client and server (both sides' TTLs decremented)",
        _ => "not told",
    };
    writeln!(
        out,
        "vantage    {place} (from {}, {} of {}){}",
        v.from,
        v.connections,
        count(v.of, "connection"),
        if duplicates > 0 {
            format!(" · {duplicates} duplicate segments dropped")
        } else {
            String::new()
        }
    )
}

/// Delayed-ACK timers seen, frames skipped or not decoded, and warnings.
fn capture_notes(c: &CaptureSummary, out: &mut impl Write) -> io::Result<()> {
    for a in c.delayed_ack.iter().take(3) {
        writeln!(
            out,
            "delayed ACK {} {}: {} ACKs waited {} (median), matches {}",
            a.role,
            a.endpoint,
            a.acks,
            fmt_ms(a.typical_ms),
            a.matches
        )?;
    }
    if c.non_tcp + c.fragments > 0 {
        writeln!(
            out,
            "skipped    {} non-TCP frames, {} IP fragments",
            c.non_tcp, c.fragments
        )?;
    }
    for u in &c.undecodable {
        writeln!(
            out,
            "undecoded  {} frames: {} (first: frame {})",
            u.count, u.reason, u.first_frame
        )?;
    }
    for w in &c.warnings {
        writeln!(out, "warning    {w}")?;
    }
    Ok(())
}

/// The findings that cost at least 1% of the exchanges' time, in full.
fn findings(
    list: &[Finding],
    no_exchange: bool,
    opts: TextOptions,
    out: &mut impl Write,
) -> io::Result<()> {
    if list.is_empty() {
        return writeln!(
            out,
            "FINDINGS   none: no known mechanism cost a noticeable share (1%) of the exchanges' time here."
        );
    }
    writeln!(out, "FINDINGS   ordered by time lost")?;
    for (i, f) in list.iter().enumerate() {
        finding(i + 1, f, no_exchange, opts, out)?;
    }
    Ok(())
}

/// The findings under 1%, one line each with an example.
fn minor_findings(list: &[Finding], out: &mut impl Write) -> io::Result<()> {
    if list.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "MINOR      each under 1% of the exchanges' time")?;
    for f in list {
        let ev = f
            .evidence
            .first()
            .map(|e| {
                let frames: Vec<String> = e.frames.iter().map(u64::to_string).collect();
                format!(" (e.g. conn {} frames {})", e.connection, frames.join(","))
            })
            .unwrap_or_default();
        writeln!(
            out,
            "  {} — {} {} — {} lost in {} occurrence(s){ev}",
            f.kind,
            f.culprit.role,
            f.culprit.endpoint,
            fmt_ms(f.total_delay_ms),
            f.occurrences
        )?;
    }
    Ok(())
}

/// Milliseconds as the reports print them: `1.23 s`, `44.1 ms`, `0.52 ms`.
pub use tcpdoctor_engine::fmt_ms;

fn wrap(
    text: &str,
    indent: &str,
    first: &str,
    width: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut line = String::from(first);
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            writeln!(out, "{line}")?;
            line = String::from(indent);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    if !empty {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

fn finding(
    n: usize,
    f: &Finding,
    no_exchange: bool,
    opts: TextOptions,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out)?;
    if let Some(lost) = f.details.get("requests_lost").and_then(|v| v.as_u64()) {
        // A failure: what it cost is the requests, not time.
        writeln!(
            out,
            "{n}. {} — {} {} — {lost} request(s) failed",
            f.kind, f.culprit.role, f.culprit.endpoint,
        )?;
    } else {
        writeln!(
            out,
            "{n}. {} — {} {} — {} lost ({})",
            f.kind,
            f.culprit.role,
            f.culprit.endpoint,
            fmt_ms(f.total_delay_ms),
            share_words(f, no_exchange)
        )?;
    }
    writeln!(
        out,
        "   {} on {}, typically {} each",
        count(f.occurrences, "occurrence"),
        count(f.connections, "connection"),
        fmt_ms(f.typical_delay_ms)
    )?;
    wrap(&f.explanation, "        ", "   why ", opts.width, out)?;
    wrap(&f.fix, "        ", "   fix ", opts.width, out)?;
    if let Some(p) = &f.predicted_after_fix {
        writeln!(out, "   after fix {}", prediction(p))?;
    }
    let ev: Vec<String> = f
        .evidence
        .iter()
        .take(4)
        .map(|e| {
            let frames: Vec<String> = e.frames.iter().map(u64::to_string).collect();
            format!("conn {} frames {}", e.connection, frames.join(","))
        })
        .collect();
    writeln!(out, "   evidence  {}", ev.join(" · "))?;
    if !f.wireshark_filter.is_empty() {
        writeln!(out, "   wireshark {}", f.wireshark_filter)?;
    }
    if let Some(l) = &f.ladder {
        ladder(l, ladder_shows_evidence(f), out)?;
    }
    Ok(())
}

/// Whether a finding's ladder shows the exchange its first evidence names:
/// same connection, and at least one of the frames it names drawn (evidence
/// that names no frame, a connection's whole time, leaves the ladder be).
/// The engine keeps a connection's last few packets for ladders: a finding
/// made when the connection closes can only draw those.
pub fn ladder_shows_evidence(f: &Finding) -> bool {
    match (&f.ladder, f.evidence.first()) {
        (Some(l), Some(e)) => {
            l.connection == e.connection
                && (e.frames.is_empty() || l.rows.iter().any(|r| e.frames.contains(&r.frame)))
        }
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// A finding's prediction in a line: the exchanges it touched, then all.
pub fn prediction(p: &tcpdoctor_engine::model::Prediction) -> String {
    let (a, all) = (&p.affected, &p.all);
    format!(
        "p50 {} → {}, p99 {} → {} on the {} exchange(s) it touched \
         (all exchanges: p50 {} → {}, p99 {} → {}), without {}",
        fmt_ms(a.before_p50_ms),
        fmt_ms(a.p50_ms),
        fmt_ms(a.before_p99_ms),
        fmt_ms(a.p99_ms),
        p.exchanges,
        fmt_ms(all.before_p50_ms),
        fmt_ms(all.p50_ms),
        fmt_ms(all.before_p99_ms),
        fmt_ms(all.p99_ms),
        p.parts.join(" + ")
    )
}

const ARROW: usize = 34;

fn ladder(l: &Ladder, of_evidence: bool, out: &mut impl Write) -> io::Result<()> {
    if of_evidence {
        writeln!(
            out,
            "   ladder of one exchange (connection {}):",
            l.connection
        )?;
    } else {
        writeln!(
            out,
            "   ladder of the connection's last packets, not the exchange the evidence names \
             (connection {}; --html draws that one):",
            l.connection
        )?;
    }
    writeln!(
        out,
        "   {:>9} {:>7}  {:<w$}{}",
        "t (ms)",
        "frame",
        l.client,
        l.server,
        w = ARROW + 2
    )?;
    for r in &l.rows {
        let label = if r.len > 0 {
            format!(" {} len={} ", r.flags, r.len)
        } else {
            format!(" {} ", r.flags)
        };
        let fill = ARROW.saturating_sub(label.chars().count() + 1);
        let left = fill / 2;
        let right = fill - left;
        let arrow = if r.dir == "c>s" {
            format!("|{}{}{}>|", "-".repeat(left), label, "-".repeat(right))
        } else {
            format!("|<{}{}{}|", "-".repeat(left), label, "-".repeat(right))
        };
        let note = r
            .note
            .as_deref()
            .map(|n| format!("  {n}"))
            .unwrap_or_default();
        writeln!(out, "   {:>9.3} {:>7}  {arrow}{note}", r.t_ms, r.frame)?;
    }
    Ok(())
}

fn connections(a: &Analysis, opts: TextOptions, out: &mut impl Write) -> io::Result<()> {
    let mut list: Vec<&ConnectionSummary> = a.connections.iter().collect();
    list.sort_by(|x, y| {
        y.time_lost_ms
            .total_cmp(&x.time_lost_ms)
            .then(y.duration_ms.total_cmp(&x.duration_ms))
    });
    let shown = list.len().min(opts.connections);
    writeln!(
        out,
        "CONNECTIONS {} in all; {} shown, most time lost first (--connections N for more, --format json for all)",
        a.capture.connections, shown
    )?;
    writeln!(
        out,
        "  {:>5}  {:<22} {:<22} {:>9} {:>5} {:>10} {:>12} {:>7} {:>10} {:>10}  {:<14}  end",
        "id",
        "client",
        "server",
        "rtt",
        "exch",
        "exch mean",
        "bytes c>s/s>c",
        "retrans",
        "duration",
        "lost",
        "rate limit"
    )?;
    for c in list.into_iter().take(shown) {
        let rtt = c.rtt_ms.map_or("?".to_string(), fmt_ms);
        let mean = c
            .exchange_latency_ms
            .map_or("-".to_string(), |e| fmt_ms(e.mean));
        writeln!(
            out,
            "  {:>5}  {:<22} {:<22} {:>9} {:>5} {:>10} {:>12} {:>7} {:>10} {:>10}  {:<14}  {}",
            c.id,
            c.client,
            c.server,
            rtt,
            c.exchanges,
            mean,
            format!(
                "{}/{}",
                short(c.bytes.client_to_server),
                short(c.bytes.server_to_client)
            ),
            c.retransmissions.client_to_server + c.retransmissions.server_to_client,
            fmt_ms(c.duration_ms),
            fmt_ms(c.time_lost_ms),
            rate_limit(c),
            match c.ended_by {
                Some(by) => format!("{} by {by}", c.end),
                None => c.end.to_string(),
            }
        )?;
    }
    let guessed = a
        .connections
        .iter()
        .filter(|c| c.roles_from == "port-guess")
        .count();
    if guessed > 0 {
        writeln!(
            out,
            "  ({guessed} connection(s) started before the capture: client and server guessed from the ports)"
        )?;
    }
    Ok(())
}

/// The limit of the connection's larger transfers (of the direction that
/// moved more in them), `-` without one.
fn rate_limit(c: &ConnectionSummary) -> &'static str {
    let r = &c.rate_limit;
    match (&r.client_to_server, &r.server_to_client) {
        (Some(a), Some(b)) if a.bytes > b.bytes => a.limit,
        (_, Some(b)) => b.limit,
        (Some(a), None) => a.limit,
        (None, None) => "-",
    }
}

fn short(b: u64) -> String {
    if b >= 10_000_000 {
        format!("{}M", b / 1_000_000)
    } else if b >= 10_000 {
        format!("{}K", b / 1_000)
    } else {
        b.to_string()
    }
}
