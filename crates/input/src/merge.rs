//! Several captures analysed as one: packets merged by timestamp, as
//! `mergecap` does by default, so rotated files (`tcpdump -C/-G`) and
//! captures of several interfaces read as one stream.
//!
//! Files are opened when the merge reaches their first packet, so a
//! directory of a thousand rotated files holds one or two open at a time.
//! Two files that captured the same connection at two places (the client's
//! and the server's side of one incident) are told apart from rotation by
//! time: while the file that first showed a connection is still being read,
//! the same connection's packets from another file are a second view of it.
//! They are not analysed twice (the first view is); the connection is
//! reported as seen in both, with where each file was taken.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::net::SocketAddr;

use anyhow::Context;
use serde::Serialize;
use tcpdoctor_capture::{decompressed, CaptureError, CaptureReader, Compression};
use tcpdoctor_engine::model::Analysis;
use tcpdoctor_wire::{LinkType, TcpSegment, Timestamp};

/// How far out of order a capture's timestamps may step back (see
/// [`Merger::next_packet`]): files of several vantage points start up to
/// this much later in the merge than their first packet says.
const ROTATION_SLACK_NS: i64 = 10_000_000;
/// Connections remembered for matching across files, at most (about 100 B each).
const MAX_TRACKED: usize = 1 << 20;
/// Matched connections listed in the report; all are counted.
const MAX_LISTED: usize = 20;

type Reader = CaptureReader<Box<dyn Read + Send>>;

/// One endpoint pair, the same whichever way the packet goes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Key(SocketAddr, SocketAddr);

impl Key {
    fn of(s: &TcpSegment<'_>) -> Key {
        let a = SocketAddr::new(s.src, s.src_port);
        let b = SocketAddr::new(s.dst, s.dst_port);
        if a <= b {
            Key(a, b)
        } else {
            Key(b, a)
        }
    }
}

/// A packet handed to the analysis, borrowed from the merge.
pub(crate) struct Pkt<'a> {
    pub ts: Timestamp,
    pub link: LinkType,
    pub orig_len: u32,
    pub data: &'a [u8],
    pub source: usize,
}

/// A capture file of the merge and what was seen in it.
struct FileState {
    name: String,
    format: String,
    link: Option<LinkType>,
    first: Option<Timestamp>,
    last: Option<Timestamp>,
    packets: u64,
    /// Packets of connections another file showed first, not analysed twice.
    second_views: u64,
    error: Option<CaptureError>,
    ended: bool,
    /// Where each of its handshakes says it was taken, counted when the
    /// file ended (its handshakes are then let go).
    votes: HashMap<&'static str, u64>,
    handshakes: u64,
    folded: bool,
}

struct Active {
    source: usize,
    reader: Reader,
    ts: Timestamp,
    link: LinkType,
    orig_len: u32,
    data: Vec<u8>,
}

/// The handshake of one connection as one file saw it.
#[derive(Default, Clone, Copy)]
struct Handshake {
    client: Option<SocketAddr>,
    syn: Option<Timestamp>,
    syn_ack: Option<Timestamp>,
    ack: Option<Timestamp>,
    client_ttl: u8,
    server_ttl: u8,
}

pub struct Merger {
    files: Vec<FileState>,
    /// Sources not opened yet, latest first packet first (popped from the end).
    waiting: Vec<usize>,
    active: Vec<Active>,
    /// The active entry whose packet was handed out last.
    current: Option<usize>,
    owners: FxHashMap<Key, u32>,
    handshakes: FxHashMap<(u32, Key), Handshake>,
    /// Connections seen in more than one file: the files, in the order seen.
    matched: FxHashMap<Key, Vec<u32>>,
    untracked: u64,
}

/// Opens each file to read its first packet's time; a file that is not a
/// capture at all is an error, as it is for one file.
pub fn open(paths: &[String]) -> anyhow::Result<Merger> {
    let mut files = Vec::new();
    for path in paths {
        let mut reader = open_one(path)?;
        let mut f = FileState {
            name: path.clone(),
            format: String::new(),
            link: reader.0.link_type(),
            first: None,
            last: None,
            packets: 0,
            second_views: 0,
            error: None,
            ended: false,
            votes: HashMap::new(),
            handshakes: 0,
            folded: false,
        };
        f.format = match reader.1 {
            Compression::None => reader.0.format().to_string(),
            c => format!("{}, {c}", reader.0.format()),
        };
        match reader.0.next_packet() {
            Ok(Some(p)) => f.first = Some(p.ts),
            Ok(None) => f.ended = true,
            Err(e) => {
                f.error = Some(e);
                f.ended = true;
            }
        }
        if f.link.is_none() {
            f.link = reader.0.link_type();
        }
        files.push(f);
    }
    let mut waiting: Vec<usize> = (0..files.len()).filter(|&i| !files[i].ended).collect();
    // Latest first, ties by position reversed: popping takes the earliest, and
    // of equal times the file named first (mergecap's order).
    waiting.sort_by_key(|&i| (std::cmp::Reverse(files[i].first), std::cmp::Reverse(i)));
    Ok(Merger {
        files,
        waiting,
        active: Vec::new(),
        current: None,
        owners: FxHashMap::default(),
        handshakes: FxHashMap::default(),
        matched: FxHashMap::default(),
        untracked: 0,
    })
}

fn open_one(path: &str) -> anyhow::Result<(Reader, Compression)> {
    let file = File::open(path).with_context(|| path.to_string())?;
    let (src, c) =
        decompressed(BufReader::with_capacity(1 << 20, file)).with_context(|| path.to_string())?;
    let reader = CaptureReader::new(src).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    Ok((reader, c))
}

impl Merger {
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|f| f.name.as_str())
    }

    pub fn link_types(&self) -> impl Iterator<Item = LinkType> + '_ {
        self.files.iter().filter_map(|f| f.link)
    }

    /// The next packet in time order, `Ok(None)` when every file is read.
    /// Errors in one file end that file (reported with [`Merger::report`]),
    /// not the merge.
    pub(crate) fn next_packet(&mut self) -> Option<Pkt<'_>> {
        if let Some(i) = self.current.take() {
            self.advance(i);
        }
        // Open every file whose first packet is due before the earliest one
        // held, by more than [`ROTATION_SLACK_NS`]: a capture tool writes a
        // few timestamps out of order (packets taken on two CPUs), and where
        // one falls at a rotation's cut the next file starts a moment before
        // the last one ends. Opened at once, its first packets would come
        // before the last file's end and read as a second view of those
        // connections; opened after, they follow it, as in one file.
        while let Some(&next) = self.waiting.last() {
            let held = self.active.iter().map(|a| a.ts).min();
            let due = self.files[next]
                .first
                .map(|f| Timestamp::from_nanos(f.nanos().saturating_add(ROTATION_SLACK_NS)));
            if held.is_some_and(|t| due.is_some_and(|f| f > t)) {
                break;
            }
            self.waiting.pop();
            self.start(next);
        }
        let i =
            (0..self.active.len()).min_by_key(|&i| (self.active[i].ts, self.active[i].source))?;
        self.current = Some(i);
        let a = &self.active[i];
        let f = &mut self.files[a.source];
        f.packets += 1;
        f.last = Some(a.ts);
        Some(Pkt {
            ts: a.ts,
            link: a.link,
            orig_len: a.orig_len,
            data: &a.data,
            source: a.source,
        })
    }

    fn start(&mut self, source: usize) {
        let f = &mut self.files[source];
        let reader = match open_one(&f.name) {
            Ok((r, _)) => r,
            Err(e) => {
                // It opened a moment ago: it changed or went away since.
                f.error = Some(CaptureError {
                    kind: tcpdoctor_capture::ErrorKind::Io,
                    offset: 0,
                    detail: format!("{e:#}"),
                });
                f.ended = true;
                return;
            }
        };
        self.active.push(Active {
            source,
            reader,
            ts: Timestamp::from_nanos(0),
            link: LinkType::Ethernet,
            orig_len: 0,
            data: Vec::new(),
        });
        let i = self.active.len() - 1;
        self.advance(i);
    }

    /// Reads the next packet of an active file, or retires the file.
    fn advance(&mut self, i: usize) {
        let a = &mut self.active[i];
        match a.reader.next_packet() {
            Ok(Some(p)) => {
                a.ts = p.ts;
                a.link = p.link;
                a.orig_len = p.orig_len;
                a.data.clear();
                a.data.extend_from_slice(p.data);
                return;
            }
            Ok(None) => {}
            Err(e) => self.files[a.source].error = Some(e),
        }
        let source = a.source;
        self.files[source].ended = true;
        self.active.swap_remove(i);
        self.retire(source);
    }

    /// A file has ended: its handshakes become its counts of where it was
    /// taken, and its connections are no longer its own (a rotated file's
    /// successor carries them on). Memory then holds only the open files'
    /// connections, and those seen in two files.
    fn retire(&mut self, source: usize) {
        let src = source as u32;
        let Merger {
            files,
            handshakes,
            owners,
            matched,
            ..
        } = self;
        let f = &mut files[source];
        handshakes.retain(|(s, k), h| {
            if *s != src {
                return true;
            }
            if h.syn.is_some() {
                f.handshakes += 1;
                let (place, _) = vantage(h);
                if place != "unknown" {
                    *f.votes.entry(place).or_default() += 1;
                }
            }
            matched.contains_key(k)
        });
        owners.retain(|_, o| *o != src);
        f.folded = true;
    }

    /// Whether a decoded TCP segment from `source` is analysed: not when it
    /// is a second view of a connection another file is showing.
    pub(crate) fn admit(&mut self, source: usize, ts: Timestamp, s: &TcpSegment<'_>) -> bool {
        let key = Key::of(s);
        let src = source as u32;
        // Only the handshake's segments matter here: SYN, SYN-ACK, and the
        // client's pure ACK that completes it (data segments are skipped
        // without a lookup).
        let handshake_like = s.flags.syn() || (s.flags.ack() && s.payload_len == 0);
        if handshake_like
            && (self.handshakes.len() < MAX_TRACKED || self.handshakes.contains_key(&(src, key)))
        {
            let h = self.handshakes.entry((src, key)).or_default();
            let from = SocketAddr::new(s.src, s.src_port);
            match (s.flags.syn(), s.flags.ack()) {
                (true, false) if h.syn.is_none() => {
                    h.syn = Some(ts);
                    h.client = Some(from);
                    h.client_ttl = s.ttl;
                }
                (true, true) if h.syn_ack.is_none() => {
                    h.syn_ack = Some(ts);
                    h.server_ttl = s.ttl;
                }
                (false, true)
                    if h.ack.is_none() && h.syn_ack.is_some() && h.client == Some(from) =>
                {
                    h.ack = Some(ts)
                }
                _ => {}
            }
        }
        let room = self.owners.len() < MAX_TRACKED;
        let owner = match self.owners.entry(key) {
            Entry::Vacant(v) => {
                if room {
                    v.insert(src);
                } else {
                    self.untracked += 1;
                }
                return true;
            }
            Entry::Occupied(mut o) => {
                let owner = *o.get();
                if owner == src {
                    return true;
                }
                if self.files[owner as usize].ended {
                    // Read to its end: a rotated file's successor carries on.
                    o.insert(src);
                    return true;
                }
                owner
            }
        };
        self.files[source].second_views += 1;
        if self.matched.len() < MAX_TRACKED {
            let seen = self.matched.entry(key).or_insert_with(|| vec![owner]);
            if !seen.contains(&src) {
                seen.push(src);
            }
        }
        false
    }

    /// Per-file errors as warnings for the analysis.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        for f in &self.files {
            if let Some(e) = &f.error {
                let what = match e.kind {
                    tcpdoctor_capture::ErrorKind::Truncated => "is truncated",
                    tcpdoctor_capture::ErrorKind::Io => "could not be read",
                    _ => "is corrupt",
                };
                w.push(format!(
                    "{}: the capture {what} at byte {} ({}); its {} packets before it were analysed",
                    f.name, e.offset, e.detail, f.packets
                ));
            }
        }
        let views: u64 = self.files.iter().map(|f| f.second_views).sum();
        if views > 0 {
            w.push(format!(
                "{views} packets were a second view of connections another file was showing \
                 (captured at two places); each connection is analysed from the file that showed it first"
            ));
        }
        if self.untracked > 0 {
            w.push(format!(
                "more than {MAX_TRACKED} connections: {} packets of later ones were not checked for \
                 being seen in two files",
                self.untracked
            ));
        }
        w
    }

    /// What each file held and where it was taken; connections seen in two.
    pub fn report(&self, analysis: &Analysis) -> Report {
        let files = self
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut votes = f.votes.clone();
                let mut of = f.handshakes;
                for ((src, _), h) in &self.handshakes {
                    if !f.folded && *src as usize == i && h.syn.is_some() {
                        of += 1;
                        let (place, _) = vantage(h);
                        if place != "unknown" {
                            *votes.entry(place).or_default() += 1;
                        }
                    }
                }
                let best = votes
                    .iter()
                    .max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p)))
                    .map(|(p, n)| (*p, *n));
                FileReport {
                    name: f.name.clone(),
                    format: f.format.clone(),
                    packets: f.packets,
                    first_unix: f.first.map(unix),
                    last_unix: f.last.map(unix),
                    vantage: best.map_or("unknown", |b| b.0),
                    vantage_connections: best.map_or(0, |b| b.1),
                    handshakes: of,
                    second_views: f.second_views,
                    error: f.error.as_ref().map(|e| e.to_string()),
                }
            })
            .collect();
        let mut keys: Vec<&Key> = self.matched.keys().collect();
        keys.sort_by_key(|k| {
            self.handshakes
                .get(&(self.matched[*k][0], **k))
                .and_then(|h| h.syn)
                .map_or(i64::MAX, |t| t.nanos())
        });
        let matched = keys
            .iter()
            .take(MAX_LISTED)
            .map(|k| {
                let seen = &self.matched[*k];
                let hs0 = self
                    .handshakes
                    .get(&(seen[0], **k))
                    .copied()
                    .unwrap_or_default();
                let (client, server) = match hs0.client {
                    Some(c) if c == k.1 => (k.1, k.0),
                    _ => (k.0, k.1),
                };
                let ids = analysis
                    .connections
                    .iter()
                    .filter(|c| {
                        (c.client == client && c.server == server)
                            || (c.client == server && c.server == client)
                    })
                    .map(|c| c.id)
                    .collect();
                let views = seen
                    .iter()
                    .map(|&s| {
                        let h = self.handshakes.get(&(s, **k)).copied().unwrap_or_default();
                        View {
                            file: self.files[s as usize].name.clone(),
                            vantage: vantage(&h).0,
                            syn_unix: h.syn.map(unix),
                        }
                    })
                    .collect();
                Matched {
                    client: client.to_string(),
                    server: server.to_string(),
                    ids,
                    analysed_from: self.files[seen[0] as usize].name.clone(),
                    views,
                }
            })
            .collect();
        Report {
            files,
            connections_in_several_files: self.matched.len() as u64,
            matched,
        }
    }
}

fn unix(t: Timestamp) -> f64 {
    t.nanos() as f64 / 1e9
}

/// Where a file was taken, as one connection's handshake tells it: the same
/// reading as the analysis makes of each connection (TTLs first, then which
/// half of the handshake round trip is short).
fn vantage(h: &Handshake) -> (&'static str, &'static str) {
    let initial = |t: u8| matches!(t, 32 | 64 | 128 | 255);
    let (c, s) = (h.client_ttl, h.server_ttl);
    if c != 0 && s != 0 {
        match (initial(c), initial(s)) {
            (true, false) => return ("client", "ttl"),
            (false, true) => return ("server", "ttl"),
            (false, false) => return ("between", "ttl"),
            _ => {}
        }
    }
    let (Some(syn), Some(syn_ack), Some(ack)) = (h.syn, h.syn_ack, h.ack) else {
        return ("unknown", "no handshake");
    };
    let server_side = syn_ack.since(syn);
    let client_side = ack.since(syn_ack);
    let total = server_side + client_side;
    if total < 1_000_000 {
        ("unknown", "endpoints too close to tell")
    } else if client_side * 5 < total {
        ("client", "handshake")
    } else if server_side * 5 < total {
        ("server", "handshake")
    } else {
        ("between", "handshake")
    }
}

#[derive(Serialize)]
pub struct Report {
    pub files: Vec<FileReport>,
    pub connections_in_several_files: u64,
    /// The first of them (by SYN time), at most 20.
    pub matched: Vec<Matched>,
}

#[derive(Serialize)]
pub struct FileReport {
    pub name: String,
    pub format: String,
    pub packets: u64,
    pub first_unix: Option<f64>,
    pub last_unix: Option<f64>,
    /// `client`, `server`, `between` or `unknown`: the most connections' reading.
    pub vantage: &'static str,
    pub vantage_connections: u64,
    /// Connections whose SYN this file holds.
    pub handshakes: u64,
    /// Packets of connections another file showed first, not analysed twice.
    pub second_views: u64,
    pub error: Option<String>,
}

#[derive(Serialize)]
pub struct Matched {
    pub client: String,
    pub server: String,
    /// The connection's id(s) in the analysis (several if its ports were reused).
    pub ids: Vec<u64>,
    pub analysed_from: String,
    pub views: Vec<View>,
}

#[derive(Serialize)]
pub struct View {
    pub file: String,
    pub vantage: &'static str,
    /// When this file saw the SYN (by its own clock).
    pub syn_unix: Option<f64>,
}

impl Report {
    pub fn text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let second_views: u64 = self.files.iter().map(|f| f.second_views).sum();
        writeln!(
            out,
            "\nINPUTS     {} files merged by time (frame numbers count the merged stream{})",
            self.files.len(),
            if second_views > 0 {
                " less the second views"
            } else {
                ", as `mergecap -w` writes it"
            }
        )?;
        for f in &self.files {
            let span = match (f.first_unix, f.last_unix) {
                (Some(a), Some(b)) => format!("{:.3} s from {}", b - a, utc(a)),
                _ => "no packets".into(),
            };
            let place = match f.vantage {
                "unknown" => format!("where it was taken not told ({} handshakes)", f.handshakes),
                p => format!(
                    "taken at the {p} ({} of {} handshakes)",
                    f.vantage_connections, f.handshakes
                ),
            };
            let place = place.replace("at the between", "between client and server");
            writeln!(
                out,
                "  {}  {} · {} packets · {span} · {place}",
                f.name, f.format, f.packets
            )?;
            if f.second_views > 0 {
                writeln!(
                    out,
                    "      {} packets were a second view of connections another file showed first",
                    f.second_views
                )?;
            }
            if let Some(e) = &f.error {
                writeln!(out, "      stopped: {e}")?;
            }
        }
        if self.connections_in_several_files > 0 {
            writeln!(
                out,
                "  {} connection(s) seen in two or more files, each analysed once:",
                self.connections_in_several_files
            )?;
            for m in &self.matched {
                let ids: Vec<String> = m.ids.iter().map(|i| i.to_string()).collect();
                let views: Vec<String> = m
                    .views
                    .iter()
                    .map(|v| format!("{} ({} side)", v.file, v.vantage))
                    .collect();
                writeln!(
                    out,
                    "    conn {} {} → {}: {}",
                    if ids.is_empty() {
                        "-".into()
                    } else {
                        ids.join(",")
                    },
                    m.client,
                    m.server,
                    views.join(" and ")
                )?;
            }
        }
        Ok(())
    }
}

/// `2026-11-24 08:01:02.123 UTC` from Unix seconds.
pub fn utc(unix: f64) -> String {
    let ms = (unix * 1000.0).round() as i64;
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let s = ms_of_day / 1000;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:03} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60,
        ms_of_day % 1000
    )
}

/// The inverse of days-from-civil (400-year eras of 146,097 days).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Captures found by [`expand`], and the files of the directories given that
/// are not captures (left out, and said so).
pub struct Expanded {
    pub paths: Vec<String>,
    pub skipped: Vec<String>,
}

/// File name endings taken as captures whatever they hold (a damaged one is
/// then an error, as a damaged file named on the command line is).
const CAPTURE_ENDINGS: [&str; 8] = [
    ".pcap", ".pcapng", ".cap", ".dmp", ".gz", ".zst", ".zstd", ".lz4",
];

/// Whether a file in a directory is a capture: by its name, or by its
/// first bytes (pcap, pcapng, or a compressed stream of either).
pub(crate) fn looks_like_capture(path: &std::path::Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if CAPTURE_ENDINGS.iter().any(|e| name.ends_with(e)) || name.contains(".pcap") {
        return true;
    }
    let mut head = [0u8; 4];
    let Ok(mut f) = File::open(path) else {
        // Unreadable: named as a capture so that the error is reported.
        return true;
    };
    let mut have = 0;
    while have < head.len() {
        match f.read(&mut head[have..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => have += k,
        }
    }
    matches!(
        head[..have],
        [0xd4, 0xc3, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0xc3, 0xd4]
            | [0x4d, 0x3c, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0x3c, 0x4d]
            | [0x0a, 0x0d, 0x0d, 0x0a]
            | [0x1f, 0x8b, ..]
            | [0x28, 0xb5, 0x2f, 0xfd]
    )
}

/// Expands directories into the capture files they hold, sorted by name;
/// hidden files are skipped, and so are files that are not captures
/// (counted in [`Expanded::skipped`]). A file named on its own is taken as given.
pub fn expand(paths: &[String]) -> anyhow::Result<Expanded> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| p.clone());
        if meta.as_ref().is_ok_and(|m| m.is_dir()) {
            let mut names: Vec<std::path::PathBuf> = std::fs::read_dir(p)
                .with_context(|| p.clone())?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .collect();
            names.sort();
            if names.is_empty() {
                anyhow::bail!("{p}: the directory holds no files");
            }
            let (captures, others): (Vec<_>, Vec<_>) =
                names.into_iter().partition(|n| looks_like_capture(n));
            if captures.is_empty() {
                anyhow::bail!(
                    "{p}: the directory holds no capture ({} other file{}: {})",
                    others.len(),
                    if others.len() == 1 { "" } else { "s" },
                    others
                        .iter()
                        .map(|o| o.to_string_lossy())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            out.extend(captures.iter().map(|c| c.to_string_lossy().into_owned()));
            skipped.extend(others.iter().map(|o| o.to_string_lossy().into_owned()));
        } else {
            out.push(p.clone());
        }
    }
    Ok(Expanded {
        paths: out,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_round_trip() {
        assert_eq!(utc(1_700_000_000.25), "2023-11-14 22:13:20.250 UTC");
        assert_eq!(utc(0.0), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(utc(951_782_400.0), "2000-02-29 00:00:00.000 UTC");
    }

    #[test]
    fn handshake_halves_tell_the_side() {
        let t = |ms: i64| Some(Timestamp::from_nanos(ms * 1_000_000));
        let at_client = Handshake {
            syn: t(0),
            syn_ack: t(20),
            ack: t(20),
            client_ttl: 64,
            server_ttl: 64,
            ..Handshake::default()
        };
        assert_eq!(vantage(&at_client).0, "client");
        let at_server = Handshake {
            syn: t(0),
            syn_ack: t(0),
            ack: t(20),
            ..at_client
        };
        assert_eq!(vantage(&at_server).0, "server");
        let routed = Handshake {
            server_ttl: 63,
            ..at_server
        };
        assert_eq!(vantage(&routed).0, "client");
    }
}
