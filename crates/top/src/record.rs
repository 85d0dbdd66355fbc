//! The records of a perf ring buffer, from bytes (`include/uapi/linux/perf_event.h`).
//! `sys.rs` hands out the ring's unread bytes in place; this parses them,
//! checked: a record whose size is 0 or runs past the bytes is counted and
//! the rest of the batch dropped (the stream cannot be resynchronised inside it).

/// `PERF_RECORD_LOST`: `{ u64 id; u64 lost; }`.
pub const RECORD_LOST: u32 = 2;
/// `PERF_RECORD_THROTTLE`: the kernel stopped sampling this event for the
/// rest of the tick (more than `kernel.perf_event_max_sample_rate`); the
/// events of that time are missed without a count.
pub const RECORD_THROTTLE: u32 = 5;
/// `PERF_RECORD_SAMPLE`.
pub const RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_LOST_SAMPLES`: `{ u64 lost; }`.
pub const RECORD_LOST_SAMPLES: u32 = 13;

/// What the events are opened with: `PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
/// PERF_SAMPLE_CPU | PERF_SAMPLE_RAW`; a sample is then laid out as
/// `u32 pid, tid; u64 time; u32 cpu, res; u32 size; u8 raw[size]`.
pub const SAMPLE_TYPE: u64 = (1 << 1) | (1 << 2) | (1 << 7) | (1 << 10);

/// One sample: who was running, when, and the tracepoint's raw record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample<'a> {
    /// Process (thread group) id; 0 for the idle task.
    pub pid: u32,
    pub tid: u32,
    /// `CLOCK_MONOTONIC`-based kernel time (perf's default clock), ns.
    pub time_ns: u64,
    pub cpu: u32,
    pub raw: &'a [u8],
}

/// A record of the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    /// Samples the kernel dropped because the ring was full.
    Lost(u64),
    /// Sampling was throttled (events missed, uncounted).
    Throttle,
    /// A record type `top` does not ask for (skipped).
    Other(u32),
    /// A sample too short for the fields its type promises.
    Malformed,
}

/// Iterates the records of `bytes`; ends early (setting `*broken`) at a
/// record whose header is unreadable or whose size overruns the bytes.
pub struct Records<'a> {
    bytes: &'a [u8],
    pub broken: bool,
}

impl<'a> Records<'a> {
    pub fn new(bytes: &'a [u8]) -> Records<'a> {
        Records {
            bytes,
            broken: false,
        }
    }
}

/// Where the unread bytes wrap around the end of the ring (`a`, then `b`),
/// the one record cut in two is copied whole into `joint` (at most 64 KiB:
/// a record's size is a `u16`): the records are then `a[..cut]`, `joint`,
/// `b[rest..]`, each whole. Bytes that do not parse are left as they are
/// for [`Records`] to find broken.
pub fn rejoin<'a>(a: &'a [u8], b: &'a [u8], joint: &'a mut Vec<u8>) -> [&'a [u8]; 3] {
    if b.is_empty() {
        // Not wrapped: nothing is cut.
        return [a, &[], b];
    }
    let mut at = 0;
    while at < a.len() {
        let left = a.len() - at;
        // The header's size field, itself cut when fewer than 8 bytes are left.
        let mut header = [0u8; 8];
        if left >= 8 {
            header.copy_from_slice(&a[at..at + 8]);
        } else if let Some(rest) = b.get(..8 - left) {
            header[..left].copy_from_slice(&a[at..]);
            header[left..].copy_from_slice(rest);
        } else {
            break;
        }
        let size = usize::from(u16::from_ne_bytes([header[6], header[7]]));
        if size < 8 {
            break;
        }
        if size > left {
            let need = size - left;
            if need > b.len() {
                break;
            }
            joint.clear();
            joint.extend_from_slice(&a[at..]);
            joint.extend_from_slice(&b[..need]);
            return [&a[..at], joint, &b[need..]];
        }
        at += size;
    }
    [a, &[], b]
}

/// The records of up to three runs of bytes, in order ([`rejoin`]); broken
/// (and ended) at the first run that is.
pub struct Runs<'a> {
    runs: [&'a [u8]; 3],
    next: usize,
    cur: Records<'a>,
}

impl<'a> Runs<'a> {
    pub fn new(runs: [&'a [u8]; 3]) -> Runs<'a> {
        Runs {
            runs,
            next: 1,
            cur: Records::new(runs[0]),
        }
    }

    pub fn broken(&self) -> bool {
        self.cur.broken
    }
}

impl<'a> Iterator for Runs<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        loop {
            if let Some(r) = self.cur.next() {
                return Some(r);
            }
            if self.cur.broken || self.next == self.runs.len() {
                return None;
            }
            self.cur = Records::new(self.runs[self.next]);
            self.next += 1;
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        if self.bytes.is_empty() || self.broken {
            return None;
        }
        // struct perf_event_header { u32 type; u16 misc; u16 size; }
        let (Some(kind), Some(size)) = (
            u32_at(self.bytes, 0),
            self.bytes
                .get(6..8)
                .map(|s| usize::from(u16::from_ne_bytes([s[0], s[1]]))),
        ) else {
            self.broken = true;
            return None;
        };
        if size < 8 || size > self.bytes.len() {
            self.broken = true;
            return None;
        }
        let (rec, rest) = self.bytes.split_at(size);
        self.bytes = rest;
        let body = &rec[8..];
        Some(match kind {
            RECORD_SAMPLE => parse_sample(body).map_or(Record::Malformed, Record::Sample),
            RECORD_LOST => u64_at(body, 8).map_or(Record::Malformed, Record::Lost),
            RECORD_LOST_SAMPLES => u64_at(body, 0).map_or(Record::Malformed, Record::Lost),
            RECORD_THROTTLE => Record::Throttle,
            k => Record::Other(k),
        })
    }
}

fn parse_sample(b: &[u8]) -> Option<Sample<'_>> {
    let pid = u32_at(b, 0)?;
    let tid = u32_at(b, 4)?;
    let time_ns = u64_at(b, 8)?;
    let cpu = u32_at(b, 16)?;
    let size = u32_at(b, 24)? as usize;
    let raw = b.get(28..28usize.checked_add(size)?)?;
    Some(Sample {
        pid,
        tid,
        time_ns,
        cpu,
        raw,
    })
}
