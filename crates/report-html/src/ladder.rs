//! Each finding's ladder drawn from the packets its first evidence names.
//!
//! The engine keeps only a connection's last few packets for a ladder, so the
//! one in a finding can show a later exchange than the one its evidence
//! cites (a slow handshake cited, the connection's last data drawn). In the
//! pass over the capture the report makes anyway, [`Ladders`] gathers the
//! evidence's own packets: those of its connection from the first frame it
//! names to the last, sequence numbers relative to each side's first one,
//! windows scaled as the handshake said, and the engine's notes kept where
//! they name one of these frames.

use std::net::{IpAddr, SocketAddr};

use tcpdoctor_engine::model::{Analysis, Ladder, LadderRow};
use tcpdoctor_wire::{TcpSegment, Timestamp};

/// Rows drawn at most; past that, the evidence frames and the packets right
/// after each are kept.
pub const MAX_ROWS: usize = 16;

/// Packets kept per ladder while reading, at most (the frames named by the
/// evidence and their neighbours are chosen from these).
const MAX_HELD: usize = 4096;

struct Want {
    /// Index into the analysis' findings.
    finding: usize,
    connection: u64,
    client: SocketAddr,
    server: SocketAddr,
    first_frame: u64,
    from: u64,
    to: u64,
    named: Vec<u64>,
    /// Window shift of what the client / the server advertise.
    shift: [u8; 2],
    /// Each side's first sequence number (its SYN's, or the first seen).
    base: [Option<u32>; 2],
    rows: Vec<(Timestamp, LadderRow)>,
    notes: Vec<(u64, String)>,
}

/// Fed every frame of the capture in order; gathers the findings' ladders.
pub struct Ladders {
    wants: Vec<Want>,
}

impl Ladders {
    /// A ladder for every finding (major ones: the minor ones have none in
    /// the page) whose first evidence names frames of a listed connection.
    pub fn new(a: &Analysis) -> Ladders {
        let mut wants = Vec::new();
        for (i, f) in a.findings.iter().enumerate() {
            let Some(e) = f.evidence.first() else {
                continue;
            };
            let (Some(&from), Some(&to)) = (e.frames.iter().min(), e.frames.iter().max()) else {
                continue;
            };
            let Some(c) = a.connections.iter().find(|c| c.id == e.connection) else {
                continue;
            };
            let notes = f
                .ladder
                .as_ref()
                .filter(|l| l.connection == e.connection)
                .map(|l| {
                    l.rows
                        .iter()
                        .filter_map(|r| r.note.clone().map(|n| (r.frame, n)))
                        .collect()
                })
                .unwrap_or_default();
            wants.push(Want {
                finding: i,
                connection: c.id,
                client: c.client,
                server: c.server,
                first_frame: c.first_frame,
                from,
                to,
                named: e.frames.clone(),
                shift: [
                    c.window_scale.client_to_server.unwrap_or(0),
                    c.window_scale.server_to_client.unwrap_or(0),
                ],
                base: [None, None],
                rows: Vec::new(),
                notes,
            });
        }
        Ladders { wants }
    }

    /// The first frame any ladder needs (its connection's first, for the
    /// sequence numbers' origin).
    pub fn first_frame(&self) -> u64 {
        self.wants
            .iter()
            .filter(|w| w.rows.len() < MAX_HELD)
            .map(|w| w.first_frame)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Whether a frame at or after `frame` is still wanted.
    pub fn wants_more(&self, frame: u64) -> bool {
        self.wants
            .iter()
            .any(|w| frame <= w.to && w.rows.len() < MAX_HELD)
    }

    pub fn push(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment<'_>) {
        let src = SocketAddr::new(seg.src, seg.src_port);
        let dst = SocketAddr::new(seg.dst, seg.dst_port);
        for w in &mut self.wants {
            if frame < w.first_frame || frame > w.to || w.rows.len() >= MAX_HELD {
                continue;
            }
            let side = if same(src, w.client) && same(dst, w.server) {
                0
            } else if same(src, w.server) && same(dst, w.client) {
                1
            } else {
                continue;
            };
            let base = *w.base[side].get_or_insert(if seg.flags.syn() {
                seg.seq
            } else {
                seg.seq.wrapping_sub(1)
            });
            if frame < w.from {
                continue;
            }
            let peer = w.base[1 - side];
            let shift = if seg.flags.syn() { 0 } else { w.shift[side] };
            w.rows.push((
                ts,
                LadderRow {
                    frame,
                    t_ms: 0.0,
                    dir: if side == 0 { "c>s" } else { "s>c" },
                    flags: seg.flags.to_string(),
                    seq: seg.seq.wrapping_sub(base),
                    ack: match peer {
                        Some(b) if seg.flags.ack() => seg.ack.wrapping_sub(b),
                        _ => 0,
                    },
                    len: seg.payload_len,
                    window: u32::from(seg.window) << shift.min(14),
                    note: None,
                },
            ));
        }
    }

    /// The ladders gathered, by finding index.
    pub fn finish(self) -> Vec<(usize, Ladder)> {
        self.wants
            .into_iter()
            .filter(|w| !w.rows.is_empty())
            .map(|w| {
                let rows = choose(&w.rows, &w.named);
                let t0 = rows.first().map(|r| r.0).unwrap_or_default();
                let rows = rows
                    .into_iter()
                    .map(|(ts, mut r)| {
                        r.t_ms = (ts.since(t0) as f64 / 1e3).round() / 1e3;
                        r.note = w
                            .notes
                            .iter()
                            .find(|(f, _)| *f == r.frame)
                            .map(|(_, n)| n.clone());
                        r
                    })
                    .collect();
                (
                    w.finding,
                    Ladder {
                        connection: w.connection,
                        client: w.client.to_string(),
                        server: w.server.to_string(),
                        rows,
                    },
                )
            })
            .collect()
    }
}

/// All rows if they fit; else the named frames and the packet after each,
/// in order, up to [`MAX_ROWS`].
fn choose(rows: &[(Timestamp, LadderRow)], named: &[u64]) -> Vec<(Timestamp, LadderRow)> {
    if rows.len() <= MAX_ROWS {
        return rows.to_vec();
    }
    let mut keep = vec![false; rows.len()];
    let mut n = 0;
    for (i, (_, r)) in rows.iter().enumerate() {
        if named.contains(&r.frame) && n < MAX_ROWS {
            keep[i] = true;
            n += 1;
        }
    }
    for i in 0..rows.len() {
        if n >= MAX_ROWS {
            break;
        }
        if keep[i] && i + 1 < rows.len() && !keep[i + 1] {
            keep[i + 1] = true;
            n += 1;
        }
    }
    rows.iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(r, _)| r.clone())
        .collect()
}

pub use tcpdoctor_report::ladder_shows_evidence as matches_evidence;

/// Addresses equal, IPv4-mapped IPv6 and IPv4 alike.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && canon(a.ip()) == canon(b.ip())
}
