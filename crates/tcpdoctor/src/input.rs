//! Reading a capture on its own thread.
//!
//! One thread reads and decodes (the capture reader and `tcpdoctor_wire::decode`),
//! the caller's thread runs the engine: on two cores the read() copies and
//! header decoding overlap with connection tracking and diagnosis. Decoded
//! segments cross over in batches that own their bytes: the fixed fields,
//! the TCP options, and of the payload only what the engine reads
//! ([`tcpdoctor_diagnose::payload_needed`]). Batches are recycled, so the
//! steady state allocates nothing.

use std::fs::File;
use std::io::{self, Read};
use std::net::IpAddr;
use std::ops::Range;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread;

use anyhow::Context;
use tcpdoctor_capture::{CaptureError, CaptureReader, Format};
use tcpdoctor_diagnose::{payload_needed, Engine};
use tcpdoctor_wire::{decode, DecodeError, LinkType, Skip, TcpFlags, TcpSegment, Timestamp};

const BATCH: usize = 4096;
const IN_FLIGHT: usize = 4;

/// An opened capture, header read.
pub struct Input {
    reader: CaptureReader<Box<dyn Read + Send>>,
}

impl Input {
    pub fn open(path: &str, name: &str) -> anyhow::Result<Input> {
        let src: Box<dyn Read + Send> = if path == "-" {
            Box::new(io::stdin())
        } else {
            Box::new(File::open(path).with_context(|| path.to_string())?)
        };
        let reader = CaptureReader::new(src).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        Ok(Input { reader })
    }

    pub fn format(&self) -> Format {
        self.reader.format()
    }

    pub fn link_type(&self) -> Option<LinkType> {
        self.reader.link_type()
    }

    /// Feeds every frame to `engine`; returns the error that stopped reading, if any.
    pub fn feed(self, engine: &mut Engine) -> Option<CaptureError> {
        self.feed_with(engine, |_| {})
    }

    /// [`Input::feed`], calling `each` with the engine after every batch of
    /// frames (to drain what it produced so far).
    pub fn feed_with(
        self,
        engine: &mut Engine,
        mut each: impl FnMut(&mut Engine),
    ) -> Option<CaptureError> {
        let (full_tx, full_rx) = sync_channel::<Batch>(IN_FLIGHT);
        let (empty_tx, empty_rx) = sync_channel::<Batch>(IN_FLIGHT + 1);
        for _ in 0..IN_FLIGHT {
            let _ = empty_tx.send(Batch::default());
        }
        let mut reader = self.reader;
        let worker = thread::spawn(move || produce(&mut reader, &full_tx, &empty_rx));
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
        worker.join().unwrap_or_else(|_| {
            Some(CaptureError {
                kind: tcpdoctor_capture::ErrorKind::Io,
                offset: 0,
                detail: "the reading thread failed".into(),
            })
        })
    }
}

fn produce<R: Read>(
    reader: &mut CaptureReader<R>,
    full: &SyncSender<Batch>,
    empty: &Receiver<Batch>,
) -> Option<CaptureError> {
    loop {
        let Ok(mut batch) = empty.recv() else {
            return None;
        };
        batch.clear();
        let mut stop = None;
        while batch.recs.len() < BATCH {
            match reader.next_packet() {
                Ok(Some(p)) => batch.push(p.ts, p.link, p.orig_len, p.data),
                Ok(None) => {
                    stop = Some(None);
                    break;
                }
                Err(e) => {
                    stop = Some(Some(e));
                    break;
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

/// A [`TcpSegment`] whose option and payload bytes live in the batch.
struct OwnedSegment {
    src: IpAddr,
    dst: IpAddr,
    ttl: u8,
    src_port: u16,
    dst_port: u16,
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    window: u16,
    payload_len: u32,
    options: Range<usize>,
    payload: Range<usize>,
}

impl Batch {
    fn clear(&mut self) {
        self.recs.clear();
        self.bytes.clear();
    }

    fn push(&mut self, ts: Timestamp, link: LinkType, orig_len: u32, data: &[u8]) {
        let what = match decode(link, data) {
            Ok(Ok(s)) => {
                let options = self.keep(s.options_raw);
                let payload = self.keep(&s.payload[..payload_needed(s.payload)]);
                What::Tcp(OwnedSegment {
                    src: s.src,
                    dst: s.dst,
                    ttl: s.ttl,
                    src_port: s.src_port,
                    dst_port: s.dst_port,
                    seq: s.seq,
                    ack: s.ack,
                    flags: s.flags,
                    window: s.window,
                    payload_len: s.payload_len,
                    options,
                    payload,
                })
            }
            Ok(Err(skip)) => What::Skip(skip),
            Err(e) => What::Error(e),
        };
        self.recs.push(Rec {
            ts,
            link,
            orig_len,
            what,
        });
    }

    fn keep(&mut self, b: &[u8]) -> Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(b);
        start..self.bytes.len()
    }
}

impl OwnedSegment {
    fn segment<'a>(&self, bytes: &'a [u8]) -> TcpSegment<'a> {
        TcpSegment {
            src: self.src,
            dst: self.dst,
            ttl: self.ttl,
            src_port: self.src_port,
            dst_port: self.dst_port,
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: self.window,
            options_raw: &bytes[self.options.clone()],
            payload_len: self.payload_len,
            payload: &bytes[self.payload.clone()],
        }
    }
}
