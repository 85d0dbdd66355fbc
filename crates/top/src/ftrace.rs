//! The pages of ftrace's ring buffer, from bytes: what a read of
//! `per_cpu/cpuN/trace_pipe_raw` returns (`kernel/trace/ring_buffer.c`; the
//! layout is in tracefs' `events/header_page` and `events/header_event`).
//!
//! A page is `u64 timestamp; local_t commit; data[]`: `commit`'s low bits
//! are the bytes of data, its bits 31 and 30 say that events were missed
//! before the page and that their count is stored after the data. The data
//! is a run of events, each a `u32` header (`type_len` in its 5 low bits,
//! `time_delta` in the 27 others) and then:
//! - `type_len` 1–28: that many 32-bit words of record;
//! - 0: a `u32` length (itself included) and the record;
//! - 29: padding (to the end of the page when `time_delta` is 0);
//! - 30: a time extend, `time_delta` + the next word << 27 added to the clock;
//! - 31: an absolute time stamp, the same two pieces.
//!
//! Each event's time is the page's timestamp plus every delta up to it. The
//! record is the tracepoint's own (`common_type` first), as perf's raw
//! samples hold it, so `decode.rs` reads both. Nothing here trusts a length:
//! an event that runs past the data ends the page, counted as malformed.

/// A page of the ring: the size of every read of `trace_pipe_raw`.
pub const PAGE: usize = 4096;
const HEADER: usize = 16;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
/// The data's length in `commit` (a page is far smaller).
const SIZE_MASK: u64 = (1 << 27) - 1;

const PADDING: u32 = 29;
const TIME_EXTEND: u32 = 30;
const TIME_STAMP: u32 = 31;

/// An item of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// A tracepoint's record and its time (ns, the instance's clock).
    Event { time_ns: u64, raw: &'a [u8] },
    /// An event whose length runs past the data (the page's rest is dropped).
    Malformed,
}

/// The events of one page, in order.
#[derive(Debug, Clone)]
pub struct Page<'a> {
    data: &'a [u8],
    at: usize,
    time: u64,
    /// Events the kernel dropped before this page (the ring was full):
    /// `Some(0)` when it says some were and not how many.
    pub missed: Option<u64>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

impl<'a> Page<'a> {
    /// The page `bytes` holds (one read of `trace_pipe_raw`); `None` when it
    /// is too short for its header or its data's length runs past it.
    pub fn parse(bytes: &'a [u8]) -> Option<Page<'a>> {
        let time = u64_at(bytes, 0)?;
        let commit = u64_at(bytes, 8)?;
        let size = (commit & SIZE_MASK) as usize;
        let end = HEADER.checked_add(size)?;
        let data = bytes.get(HEADER..end)?;
        let missed = if commit & MISSED_STORED != 0 {
            // The count follows the data, when the page had room for it.
            Some(u64_at(bytes, end).unwrap_or(0))
        } else if commit & MISSED_EVENTS != 0 {
            Some(0)
        } else {
            None
        };
        Some(Page {
            data,
            at: 0,
            time,
            missed,
        })
    }
}

impl<'a> Iterator for Page<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        loop {
            let header = u32_at(self.data, self.at)?;
            let kind = header & 0x1f;
            let delta = u64::from(header >> 5);
            let word = || u32_at(self.data, self.at + 4);
            let (len, record) = match kind {
                PADDING if delta == 0 => {
                    self.at = self.data.len();
                    return None;
                }
                PADDING => match word() {
                    Some(n) => (4 + n as usize, None),
                    None => (usize::MAX, None),
                },
                TIME_EXTEND => match word() {
                    Some(hi) => {
                        self.time = self.time.wrapping_add(u64::from(hi) << 27 | delta);
                        (8, None)
                    }
                    None => (usize::MAX, None),
                },
                TIME_STAMP => match word() {
                    Some(hi) => {
                        // It may hold the low 59 bits only: the rest from the clock so far.
                        let abs = u64::from(hi) << 27 | delta;
                        self.time = if abs < 1 << 59 {
                            abs | self.time & !((1 << 59) - 1)
                        } else {
                            abs
                        };
                        (8, None)
                    }
                    None => (usize::MAX, None),
                },
                0 => match word() {
                    // The length counts its own word.
                    Some(n) if n >= 4 => (4 + n as usize, Some((8, n as usize - 4))),
                    _ => (usize::MAX, None),
                },
                words => (4 + 4 * words as usize, Some((4, 4 * words as usize))),
            };
            let Some(end) = self.at.checked_add(len).filter(|&e| e <= self.data.len()) else {
                self.at = self.data.len();
                return Some(Item::Malformed);
            };
            let start = self.at;
            self.at = end;
            if let Some((off, n)) = record {
                self.time = self.time.wrapping_add(delta);
                return Some(Item::Event {
                    time_ns: self.time,
                    raw: &self.data[start + off..start + off + n],
                });
            }
        }
    }
}
