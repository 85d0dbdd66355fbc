//! The final report as one self-contained HTML page (`top --html`): the
//! trace on top, the findings with their explanation and fix, then the
//! processes and the connections. It is drawn from the final JSON document
//! ([`crate::report::final_doc`]), so the page and the JSON say the same.
//! The look is `analyze --html`'s. Nothing is loaded from the network and no
//! script runs (the page's Content-Security-Policy allows none); every
//! string that comes from the kernel or /proc (commands, command lines,
//! cgroups, addresses) goes through [`esc`].

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::Value;

use crate::text::{bytes, plural};
pub use tcpdoctor_units::esc;

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:960px;padding:16px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:13px}.small{color:#666;font-size:12px}
.verdict{border-left:6px solid #d62728;background:#fff5f5;padding:10px 14px;margin:14px 0}
.verdict.ok{border-color:#2ca02c;background:#f4fff4}
.finding{border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin:14px 0}
.finding .head{font-size:15px}.kind{font-weight:700;font-family:ui-monospace,monospace}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:12px}
th,td{padding:3px 6px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{background:#f6f8fa}
td.l,th.l{text-align:left}td.w{white-space:normal;word-break:break-all;min-width:160px}
"#;

/// A scalar of the document as text: strings escaped, numbers as they
/// are, null, missing or empty as `-`.
fn val(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) if !s.is_empty() => esc(s).into_owned(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => "-".into(),
    }
}

fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// A size cell: in units, the exact count of bytes on hover.
fn size(v: Option<&Value>) -> String {
    match v.and_then(Value::as_u64) {
        Some(n) => format!(r#"<td title="{n} bytes">{}</td>"#, bytes(n)),
        None => "<td>-</td>".into(),
    }
}

/// Milliseconds, two decimals.
fn ms(v: Option<&Value>) -> String {
    v.and_then(Value::as_f64)
        .map_or_else(|| "-".into(), |m| format!("{m:.2}"))
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The page of a final document (`Outcome::json`, stamped or not).
pub fn render(doc: &Value) -> String {
    let mut s = String::with_capacity(32 * 1024);
    let t = &doc["trace"];
    let findings = list(doc, "findings");
    let secs = t["duration_ms"].as_f64().unwrap_or(0.0) / 1e3;
    let _ = write!(
        s,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'"><meta name="viewport" content="width=device-width,initial-scale=1"><title>tcpdoctor top: {}, {secs:.1} s</title><style>{STYLE}</style></head><body>"#,
        plural(findings.len() as u64, "finding")
    );
    header(doc, secs, &mut s);
    s.push_str("<h2>Findings</h2>");
    if findings.is_empty() {
        s.push_str(r#"<div class="verdict ok" id="verdict">No findings: no loss, retransmission timeout, SYN retry, reset, Nagle hold or window stall.</div>"#);
    }
    for (i, f) in findings.iter().enumerate() {
        finding(i + 1, f, &mut s);
    }
    processes(doc, &mut s);
    connections(doc, &mut s);
    let version = doc["tool_version"]
        .as_str()
        .unwrap_or(env!("CARGO_PKG_VERSION"));
    let _ = write!(
        s,
        r#"<p class="small">tcpdoctor {} · from the kernel's TCP tracepoints · every field is in the JSON report (<code>--format json</code>).</p></body></html>"#,
        esc(version)
    );
    s.push('\n');
    s
}

/// The command, what was traced and how much, notes and system-wide counts.
fn header(doc: &Value, secs: f64, s: &mut String) {
    let t = &doc["trace"];
    let input = &doc["input"];
    let mut cmd = String::from("tcpdoctor top");
    for (flag, key) in [("--port", "port"), ("--pid", "pid")] {
        if let Some(v) = input.get(key).filter(|v| !v.is_null()) {
            let _ = write!(cmd, " {flag} {}", val(Some(v)));
        }
    }
    let _ = write!(
        s,
        r#"<h1>{cmd}</h1><div class="meta" id="trace">{secs:.1} s traced · {} events · <span id="lost">{} lost</span>{} · {} · {} · {} CPUs</div>"#,
        num(t, "events"),
        num(t, "lost"),
        if num(t, "lost") > 0 {
            " (counts below have holes)"
        } else {
            ""
        },
        plural(num(t, "connections"), "connection"),
        plural(num(t, "processes"), "process"),
        num(t, "cpus"),
    );
    let sys = &doc["system"];
    let notes = list(t, "notes").iter().map(|n| val(Some(n)));
    let missing = list(t, "missing_fields").iter().map(|m| {
        format!(
            "this kernel's tracepoint lacks fields (left out): {}",
            val(Some(m))
        )
    });
    let unavailable = list(t, "unavailable").iter().map(|u| {
        format!(
            "tracepoint {} does not exist on this kernel (its counts stay 0)",
            val(Some(u))
        )
    });
    let mut lines: Vec<String> = notes.chain(missing).chain(unavailable).collect();
    let (q, r, w) = (
        num(sys, "rcvqueue_full"),
        num(sys, "exceed_buf_limit_receive"),
        num(sys, "exceed_buf_limit_send"),
    );
    if q + r + w > 0 {
        lines.push(format!(
            "system: {q} receive-queue-full events, {r} receive / {w} send memory-limit events \
             (the kernel names no socket for these)"
        ));
    }
    for l in lines {
        let _ = write!(s, r#"<p class="small note">note: {l}</p>"#);
    }
}

fn finding(n: usize, f: &Value, s: &mut String) {
    let kind = val(f.get("kind"));
    let process = match f.get("process").filter(|p| p.is_object()) {
        Some(p) => format!(
            "{} (pid {})",
            p.get("command")
                .and_then(Value::as_str)
                .map_or(Cow::Borrowed("(exited)"), esc),
            val(p.get("pid"))
        ),
        None => "process unknown".into(),
    };
    let details: Vec<String> = f
        .get("details")
        .and_then(Value::as_object)
        .map(|d| {
            d.iter()
                .map(|(k, v)| format!("{} {}", esc(k), val(Some(v))))
                .collect()
        })
        .unwrap_or_default();
    let evidence: Vec<String> = list(f, "evidence")
        .iter()
        .map(|e| {
            format!(
                "conn {} {} → {} ×{}",
                val(e.get("connection")),
                val(e.get("local")),
                val(e.get("remote")),
                val(e.get("count"))
            )
        })
        .collect();
    let _ = write!(
        s,
        r#"<div class="finding" id="finding-{n}" data-kind="{kind}"><div class="head">{n}. <span class="kind">{kind}</span> — {} <code>{}</code> — {process}</div><div class="meta">{} on {}{}</div><p><b>Why.</b> {}</p><p><b>Fix.</b> {}</p><div class="small">evidence: {}</div></div>"#,
        val(f.pointer("/culprit/role")),
        val(f.pointer("/culprit/endpoint")),
        plural(num(f, "occurrences"), "occurrence"),
        plural(num(f, "connections"), "connection"),
        if details.is_empty() {
            String::new()
        } else {
            format!(" · {}", details.join(" · "))
        },
        val(f.get("explanation")),
        val(f.get("fix")),
        if evidence.is_empty() {
            "-".into()
        } else {
            evidence.join(" · ")
        }
    );
}

fn processes(doc: &Value, s: &mut String) {
    s.push_str(r#"<h2>Processes</h2><div class="scroll"><table id="processes"><thead><tr><th>pid</th><th class="l">command</th><th class="l">command line</th><th class="l">cgroup</th><th>conns</th><th>written</th><th>writes</th><th>read</th><th>reads</th><th>acked</th><th>retrans</th><th>RTO</th><th>resets</th></tr></thead><tbody>"#);
    for p in list(doc, "processes") {
        let command = match p.get("command").and_then(Value::as_str) {
            Some(c) if !c.is_empty() => esc(c),
            _ => Cow::Borrowed("(exited)"),
        };
        let _ = write!(
            s,
            r#"<tr><td>{}</td><td class="l">{command}</td><td class="l w">{}</td><td class="l w">{}</td><td>{}</td>{}<td>{}</td>{}<td>{}</td>{}<td>{}</td><td>{}</td><td>{}</td></tr>"#,
            val(p.get("pid")),
            val(p.get("cmdline")),
            val(p.get("cgroup")),
            num(p, "connections"),
            size(p.get("sent")),
            num(p, "writes"),
            size(p.get("received")),
            num(p, "reads"),
            size(p.get("acked")),
            num(p, "retransmits"),
            num(p, "rto_episodes"),
            num(p, "resets"),
        );
    }
    s.push_str("</tbody></table></div>");
}

fn connections(doc: &Value, s: &mut String) {
    let conns = list(doc, "connections");
    let unlisted = num(&doc["trace"], "connections_unlisted");
    let _ = write!(
        s,
        r#"<h2>Connections</h2><p class="small">{} listed{}. SRTT and its minimum in ms, CWND in segments; SND_WND is the peer's window, RCV_WND ours.</p><div class="scroll"><table id="connections"><thead><tr><th>id</th><th class="l">local</th><th class="l">remote</th><th class="l">role</th><th class="l">state</th><th>pid</th><th class="l">command</th><th>cookie</th><th>sent</th><th>received</th><th>srtt</th><th>min</th><th>cwnd</th><th>snd_wnd</th><th>rcv_wnd</th><th>retrans</th><th>RTO</th><th>resets</th></tr></thead><tbody>"#,
        conns.len(),
        if unlisted > 0 {
            format!(", {unlisted} more not kept")
        } else {
            String::new()
        }
    );
    for c in conns {
        let state = match (val(c.get("state")), c["closed"].as_bool()) {
            (st, Some(true)) if st == "-" => "closed".into(),
            (st, Some(true)) if st != "closed" => format!("{st} (closed)"),
            (st, _) => st,
        };
        let _ = write!(
            s,
            r#"<tr><td>{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{state}</td><td>{}</td><td class="l">{}</td><td>{}</td>{}{}<td>{}</td><td>{}</td><td>{}</td>{}{}<td>{}</td><td>{}</td><td>{}</td></tr>"#,
            val(c.get("id")),
            val(c.get("local")),
            val(c.get("remote")),
            val(c.get("role")),
            val(c.get("pid")),
            val(c.get("command")),
            val(c.get("cookie")),
            size(c.pointer("/bytes/sent")),
            size(c.pointer("/bytes/received")),
            ms(c.get("srtt_ms")),
            ms(c.get("srtt_min_ms")),
            val(c.get("cwnd")),
            size(c.get("snd_wnd")),
            size(c.get("rcv_wnd")),
            num(c, "retransmissions"),
            num(c, "rto_episodes"),
            num(c, "resets_sent") + num(c, "resets_received"),
        );
    }
    s.push_str("</tbody></table></div>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "schema": 1, "command": "top", "tool_version": "9.9.9", "input": {"port": 8080, "pid": null},
            "trace": {"events": 1234, "lost": 0, "duration_ms": 2000.0, "connections": 1,
                      "connections_unlisted": 0, "processes": 1, "cpus": 2,
                      "notes": ["a note"], "missing_fields": [], "unavailable": []},
            "system": {"rcvqueue_full": 0, "exceed_buf_limit_send": 0, "exceed_buf_limit_receive": 0},
            "processes": [{"pid": 4242, "command": "<script>alert(1)</script>",
                           "cmdline": "/usr/bin/<script>x</script> --a=1 & --b", "cgroup": "/system.slice/x.service",
                           "connections": 1, "sent": 65536, "received": 900, "acked": 65536,
                           "writes": 3, "reads": 2, "retransmits": 4, "rto_episodes": 1, "resets": 0}],
            "connections": [{"id": 7, "local": "10.0.0.1:8080", "remote": "10.0.0.2:51000",
                             "role": "server", "pid": 4242, "command": "<script>alert(1)</script>",
                             "cookie": 99, "state": "ESTABLISHED", "closed": false,
                             "bytes": {"sent": 65536, "received": 900, "acked": 65536},
                             "srtt_ms": 1.25, "srtt_min_ms": 0.5, "cwnd": 10,
                             "snd_wnd": 65535, "rcv_wnd": 87380, "retransmissions": 4,
                             "rto_episodes": 1, "resets_sent": 0, "resets_received": 0}],
            "findings": [{"kind": "retransmission_timeout",
                          "culprit": {"endpoint": "10.0.0.2:51000", "role": "network"},
                          "process": {"pid": 4242, "command": "<script>alert(1)</script>"},
                          "connections": 1, "occurrences": 1, "details": {"rto_retransmissions": 4},
                          "evidence": [{"connection": 7, "local": "10.0.0.1:8080",
                                        "remote": "10.0.0.2:51000", "count": 1}],
                          "explanation": "the retransmission timer fired",
                          "fix": "look for loss on the path"}]
        })
    }

    #[test]
    fn page_is_complete_and_shows_kernel_strings_as_text() {
        let page = render(&doc());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.trim_end().ends_with("</html>"));
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("/usr/bin/&lt;script&gt;x&lt;/script&gt; --a=1 &amp; --b"));
        // Nothing from the network.
        assert!(!page.contains("src=") && !page.contains("<link") && !page.contains("url("));
    }

    #[test]
    fn sections_in_order_with_the_finding() {
        let page = render(&doc());
        let at = |needle: &str| {
            page.find(needle)
                .unwrap_or_else(|| panic!("{needle} missing"))
        };
        assert!(at("<h1>tcpdoctor top --port 8080</h1>") < at("<h2>Findings</h2>"));
        assert!(at("<h2>Findings</h2>") < at("<h2>Processes</h2>"));
        assert!(at("<h2>Processes</h2>") < at("<h2>Connections</h2>"));
        for text in [
            "retransmission_timeout",
            "network <code>10.0.0.2:51000</code>",
            "(pid 4242)",
            "<b>Fix.</b> look for loss on the path",
            "the retransmission timer fired",
            "1234 events",
            "note: a note",
            "10.0.0.1:8080",
            "ESTABLISHED",
            "1.25",
            "tcpdoctor 9.9.9",
        ] {
            at(text);
        }
    }

    #[test]
    fn an_empty_trace_says_there_are_no_findings() {
        let f = crate::tracker::Tracker::new(crate::tracker::Filter::default()).finish();
        let d = crate::report::final_doc(&f, &crate::Setup::default(), 1.0, 1000.0);
        let page = render(&d);
        assert!(page.contains("No findings"));
        assert!(page.contains("1.0 s traced · 0 events"));
        assert!(page.trim_end().ends_with("</html>"));
    }
}
