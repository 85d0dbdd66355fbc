//! The last few packets of each connection, for the ladder diagram of a finding.

use tcpdoctor_flow::{Dir, Segment};
use tcpdoctor_wire::Timestamp;

use crate::model::LadderRow;
use crate::round3;

const RING: usize = 8;

/// A packet kept for ladder diagrams.
#[derive(Debug, Clone, Copy, Default)]
struct Recent {
    frame: u64,
    ts: Timestamp,
    client_to_server: bool,
    flags: u16,
    seq: u32,
    ack: u32,
    len: u32,
    window: u32,
}

/// The last [`RING`] packets of a connection, for ladder diagrams.
#[derive(Default)]
pub(crate) struct Ring {
    recent: [Recent; RING],
    /// Packets pushed so far: the next slot is `pushed % RING`.
    pub(crate) pushed: u64,
}

impl Ring {
    pub(crate) fn push(&mut self, seg: &Segment<'_>) {
        self.recent[(self.pushed % RING as u64) as usize] = Recent {
            frame: seg.frame,
            ts: seg.ts,
            client_to_server: seg.dir == Dir::ClientToServer,
            flags: seg.flags.0,
            seq: seg.seq,
            ack: seg.ack,
            len: seg.len,
            window: seg.window,
        };
        self.pushed += 1;
    }

    /// The remembered packets, oldest first, from `from` if it is still held.
    pub(crate) fn rows(&self, from: Option<u64>, notes: &[(u64, String)]) -> Vec<LadderRow> {
        let len = self.pushed.min(RING as u64) as usize;
        let next = (self.pushed % RING as u64) as usize;
        let start = (next + RING - len) % RING;
        let mut rows: Vec<&Recent> = (0..len).map(|i| &self.recent[(start + i) % RING]).collect();
        if let Some(f) = from {
            if let Some(pos) = rows.iter().position(|r| r.frame == f) {
                rows.drain(..pos);
            }
        }
        let t0 = rows.first().map(|r| r.ts).unwrap_or_default();
        rows.iter()
            .map(|r| LadderRow {
                frame: r.frame,
                t_ms: round3(r.ts.ms_since(t0)),
                dir: if r.client_to_server { "c>s" } else { "s>c" },
                flags: tcpdoctor_wire::TcpFlags(r.flags).to_string(),
                seq: r.seq,
                ack: r.ack,
                len: r.len,
                window: r.window,
                note: notes
                    .iter()
                    .find(|(f, _)| *f == r.frame)
                    .map(|(_, n)| n.clone()),
            })
            .collect()
    }
}
