//! One self-contained HTML report of an [`Analysis`]: the verdict and the
//! latency budget on top, the exchange-latency distribution, per finding a
//! ladder diagram and (for transfers) time-sequence and in-flight charts,
//! and a connection table that sorts and filters.
//!
//! [`render`] writes to any `Write`; [`pass::write`] reads a capture file a
//! second time for the graphs and ladders and writes the page (and the
//! annotated capture of `--annotate`) to files. Charts are SVG drawn here; the
//! only script is a few lines inline for the table, allowed by hash in the
//! page's Content-Security-Policy, so nothing else can run even if a string
//! escaped escaping. Nothing is loaded from the network. Every string that
//! can come from packets goes through [`esc`].
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::io::{self, Write};

use sha2::{Digest, Sha256};
use tcpdoctor_engine::model::{Analysis, ConnectionSummary, Finding, LatencyBin};
use tcpdoctor_report::fmt_ms;
pub use tcpdoctor_units::esc;

mod charts;
pub mod ladder;
pub mod pass;
pub mod trace;

pub use ladder::Ladders;
pub use trace::{targets, Recorder, Trace};

/// What the page shows beyond the analysis.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras<'a> {
    /// The capture's name as the user gave it.
    pub source: &'a str,
    /// `pcap (µs timestamps)` and the like.
    pub format: &'a str,
    /// From [`tcpdoctor_engine::Engine::finish_with_distribution`].
    pub latency: &'a [LatencyBin],
    /// Time-sequence data of the findings' connections ([`Recorder`]).
    pub traces: &'a [Trace],
}

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:960px;padding:16px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}
.meta{color:#555;font-size:13px}.small{color:#666;font-size:12px}
.verdict{border-left:6px solid #d62728;background:#fff5f5;padding:10px 14px;margin:14px 0}
.verdict.ok{border-color:#2ca02c;background:#f4fff4}
.verdict .kind{font-weight:700;font-family:ui-monospace,monospace}
.finding{border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin:14px 0}
.finding .head{font-size:15px}.finding .kind{font-weight:700;font-family:ui-monospace,monospace}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
pre{white-space:pre-wrap;background:#f6f8fa;padding:6px 8px;border-radius:4px}
svg.chart{display:block;max-width:100%;height:auto;margin:6px 0;font-family:ui-monospace,monospace;font-size:11px}
.legend{list-style:none;padding:0;margin:4px 0;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.onbar{fill:#fff;font-weight:700}
.axis{stroke:#888}.tick{fill:#555}.mode{fill:#111;font-weight:700;font-size:12px}
.life{stroke:#999;stroke-width:2}.col{font-weight:700;fill:#222}
.arrow line{stroke:#555;stroke-width:1.3}.arrow .lbl{fill:#333}
.arrow.hot line{stroke:#d62728;stroke-width:2.4}.arrow.hot .lbl{fill:#d62728;font-weight:700}
.note{fill:#d62728}.gap{fill:#d62728;font-weight:700}
.arrow:hover line{stroke-width:4}
path.data{stroke:#1f77b4;stroke-width:1.5;fill:none}path.retx{stroke:#d62728;stroke-width:2.5;fill:none}
path.ackl{stroke:#2ca02c;stroke-width:1.2;fill:none}path.win{stroke:#ff7f0e;stroke-width:1.2;fill:none}
path.flight{stroke:#1f77b4;stroke-width:1.2;fill:none}path.win.top{stroke-width:2;stroke-dasharray:6 3}
.k-data{fill:#1f77b4}.k-retx{fill:#d62728}.k-ack{fill:#2ca02c}.k-win{fill:#ff7f0e}.k-flight{fill:#1f77b4}
table{border-collapse:collapse;width:100%;font-size:12px}
th,td{padding:3px 6px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{cursor:pointer;background:#f6f8fa;user-select:none}th:hover{background:#e8eef5}
td.l,th.l{text-align:left}
input#filter{width:320px;padding:4px;margin:4px 0}
"#;

/// Sorts the connection table by a clicked column and filters its rows.
const SCRIPT: &str = r#"(function(){var t=document.getElementById('conns');if(!t)return;var b=t.tBodies[0];var d={};
Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,i){th.addEventListener('click',function(){d[i]=!d[i];var r=Array.prototype.slice.call(b.rows);
r.sort(function(x,y){var a=x.cells[i].getAttribute('data-v'),c=y.cells[i].getAttribute('data-v');var n=parseFloat(a),m=parseFloat(c);
var k=(!isNaN(n)&&!isNaN(m))?n-m:String(a).localeCompare(String(c));return d[i]?-k:k;});r.forEach(function(x){b.appendChild(x);});});});
var f=document.getElementById('filter');f.addEventListener('input',function(){var q=f.value.toLowerCase();
Array.prototype.forEach.call(b.rows,function(x){x.style.display=x.textContent.toLowerCase().indexOf(q)<0?'none':'';});});})();"#;

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                o.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}

/// Writes the whole page.
pub fn render(a: &Analysis, x: &Extras<'_>, out: &mut impl Write) -> io::Result<()> {
    let mut s = String::with_capacity(64 * 1024);
    let hash = base64(&Sha256::digest(SCRIPT.as_bytes()));
    let c = &a.capture;
    let _ = write!(
        s,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{hash}'"><meta name="viewport" content="width=device-width,initial-scale=1"><title>tcpdoctor: {}</title><style>{STYLE}</style></head><body>"#,
        esc(x.source)
    );
    s.push_str(r##"<svg width="0" height="0" style="position:absolute"><defs><marker id="ah" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" fill="#555"/></marker><marker id="ah-hot" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" fill="#d62728"/></marker></defs></svg>"##);
    let _ = write!(
        s,
        r#"<h1>tcpdoctor: <span id="source">{}</span></h1><div class="meta">{} · {} · <span id="packets">{}</span> packets ({} TCP) · {} connections · {:.3} s</div>"#,
        esc(x.source),
        esc(x.format),
        esc(&c.link_types.join(", ")),
        c.packets,
        c.tcp_packets,
        c.connections,
        c.duration_ms / 1e3
    );
    verdict(a, &mut s);
    if let Some(p) = &c.exchange_latency_ms {
        let _ = write!(
            s,
            r#"<div class="meta" id="latency">{} request/response exchanges · latency p50 <b>{}</b> · p90 {} · p99 {} · max {}</div>"#,
            c.exchanges,
            esc(&fmt_ms(p.p50)),
            esc(&fmt_ms(p.p90)),
            esc(&fmt_ms(p.p99)),
            esc(&fmt_ms(p.max))
        );
    }
    if let Some(b) = &c.latency_budget {
        let _ = write!(
            s,
            r#"<h2>Latency budget</h2><p>Exchanges around the median take <b id="budget-total">{}</b>; where that time went:</p>"#,
            esc(&fmt_ms(b.median.total_ms))
        );
        if let Some(note) = tcpdoctor_report::median_caveat(a) {
            let _ = write!(s, r#"<p id="budget-caveat">{}</p>"#, esc(&note));
        }
        charts::budget_bar(
            "budget-median",
            &b.median.parts_ms,
            b.median.total_ms,
            &mut s,
        );
        let _ = write!(
            s,
            r#"<p class="small">All {} exchanges, mean {}:</p>"#,
            b.mean.exchanges,
            esc(&fmt_ms(b.mean.total_ms))
        );
        charts::budget_bar("budget-mean", &b.mean.parts_ms, b.mean.total_ms, &mut s);
    }
    if !x.latency.is_empty() {
        s.push_str("<h2>Exchange latency distribution</h2><p class=\"small\">Each bar is coloured by the part of the budget that took most of its exchanges' time; each mode is labelled with the cause that explains it.</p>");
        charts::histogram(x.latency, &a.findings, &mut s);
    }
    for w in &c.warnings {
        let _ = write!(s, r#"<p class="small">warning: {}</p>"#, esc(w));
    }
    s.push_str("<h2>Findings</h2>");
    if a.findings.is_empty() {
        s.push_str(
            "<p>None: no known mechanism cost a noticeable share (1%) of the exchanges' time.</p>",
        );
    }
    for (i, f) in a.findings.iter().enumerate() {
        finding(i + 1, f, c.exchanges == 0, x, &mut s);
    }
    if !a.minor_findings.is_empty() {
        s.push_str("<h3>Minor (each under 1% of the exchanges' time)</h3><ul>");
        for f in &a.minor_findings {
            let _ = write!(
                s,
                r#"<li><span class="kind">{}</span> — {} {} — {} lost in {} occurrence(s)</li>"#,
                esc(f.kind),
                esc(f.culprit.role),
                esc(&f.culprit.endpoint),
                esc(&fmt_ms(f.total_delay_ms)),
                f.occurrences
            );
        }
        s.push_str("</ul>");
    }
    connections(a, &mut s);
    let _ = write!(
        s,
        r#"<p class="small">tcpdoctor {} · frame numbers are Wireshark's (1-based) · open the capture with <code>--annotate</code> to see these findings as packet comments.</p><script>{SCRIPT}</script></body></html>"#,
        env!("CARGO_PKG_VERSION")
    );
    out.write_all(s.as_bytes())
}

/// What a finding cost: time, or for refused and reset connections the
/// requests that failed (they are reported whatever time they took).
fn cost(f: &Finding, no_exchange: bool) -> String {
    match f.details.get("requests_lost").and_then(|v| v.as_u64()) {
        Some(n) => format!("<b>{n} request(s) failed</b>"),
        None => format!(
            "<b>{}</b> lost ({})",
            esc(&fmt_ms(f.total_delay_ms)),
            esc(&tcpdoctor_report::share_words(f, no_exchange))
        ),
    }
}

fn verdict(a: &Analysis, s: &mut String) {
    match a.findings.first() {
        Some(f) => {
            let _ = write!(
                s,
                r#"<div class="verdict" id="verdict"><span class="kind">{}</span> — {} <code>{}</code> — {}, typically <b class="typical">{}</b> each, {} on {}.<br>Fix: {}</div>"#,
                esc(f.kind),
                esc(f.culprit.role),
                esc(&f.culprit.endpoint),
                cost(f, a.capture.exchanges == 0),
                esc(&fmt_ms(f.typical_delay_ms)),
                tcpdoctor_report::count(f.occurrences, "time"),
                tcpdoctor_report::count(f.connections, "connection"),
                esc(&f.fix)
            );
        }
        None => s.push_str(r#"<div class="verdict ok" id="verdict">No known mechanism cost a noticeable share (1%) of the exchanges' time.</div>"#),
    }
}

fn finding(n: usize, f: &Finding, no_exchange: bool, x: &Extras<'_>, s: &mut String) {
    let _ = write!(
        s,
        r#"<div class="finding" id="finding-{n}" data-kind="{}"><div class="head">{n}. <span class="kind">{}</span> — {} <code>{}</code> — {}</div><div class="meta">{} on {}, typically <b class="typical">{}</b> each</div><p><b>Why.</b> {}</p><p><b>Fix.</b> {}</p>"#,
        esc(f.kind),
        esc(f.kind),
        esc(f.culprit.role),
        esc(&f.culprit.endpoint),
        cost(f, no_exchange),
        tcpdoctor_report::count(f.occurrences, "occurrence"),
        tcpdoctor_report::count(f.connections, "connection"),
        esc(&fmt_ms(f.typical_delay_ms)),
        esc(&f.explanation),
        esc(&f.fix)
    );
    let ev: Vec<String> = f
        .evidence
        .iter()
        .take(6)
        .map(|e| {
            let frames: Vec<String> = e.frames.iter().map(u64::to_string).collect();
            format!("conn {} frames {}", e.connection, frames.join(","))
        })
        .collect();
    let _ = write!(
        s,
        r#"<div class="meta">evidence: {}</div>"#,
        esc(&ev.join(" · "))
    );
    if !f.wireshark_filter.is_empty() {
        let _ = write!(
            s,
            r#"<div class="meta">Wireshark display filter:</div><pre>{}</pre>"#,
            esc(&f.wireshark_filter)
        );
    }
    // A ladder of other packets than those the evidence names would
    // contradict it: left out (the report's own pass over the capture
    // draws the evidence's packets; it cannot for standard input or merged files).
    match &f.ladder {
        Some(l) if ladder::matches_evidence(f) => {
            let _ = write!(
                s,
                "<h3>Ladder of one exchange (connection {}); hover an arrow for its frame</h3>",
                l.connection
            );
            charts::ladder(l, f.kind, s);
        }
        Some(_) => s.push_str(
            r#"<p class="small ladder-missing">No ladder: the packets of the exchange the evidence names were not at hand (the capture was read from standard input or merged from several files); open the evidence frames in Wireshark.</p>"#,
        ),
        None => {}
    }
    if let Some(tr) = f
        .evidence
        .first()
        .and_then(|e| x.traces.iter().find(|t| t.connection == e.connection))
    {
        let _ = write!(
            s,
            "<h3>Time-sequence graph, connection {} ({} {} sending)</h3>",
            tr.connection,
            esc(tr.sender_role),
            esc(&tr.sender)
        );
        charts::time_sequence(tr, s);
    }
    s.push_str("</div>");
}

fn connections(a: &Analysis, s: &mut String) {
    let _ = write!(
        s,
        r#"<h2>Connections</h2><p class="small">{} in all, {} listed (most time lost kept). Click a column to sort; type to filter.</p><input id="filter" type="search" placeholder="filter (address, port…)"><table id="conns"><thead><tr><th>id</th><th class="l">client</th><th class="l">server</th><th>rtt</th><th>exch</th><th>exch mean</th><th>bytes c&gt;s</th><th>bytes s&gt;c</th><th>retrans</th><th>duration</th><th>lost</th><th class="l">end</th></tr></thead><tbody>"#,
        a.capture.connections,
        a.connections.len()
    );
    let mut list: Vec<&ConnectionSummary> = a.connections.iter().collect();
    list.sort_by(|x, y| {
        y.time_lost_ms
            .total_cmp(&x.time_lost_ms)
            .then(x.id.cmp(&y.id))
    });
    let ms = |v: Option<f64>| match v {
        Some(v) => format!(r#"<td data-v="{v}">{}</td>"#, esc(&fmt_ms(v))),
        None => r#"<td data-v="-1">-</td>"#.to_string(),
    };
    for c in list {
        let client = c.client.to_string();
        let server = c.server.to_string();
        let _ = write!(
            s,
            r#"<tr><td data-v="{0}">{0}</td><td class="l" data-v="{1}">{1}</td><td class="l" data-v="{2}">{2}</td>{3}<td data-v="{4}">{4}</td>{5}<td data-v="{6}">{6}</td><td data-v="{7}">{7}</td><td data-v="{8}">{8}</td>{9}{10}<td class="l" data-v="{11}">{11}</td></tr>"#,
            c.id,
            esc(&client),
            esc(&server),
            ms(c.rtt_ms),
            c.exchanges,
            ms(c.exchange_latency_ms.map(|e| e.mean)),
            c.bytes.client_to_server,
            c.bytes.server_to_client,
            c.retransmissions.client_to_server + c.retransmissions.server_to_client,
            ms(Some(c.duration_ms)),
            ms(Some(c.time_lost_ms)),
            esc(c.end)
        );
    }
    s.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_of_known_values() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
