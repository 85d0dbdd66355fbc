//! Reading a capture on its own thread.
//!
//! One thread reads and decodes (the capture reader and `tcpdoctor_wire::decode`),
//! the caller's thread runs the engine: on two cores the read() copies and
//! header decoding overlap with connection tracking and diagnosis. Decoded
//! segments cross over in batches that own their bytes: the fixed fields,
//! the TCP options, and of the payload only what the engine reads
//! ([`tcpdoctor_engine::payload_needed`]). Batches are recycled, so the
//! steady state allocates nothing.

use std::fs::File;
use std::io::Read;
use std::net::IpAddr;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread;

use anyhow::Context;
use tcpdoctor_capture::{decompressed, CaptureError, CaptureReader, Compression};

use crate::merge::{Merger, Pkt};
use crate::select::{Selection, Selector};
use tcpdoctor_engine::{payload_needed, Engine};
use tcpdoctor_wire::{decode_frame, DecodeError, LinkType, Skip, TcpFlags, TcpSegment, Timestamp};

const BATCH: usize = 4096;
/// A batch is sent once its kept bytes reach this (HTTP heads and TLS
/// records are kept, and a frame may be large): memory stays bounded.
const BATCH_BYTES: usize = 16 << 20;
const IN_FLIGHT: usize = 4;
/// Kept bytes this short are copied as the fixed-size window of the frame
/// that ends with them ([`Batch::keep`]).
const WINDOW: usize = 32;

/// An opened capture (header read), or several merged by time.
pub struct Input {
    source: Source,
}

enum Source {
    One {
        reader: CaptureReader<Box<dyn Read + Send>>,
        compression: Compression,
    },
    Many(Merger),
}

/// What reading left besides the packets.
pub struct Fed {
    /// The error that stopped reading a single capture, if any.
    pub stopped: Option<CaptureError>,
    /// Several inputs: the merge, for its report.
    pub merger: Option<Merger>,
    /// Packets read and packets selected, when a selection was given.
    pub selected: Option<(u64, u64)>,
    /// With a selection: the first and last packet times read (Unix ns).
    pub read_span_ns: Option<(i64, i64)>,
}

impl Fed {
    /// What the analysis is told besides the packets: the merge's per-file
    /// problems, and a selection that kept nothing. `window` is the time
    /// window as given (`from 30 to 45`), when there is one: the message then
    /// says which times the packets read cover.
    pub fn warnings(&self, window: Option<&str>) -> Vec<String> {
        let mut w = self
            .merger
            .as_ref()
            .map(Merger::warnings)
            .unwrap_or_default();
        if let Some((read, 0)) = self.selected {
            let what = match (window, self.read_span_ns) {
                (Some(window), Some((first, last))) => format!(
                    "nothing falls in the window ({window}): the {read} packets read span {:.3} s, \
                     from {} to {}",
                    (last - first) as f64 / 1e9,
                    crate::merge::utc(first as f64 / 1e9),
                    crate::merge::utc(last as f64 / 1e9)
                ),
                _ => format!("the selection kept none of the {read} packets read"),
            };
            w.push(what);
        }
        w
    }
}

impl Input {
    /// Opens a capture file; `name` is how messages name it.
    pub fn open(path: &str, name: &str) -> anyhow::Result<Input> {
        let file = File::open(path).with_context(|| path.to_string())?;
        Input::read(Box::new(file), name)
    }

    /// A capture from any reader (standard input, bytes in memory), plain or
    /// compressed; `name` is how messages name it.
    pub fn read(src: Box<dyn Read + Send>, name: &str) -> anyhow::Result<Input> {
        let (src, compression) = decompressed(src).with_context(|| name.to_string())?;
        let reader = CaptureReader::new(src).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        Ok(Input {
            source: Source::One {
                reader,
                compression,
            },
        })
    }

    /// Several capture files, merged by time (see [`crate::merge`]).
    pub fn open_many(paths: &[String]) -> anyhow::Result<Input> {
        Ok(Input {
            source: Source::Many(crate::merge::open(paths)?),
        })
    }

    /// The container format, and the compression when there is one.
    pub fn format(&self) -> String {
        match &self.source {
            Source::One {
                reader,
                compression: Compression::None,
            } => reader.format().to_string(),
            Source::One {
                reader,
                compression,
            } => format!("{}, {compression}", reader.format()),
            Source::Many(m) => format!("{} files merged by time", m.names().count()),
        }
    }

    /// The link types the analysis will meet (of the first interface seen so far).
    pub fn link_types(&self) -> Vec<LinkType> {
        match &self.source {
            Source::One { reader, .. } => reader.link_type().into_iter().collect(),
            Source::Many(m) => m.link_types().collect(),
        }
    }

    /// Feeds every selected frame to `engine`.
    pub fn feed(self, engine: &mut Engine, selection: Selection) -> Fed {
        self.feed_with(engine, selection, |_| {})
    }

    /// [`Input::feed`], calling `each` with the engine after every batch of
    /// frames (to drain what it produced so far).
    pub fn feed_with(
        self,
        engine: &mut Engine,
        selection: Selection,
        mut each: impl FnMut(&mut Engine),
    ) -> Fed {
        let (full_tx, full_rx) = sync_channel::<Batch>(IN_FLIGHT);
        let (empty_tx, empty_rx) = sync_channel::<Batch>(IN_FLIGHT + 1);
        for _ in 0..IN_FLIGHT {
            let _ = empty_tx.send(Batch::default());
        }
        let mut selector = (!selection.is_empty()).then(|| Selector::new(selection));
        let source = self.source;
        let worker = thread::spawn(move || match source {
            Source::One { mut reader, .. } => {
                let stopped = produce(
                    &mut OneFile(&mut reader),
                    selector.as_mut(),
                    &full_tx,
                    &empty_rx,
                );
                (stopped, None, selector)
            }
            Source::Many(mut m) => {
                let stopped = produce(&mut m, selector.as_mut(), &full_tx, &empty_rx);
                (stopped, Some(m), selector)
            }
        });
        for batch in full_rx.iter() {
            for rec in &batch.recs {
                match &rec.what {
                    What::Tcp(s) => {
                        let seg = s.segment(&batch.bytes);
                        engine.push_segment(rec.ts, rec.link, rec.orig_len, &seg);
                    }
                    What::Skip(skip) => {
                        engine.push_decoded(rec.ts, rec.link, rec.orig_len, Ok(Err(*skip)))
                    }
                    What::Error(e) => engine.push_decoded(rec.ts, rec.link, rec.orig_len, Err(*e)),
                }
            }
            each(engine);
            // The worker may have finished; a closed return channel is fine.
            let _ = empty_tx.send(batch);
        }
        match worker.join() {
            Ok((stopped, merger, selector)) => Fed {
                stopped,
                merger,
                selected: selector.as_ref().map(|s| (s.read, s.kept)),
                read_span_ns: selector.and_then(|s| s.span_ns),
            },
            Err(_) => Fed {
                stopped: Some(CaptureError {
                    kind: tcpdoctor_capture::ErrorKind::Io,
                    offset: 0,
                    detail: "the reading thread failed".into(),
                }),
                merger: None,
                selected: None,
                read_span_ns: None,
            },
        }
    }
}

/// Where the packets come from: one capture, or the merge of several.
trait Packets {
    /// Several sources: decoded segments go through [`Packets::admit`].
    const MERGES: bool = false;
    fn next(&mut self) -> Result<Option<Pkt<'_>>, CaptureError>;
    /// Whether a decoded segment is analysed (the merge drops second views).
    fn admit(&mut self, _source: usize, _ts: Timestamp, _seg: &TcpSegment<'_>) -> bool {
        true
    }
}

struct OneFile<'r>(&'r mut CaptureReader<Box<dyn Read + Send>>);

impl Packets for OneFile<'_> {
    fn next(&mut self) -> Result<Option<Pkt<'_>>, CaptureError> {
        Ok(self.0.next_packet()?.map(|p| Pkt {
            ts: p.ts,
            link: p.link,
            orig_len: p.orig_len,
            data: p.data,
            source: 0,
        }))
    }
}

impl Packets for Merger {
    const MERGES: bool = true;
    fn next(&mut self) -> Result<Option<Pkt<'_>>, CaptureError> {
        Ok(self.next_packet())
    }

    fn admit(&mut self, source: usize, ts: Timestamp, seg: &TcpSegment<'_>) -> bool {
        Merger::admit(self, source, ts, seg)
    }
}

fn produce<P: Packets>(
    packets: &mut P,
    mut selector: Option<&mut Selector>,
    full: &SyncSender<Batch>,
    empty: &Receiver<Batch>,
) -> Option<CaptureError> {
    loop {
        let Ok(mut batch) = empty.recv() else {
            return None;
        };
        batch.clear();
        let mut stop = None;
        while batch.recs.len() < BATCH && batch.bytes.len() < BATCH_BYTES {
            let (ts, source) = match packets.next() {
                Ok(Some(p)) => {
                    if let Some(s) = selector.as_deref_mut() {
                        if !s.keep(p.ts, p.link, p.data) {
                            continue;
                        }
                    }
                    batch.push(p.ts, p.link, p.orig_len, p.data);
                    (p.ts, p.source)
                }
                Ok(None) => {
                    stop = Some(None);
                    break;
                }
                Err(e) => {
                    stop = Some(Some(e));
                    break;
                }
            };
            if P::MERGES {
                if let Some(seg) = batch.last_segment() {
                    if !packets.admit(source, ts, &seg) {
                        batch.pop();
                    }
                }
            }
        }
        if full.send(batch).is_err() {
            return None;
        }
        if let Some(end) = stop {
            return end;
        }
    }
}

#[derive(Default)]
struct Batch {
    recs: Vec<Rec>,
    bytes: Vec<u8>,
}

struct Rec {
    ts: Timestamp,
    link: LinkType,
    orig_len: u32,
    what: What,
}

enum What {
    Tcp(OwnedSegment),
    Skip(Skip),
    Error(DecodeError),
}

/// A [`TcpSegment`] whose option and payload bytes live in the batch: the
/// options at `at`, the payload kept right after them. Offsets are `u32`
/// (a batch's bytes stop growing past [`BATCH_BYTES`], and one frame adds at
/// most 16 MB): the record stays small to copy.
struct OwnedSegment {
    src: IpAddr,
    dst: IpAddr,
    ttl: u8,
    ip_id: u16,
    src_port: u16,
    dst_port: u16,
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    window: u16,
    payload_len: u32,
    length_clamped: bool,
    at: u32,
    options_len: u32,
    kept: u32,
}

impl Batch {
    fn clear(&mut self) {
        self.recs.clear();
        self.bytes.clear();
    }

    fn push(&mut self, ts: Timestamp, link: LinkType, orig_len: u32, data: &[u8]) {
        let rec = |what| Rec {
            ts,
            link,
            orig_len,
            what,
        };
        // Each record made where it is pushed: the segment is not moved twice.
        match decode_frame(link, data, orig_len) {
            Ok(Ok(s)) => {
                let kept = payload_needed(s.payload);
                let at = self.keep(data, s.options_raw, &s.payload[..kept]);
                self.recs.push(rec(What::Tcp(OwnedSegment {
                    src: s.src,
                    dst: s.dst,
                    ttl: s.ttl,
                    ip_id: s.ip_id,
                    src_port: s.src_port,
                    dst_port: s.dst_port,
                    seq: s.seq,
                    ack: s.ack,
                    flags: s.flags,
                    window: s.window,
                    payload_len: s.payload_len,
                    length_clamped: s.length_clamped,
                    at,
                    options_len: s.options_raw.len() as u32,
                    kept: kept as u32,
                })))
            }
            Ok(Err(skip)) => self.recs.push(rec(What::Skip(skip))),
            Err(e) => self.recs.push(rec(What::Error(e))),
        }
    }

    fn last_segment(&self) -> Option<TcpSegment<'_>> {
        match &self.recs.last()?.what {
            What::Tcp(s) => Some(s.segment(&self.bytes)),
            _ => None,
        }
    }

    /// Takes back the last record (its bytes are the last ones kept; a
    /// window's bytes before them stay, unread).
    fn pop(&mut self) {
        if let Some(Rec {
            what: What::Tcp(s), ..
        }) = self.recs.pop()
        {
            self.bytes.truncate(s.at as usize);
        }
    }

    /// Appends `options` then `payload` (both borrowed from `frame`); returns
    /// where they start (short ones after bytes of the frame before them, see
    /// [`WINDOW`]). In a TCP segment the payload follows the options: one
    /// copy of both.
    fn keep(&mut self, frame: &[u8], options: &[u8], payload: &[u8]) -> u32 {
        let start = self.bytes.len();
        match offset_in(frame, options) {
            Some(o) if offset_in(frame, payload) == Some(o + options.len()) => {
                let end = o + options.len() + payload.len();
                // Most segments keep only their options (an ACK's timestamps,
                // a SYN's): the [`WINDOW`] bytes of the frame that end with
                // them are copied at a fixed size, without a call, and the
                // kept bytes start inside that window.
                if end - o <= WINDOW && end >= WINDOW {
                    if let Ok(w) = <&[u8; WINDOW]>::try_from(&frame[end - WINDOW..end]) {
                        self.bytes.extend_from_slice(w);
                        return (start + WINDOW - (end - o)) as u32;
                    }
                }
                self.bytes.extend_from_slice(&frame[o..end])
            }
            _ => {
                self.bytes.extend_from_slice(options);
                self.bytes.extend_from_slice(payload);
            }
        }
        start as u32
    }
}

impl OwnedSegment {
    fn segment<'a>(&self, bytes: &'a [u8]) -> TcpSegment<'a> {
        let at = self.at as usize;
        TcpSegment {
            src: self.src,
            dst: self.dst,
            ttl: self.ttl,
            ip_id: self.ip_id,
            src_port: self.src_port,
            dst_port: self.dst_port,
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: self.window,
            options_raw: &bytes[at..at + self.options_len as usize],
            payload_len: self.payload_len,
            payload: &bytes[at + self.options_len as usize..][..self.kept as usize],
            length_clamped: self.length_clamped,
        }
    }
}

/// Where `part` starts inside `whole`, if it lies within it.
fn offset_in(whole: &[u8], part: &[u8]) -> Option<usize> {
    let o = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    (o.checked_add(part.len())? <= whole.len()).then_some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_selection_is_told_with_the_window_and_the_span_read() {
        let fed = |span| Fed {
            stopped: None,
            merger: None,
            selected: Some((7, 0)),
            read_span_ns: span,
        };
        let second = 1_000_000_000;
        let w = fed(Some((0, 3 * second / 2))).warnings(Some("from 5 to 6"));
        assert_eq!(
            w,
            [
                "nothing falls in the window (from 5 to 6): the 7 packets read span 1.500 s, \
              from 1970-01-01 00:00:00.000 UTC to 1970-01-01 00:00:01.500 UTC"
            ]
        );
        let w = fed(Some((0, second))).warnings(None);
        assert_eq!(w, ["the selection kept none of the 7 packets read"]);
        let kept = Fed {
            selected: Some((7, 1)),
            ..fed(None)
        };
        assert!(kept.warnings(Some("from 5")).is_empty());
    }

    #[test]
    fn offset_in_finds_parts_of_the_frame_only() {
        let frame = [0u8; 64];
        let other = [0u8; 8];
        assert_eq!(offset_in(&frame, &frame[20..32]), Some(20));
        assert_eq!(offset_in(&frame, &frame[64..]), Some(64));
        assert_eq!(offset_in(&frame, &other), None);
        assert_eq!(offset_in(&frame[..16], &frame[8..24]), None);
    }

    #[test]
    fn options_and_payload_are_kept_together_or_apart() {
        let frame: Vec<u8> = (0..40).collect();
        let mut b = Batch::default();
        // Contiguous in the frame: one copy.
        let at = b.keep(&frame, &frame[10..22], &frame[22..30]) as usize;
        assert_eq!(&b.bytes[at..at + 20], &frame[10..30]);
        // Apart (a payload that is not right after the options): both kept, in order.
        let elsewhere = [7u8, 8, 9];
        let at = b.keep(&frame, &frame[0..4], &elsewhere) as usize;
        assert_eq!(&b.bytes[at..], &[0, 1, 2, 3, 7, 8, 9]);
    }
}
