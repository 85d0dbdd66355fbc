//! TLS handshakes: told by their record headers, and folded into the
//! exchange they open.
//!
//! A TLS connection begins with a handshake: ClientHello, the server's flight
//! (ServerHello, certificate, its key share signed with the certificate's
//! key), and for TLS 1.2 a second round (the client's key exchange and
//! Finished, the server's Finished) — RFC 5246 §7.3; TLS 1.3 needs one round
//! trip (RFC 8446 §2). Each round is a request and a response to the
//! connection tracker. Record headers tell them apart (RFC 8446 §5.1: content
//! type 22 is a handshake record; application data is 23): an exchange whose
//! request begins with a handshake record is a handshake round, not a request
//! of the application; so is a client flight of only change_cipher_spec and
//! Finished, when the server answers it before the request comes (TLS 1.3's
//! session tickets).
//!
//! Handshake rounds are not counted as exchanges: their time is put in the
//! budget of the application exchange that follows (a connection's first
//! request waits for its TLS handshake as it does for the TCP one), as the
//! `tls_handshake` part, and the server's share of it — between the end of a
//! client flight reaching the server and the server's answer, its key
//! exchange and signature — as `tls_key_exchange`. The endpoints' own time in
//! a handshake, when at least [`MIN_HANDSHAKE_NS`], is an occurrence of
//! `tls_handshake`, blamed on the server (key exchange) or the client (its
//! processing between flights), whichever took more; the handshake's round
//! trips are counted by `network_latency` with the others.

use tcpdoctor_flow::{Connection, Dir, Exchange, Mark, SegKind, Segment};
use tcpdoctor_wire::Timestamp;

use crate::budget::{index, Claims, Part, Split};
use crate::round3;
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{ms, Said, Words};
use serde_json::json;

/// The endpoints' own time in a handshake below this is not reported: a
/// full handshake costs each side some CPU (an ECDSA P-256 signature tens of
/// µs, a TLS library's key schedule and certificate parsing a few hundred),
/// an RSA-2048 signature about 1 ms, RSA-4096 several.
pub const MIN_HANDSHAKE_NS: i64 = 2_000_000;
/// The client's own time in a handshake blamed on it at least.
pub const MIN_CLIENT_NS: i64 = 5_000_000;

/// Whether `p` starts with a TLS record header: a content type of
/// change_cipher_spec, alert, handshake or application data, a 3.x version
/// (SSL 3.0 to TLS 1.3's legacy 3.3) and a length within the record limit.
pub fn looks_like_record(p: &[u8]) -> bool {
    p.len() >= 5
        && (20..=23).contains(&p[0])
        && p[1] == 3
        && p[2] <= 4
        && u16::from_be_bytes([p[3], p[4]]) <= (1 << 14) + 2048
}

/// How many leading payload bytes the rule reads: the record header and the
/// handshake message type; of a ServerHello, up to its cipher suite.
pub fn payload_needed(p: &[u8]) -> usize {
    if !looks_like_record(p) {
        0
    } else if server_hello_at(p).is_some() {
        p.len().min(PLAIN_ALERT + SERVER_HELLO_NEEDED)
    } else {
        p.len().min(6)
    }
}

/// A plaintext alert record: the header and 2 bytes.
const PLAIN_ALERT: usize = 7;

/// Where the ServerHello that `p` starts with begins: at 0, or after one
/// plaintext alert (a server warns `unrecognized_name` before its
/// ServerHello when it has no certificate for the name the client gave).
fn server_hello_at(p: &[u8]) -> Option<usize> {
    let hello = |q: &[u8]| record_type(q) == Some(HANDSHAKE) && q.get(5) == Some(&SERVER_HELLO);
    if hello(p) {
        Some(0)
    } else if record_type(p) == Some(ALERT) && p[3..5] == [0, 2] && hello(p.get(PLAIN_ALERT..)?) {
        Some(PLAIN_ALERT)
    } else {
        None
    }
}

const SERVER_HELLO: u8 = 2;
/// A ServerHello's bytes up to its cipher suite, with the longest session id
/// (RFC 5246 §7.4.1.3): the record header (5), the handshake header (4), the
/// version (2), the random (32), the session id's length (1) and at most 32
/// bytes of it, the suite (2).
const SERVER_HELLO_NEEDED: usize = 5 + 4 + 2 + 32 + 1 + 32 + 2;

/// The certificate's key, as the server's handshake shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CertKey {
    /// No ServerHello seen (the capture began later, or cut it short), or a
    /// suite that names no key (pre-shared keys, anonymous).
    #[default]
    Unknown,
    /// A TLS 1.2 suite signed or decrypted with RSA (`ECDHE_RSA`, `DHE_RSA`,
    /// or the RSA key exchange).
    Rsa,
    /// A TLS 1.2 suite signed with ECDSA (`ECDHE_ECDSA`, `ECDH_ECDSA`).
    Ecdsa,
    /// TLS 1.3: the suite names no key, and the certificate travels
    /// encrypted (RFC 8446 §2).
    Encrypted,
}

impl CertKey {
    /// The word in a finding's details.
    pub fn as_str(self) -> &'static str {
        match self {
            CertKey::Unknown => "unknown",
            CertKey::Rsa => "rsa",
            CertKey::Ecdsa => "ecdsa",
            CertKey::Encrypted => "encrypted",
        }
    }

    /// Index in [`crate::Aggregate::tls_keys`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The keys a suite can name.
    const KNOWN: [CertKey; 3] = [CertKey::Rsa, CertKey::Ecdsa, CertKey::Encrypted];

    /// The key a cipher suite names (the IANA TLS Cipher Suites registry).
    pub fn of_suite(suite: u16) -> CertKey {
        match suite {
            // TLS 1.3's five suites (RFC 8446 §B.4).
            0x1301..=0x1305 => CertKey::Encrypted,
            // ECDH(E)_ECDSA: RFC 8422, 5289, 6209 (ARIA), 6367 (Camellia),
            // 7251 (CCM), 7905 (ChaCha20).
            0xC001..=0xC00A
            | 0xC023..=0xC026
            | 0xC02B..=0xC02E
            | 0xC048..=0xC04B
            | 0xC05C..=0xC05F
            | 0xC072..=0xC075
            | 0xC086..=0xC089
            | 0xC0AC..=0xC0AF
            | 0xCCA9 => CertKey::Ecdsa,
            // The RSA key exchange, DHE_RSA, ECDHE_RSA (the same RFCs; a
            // fixed ECDH_RSA key is an EC key that a CA signed with RSA: not
            // named).
            0x0001..=0x000A
            | 0x0014..=0x0016
            | 0x002F
            | 0x0033
            | 0x0035
            | 0x0039
            | 0x003B..=0x003D
            | 0x0041
            | 0x0045
            | 0x0067
            | 0x006B
            | 0x0084
            | 0x0088
            | 0x0096
            | 0x009A
            | 0x009C..=0x009F
            | 0x00BA
            | 0x00BE
            | 0x00C0
            | 0x00C4
            | 0xC010..=0xC014
            | 0xC027..=0xC028
            | 0xC02F..=0xC030
            | 0xC03C..=0xC03D
            | 0xC044..=0xC045
            | 0xC04C..=0xC04D
            | 0xC050..=0xC053
            | 0xC060..=0xC061
            | 0xC076..=0xC077
            | 0xC07A..=0xC07D
            | 0xC08A..=0xC08B
            | 0xC09C..=0xC0A3
            | 0xCCA8
            | 0xCCAA
            // RSA_PSK (RFC 4279, 5487, 6209, 6367, 7905), SRP_RSA (RFC 5054).
            | 0x002E
            | 0x0092..=0x0095
            | 0x00AC..=0x00AD
            | 0x00B6..=0x00B9
            | 0xC01B
            | 0xC01E
            | 0xC021
            | 0xC06E..=0xC06F
            | 0xC098..=0xC099
            | 0xCCAE => CertKey::Rsa,
            _ => CertKey::Unknown,
        }
    }
}

/// The cipher suite of a ServerHello that `p` starts with (RFC 5246
/// §7.4.1.3, RFC 8446 §4.1.3: the same layout up to the suite).
pub fn server_hello_suite(p: &[u8]) -> Option<u16> {
    let p = &p[server_hello_at(p)?..];
    let sid = usize::from(*p.get(43)?);
    if sid > 32 {
        return None;
    }
    let at = 44 + sid;
    Some(u16::from_be_bytes([*p.get(at)?, *p.get(at + 1)?]))
}

/// The content type of the record `p` starts, if it starts one.
fn record_type(p: &[u8]) -> Option<u8> {
    looks_like_record(p).then(|| p[0])
}

/// Whether a segment of `len` bytes starting `p` is one record of
/// application data too short to hold a request: a multiplexed protocol's
/// control frame (HTTP/2's WINDOW_UPDATE, PING or SETTINGS ACK, 9 to 17 bytes;
/// SPDY's PING, 12), with its record's overhead (17 bytes in TLS 1.3, 24 in
/// TLS 1.2 with AES-GCM). 41 holds an HTTP/2 PING in TLS 1.2 with AES-GCM;
/// an HTTP/1 request line alone is 16 bytes or more (`GET / HTTP/1.1`).
fn is_control_record(p: &[u8], len: u32) -> bool {
    const MAX_CONTROL_RECORD: u32 = 41;
    record_type(p) == Some(APPLICATION_DATA)
        && len == 5 + u32::from(u16::from_be_bytes([p[3], p[4]]))
        && len - 5 <= MAX_CONTROL_RECORD
}

/// Whether a segment of `len` bytes starting `p` is one TLS alert record: a
/// TLS 1.2 alert (content type 21), or a record of application data too
/// short for anything but an alert — TLS 1.3 encrypts its alerts as
/// application data (RFC 8446 §5.2): 2 bytes, the inner content type and a
/// 16-byte tag make 19; an HTTP request in a record is 35 or more.
pub fn is_alert_record(p: &[u8], len: u32) -> bool {
    const MAX_ENCRYPTED_ALERT: u32 = 32;
    let Some(t) = record_type(p) else {
        return false;
    };
    let record = u32::from(u16::from_be_bytes([p[3], p[4]]));
    len == 5 + record && (t == ALERT || (t == APPLICATION_DATA && record <= MAX_ENCRYPTED_ALERT))
}

const CHANGE_CIPHER_SPEC: u8 = 20;
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;
/// A client flight that starts with change_cipher_spec and is no larger than
/// this is only the handshake's end: CCS (6 bytes) and an encrypted Finished
/// (58–74 bytes in TLS 1.3, less in a resumed TLS 1.2 session). With a
/// request of any size behind it, it is larger.
const MAX_FINISHED_FLIGHT: u64 = 96;

/// Per connection.
#[derive(Debug, Default)]
pub struct TlsState {
    /// Direction of the last new data seen.
    last_dir: Option<Dir>,
    /// The record type the request in progress began with.
    request_record: Option<u8>,
    /// The request in progress, begun with a handshake record, carries
    /// application data after it: TLS False Start (RFC 7918) — the client's
    /// last handshake flight and its first request leave together.
    false_start: bool,
    /// The client's first data: a TLS record (`Some(true)`), or not.
    tls: Option<bool>,
    /// The certificate's key, from the last ServerHello.
    key: CertKey,
    /// The client's last message is one TLS alert: its close_notify.
    closing_alert: bool,
    /// Per direction ([`Dir::index`]): the message in progress began with
    /// one control record ([`is_control_record`]) of this many bytes; the
    /// segment after it, and how long after.
    lead: [Option<(Mark, u32)>; 2],
    then: [Option<(Mark, i64)>; 2],
    pending: Option<Pending>,
}

/// Handshake rounds waiting for the application exchange they open.
#[derive(Debug, Clone, Copy)]
struct Pending {
    first: Exchange,
    rounds: u32,
    client_ns: i64,
    last_end: Timestamp,
}

/// What [`TlsState::on_exchange`] made of an exchange.
pub enum Step {
    /// Not TLS, or an exchange after the handshake's first.
    Plain,
    /// A handshake round: not an exchange of the application.
    Handshake,
    /// The first exchange after a handshake, stretched back to its start.
    Opened(Box<Exchange>, Opened),
    /// An exchange whose request or response began with a control record
    /// and went on later: the message starts after it. Per direction
    /// ([`Dir::index`]), the pause from the record to the rest (ns) and the
    /// frame that ended it, or zeros: the sender's time before its message,
    /// not inside it (a client's between its control frame and its next
    /// request; a server's between acknowledging the client's HTTP/2
    /// settings and starting its response).
    Trimmed(Box<Exchange>, [(i64, u64); 2]),
}

impl Step {
    /// The senders' pauses after a control record that began their
    /// messages, per direction, as [`Step::Trimmed`] holds them.
    pub fn pauses(&self) -> Option<[(i64, u64); 2]> {
        match self {
            Step::Trimmed(_, pauses) => Some(*pauses),
            Step::Opened(_, o) => Some(o.pauses),
            Step::Plain | Step::Handshake => None,
        }
    }
}

/// The handshake an exchange paid for.
#[derive(Debug, Clone, Copy)]
pub struct Opened {
    pub rounds: u32,
    /// The client's time between the server's flight and its next one.
    pub client_ns: i64,
    /// The handshake's first segment.
    pub frame: u64,
    pub key: CertKey,
    /// The response began with a control record: as [`Step::Trimmed`].
    pub pauses: [(i64, u64); 2],
}

impl TlsState {
    #[inline]
    pub fn on_segment(&mut self, seg: &Segment<'_>, mid_stream: bool) {
        // Not TLS: decided by the client's first data, for good.
        if self.tls == Some(false) || seg.kind != SegKind::NewData {
            return;
        }
        if self.last_dir == Some(seg.dir) {
            if seg.dir == Dir::ClientToServer
                && self.request_record == Some(HANDSHAKE)
                && record_type(seg.payload) == Some(APPLICATION_DATA)
            {
                self.false_start = true;
            }
            let d = seg.dir.index();
            if let (Some((lead, _)), None) = (self.lead[d], self.then[d]) {
                let at = Mark {
                    ts: seg.ts,
                    frame: seg.frame,
                };
                self.then[d] = Some((at, seg.ts.since(lead.ts)));
            }
            return;
        }
        self.on_message_start(seg, mid_stream);
    }

    /// New data in the other direction than the last: a message starts.
    #[cold]
    fn on_message_start(&mut self, seg: &Segment<'_>, mid_stream: bool) {
        self.last_dir = Some(seg.dir);
        if seg.dir == Dir::ClientToServer {
            let record = record_type(seg.payload);
            // Picked up after its handshake, a TLS connection's client
            // sends application data first.
            let first = record == Some(HANDSHAKE) || mid_stream && record == Some(APPLICATION_DATA);
            let tls = *self.tls.get_or_insert(first);
            self.request_record = record.filter(|_| tls);
            self.false_start = false;
            self.closing_alert = tls && is_alert_record(seg.payload, seg.len);
        } else if self.request_record == Some(HANDSHAKE) {
            if let Some(suite) = server_hello_suite(seg.payload) {
                self.key = CertKey::of_suite(suite);
            }
        }
        let d = seg.dir.index();
        let control = self.tls == Some(true) && is_control_record(seg.payload, seg.len);
        self.lead[d] = control.then_some((
            Mark {
                ts: seg.ts,
                frame: seg.frame,
            },
            seg.len,
        ));
        self.then[d] = None;
    }

    /// Classifies a completed exchange and claims its handshake time.
    pub fn on_exchange(&mut self, conn: &Connection, ex: &Exchange, claims: &mut Claims) -> Step {
        let (Some(req_first), Some(req_last), Some(resp_first), Some(resp_last)) = (
            ex.request_first,
            ex.request_last,
            ex.response_first,
            ex.response_last,
        ) else {
            return Step::Plain;
        };
        let to_server = conn.distance_to(Dir::ServerToClient).unwrap_or(0);
        let to_client = conn.distance_to(Dir::ClientToServer).unwrap_or(0);
        let turnaround = |p: &Pending, claims: &mut Claims| {
            claims.claim(Part::TlsHandshake, p.last_end, req_first.ts);
            (req_first.ts.since(p.last_end) - to_client).max(0)
        };
        // A False Start flight is the request itself: the exchange of the
        // application that the handshake opens.
        let round = self.request_record == Some(HANDSHAKE) && !self.false_start;
        let finished = self.request_record == Some(CHANGE_CIPHER_SPEC)
            && ex.request_bytes <= MAX_FINISHED_FLIGHT;
        if round || finished {
            let mut p = self.pending.unwrap_or(Pending {
                first: *ex,
                rounds: 0,
                client_ns: 0,
                last_end: req_first.ts,
            });
            if self.pending.is_some() {
                p.client_ns += turnaround(&p, claims);
            }
            // The flight's transfer and its way to the server, the server's
            // answer, the answer's transfer.
            let at_server =
                Timestamp::from_nanos(req_last.ts.nanos() + to_server).min(resp_first.ts);
            claims.claim(Part::TlsHandshake, req_first.ts, at_server);
            claims.claim(Part::TlsKeyExchange, at_server, resp_first.ts);
            claims.claim(Part::TlsHandshake, resp_first.ts, resp_last.ts);
            // The client waits for each flight it starts with a handshake
            // message (ClientHello, its key exchange); TLS 1.3's server
            // sends its session tickets after the client's Finished unasked.
            p.rounds += u32::from(round);
            p.last_end = resp_last.ts;
            self.pending = Some(p);
            return Step::Handshake;
        }
        // Most connections have no handshake pending: not taken (a copy).
        if self.pending.is_none() {
            if self.lead == [None, None] {
                return Step::Plain;
            }
            return self.trimmed(ex, req_last, resp_last);
        }
        let Some(p) = self.pending.take() else {
            return Step::Plain;
        };
        let client_ns = p.client_ns + turnaround(&p, claims);
        let mut opened = *ex;
        opened.setup = p.first.setup;
        if opened.setup.is_none() {
            opened.request_first = p.first.request_first;
        }
        // The request starts with the handshake; the response may start
        // with a control record (HTTP/2's SETTINGS ACK).
        self.lead[Dir::ClientToServer.index()] = None;
        let mut pauses = [(0, 0); 2];
        if self.lead[Dir::ServerToClient.index()].is_some() {
            pauses = self.trim(&mut opened, req_last, resp_last);
        }
        Step::Opened(
            Box::new(opened),
            Opened {
                rounds: p.rounds,
                client_ns,
                frame: p.first.request_first.map_or(0, |m| m.frame),
                key: self.key,
                pauses,
            },
        )
    }
}

impl TlsState {
    /// The exchange with its request, or its response, started after a
    /// leading control record, when the rest of the message followed it.
    #[cold]
    fn trimmed(&mut self, ex: &Exchange, req_last: Mark, resp_last: Mark) -> Step {
        let mut trimmed = *ex;
        let pauses = self.trim(&mut trimmed, req_last, resp_last);
        if pauses == [(0, 0); 2] {
            return Step::Plain;
        }
        Step::Trimmed(Box::new(trimmed), pauses)
    }

    /// Starts `ex`'s request and response after their leading control
    /// records, where the rest of the message followed one; the pauses
    /// after them, per direction, as [`Step::Trimmed`] holds them.
    fn trim(&mut self, trimmed: &mut Exchange, req_last: Mark, resp_last: Mark) -> [(i64, u64); 2] {
        let mut pauses = [(0, 0); 2];
        for d in [Dir::ClientToServer, Dir::ServerToClient] {
            let i = d.index();
            let (Some((lead, len)), Some((then, pause))) =
                (self.lead[i].take(), self.then[i].take())
            else {
                continue;
            };
            let (first, last, bytes) = match d {
                Dir::ClientToServer => (
                    &mut trimmed.request_first,
                    req_last,
                    &mut trimmed.request_bytes,
                ),
                Dir::ServerToClient => (
                    &mut trimmed.response_first,
                    resp_last,
                    &mut trimmed.response_bytes,
                ),
            };
            if first.map(|m| m.frame) != Some(lead.frame) || then.frame > last.frame {
                continue;
            }
            *first = Some(then);
            *bytes = bytes.saturating_sub(u64::from(len));
            if d == Dir::ServerToClient {
                // The first segment's clock is the control record's.
                trimmed.response_tsval = None;
            }
            pauses[i] = (pause, then.frame);
        }
        pauses
    }
}

/// The handshake's time: the server's, the client's, the path's.
fn parts(split: &Split, o: &Opened) -> (i64, i64, i64) {
    let total = split[index(Part::TlsHandshake)] + split[index(Part::TlsKeyExchange)];
    let server = split[index(Part::TlsKeyExchange)];
    let client = o.client_ns.clamp(0, total - server);
    (server, client, total - server - client)
}

/// The handshake's round trips on the network: `network_latency`'s.
pub fn network_ns(split: &Split, o: &Opened) -> i64 {
    parts(split, o).2
}

/// The `tls_handshake` occurrence of an exchange that paid for a handshake:
/// the endpoints' own time in it (its round trips are `network_latency`'s),
/// blamed on the one that took more.
pub fn occurrence(conn: &Connection, split: &Split, o: &Opened) -> Option<Occurrence> {
    let (server, client, network) = parts(split, o);
    if server + client < MIN_HANDSHAKE_NS {
        return None;
    }
    let culprit = if server >= client {
        Blame::Side(Dir::ServerToClient)
    } else if client >= MIN_CLIENT_NS {
        Blame::Side(Dir::ClientToServer)
    } else {
        // A client process's own start-up (curl's ~1–3 ms per run) is not
        // a slow handshake.
        return None;
    };
    Some(Occurrence {
        kind: Kind::TlsHandshake,
        culprit,
        delay_ns: server + client,
        frames: vec![o.frame],
        notes: vec![(o.frame, "ClientHello".to_string())],
        ladder_from: Some(o.frame),
        ladder: None,
        span: None,
        detail: Detail::Tls(Tls {
            server_ns: server,
            client_ns: client,
            network_ns: network,
            rounds: o.rounds,
            rtt_ns: conn.path_rtt_ns(),
            key: o.key,
        }),
    })
}

/// Why a server's own time in its handshakes, and the fix, by the key its
/// certificate signs with: a large RSA key is the usual cause; an ECDSA one
/// is not, and then the time is the server's elsewhere.
fn server_words(ep: &str, kx: f64, key: CertKey) -> (String, String) {
    let own = format!("most of it is {ep}'s own time between the client's flight and its answer — {kx:.2} ms per handshake");
    let costs = "RSA keys of 3072–4096 bits cost milliseconds per signature, 2048 bits about one; \
                 ECDSA P-256 or Ed25519 tens of microseconds";
    let elsewhere = "its CPU busy with other work or a worker blocked, a certificate or key \
                     looked up per handshake (a certificate-selection callback, a remote key store \
                     or hardware module), or an OCSP response fetched in line";
    let rest = "let clients resume sessions (`ssl_session_cache shared:SSL:10m; \
                ssl_session_tickets on;`) so repeat handshakes skip the signature; and keep \
                connections alive so each request does not pay a handshake";
    match key {
        CertKey::Rsa => (
            format!(
                "{own}: computing its key share and signing it with the certificate's RSA key (the \
                 cipher suite in its ServerHello is RSA-signed; {costs}), or waiting on a hardware \
                 module or an OCSP lookup"
            ),
            format!(
                "At {ep}: sign with an ECDSA P-256 certificate (or serve one beside the RSA one: nginx \
                 takes several `ssl_certificate` lines) instead of the RSA key; enable TLS 1.3; {rest}. \
                 `openssl speed rsa2048 rsa4096 ecdsap256` shows the cost per signature on this CPU."
            ),
        ),
        CertKey::Ecdsa => (
            format!(
                "{own}. Its certificate's key is ECDSA already (the cipher suite in its ServerHello is \
                 ECDSA-signed), and an ECDSA signature costs tens of microseconds: this is not the \
                 signature but what the server did before answering — {elsewhere}"
            ),
            format!(
                "At {ep}: find what the server does between a ClientHello and its answer — its CPU \
                 during handshakes (`top -H`, `perf top`), certificate-selection callbacks and remote \
                 key stores (cache what they return), OCSP responses fetched per handshake (staple a \
                 cached one: nginx `ssl_stapling on`); {rest}. A different certificate key will not \
                 help: it is ECDSA already."
            ),
        ),
        CertKey::Encrypted | CertKey::Unknown => {
            let hidden = if key == CertKey::Encrypted {
                "TLS 1.3 sends the certificate encrypted, so the capture cannot show its key"
            } else {
                "the capture shows no ServerHello that names the certificate's key"
            };
            (
                format!(
                    "{own}: computing its key share and signing it with the certificate's key \
                     ({hidden}; {costs}), or what the server did before answering — {elsewhere}"
                ),
                format!(
                    "At {ep}: read the certificate's key (`openssl s_client -connect HOST:PORT \
                     </dev/null 2>/dev/null | grep 'Server public key'`). If it is RSA, sign with an \
                     ECDSA P-256 certificate (or serve one beside it: nginx takes several \
                     `ssl_certificate` lines); if it is ECDSA already, find what the server does \
                     before answering a ClientHello (its CPU, certificate-selection callbacks, OCSP \
                     fetches); {rest}."
                ),
            )
        }
    }
}

/// The words of a `tls_handshake` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep, role, server) = (s.a, s.typical, s.total, s.ep, s.role, s.server);
    let n = a.occurrences.max(1);
    let per = |ns: i64| round3(ns as f64 / n as f64 / 1e6);
    let (kx, cl) = (per(a.inside_ns), per(a.transfer_ns));
    let rounds = round3(a.count as f64 / n as f64);
    let network = round3(a.handshake_ns as f64 / n as f64 / 1e6);
    let rtt = a.rtt_ns_min.map(ms);
    let version = if rounds >= 1.5 {
        "a full TLS 1.2 handshake: two round trips before the first request"
    } else {
        "a one-round-trip handshake (TLS 1.3, or a resumed TLS 1.2 session)"
    };
    let key = key_of(&a.tls_keys);
    let (cause, why, fix) = match role {
        "server" => {
            let (why, fix) = server_words(ep, kx, key);
            ("key_exchange", why, fix)
        }
        _ => (
            "client",
            format!(
                "most of it is the client's own time between the server's flight and its next one — \
                 {cl:.2} ms per handshake: verifying the certificate chain, computing its key \
                 share, or a client that starts its TLS library cold (a new process per request)"
            ),
            format!(
                "At the client {ep}: reuse connections (keep-alive, a connection pool) and TLS sessions \
                 (session tickets), keep the process and its TLS context warm between requests, and \
                 check what it does between the server's handshake flight and its answer."
            ),
        ),
    };
    let explanation = format!(
        "{conns} connection(s) to {srv} opened with a TLS handshake ({version}) in which the endpoints \
         spent {typical:.2} ms (median) of their own time, {total:.0} ms in all, before the first request \
         could leave: {why}. Per handshake: \
         {network:.2} ms round trips, {kx:.2} ms the server's key exchange, {cl:.2} ms the \
         client's processing (means).",
        conns = a.connections,
        srv = if server.is_empty() { ep.clone() } else { server.clone() },
    );
    (
        explanation,
        fix,
        json!({"cause": cause, "handshakes": a.occurrences, "handshakes_seen": a.flagged,
               "round_trips": rounds, "certificate_key": key.as_str(),
               "key_exchange_ms": kx, "client_ms": cl, "network_ms": network,
               "rtt_ms": rtt}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_headers() {
        // ClientHello in a TLS 1.0 record (as TLS 1.3 clients send it).
        assert_eq!(record_type(&[22, 3, 1, 0, 200, 1]), Some(HANDSHAKE));
        assert_eq!(record_type(&[20, 3, 3, 0, 1, 1]), Some(CHANGE_CIPHER_SPEC));
        assert!(looks_like_record(&[23, 3, 3, 0x40, 0]));
        // HTTP, SSH, a record too long, a short payload.
        assert!(!looks_like_record(b"GET / HTTP/1.1"));
        assert!(!looks_like_record(b"SSH-2.0-OpenSSH"));
        assert!(!looks_like_record(&[22, 3, 3, 0xff, 0xff]));
        assert!(!looks_like_record(&[22, 3, 3]));
        assert_eq!(payload_needed(&[22, 3, 1, 0, 200, 1, 0, 0]), 6);
        assert_eq!(payload_needed(b"hello world"), 0);
    }

    #[test]
    fn a_findings_key_is_the_one_most_handshakes_showed() {
        let key = |rsa, ecdsa, encrypted| key_of(&[7, rsa, ecdsa, encrypted]);
        assert_eq!(key(0, 0, 0), CertKey::Unknown);
        assert_eq!(key(3, 0, 0), CertKey::Rsa);
        assert_eq!(key(0, 1, 0), CertKey::Ecdsa);
        assert_eq!(key(1, 2, 5), CertKey::Encrypted);
        assert_eq!(key(2, 1, 0), CertKey::Rsa);
        // Two keys seen as often: which one the slow handshakes had is not known.
        assert_eq!(key(2, 2, 0), CertKey::Unknown);
        assert_eq!(key(0, 3, 3), CertKey::Unknown);
        assert_eq!(key(4, 1, 4), CertKey::Unknown);
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn server_hello_suites() {
        // fixtures/tls-ecdsa.client.pcap frame 66: nginx, TLS 1.2, no
        // session id, ECDHE-ECDSA-AES128-GCM-SHA256.
        let tls12 = hex(
            "160303004c020000480303c9f1cfdc5cdd0eada261a514e3e4afd626575597d39a26c05f620f\
             77caf2160700c02b000020ff01000100000b0004030001020010000b000908687474702f312e3100",
        );
        assert_eq!(server_hello_suite(&tls12), Some(0xC02B));
        assert_eq!(payload_needed(&tls12), tls12.len());
        // fixtures/corpus/zeek-tls13-ech.pcap frame 9: TLS 1.3 with a
        // 32-byte legacy session id, TLS_AES_128_GCM_SHA256; its suite is
        // the last two of the bytes kept.
        let tls13 = hex(
            "160303007a020000760303cd86afb4bb270220f3b7c330c6fc84b3ada6a00d98b285a5022de6\
             f5ced70efc207c77f968ecbeda040598f47af5265fb5f0f5ef3279f08b43d03c31a57ce0c6301301\
             00002e002b0002030400330024001d00",
        );
        assert_eq!(payload_needed(&tls13), PLAIN_ALERT + SERVER_HELLO_NEEDED);
        assert_eq!(
            server_hello_suite(&tls13[..SERVER_HELLO_NEEDED]),
            Some(0x1301)
        );
        assert_eq!(CertKey::of_suite(0x1301), CertKey::Encrypted);
        // Cut before the suite; a ClientHello; a session id too long.
        assert_eq!(server_hello_suite(&tls13[..SERVER_HELLO_NEEDED - 1]), None);
        assert_eq!(server_hello_suite(&[22, 3, 1, 0, 200, 1, 0, 0]), None);
        // After a warning alert (unrecognized_name): as
        // fixtures/corpus/ndpi-http-ipv6.pcap frame 149 begins (its real bytes).
        let warned = [&hex("15030300020170")[..], &tls12].concat();
        assert_eq!(server_hello_suite(&warned), Some(0xC02B));
        assert_eq!(payload_needed(&warned), warned.len());
        let mut bad = tls12.clone();
        bad[43] = 33;
        assert_eq!(server_hello_suite(&bad), None);
    }

    #[test]
    fn alert_and_control_records() {
        // (a segment's first bytes, its length, an alert, a control frame).
        let cases = [
            // A Python server's TLS 1.2 and 1.3 connections (tests/e2e/tls.sh
            // part 6): the client's close_notify after the server's FIN;
            // its requests.
            ("150303001a44", 31, true, false),
            ("170303001343", 24, true, true),
            ("170303006544", 106, false, false),
            ("170303005e63", 99, false, false),
            // fixtures/corpus/zeek-tls-chrome-34-google.pcap: frame 31, a
            // 41-byte record (SPDY's PING, 12 bytes, and 24 of AES-GCM);
            // frame 33, the next request; frame 20, a 49-byte record.
            ("170303002400", 41, false, true),
            ("170303008c00", 145, false, false),
            ("170303002c00", 49, false, false),
            // Records cut short, or that another follows.
            ("150303001a44", 30, false, false),
            ("170303001343", 48, false, false),
            ("170303002400", 60, false, false),
        ];
        for (p, len, alert, control) in cases {
            assert_eq!(is_alert_record(&hex(p), len), alert, "{p} {len}");
            assert_eq!(is_control_record(&hex(p), len), control, "{p} {len}");
        }
        assert!(!is_alert_record(b"GET / HTTP/1.1", 14));
        assert!(!is_control_record(b"GET / HTTP/1.1", 14));
    }

    /// Every suite OpenSSL 3.0 knows (`openssl ciphers -V
    /// 'ALL:COMPLEMENTOFALL:@SECLEVEL=0'`), by its `Au=`: `R` RSA, `E` ECDSA,
    /// `3` TLS 1.3 (`any`), `-` none of them (DSS, PSK, SRP, anonymous).
    const OPENSSL_SUITES: &str = "
        0001R 0002R 002c- 002d- 002eR 002fR 0032- 0033R 0034- 0035R 0038- 0039R 003a- 003bR
        003cR 003dR 0040- 0041R 0044- 0045R 0046- 0067R 006a- 006bR 006c- 006d- 0084R 0087-
        0088R 0089- 008c- 008d- 0090- 0091- 0094R 0095R 009cR 009dR 009eR 009fR 00a2- 00a3-
        00a6- 00a7- 00a8- 00a9- 00aa- 00ab- 00acR 00adR 00ae- 00af- 00b0- 00b1- 00b2- 00b3-
        00b4- 00b5- 00b6R 00b7R 00b8R 00b9R 00baR 00bd- 00beR 00bf- 00c0R 00c3- 00c4R 00c5-
        13013 13023 13033 c006E c009E c00aE c010R c013R c014R c015- c018- c019- c01d- c01eR
        c01f- c020- c021R c022- c023E c024E c027R c028R c02bE c02cE c02fR c030R c035- c036-
        c037- c038- c039- c03a- c03b- c050R c051R c052R c053R c056- c057- c05cE c05dE c060R
        c061R c06a- c06b- c06c- c06d- c06eR c06fR c072E c073E c076R c077R c094- c095- c096-
        c097- c098R c099R c09a- c09b- c09cR c09dR c09eR c09fR c0a0R c0a1R c0a2R c0a3R c0a4-
        c0a5- c0a6- c0a7- c0a8- c0a9- c0aa- c0ab- c0acE c0adE c0aeE c0afE cca8R cca9E ccaaR
        ccab- ccac- ccad- ccaeR";

    #[test]
    fn suites_name_the_key_openssl_names() {
        let mut n = 0;
        for t in OPENSSL_SUITES.split_whitespace() {
            let id = u16::from_str_radix(&t[..4], 16).unwrap();
            let want = match &t[4..] {
                "R" => CertKey::Rsa,
                "E" => CertKey::Ecdsa,
                "3" => CertKey::Encrypted,
                _ => CertKey::Unknown,
            };
            assert_eq!(CertKey::of_suite(id), want, "suite {id:#06x}");
            n += 1;
        }
        assert_eq!(n, 158);
    }
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The server's key exchange, the client's processing between
    /// flights (the rest of the handshake is round trips).
    pub server_ns: i64,
    pub client_ns: i64,
    pub network_ns: i64,
    /// Handshake round trips (2 for a full TLS 1.2 handshake, 1 for TLS 1.3).
    pub rounds: u32,
    pub rtt_ns: Option<i64>,
    /// The certificate's key, from the ServerHello's suite.
    pub key: CertKey,
}

impl rule::Fold for Tls {
    fn fold(self, a: &mut crate::Aggregate) {
        a.handshake_ns += self.network_ns;
        a.inside_ns += self.server_ns;
        a.transfer_ns += self.client_ns;
        a.count += u64::from(self.rounds);
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, self.rtt_ns);
        a.tls_keys[self.key.index()] += 1;
    }
}

/// The key most of a finding's handshakes showed; `Unknown` when no key was
/// seen or two tie.
fn key_of(keys: &[u32; 4]) -> CertKey {
    let (mut most, mut n, mut tie) = (CertKey::Unknown, 0, false);
    for k in CertKey::KNOWN {
        let c = keys[k.index()];
        if c > n {
            (most, n, tie) = (k, c, false);
        } else if c == n {
            tie = true;
        }
    }
    if tie {
        CertKey::Unknown
    } else {
        most
    }
}

impl rule::Rule for TlsState {
    #[inline]
    fn on_segment(&mut self, _: &mut rule::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        if seg.len > 0 {
            TlsState::on_segment(self, seg, !conn.client.syn_seen);
        }
    }

    fn on_budget(&mut self, cx: &mut rule::ExchangeCx<'_>, conn: &Connection, _: &Exchange) {
        if let Some(t) = cx.tls {
            cx.out.extend(occurrence(conn, &cx.split, &t));
        }
    }

    /// A client that closes with its close_notify and gets an RST for it
    /// (the server closed its socket without reading it, before or after its
    /// FIN) lost nothing: the alert is no request, and its response had come.
    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, _: &Connection) {
        if self.closing_alert {
            cx.out.retain(|o| o.kind != Kind::ConnectionReset);
        }
    }
}

/// The verdict's sentence of a `tls_handshake` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    let (ep, role, typ) = (c.ep, c.role, &c.typ);
    match c.str("cause") {
        Some("key_exchange") => {
            let what = match c.str("certificate_key") {
                Some("ecdsa") => "its own time before answering, not its ECDSA key's signature",
                Some("rsa") => "its own key exchange (its RSA key's signature)",
                _ => "its own key exchange (the certificate key's signature)",
            };
            format!("{ep} ({role}) takes ~{typ} per TLS handshake, most of it {what}")
        }
        Some("client") => format!(
            "each TLS handshake takes ~{typ}, most of it the client's own processing between flights"
        ),
        _ => format!("each new connection pays a TLS handshake of ~{typ}, mostly round trips"),
    }
}

/// Slow handshakes that are fewer than half of the endpoint's (`flagged`:
/// its handshakes seen) are a busy moment, not its keys: a minor finding.
pub(crate) fn standing(a: &crate::Aggregate) -> rule::Standing {
    if a.occurrences * 2 < a.flagged {
        rule::Standing::Minor
    } else {
        rule::Standing::ByShare
    }
}
