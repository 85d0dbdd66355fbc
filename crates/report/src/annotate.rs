//! `analyze --annotate`: the comment written on each evidence frame of the
//! annotated pcapng, so that Wireshark shows what tcpdoctor found at the
//! packets themselves.

use std::collections::HashMap;

use tcpdoctor_engine::model::{Analysis, Finding};

use crate::fmt_ms;

/// A comment per evidence frame (frames in two findings get both).
pub fn comments(a: &Analysis) -> HashMap<u64, String> {
    let mut out: HashMap<u64, String> = HashMap::new();
    for f in a.findings.iter().chain(&a.minor_findings) {
        for e in &f.evidence {
            for (i, &frame) in e.frames.iter().enumerate() {
                let c = comment(f, e.frames.as_slice(), i, e.delay_ms, e.connection);
                out.entry(frame)
                    .and_modify(|s| {
                        s.push_str("; ");
                        s.push_str(&c);
                    })
                    .or_insert(c);
            }
        }
    }
    out
}

fn comment(f: &Finding, frames: &[u64], i: usize, delay_ms: f64, conn: u64) -> String {
    let delay = fmt_ms(delay_ms);
    let len = |frame: u64| {
        f.ladder
            .as_ref()
            .and_then(|l| l.rows.iter().find(|r| r.frame == frame))
            .map(|r| format!("{} B ", r.len))
            .unwrap_or_default()
    };
    if f.kind == "nagle_delayed_ack" && frames.len() == 3 {
        let (small, ack, held) = (frames[0], frames[1], frames[2]);
        return match i {
            0 => format!(
                "tcpdoctor: nagle_delayed_ack: this small segment went out; Nagle held the next one until the ACK in frame {ack}"
            ),
            1 => format!(
                "tcpdoctor: nagle_delayed_ack: delayed ACK of frame {small}, {delay} late; it released the data held by Nagle (frame {held})"
            ),
            _ => format!(
                "tcpdoctor: Nagle held this {}{delay} waiting for the ACK in frame {ack}",
                len(held)
            ),
        };
    }
    let list: Vec<String> = frames.iter().map(u64::to_string).collect();
    format!(
        "tcpdoctor: {} ({} {}): {delay} lost; evidence {} of frames {} on connection {conn}",
        f.kind,
        f.culprit.role,
        f.culprit.endpoint,
        i + 1,
        list.join(",")
    )
}
