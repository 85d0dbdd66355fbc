//! `--html` and `--annotate`: the second pass over a capture file that
//! gathers time-sequence data and ladders for the findings' connections
//! and/or writes the capture back as pcapng with a comment on each evidence
//! frame (the comments are `tcpdoctor-report`'s, `annotate`). The crate's
//! only file I/O: both outputs are written under a temporary name and
//! renamed when complete.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};

use anyhow::Context;
use tcpdoctor_capture::write::{PcapNgWriter, Staged};
use tcpdoctor_capture::{CaptureReader, Packet};
use tcpdoctor_engine::model::{Analysis, LatencyBin};
use tcpdoctor_wire::{decode_frame, LinkType};

use crate::{Extras, Ladders, Recorder, Trace};

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
        (Some(_), Some(_)) => Some(Recorder::new(crate::targets(
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
        tcpdoctor_report::annotate::comments(a)
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
            feed(&mut recorder, &mut ladders, frame, &p);
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
        crate::render(
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

/// One packet of the second pass to the time-sequence recorder and the
/// ladders, decoded once when either wants it.
fn feed(
    recorder: &mut Option<Recorder>,
    ladders: &mut Option<Ladders>,
    frame: u64,
    p: &Packet<'_>,
) {
    let ladder_wants = ladders
        .as_ref()
        .is_some_and(|l| frame >= l.first_frame() && l.wants_more(frame));
    if let Some(r) = recorder.as_mut() {
        if frame < r.first_frame() || frame.is_multiple_of(1024) {
            r.tick(p.ts);
        }
        if frame >= r.first_frame() && r.wants_more() {
            match decode_frame(p.link, p.data, p.orig_len) {
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
            if let (Ok(Ok(seg)), Some(l)) =
                (decode_frame(p.link, p.data, p.orig_len), ladders.as_mut())
            {
                l.push(frame, p.ts, &seg);
            }
        }
    } else if ladder_wants {
        if let (Ok(Ok(seg)), Some(l)) = (decode_frame(p.link, p.data, p.orig_len), ladders.as_mut())
        {
            l.push(frame, p.ts, &seg);
        }
    }
}
