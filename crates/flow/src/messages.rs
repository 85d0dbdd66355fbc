//! Messages of the self-delimiting protocols of message brokers (AMQP 0-9-1,
//! MQTT, STOMP, NATS) and of JSON-RPC over lines, where each side sends
//! messages of its own accord: a broker delivers to a consumer when some
//! publisher publishes, a client acknowledges a delivery and expects nothing
//! back, either side sends heartbeats. Read as request and response, a delivery after an
//! acknowledgement is the broker "thinking" for the publisher's pace, and a
//! client's second publish minutes after its first is one request paused
//! inside.
//!
//! The framing tells where a message ends, and the message's kind whether
//! it asks for an answer (a client's CONNECT, SUBSCRIBE, PING, a publish
//! that wants its acknowledgement) or gives one (CONNACK, SUBACK, PONG), or
//! is neither (an acknowledgement, a delivery, a heartbeat).
//! [`Messages::on_data`] reads each new segment and keeps count of the
//! answers the client is owed; the connection ends an exchange where nobody
//! waits on what follows ([`Turn`]): server data while nothing is owed is not
//! an answer, and a client message after messages that asked nothing starts
//! a request of its own. A connection whose first data is of none of these
//! protocols costs one comparison per segment after it.

use crate::Dir;

/// The protocol a connection speaks, as far as its messages tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Proto {
    /// Not decided: no data yet, or one side's first data fits a protocol
    /// whose name it does not carry ([`Messages::candidate`]).
    #[default]
    Unknown,
    /// None of these.
    Other,
    Amqp,
    Mqtt,
    Stomp,
    Nats,
    /// JSON-RPC (1.0 and 2.0) as one JSON object per line: Stratum's mining
    /// pools, Ethereum's and Bitcoin's work proxies, many a service's RPC.
    JsonRpc,
}

/// What a connection learns from the messages of one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Nothing to change.
    Same,
    /// The sender's earlier messages are done and nobody waits on what
    /// they started: the exchange in progress ends before this segment.
    Ends,
}

/// Per connection.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Messages {
    proto: Proto,
    /// A protocol one side's first data fits without naming it, waiting for
    /// the other side's first data to agree.
    candidate: Proto,
    /// Per direction ([`Dir::index`]): the data so far ended where a message
    /// ended.
    boundary: [bool; 2],
    /// Answers the client asked for and has not had.
    owed: u32,
    /// Per direction: its first data was seen.
    seen: [bool; 2],
    /// Per direction: bytes of the frame in progress still to come, and
    /// whether a message ends with it.
    rest: [u32; 2],
    ends: [bool; 2],
    /// Per direction: the sequence number of the next byte expected.
    next: [u32; 2],
}

impl Messages {
    /// Whether this connection is known to speak none of these protocols.
    #[inline]
    pub(crate) fn is_other(&self) -> bool {
        self.proto == Proto::Other
    }

    /// Reads a segment of new data in `dir` (`seq` its first byte's sequence
    /// number, `len` its length, `payload` what the capture kept of it);
    /// `response_begun`: the exchange in progress has a response. Whether
    /// that exchange ends before this segment.
    pub(crate) fn on_data(
        &mut self,
        dir: Dir,
        seq: u32,
        len: u32,
        payload: &[u8],
        response_begun: bool,
    ) -> Turn {
        if self.proto == Proto::Other {
            return Turn::Same;
        }
        let d = dir.index();
        let first = !self.seen[d];
        self.seen[d] = true;
        if self.proto == Proto::Unknown && !self.decide(dir, payload, len, first) {
            return Turn::Same;
        }
        let proto = if self.proto == Proto::Unknown {
            self.candidate
        } else {
            self.proto
        };
        // What was true before this segment decides the turn: the sender
        // between messages, and nothing owed — or, from the server, a
        // message that answers nothing whatever is owed (a delivery, a
        // notification: a request it never answers does not make every
        // later push its answer).
        let (owed, between) = (self.owed, self.boundary[d]);
        let push = self.read(proto, dir, seq, len, payload);
        let turn = self.proto != Proto::Unknown
            && match dir {
                // What the server sends now answers nothing: the response
                // before it (if any) is whole, and this is a message of its own.
                Dir::ServerToClient => (owed == 0 || push) && (between || !response_begun),
                // The client's request so far asked for nothing: another
                // message starts a request of its own.
                Dir::ClientToServer => owed == 0 && between && !response_begun,
            };
        if turn {
            Turn::Ends
        } else {
            Turn::Same
        }
    }

    /// Decides the protocol from a side's first data, or keeps it a
    /// candidate; whether the messages are to be read.
    #[cold]
    fn decide(&mut self, dir: Dir, payload: &[u8], len: u32, first: bool) -> bool {
        if first {
            if let Some(p) = named(dir, payload) {
                self.proto = p;
                return true;
            }
        }
        let decided = match (self.candidate, first) {
            // More of the side whose first data made the candidate.
            (c, false) if c != Proto::Unknown => return true,
            (_, false) => Proto::Other,
            (Proto::Unknown, true) => {
                let fits = [
                    Proto::Amqp,
                    Proto::Mqtt,
                    Proto::Stomp,
                    Proto::Nats,
                    Proto::JsonRpc,
                ]
                .into_iter()
                .find(|&p| may_start(p, dir, payload) && fits(p, dir, payload, len));
                match fits {
                    Some(p) => {
                        self.candidate = p;
                        return true;
                    }
                    None => Proto::Other,
                }
            }
            // The other side's first data: it agrees, or it is none.
            (c, true) if fits(c, dir, payload, len) => c,
            _ => Proto::Other,
        };
        self.proto = decided;
        decided != Proto::Other
    }

    /// Follows the messages of one segment: where the last one ends, and
    /// the answers asked for and given. Whether the first message that
    /// starts in it answers nothing (from the server: a push).
    fn read(&mut self, proto: Proto, dir: Dir, seq: u32, len: u32, payload: &[u8]) -> bool {
        let d = dir.index();
        let in_order = self.next[d] == seq;
        self.next[d] = seq.wrapping_add(len);
        let mut skip = 0;
        if in_order && self.rest[d] == OPEN {
            // A text frame begun earlier goes on to its end: STOMP's NUL, a
            // JSON line's end.
            let end = if proto == Proto::Stomp { 0 } else { b'\n' };
            let Some(n) = payload.iter().position(|&b| b == end) else {
                return false;
            };
            skip = n + 1;
            self.rest[d] = 0;
        } else if in_order && self.rest[d] > 0 {
            // The rest of a message begun earlier.
            if self.rest[d] >= len {
                self.rest[d] -= len;
                self.boundary[d] = self.rest[d] == 0 && self.ends[d];
                return false;
            }
            skip = self.rest[d] as usize;
            self.rest[d] = 0;
        } else if !in_order {
            self.rest[d] = 0;
        }
        let body = payload.get(skip..).unwrap_or_default();
        let mut push = false;
        match walk(proto, dir, body, (len as usize).saturating_sub(skip)) {
            Some(w) => {
                self.rest[d] = w.rest;
                self.ends[d] = w.ends;
                push = w.first == Some(false);
                self.boundary[d] = w.rest == 0 && w.ends;
                self.owed = (self.owed + w.asks).saturating_sub(w.answers);
                // A JSON-RPC server may leave requests unanswered (a
                // pool ignoring a hashrate report): its answer settles all.
                if proto == Proto::JsonRpc && w.answers > 0 {
                    self.owed = 0;
                }
            }
            None => {
                // Lost track (a segment the capture cut short, bytes
                // missed): nothing is known until a segment reads whole;
                // a client may have asked.
                self.rest[d] = 0;
                self.boundary[d] = false;
                if dir == Dir::ClientToServer {
                    self.owed = self.owed.max(1);
                }
            }
        }
        push
    }
}

/// [`Walk::rest`] of a text frame that goes on to its end marker.
const OPEN: u32 = u32::MAX;

/// What [`walk`] found in one segment.
struct Walk {
    /// Bytes of its last message still to come.
    rest: u32,
    /// The segment ends where a message (or a heartbeat) ends.
    ends: bool,
    /// Messages that start in it and ask for an answer (a client's), or
    /// give one (a server's).
    asks: u32,
    answers: u32,
    /// Whether the first message that starts in it asks (a client's) or
    /// answers (a server's); heartbeats and content frames are neither.
    first: Option<bool>,
}

impl Walk {
    /// A client's message that asks for an answer, or a server's that gives
    /// one.
    fn count(&mut self, dir: Dir, yes: bool) {
        self.first.get_or_insert(yes);
        let n = u32::from(yes);
        match dir {
            Dir::ClientToServer => self.asks += n,
            Dir::ServerToClient => self.answers += n,
        }
    }
}

/// No messages yet.
const EMPTY: Walk = Walk {
    rest: 0,
    ends: true,
    asks: 0,
    answers: 0,
    first: None,
};

/// A protocol a side's first data names: AMQP's protocol header, MQTT's
/// CONNECT with its protocol name, STOMP's CONNECT, STOMP or CONNECTED frame,
/// NATS's INFO or CONNECT with its JSON.
fn named(dir: Dir, p: &[u8]) -> Option<Proto> {
    // Most first data is told by its first byte.
    if !matches!(p.first(), Some(b'A' | 0x10 | b'C' | b'S' | b'I' | b'{')) {
        return None;
    }
    if dir == Dir::ClientToServer && p.first() == Some(&b'{') {
        let line = p.split(|&b| b == b'\n').next().unwrap_or_default();
        let named = line.windows(9).any(|w| w == b"\"jsonrpc\"");
        return named.then_some(Proto::JsonRpc);
    }
    if dir == Dir::ClientToServer && p.starts_with(b"AMQP\0") {
        return Some(Proto::Amqp);
    }
    if dir == Dir::ClientToServer && p.first() == Some(&0x10) {
        let (_, at) = remaining_length(&p[1..])?;
        let name = p.get(1 + at + 2..)?;
        if name.starts_with(b"MQTT") || name.starts_with(b"MQIsdp") {
            return Some(Proto::Mqtt);
        }
    }
    let stomp: &[&[u8]] = match dir {
        Dir::ClientToServer => &[b"CONNECT\n", b"CONNECT\r\n", b"STOMP\n", b"STOMP\r\n"],
        Dir::ServerToClient => &[b"CONNECTED\n", b"CONNECTED\r\n"],
    };
    if stomp.iter().any(|c| p.starts_with(c)) {
        return Some(Proto::Stomp);
    }
    let nats: &[u8] = match dir {
        Dir::ClientToServer => b"CONNECT {",
        Dir::ServerToClient => b"INFO {",
    };
    p.starts_with(nats).then_some(Proto::Nats)
}

/// Whether `p`'s first byte may start a message of `proto`: most
/// connections' first data (an HTTP request, a TLS ClientHello) is told
/// from all four by it.
fn may_start(proto: Proto, dir: Dir, p: &[u8]) -> bool {
    let Some(&b) = p.first() else {
        return false;
    };
    match proto {
        Proto::Amqp => matches!(b, 1 | 2 | 3 | 8),
        Proto::Mqtt => {
            let kind = b >> 4;
            match dir {
                Dir::ClientToServer => matches!(kind, 1 | 3..=8 | 10 | 12 | 14 | 15),
                Dir::ServerToClient => matches!(kind, 2..=7 | 9 | 11 | 13 | 14 | 15),
            }
        }
        Proto::Stomp => matches!(
            b,
            b'S' | b'U' | b'A' | b'N' | b'B' | b'C' | b'D' | b'M' | b'R' | b'E' | b'\r' | b'\n'
        ),
        Proto::Nats => matches!(
            b.to_ascii_uppercase(),
            b'C' | b'P' | b'S' | b'U' | b'I' | b'M' | b'H' | b'+' | b'-'
        ),
        Proto::JsonRpc => b == b'{',
        Proto::Unknown | Proto::Other => false,
    }
}

/// Whether a side's first data, kept whole, is whole messages of `proto`
/// and nothing else: what a connection picked up without the protocol's
/// name needs, from both sides, to be read as speaking it.
fn fits(proto: Proto, dir: Dir, p: &[u8], len: u32) -> bool {
    p.len() >= len as usize && walk(proto, dir, p, p.len()).is_some_and(|w| w.rest == 0)
}

/// The segment read as whole messages of `proto` from its first byte (its
/// last may go on in the next segment), or `None` when it is not.
/// `len` is the segment's length: the capture (or the reader,
/// [`message_prefix`]) may have kept only the first bytes of a long one, and
/// a frame's header is what a length-framed protocol needs.
fn walk(proto: Proto, dir: Dir, p: &[u8], len: usize) -> Option<Walk> {
    match proto {
        Proto::Amqp => amqp(dir, p, len),
        Proto::Mqtt => mqtt(dir, p, len),
        Proto::Stomp if p.len() >= len => stomp(dir, p),
        Proto::Nats if p.len() >= len => nats(dir, p),
        Proto::JsonRpc if p.len() >= len => json_rpc(dir, p),
        _ => None,
    }
}

/// How many leading bytes of a segment's payload [`Messages`] reads: all of
/// a short one (a broker's messages are mostly short), the first frame's
/// header of a long one.
#[inline]
pub fn message_prefix(payload: &[u8]) -> usize {
    const SHORT: usize = 512;
    const HEADER: usize = 16;
    if payload.len() <= SHORT {
        payload.len()
    } else {
        HEADER
    }
}

/// AMQP 0-9-1 frames: type (1 method, 2 content header, 3 content body, 8
/// heartbeat), channel, size, payload, and the frame-end octet 0xCE. A
/// client's methods ask for an answer but for a publish, an acknowledgement
/// (Ack, Nack, Reject), RecoverAsync, Tune-Ok and the Close-Oks; a server's
/// give one but for a delivery, a return, a publisher confirm, a close, a
/// flow control, Blocked and Unblocked, and a consumer's cancellation.
fn amqp(dir: Dir, p: &[u8], len: usize) -> Option<Walk> {
    const FRAME_END: u8 = 0xCE;
    let mut w = EMPTY;
    if p.starts_with(b"AMQP\0") && len == 8 {
        // The protocol header asks for Connection.Start.
        w.count(dir, dir == Dir::ClientToServer);
        return Some(w);
    }
    let mut at = 0;
    while at < len {
        let h = p.get(at..at + 7)?;
        let kind = h[0];
        let size = u32::from_be_bytes([h[3], h[4], h[5], h[6]]);
        let body = p.get(at + 7..);
        match kind {
            1 => {
                let (class, method) = body.and_then(|m| m.get(..4)).map_or((0, 0), |m| {
                    (
                        u16::from_be_bytes([m[0], m[1]]),
                        u16::from_be_bytes([m[2], m[3]]),
                    )
                });
                let not = match dir {
                    Dir::ClientToServer => matches!(
                        (class, method),
                        (60, 40 | 80 | 90 | 100 | 120) | (10, 31 | 51) | (20, 21 | 41)
                    ),
                    Dir::ServerToClient => matches!(
                        (class, method),
                        (60, 30 | 50 | 60 | 80 | 120) | (10, 50 | 60 | 61) | (20, 20 | 40)
                    ),
                };
                w.count(dir, !not);
                // Basic.Publish, Return, Deliver, Get-Ok carry content.
                w.ends = !(class == 60 && matches!(method, 40 | 50 | 60 | 71));
            }
            // A content header: its body size (after class and weight).
            2 => {
                w.ends = body
                    .and_then(|b| b.get(4..12))
                    .is_some_and(|b| b.iter().all(|&x| x == 0));
            }
            3 => w.ends = true,
            // A heartbeat: no payload, on channel 0.
            8 if size == 0 && h[1] == 0 && h[2] == 0 => w.ends = true,
            _ => return None,
        }
        let end = at + 7 + size as usize;
        if end >= len {
            // The frame goes on in the next segment (its end octet with it).
            w.rest = (end + 1 - len) as u32;
            return Some(w);
        }
        if p.get(end).is_some_and(|&b| b != FRAME_END) {
            return None;
        }
        at = end + 1;
    }
    Some(w)
}

/// MQTT's remaining length (1 to 4 bytes, 7 bits each) and how many bytes
/// it took.
fn remaining_length(p: &[u8]) -> Option<(u32, usize)> {
    let mut v = 0u32;
    for (i, &b) in p.iter().take(4).enumerate() {
        v |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// MQTT control packets (3.1.1 and 5): type and flags, remaining length. A
/// client's CONNECT, PUBLISH at QoS 1 or 2, PUBREC, PUBREL, SUBSCRIBE,
/// UNSUBSCRIBE, PINGREQ and AUTH ask for an answer; a server's packets all
/// give one but PUBLISH and DISCONNECT.
fn mqtt(dir: Dir, p: &[u8], len: usize) -> Option<Walk> {
    let mut w = EMPTY;
    let mut at = 0;
    while at < len {
        let b = *p.get(at)?;
        let (kind, flags) = (b >> 4, b & 0x0f);
        let valid = match kind {
            0 => false,
            3 => flags & 0x06 != 0x06,
            6 | 8 | 10 => flags == 0x02,
            _ => flags == 0,
        };
        if !valid {
            return None;
        }
        let (size, n) = remaining_length(p.get(at + 1..)?)?;
        // Who may send it, and the length its kind allows.
        let from_client = matches!(kind, 1 | 3..=8 | 10 | 12 | 14 | 15);
        let from_server = matches!(kind, 2..=7 | 9 | 11 | 13 | 14 | 15);
        let sized = match kind {
            2 | 4..=7 | 8..=11 => size >= 2,
            12 | 13 => size == 0,
            _ => true,
        };
        let sender = match dir {
            Dir::ClientToServer => from_client,
            Dir::ServerToClient => from_server,
        };
        if !sender || !sized {
            return None;
        }
        let head = at + 1 + n;
        if kind == 1
            && !p
                .get(head + 2..)
                .is_some_and(|x| x.starts_with(b"MQTT") || x.starts_with(b"MQIsdp"))
        {
            return None;
        }
        if kind == 3 {
            // The topic's length, and the packet identifier at QoS 1 or 2.
            if let Some(t) = p.get(head..head + 2) {
                let topic = usize::from(u16::from_be_bytes([t[0], t[1]]));
                let id = if flags & 0x06 != 0 { 2 } else { 0 };
                if 2 + topic + id > size as usize {
                    return None;
                }
            }
        }
        let yes = match dir {
            Dir::ClientToServer => match kind {
                3 => flags & 0x06 != 0,
                1 | 5 | 6 | 8 | 10 | 12 | 15 => true,
                _ => false,
            },
            Dir::ServerToClient => !matches!(kind, 3 | 14),
        };
        w.count(dir, yes);
        let end = at + 1 + n + size as usize;
        if end > len {
            w.rest = (end - len) as u32;
            return Some(w);
        }
        at = end;
    }
    Some(w)
}

/// STOMP frames: a command line, headers, a blank line, a body, NUL; a
/// heartbeat is an end of line alone. A client's CONNECT (or STOMP) and any
/// frame with a `receipt` header ask for an answer; a server's CONNECTED,
/// RECEIPT and ERROR give one.
fn stomp(dir: Dir, p: &[u8]) -> Option<Walk> {
    const CLIENT: &[&[u8]] = &[
        b"SEND",
        b"SUBSCRIBE",
        b"UNSUBSCRIBE",
        b"ACK",
        b"NACK",
        b"BEGIN",
        b"COMMIT",
        b"ABORT",
        b"DISCONNECT",
        b"CONNECT",
        b"STOMP",
    ];
    const SERVER: &[&[u8]] = &[b"CONNECTED", b"MESSAGE", b"RECEIPT", b"ERROR"];
    let commands = match dir {
        Dir::ClientToServer => CLIENT,
        Dir::ServerToClient => SERVER,
    };
    let mut w = EMPTY;
    let mut rest = p;
    loop {
        // Heartbeats, or the ends of line after a frame's NUL.
        while let [b'\r' | b'\n', r @ ..] = rest {
            rest = r;
        }
        if rest.is_empty() {
            return Some(w);
        }
        let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
        let command = line.strip_suffix(b"\r").unwrap_or(line);
        if !commands.contains(&command) || line.len() == rest.len() {
            return None;
        }
        let (frame, after) = match rest.iter().position(|&b| b == 0) {
            Some(n) => (&rest[..n], Some(&rest[n + 1..])),
            None => (rest, None),
        };
        let yes = match dir {
            Dir::ClientToServer => {
                matches!(command, b"CONNECT" | b"STOMP")
                    || frame.windows(9).any(|x| x == b"\nreceipt:")
            }
            Dir::ServerToClient => command != b"MESSAGE",
        };
        w.count(dir, yes);
        match after {
            Some(a) => rest = a,
            // The frame goes on in the next segment.
            None => {
                w.rest = OPEN;
                w.ends = false;
                return Some(w);
            }
        }
    }
}

/// NATS protocol lines, each ended by CRLF; PUB, HPUB, MSG and HMSG carry a
/// payload of the size their line gives. A client's PING, and PUB or HPUB
/// with a subject to reply to, ask for an answer; a server's PONG, +OK,
/// -ERR, MSG and HMSG give one (a reply to a request comes as a MSG).
fn nats(dir: Dir, p: &[u8]) -> Option<Walk> {
    let mut w = EMPTY;
    let mut at = 0;
    while at < p.len() {
        let rest = &p[at..];
        let Some(eol) = rest.windows(2).position(|x| x == b"\r\n") else {
            // A line split across segments: where it ends is not known.
            return None;
        };
        let line = &rest[..eol];
        let mut words = line
            .split(|&b| b == b' ' || b == b'\t')
            .filter(|x| !x.is_empty());
        let verb = words.next()?;
        let mut args = [&[][..]; 5];
        let mut n = 0;
        for a in words {
            *args.get_mut(n)? = a;
            n += 1;
        }
        let last = args[n.max(1) - 1];
        // Verbs are case-insensitive.
        let is = |v: &[u8]| verb.eq_ignore_ascii_case(v);
        let (payload, yes) = match dir {
            Dir::ClientToServer if is(b"PUB") => (Some(size(last)?), n == 3),
            Dir::ClientToServer if is(b"HPUB") => (Some(size(last)?), n == 4),
            Dir::ClientToServer if is(b"PING") => (None, true),
            Dir::ClientToServer
                if [&b"SUB"[..], b"UNSUB", b"PONG", b"CONNECT"]
                    .iter()
                    .any(|v| is(v)) =>
            {
                (None, false)
            }
            Dir::ServerToClient if is(b"MSG") || is(b"HMSG") => (Some(size(last)?), true),
            Dir::ServerToClient if is(b"PONG") || is(b"+OK") || is(b"-ERR") => (None, true),
            Dir::ServerToClient if is(b"INFO") || is(b"PING") => (None, false),
            _ => return None,
        };
        w.count(dir, yes);
        at += eol + 2;
        if let Some(n) = payload {
            let end = at + n as usize + 2;
            if end > p.len() {
                w.rest = (end - p.len()) as u32;
                return Some(w);
            }
            at = end;
        }
    }
    Some(w)
}

/// JSON-RPC messages, one JSON object per line. A client's request (with a
/// method and an id) asks for an answer, its notification (no id, or a
/// null one) and its answer to the server do not; a server's result or
/// error gives one, and its own notification or request does not. Answers
/// are not matched by id (some pools answer every request with id 0 and
/// push new work the same way), and one settles every request before it
/// (some servers leave a report unanswered).
fn json_rpc(dir: Dir, p: &[u8]) -> Option<Walk> {
    let mut w = EMPTY;
    let mut lines = p.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        let last = lines.peek().is_none();
        if last && !line.is_empty() {
            // Goes on in the next segment.
            if line.trim_ascii_start().first() != Some(&b'{') {
                return None;
            }
            w.rest = OPEN;
            w.ends = false;
            return Some(w);
        }
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let (method, id, result) = json_keys(line)?;
        if !method && !result {
            return None;
        }
        w.count(
            dir,
            match dir {
                Dir::ClientToServer => method && id,
                Dir::ServerToClient => result && !method,
            },
        );
    }
    Some(w)
}

/// The top-level keys of one JSON object that JSON-RPC reads: a method,
/// an id that is not null, a result or an error.
fn json_keys(line: &[u8]) -> Option<(bool, bool, bool)> {
    if line.first() != Some(&b'{') || line.last() != Some(&b'}') {
        return None;
    }
    let (mut depth, mut i) = (0usize, 0usize);
    let (mut method, mut id, mut result) = (false, false, false);
    let skip_space = |mut j: usize| {
        while line.get(j).is_some_and(u8::is_ascii_whitespace) {
            j += 1;
        }
        j
    };
    while i < line.len() {
        match line[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < line.len() && line[i] != b'"' {
                    i += if line[i] == b'\\' { 2 } else { 1 };
                }
                let key = line.get(start..i)?;
                i += 1;
                let colon = skip_space(i);
                if depth == 1 && line.get(colon) == Some(&b':') {
                    let value = line.get(skip_space(colon + 1)..).unwrap_or_default();
                    match key {
                        b"method" => method = true,
                        b"result" | b"error" => result = true,
                        b"id" => id = !value.starts_with(b"null"),
                        _ => {}
                    }
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            _ => {}
        }
        i += 1;
    }
    (depth == 0).then_some((method, id, result))
}

/// A payload size in a NATS line.
fn size(w: &[u8]) -> Option<u32> {
    std::str::from_utf8(w).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: Dir = Dir::ClientToServer;
    const S: Dir = Dir::ServerToClient;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn feed(m: &mut Messages, next: &mut [u32; 2], dir: Dir, p: &[u8], begun: bool) -> Turn {
        let seq = next[dir.index()];
        next[dir.index()] += p.len() as u32;
        m.on_data(dir, seq, p.len() as u32, p, begun)
    }

    #[test]
    fn stomp_frames() {
        let w = stomp(C, b"STOMP\naccept-version:1.1\n\n\0").unwrap();
        assert!(w.ends && w.asks == 1);
        let w = stomp(
            C,
            b"SUBSCRIBE\nack:auto\ndestination:/queue/test\nid:1\n\n\0",
        )
        .unwrap();
        assert!(w.ends && w.asks == 0);
        let w = stomp(C, b"DISCONNECT\nreceipt:328e\n\n\0").unwrap();
        assert!(w.ends && w.asks == 1);
        let w = stomp(C, b"SEND\ndestination:/q\n\nhel").unwrap();
        assert!(!w.ends && w.rest == OPEN);
        assert!(stomp(C, b"GET / HTTP/1.1\r\n\r\n").is_none());
        // A subscription, and a publish ten seconds later: two messages.
        let (mut m, mut n) = (Messages::default(), [1, 1]);
        assert_eq!(
            feed(&mut m, &mut n, C, b"STOMP\naccept-version:1.1\n\n\0", false),
            Turn::Same
        );
        assert_eq!(m.proto, Proto::Stomp);
        assert_eq!(
            feed(&mut m, &mut n, S, b"CONNECTED\nversion:1.1\n\n\0", false),
            Turn::Same
        );
        assert_eq!(
            feed(&mut m, &mut n, C, b"SUBSCRIBE\nid:1\n\n\0", true),
            Turn::Same
        );
        assert_eq!(
            feed(&mut m, &mut n, C, b"SEND\ndestination:/q\n\nhi\0", false),
            Turn::Ends
        );
        // The delivery answers nothing.
        assert_eq!(
            feed(&mut m, &mut n, S, b"MESSAGE\nid:1\n\nhi\0", false),
            Turn::Ends
        );
    }

    #[test]
    fn nats_lines() {
        let w = nats(C, b"CONNECT {\"verbose\":false}\r\nPING\r\n").unwrap();
        assert!(w.ends && w.asks == 1);
        let w = nats(C, b"PUB a 2\r\nhi\r\nSUB b 1\r\n").unwrap();
        assert!(w.ends && w.asks == 0);
        let w = nats(C, b"PUB a inbox 2\r\nhi\r\n").unwrap();
        assert_eq!(w.asks, 1);
        let w = nats(S, b"MSG a 1 5\r\nhel").unwrap();
        assert_eq!(w.rest, 4);
        assert!(nats(C, b"GET / HTTP/1.1\r\n\r\n").is_none());
        assert!(nats(S, b"+PONG\r\n").is_none());
        // Answered, then the server's own PING: not the rest of the answer.
        let (mut m, mut n) = (Messages::default(), [1, 1]);
        feed(&mut m, &mut n, S, b"INFO {\"server_id\":\"x\"}\r\n", false);
        assert_eq!(m.proto, Proto::Nats);
        assert_eq!(
            feed(&mut m, &mut n, C, b"CONNECT {}\r\nPING\r\n", true),
            Turn::Same
        );
        assert_eq!(feed(&mut m, &mut n, S, b"PONG\r\n", false), Turn::Same);
        assert_eq!(feed(&mut m, &mut n, S, b"PING\r\n", true), Turn::Ends);
    }

    #[test]
    fn amqp_frames() {
        let publish = hex(
            "01000100000021003c002800000863656c657279657610776f726b65722e68656172746265617400ce",
        );
        let w = amqp(C, &publish, publish.len()).unwrap();
        assert!(w.asks == 0 && !w.ends && w.rest == 0);
        // Basic.Ack from a consumer; Basic.Deliver from the broker, its
        // content in the same segment, cut short by the capture.
        let ack = hex("0100010000000d003c0050000000000000000100ce");
        let mut deliver = hex("01000300000010003c003c013300000000000000010000ce");
        deliver.extend(hex("0200030000000e003c00000000"));
        let w = amqp(C, &ack, ack.len()).unwrap();
        assert!(w.asks == 0 && w.ends);
        let w = amqp(S, &deliver, deliver.len() + 2).unwrap();
        assert_eq!((w.answers, w.rest), (0, 7));
        // A consumer's acknowledgement is not a request: the next delivery
        // is not its answer.
        let (mut m, mut n) = (Messages::default(), [1, 1]);
        assert_eq!(feed(&mut m, &mut n, C, &ack, false), Turn::Same);
        assert_eq!(m.candidate, Proto::Amqp);
        let d = hex("01000300000010003c003c013300000000000000010000ce");
        assert_eq!(feed(&mut m, &mut n, S, &d, false), Turn::Ends);
        assert_eq!(m.proto, Proto::Amqp);
        assert!(amqp(C, b"GET / HTTP/1.1\r\n", 16).is_none());
    }

    proptest::proptest! {
        /// Any bytes, from either side, cut short by the capture or not,
        /// after any protocol's opening: read without a panic.
        #[test]
        fn any_bytes_are_read_without_panic(
            segs in proptest::collection::vec(
                (proptest::bool::ANY, proptest::collection::vec(proptest::num::u8::ANY, 0..80), 0u32..3),
                1..12,
            ),
            start in proptest::sample::select(vec![&b""[..], b"AMQP\0\0\x09\x01", b"\x10\x0c\x00\x04MQTT", b"CONNECT\n", b"INFO {"]),
        ) {
            let (mut m, mut n) = (Messages::default(), [1u32, 1]);
            for (i, (server, mut bytes, extra)) in segs.into_iter().enumerate() {
                if i == 0 {
                    bytes.splice(0..0, start.iter().copied());
                }
                let dir = if server { S } else { C };
                let seq = n[dir.index()];
                // Some segments are longer than what the capture kept.
                let len = bytes.len() as u32 + extra * 700;
                n[dir.index()] = seq.wrapping_add(len);
                let _ = m.on_data(dir, seq, len, &bytes, i % 3 == 0);
            }
        }
    }

    #[test]
    fn json_rpc_lines() {
        let get = b"{\"worker\": \"\", \"jsonrpc\": \"2.0\", \"params\": [], \"id\": 3, \"method\": \"eth_getWork\"}\n";
        assert_eq!(named(C, get), Some(Proto::JsonRpc));
        assert_eq!(json_rpc(C, get).unwrap().asks, 1);
        let note = b"{\"id\": null, \"method\": \"mining.notify\", \"params\": [{\"id\": 7}]}\n";
        assert_eq!(json_rpc(C, note).unwrap().asks, 0);
        let result = b"{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":[\"0x41\"]}\n";
        assert_eq!(json_rpc(S, result).unwrap().answers, 1);
        assert_eq!(json_rpc(S, note).unwrap().answers, 0);
        assert!(json_rpc(C, b"{\"a\": 1}\n").is_none());
        assert!(json_rpc(C, b"GET / HTTP/1.1\r\n\r\n").is_none());
        let w = json_rpc(S, b"{\"id\":1,\"result\":\"abc").unwrap();
        assert_eq!(w.rest, OPEN);
        // Answered, then work pushed as results: no one asked for them.
        let (mut m, mut n) = (Messages::default(), [1, 1]);
        assert_eq!(feed(&mut m, &mut n, C, get, false), Turn::Same);
        assert_eq!(feed(&mut m, &mut n, S, result, false), Turn::Same);
        assert_eq!(feed(&mut m, &mut n, S, result, true), Turn::Ends);
        // Stratum without the jsonrpc member: both sides must agree.
        let (mut m, mut n) = (Messages::default(), [1, 1]);
        let sub = b"{\"id\": 1, \"method\": \"mining.subscribe\", \"params\": []}\n";
        feed(&mut m, &mut n, C, sub, false);
        assert_eq!(m.candidate, Proto::JsonRpc);
        feed(
            &mut m,
            &mut n,
            S,
            b"{\"id\": 1, \"result\": [], \"error\": null}\n",
            false,
        );
        assert_eq!(m.proto, Proto::JsonRpc);
    }

    #[test]
    fn mqtt_packets() {
        let connect = hex("101100044d5154540402003c00054275733431");
        assert_eq!(named(C, &connect), Some(Proto::Mqtt));
        let w = mqtt(C, &hex("40020002"), 4).unwrap();
        assert!(w.asks == 0 && w.ends);
        let w = mqtt(C, &hex("c000"), 2).unwrap();
        assert!(w.asks == 1 && w.ends);
        assert!(mqtt(C, &hex("160301"), 3).is_none());
        // CONNECT and SUBSCRIBE pipelined: both answers are the response.
        let (mut m, mut n) = (Messages::default(), [1, 1]);
        feed(&mut m, &mut n, C, &connect, false);
        assert_eq!(
            feed(
                &mut m,
                &mut n,
                C,
                &hex("820d000200084275733137436d6401"),
                false
            ),
            Turn::Same
        );
        assert_eq!(feed(&mut m, &mut n, S, &hex("20020000"), false), Turn::Same);
        assert_eq!(
            feed(&mut m, &mut n, S, &hex("9003000201"), true),
            Turn::Same
        );
        // A publish at QoS 0 asks nothing; the broker's PUBLISH is its own.
        assert_eq!(
            feed(&mut m, &mut n, C, &hex("3006000161686921"), true),
            Turn::Same
        );
        assert_eq!(
            feed(&mut m, &mut n, S, &hex("3006000161686921"), false),
            Turn::Ends
        );
    }
}
