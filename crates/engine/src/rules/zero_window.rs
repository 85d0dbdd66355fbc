//! The receiver closing its window: it advertises 0 because its application
//! does not read (RFC 9293 §3.8.6.1); the sender stops and probes until a
//! window update. An RST's window is not a zero window.

use tcpdoctor_flow::{Connection, Dir, Mark, Segment};

use crate::budget::Part;
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{Said, Words};
use serde_json::json;

#[derive(Debug, Clone, Copy)]
struct Episode {
    start: Mark,
    probes: u32,
    first_probe: Option<u64>,
}

#[derive(Debug, Default)]
pub struct ZeroWindowState {
    /// Indexed by the receiver's sending direction.
    open: [Option<Episode>; 2],
}

impl ZeroWindowState {
    pub fn on_segment(&mut self, seg: &Segment<'_>, out: &mut Vec<Occurrence>) {
        // Nothing open and the window not closing: the common case, done.
        if seg.window != 0 && self.open[0].is_none() && self.open[1].is_none() {
            return;
        }
        let mark = Mark {
            ts: seg.ts,
            frame: seg.frame,
        };
        // As the receiver: does this segment close or reopen its window?
        if !seg.flags.syn() && !seg.flags.rst() && seg.flags.ack() {
            let slot = &mut self.open[seg.dir.index()];
            match (*slot, seg.window) {
                (None, 0) => {
                    *slot = Some(Episode {
                        start: mark,
                        probes: 0,
                        first_probe: None,
                    })
                }
                (Some(ep), w) if w > 0 => {
                    *slot = None;
                    out.push(occurrence(seg.dir, ep, mark, true));
                }
                _ => {}
            }
        }
        // As the sender facing a closed window: count its probes.
        if let Some(ep) = self.open[seg.dir.reverse().index()].as_mut() {
            if !seg.flags.rst() && seg.len <= 1 {
                ep.probes += 1;
                ep.first_probe.get_or_insert(seg.frame);
            }
        }
    }

    pub fn on_close(&mut self, conn: &Connection, out: &mut Vec<Occurrence>) {
        for d in [Dir::ClientToServer, Dir::ServerToClient] {
            if let Some(ep) = self.open[d.index()].take() {
                let end = Mark {
                    ts: conn.last_ts,
                    frame: 0,
                };
                out.push(occurrence(d, ep, end, false));
            }
        }
    }
}

fn occurrence(receiver: Dir, ep: Episode, end: Mark, reopened: bool) -> Occurrence {
    let mut frames = vec![ep.start.frame];
    frames.extend(ep.first_probe);
    if end.frame > 0 {
        frames.push(end.frame);
    }
    Occurrence {
        kind: Kind::ZeroWindow,
        culprit: Blame::Side(receiver),
        delay_ns: end.ts.since(ep.start.ts),
        notes: vec![(ep.start.frame, "window 0".into())],
        frames,
        ladder_from: Some(ep.start.frame),
        ladder: None,
        span: Some((Part::ReaderWait, ep.start.ts, end.ts)),
        detail: Detail::ZeroWindow(ZeroWindow {
            probes: ep.probes,
            reopened,
        }),
    }
}

/// The words of a `zero_window` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep, role, peer) = (s.a, s.typical, s.total, s.ep, s.role, s.peer);
    let explanation = format!(
        "{ep} ({role}) advertised a zero receive window {occ} time(s): its application stopped reading, the \
         socket's receive buffer filled, and the {peer} had to stop sending and probe (RFC 9293 §3.8.6.1; \
         {probes} probes seen) until the window reopened. Stalled {typical:.1} ms each (median), {total:.0} ms \
         in all.{open}",
        occ = a.occurrences,
        probes = a.count,
        open = if a.flagged > 0 {
            format!(" {} time(s) the window had not reopened when the capture ended.", a.flagged)
        } else {
            String::new()
        },
    );
    let fix = format!(
        "The reader at {ep} is too slow: find why its application does not read (blocked on disk, a busy \
         thread, back-pressure from elsewhere) and read more promptly; a larger receive buffer only delays \
         the stall."
    );
    (
        explanation,
        fix,
        json!({"probes": a.count, "not_reopened": a.flagged}),
    )
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct ZeroWindow {
    pub probes: u32,
    pub reopened: bool,
}

impl rule::Fold for ZeroWindow {
    fn fold(self, a: &mut crate::Aggregate) {
        a.count += u64::from(self.probes);
        a.flagged += u64::from(!self.reopened);
    }
}

impl rule::Rule for ZeroWindowState {
    #[inline]
    fn on_segment(&mut self, cx: &mut rule::SegmentCx<'_>, _: &Connection, seg: &Segment<'_>) {
        ZeroWindowState::on_segment(self, seg, cx.out);
    }

    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        ZeroWindowState::on_close(self, conn, cx.out);
    }
}

/// The verdict's sentence of a `zero_window` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    format!(
        "{} ({}) stops reading: its receive window falls to zero and the sender waits ~{} each time",
        c.ep, c.role, c.typ
    )
}
