//! `--html` and `--annotate`: the second pass over a capture file that
//! gathers time-sequence data for the findings' connections and/or writes
//! the capture back as pcapng with a comment on each evidence frame.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};

use anyhow::Context;
use tcpdoctor_capture::write::{PcapNgWriter, Staged};
use tcpdoctor_capture::CaptureReader;
use tcpdoctor_engine::model::{Analysis, Finding, LatencyBin};
use tcpdoctor_report_html::{Extras, Ladders, Recorder, Trace};
use tcpdoctor_wire::{decode, LinkType};

/// Connections drawn as time-sequence graphs, at most.
const MAX_TRACES: usize = 4;
/// A connection gets one when it moved at least this many bytes one way.
const MIN_TRACE_BYTES: u64 = 16 * 1024;

/// What to produce from the second pass.
pub struct Outputs<'a> {
    pub html: Option<&'a str>,
    pub annotate: Option<&'a str>,
}

/// Writes the HTML report and/or the annotated capture. `path` is the
/// capture file (None for standard input: no time-sequence graphs, no
/// annotation).
pub fn write(
    a: &Analysis,
    bins: &[LatencyBin],
    path: Option<&str>,
    source: &str,
    format: &str,
    outs: &Outputs<'_>,
) -> anyhow::Result<()> {
    let mut recorder = match (outs.html, path) {
        (Some(_), Some(_)) => Some(Recorder::new(tcpdoctor_report_html::targets(
            a,
            MAX_TRACES,
            MIN_TRACE_BYTES,
        ))),
        _ => None,
    };
    let mut annotate = match outs.annotate {
        Some(out) => {
            // Written under a temporary name, renamed once complete: a full
            // disk leaves no half-written capture under the name asked for.
            let staged = Staged::create(out)?;
            let w = PcapNgWriter::new(BufWriter::new(staged.writer()?))?;
            Some((staged, w))
        }
        None => None,
    };
    let comments = if annotate.is_some() {
        comments(a)
    } else {
        HashMap::new()
    };
    let mut ladders = match (outs.html, path) {
        (Some(_), Some(_)) => Some(Ladders::new(a)),
        _ => None,
    };
    let wants = recorder.as_ref().is_some_and(|r| r.wants_more())
        || ladders.as_ref().is_some_and(|l| l.wants_more(0))
        || annotate.is_some();
    if let (Some(path), true) = (path, wants) {
        let file = File::open(path).with_context(|| path.to_string())?;
        let (src, _) = tcpdoctor_capture::decompressed(BufReader::with_capacity(1 << 20, file))
            .with_context(|| path.to_string())?;
        let mut reader = CaptureReader::new(src).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
        let mut frame = 0u64;
        let mut links: Vec<(LinkType, u32)> = Vec::new();
        while let Ok(Some(p)) = reader.next_packet() {
            frame += 1;
            let ladder_wants = ladders
                .as_ref()
                .is_some_and(|l| frame >= l.first_frame() && l.wants_more(frame));
            if let Some(r) = recorder.as_mut() {
                if frame < r.first_frame() || frame.is_multiple_of(1024) {
                    r.tick(p.ts);
                }
                if frame >= r.first_frame() && r.wants_more() {
                    match decode(p.link, p.data) {
                        Ok(Ok(seg)) => {
                            r.push(frame, p.ts, &seg);
                            if ladder_wants {
                                if let Some(l) = ladders.as_mut() {
                                    l.push(frame, p.ts, &seg);
                                }
                            }
                        }
                        _ => r.skip(p.ts),
                    }
                } else if ladder_wants {
                    if let (Ok(Ok(seg)), Some(l)) = (decode(p.link, p.data), ladders.as_mut()) {
                        l.push(frame, p.ts, &seg);
                    }
                }
            } else if ladder_wants {
                if let (Ok(Ok(seg)), Some(l)) = (decode(p.link, p.data), ladders.as_mut()) {
                    l.push(frame, p.ts, &seg);
                }
            }
            if let Some((_, w)) = annotate.as_mut() {
                let iface = match links.iter().find(|l| l.0 == p.link) {
                    Some(l) => l.1,
                    None => {
                        let id = w.add_interface(p.link, 262_144, 9)?;
                        links.push((p.link, id));
                        id
                    }
                };
                let ns = u64::try_from(p.ts.nanos()).unwrap_or(0);
                w.write_packet_with_comment(
                    iface,
                    ns,
                    p.data,
                    p.orig_len,
                    comments.get(&frame).map(String::as_str),
                )?;
            } else if !recorder.as_ref().is_some_and(|r| r.wants_more())
                && !ladders.as_ref().is_some_and(|l| l.wants_more(frame + 1))
            {
                break;
            }
        }
    }
    if let Some((staged, w)) = annotate {
        w.into_inner().flush()?;
        staged.commit()?;
    }
    if let Some(out) = outs.html {
        let traces: Vec<Trace> = recorder.map(Recorder::finish).unwrap_or_default();
        // Each finding's ladder from the packets its evidence names.
        let drawn;
        let a = match ladders.map(Ladders::finish) {
            Some(found) if !found.is_empty() => {
                let mut copy = a.clone();
                for (i, l) in found {
                    copy.findings[i].ladder = Some(l);
                }
                drawn = copy;
                &drawn
            }
            _ => a,
        };
        let staged = Staged::create(out)?;
        let mut w = BufWriter::new(staged.writer()?);
        tcpdoctor_report_html::render(
            a,
            &Extras {
                source,
                format,
                latency: bins,
                traces: &traces,
            },
            &mut w,
        )?;
        w.flush()?;
        drop(w);
        staged.commit()?;
    }
    Ok(())
}

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
    let delay = tcpdoctor_report::fmt_ms(delay_ms);
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
