//! Time-sequence data (Stevens / tcptrace style) for the few connections the
//! findings point to, gathered in a pass over the capture: per data segment
//! its sequence range, per ACK the acknowledged sequence and the window's
//! right edge. Memory is bounded: at most [`MAX_POINTS`] points per connection.

use std::net::{IpAddr, SocketAddr};

use tcpdoctor_engine::model::{Analysis, ConnectionSummary};
use tcpdoctor_wire::{TcpSegment, Timestamp};

/// Points kept per connection; later packets are counted, not kept.
pub const MAX_POINTS: usize = 12_000;

/// A connection to record, from the analysis.
#[derive(Debug, Clone)]
pub struct Target {
    pub connection: u64,
    client: SocketAddr,
    server: SocketAddr,
    first_frame: u64,
    /// Milliseconds since the capture's first packet.
    end_ms: f64,
    /// The data sender is the client.
    client_sends: bool,
    /// Window shift of the receiver's advertisements.
    receiver_shift: u8,
    scale_known: bool,
}

impl Target {
    fn of(c: &ConnectionSummary) -> Target {
        let client_sends = c.bytes.client_to_server >= c.bytes.server_to_client;
        let shift = if client_sends {
            c.window_scale.server_to_client
        } else {
            c.window_scale.client_to_server
        };
        Target {
            connection: c.id,
            client: c.client,
            server: c.server,
            first_frame: c.first_frame,
            end_ms: c.start_ms + c.duration_ms + 1.0,
            client_sends,
            receiver_shift: shift.unwrap_or(0),
            scale_known: shift.is_some(),
        }
    }
}

/// Findings about moving data, for which a time-sequence graph shows the mechanism.
pub const TRANSFER_KINDS: [&str; 9] = [
    "receive_window_limited",
    "send_buffer_limited",
    "zero_window",
    "packet_loss",
    "retransmission_timeout",
    "congestion_limited",
    "slow_start_after_idle",
    "path_mtu_blackhole",
    "policer",
];

/// The connections of the (major) transfer findings' first evidence (largest
/// finding first), at most `max`, those that moved at least `min_bytes` one way.
pub fn targets(a: &Analysis, max: usize, min_bytes: u64) -> Vec<Target> {
    let mut out: Vec<Target> = Vec::new();
    // Minor findings get no charts in the page.
    for f in &a.findings {
        if !TRANSFER_KINDS.contains(&f.kind) {
            continue;
        }
        let Some(e) = f.evidence.first() else {
            continue;
        };
        if out.len() >= max || out.iter().any(|t| t.connection == e.connection) {
            continue;
        }
        if let Some(c) = a.connections.iter().find(|c| c.id == e.connection) {
            if c.bytes.client_to_server.max(c.bytes.server_to_client) >= min_bytes {
                out.push(Target::of(c));
            }
        }
    }
    out
}

/// One packet of a time-sequence graph. Sequence numbers are relative to
/// the sender's first byte; `t_ms` to the connection's first recorded packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Point {
    Data {
        t_ms: f64,
        frame: u64,
        seq: u64,
        len: u32,
        retransmission: bool,
    },
    Ack {
        t_ms: f64,
        frame: u64,
        ack: u64,
        /// Advertised window (scaled bytes).
        window: u64,
    },
}

/// The recorded time-sequence data of one connection.
#[derive(Debug, Clone)]
pub struct Trace {
    pub connection: u64,
    pub sender: String,
    pub receiver: String,
    /// `client` or `server`.
    pub sender_role: &'static str,
    pub points: Vec<Point>,
    /// The connection went on past [`MAX_POINTS`] packets: the rest is not drawn.
    pub truncated: bool,
    /// The window scale was seen in the handshake.
    pub scale_known: bool,
}

struct State {
    target: Target,
    t0: Option<Timestamp>,
    base: Option<u32>,
    high: u64,
    trace: Trace,
    done: bool,
}

/// Fed every frame of the capture in order; keeps the targets' packets.
pub struct Recorder {
    states: Vec<State>,
    capture_t0: Option<Timestamp>,
}

impl Recorder {
    pub fn new(targets: Vec<Target>) -> Recorder {
        let states = targets
            .into_iter()
            .map(|t| State {
                trace: Trace {
                    connection: t.connection,
                    sender: (if t.client_sends { t.client } else { t.server }).to_string(),
                    receiver: (if t.client_sends { t.server } else { t.client }).to_string(),
                    sender_role: if t.client_sends { "client" } else { "server" },
                    points: Vec::new(),
                    truncated: false,
                    scale_known: t.scale_known,
                },
                target: t,
                t0: None,
                base: None,
                high: 0,
                done: false,
            })
            .collect();
        Recorder {
            states,
            capture_t0: None,
        }
    }

    /// Whether any target is still to be recorded.
    pub fn wants_more(&self) -> bool {
        self.states.iter().any(|s| !s.done)
    }

    /// Notes a frame that is not TCP (it still starts the capture's clock).
    pub fn skip(&mut self, ts: Timestamp) {
        self.capture_t0.get_or_insert(ts);
    }

    /// The first frame any target wants: frames before it need no decoding.
    pub fn first_frame(&self) -> u64 {
        self.states
            .iter()
            .filter(|s| !s.done)
            .map(|s| s.target.first_frame)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Notes the time of a frame not pushed: targets that ended before it are done.
    pub fn tick(&mut self, ts: Timestamp) {
        let t0 = *self.capture_t0.get_or_insert(ts);
        let t = ts.since(t0) as f64 / 1e6;
        for s in &mut self.states {
            if t > s.target.end_ms {
                s.done = true;
            }
        }
    }

    pub fn push(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment<'_>) {
        let t0 = *self.capture_t0.get_or_insert(ts);
        let src = SocketAddr::new(seg.src, seg.src_port);
        let dst = SocketAddr::new(seg.dst, seg.dst_port);
        for s in &mut self.states {
            if s.done || frame < s.target.first_frame {
                continue;
            }
            let (c, v) = (s.target.client, s.target.server);
            let from_client = same(src, c) && same(dst, v);
            let from_server = same(src, v) && same(dst, c);
            if !(from_client || from_server) {
                continue;
            }
            if ts.since(t0) as f64 / 1e6 > s.target.end_ms {
                s.done = true;
                continue;
            }
            let from_sender = from_client == s.target.client_sends;
            let start = *s.t0.get_or_insert(ts);
            let t_ms = ts.since(start) as f64 / 1e6;
            if s.trace.points.len() >= MAX_POINTS {
                // Full: the rest of the connection is not read.
                s.trace.truncated = true;
                s.done = true;
                continue;
            }
            if from_sender {
                let syn = seg.flags.syn();
                let base = *s.base.get_or_insert(seg.seq.wrapping_add(u32::from(syn)));
                if seg.payload_len == 0 {
                    continue;
                }
                let seq = u64::from(seg.seq.wrapping_sub(base));
                let end = seq + u64::from(seg.payload_len);
                s.trace.points.push(Point::Data {
                    t_ms,
                    frame,
                    seq,
                    len: seg.payload_len,
                    retransmission: end <= s.high,
                });
                s.high = s.high.max(end);
            } else if seg.flags.ack() {
                let Some(base) = s.base else {
                    continue;
                };
                let shift = if seg.flags.syn() {
                    0
                } else {
                    s.target.receiver_shift
                };
                s.trace.points.push(Point::Ack {
                    t_ms,
                    frame,
                    ack: u64::from(seg.ack.wrapping_sub(base)),
                    window: u64::from(seg.window) << shift,
                });
            }
        }
    }

    pub fn finish(self) -> Vec<Trace> {
        self.states
            .into_iter()
            .map(|s| s.trace)
            .filter(|t| !t.points.is_empty())
            .collect()
    }
}

/// Addresses equal, IPv4-mapped IPv6 and IPv4 alike.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && canon(a.ip()) == canon(b.ip())
}
