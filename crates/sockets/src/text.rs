//! The text view: sockets grouped the way a person thinks of them, each
//! group summarised, its flags counted and explained once, its worst
//! sockets listed.
//!
//! - A listener and the server sockets accepted from it (same local port,
//!   and the listener's address or a wildcard) form one group: a server
//!   with 200 connections is one group, not 200 lines. Listeners on the
//!   same address (SO_REUSEPORT, or one per worker) join one group.
//! - Sockets of one process on one local address whose listener is not in
//!   view (`--state connected`) are the connections it accepted: one group.
//! - Every other socket is grouped by the process holding it and the
//!   remote endpoint: a client with 100 connections to one server is one
//!   group.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::SocketAddr;

use rustc_hash::FxHashMap;

use crate::judge::{bytes, ms};
use crate::{FlagKind, Snapshot, Socket, State};

/// How a group came together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupKey {
    /// Listening on this address, with the sockets it accepted.
    Listener(SocketAddr),
    /// Sockets of one process (or of none known) to one remote endpoint.
    Client(Option<u32>, SocketAddr),
    /// Sockets of one process on one local address its listener accepted,
    /// the listener not in view (filtered out by `--state`).
    Accepted(Option<u32>, SocketAddr),
}

/// A group of sockets.
#[derive(Debug)]
pub struct Group<'a> {
    pub key: GroupKey,
    pub listeners: Vec<&'a Socket>,
    pub members: Vec<&'a Socket>,
}

impl Group<'_> {
    fn all(&self) -> impl Iterator<Item = &Socket> {
        self.listeners.iter().chain(&self.members).copied()
    }

    fn flag_count(&self) -> usize {
        self.all().map(|s| s.flags.len()).sum()
    }
}

/// Groups sockets; groups with flags first (most flags first), then larger
/// groups first.
pub fn groups(sockets: &[Socket]) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    // Listening address → group; port → groups listening on it.
    let mut by_addr: FxHashMap<SocketAddr, usize> = FxHashMap::default();
    let mut by_port: FxHashMap<u16, Vec<usize>> = FxHashMap::default();
    for s in sockets.iter().filter(|s| s.state == State::Listen) {
        let g = *by_addr.entry(s.local).or_insert_with(|| {
            out.push(Group {
                key: GroupKey::Listener(s.local),
                listeners: Vec::new(),
                members: Vec::new(),
            });
            by_port
                .entry(s.local.port())
                .or_default()
                .push(out.len() - 1);
            out.len() - 1
        });
        out[g].listeners.push(s);
    }
    // A local address several connections share is a server's: a client's
    // sockets each have a port of their own.
    let mut sharing: FxHashMap<(Option<u32>, SocketAddr), usize> = FxHashMap::default();
    for s in sockets.iter().filter(|s| s.state != State::Listen) {
        *sharing
            .entry((s.process.map(|p| p.pid), s.local))
            .or_default() += 1;
    }
    let mut clients: FxHashMap<GroupKey, usize> = FxHashMap::default();
    for s in sockets.iter().filter(|s| s.state != State::Listen) {
        if let Some(g) = listener_of(s, &out, &by_port) {
            out[g].members.push(s);
            continue;
        }
        let pid = s.process.map(|p| p.pid);
        let key = if sharing.get(&(pid, s.local)).is_some_and(|&n| n > 1) {
            GroupKey::Accepted(pid, s.local)
        } else {
            GroupKey::Client(pid, s.remote)
        };
        let g = *clients.entry(key).or_insert_with(|| {
            out.push(Group {
                key,
                listeners: Vec::new(),
                members: Vec::new(),
            });
            out.len() - 1
        });
        out[g].members.push(s);
    }
    out.sort_by_key(|g| {
        (
            std::cmp::Reverse(g.flag_count()),
            std::cmp::Reverse(g.members.len()),
            match g.key {
                GroupKey::Listener(a) => (0, a),
                GroupKey::Accepted(_, a) => (1, a),
                GroupKey::Client(_, a) => (2, a),
            },
        )
    });
    out
}

/// The listener group that accepted `s`: same port and family, and the
/// listener's own address or a wildcard (an exact address wins).
fn listener_of(
    s: &Socket,
    groups: &[Group<'_>],
    by_port: &FxHashMap<u16, Vec<usize>>,
) -> Option<usize> {
    let candidates = by_port.get(&s.local.port())?;
    let mut wildcard = None;
    for &g in candidates {
        let GroupKey::Listener(addr) = groups[g].key else {
            continue;
        };
        if addr.is_ipv4() != s.local.is_ipv4() {
            continue;
        }
        if addr.ip() == s.local.ip() {
            return Some(g);
        }
        if addr.ip().is_unspecified() {
            wildcard = Some(g);
        }
    }
    wildcard
}

/// Rendering choices.
#[derive(Debug, Clone, Copy)]
pub struct TextOptions {
    /// Sockets listed per group (the worst first); a group with at most
    /// this many + 2 lists them all.
    pub worst: usize,
    /// Lines are wrapped to this many characters.
    pub width: usize,
}

impl Default for TextOptions {
    fn default() -> TextOptions {
        TextOptions {
            worst: 3,
            width: 100,
        }
    }
}

/// Writes `text` wrapped at word boundaries to `width` characters: the first
/// line after `first`, the others after `indent`.
fn wrap(text: &str, first: &str, indent: &str, width: usize, w: &mut impl Write) -> io::Result<()> {
    // A unit stays with its number (`128 KB` is one word here), and a count
    // with its total (`0 of 4`).
    let mut words: Vec<String> = Vec::new();
    let mut glue_next = false;
    let number = |w: &str| {
        let w = w.trim_start_matches('(');
        !w.is_empty() && w.chars().all(|c| c.is_ascii_digit())
    };
    for word in text.split(' ').filter(|x| !x.is_empty()) {
        let bare = word.trim_end_matches([')', ',', ';', ':', '.']);
        let unit = matches!(
            bare,
            "B" | "KB" | "MB" | "GB" | "ms" | "µs" | "s" | "KB/s" | "MB/s" | "GB/s"
        );
        let of = word == "of"
            && words
                .last()
                .is_some_and(|p| number(p.rsplit(' ').next().unwrap_or(p)));
        match words.last_mut() {
            Some(prev) if unit || of || glue_next => {
                prev.push(' ');
                prev.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
        glue_next = of;
    }
    let mut line = String::from(first);
    let mut empty = true;
    for word in &words {
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            writeln!(w, "{line}")?;
            line = String::from(indent);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    writeln!(w, "{line}")
}

/// Writes the text view of a snapshot.
pub fn render(snap: &Snapshot, opts: TextOptions, w: &mut impl Write) -> io::Result<()> {
    let groups = groups(&snap.sockets);
    let mut states: BTreeMap<State, usize> = BTreeMap::new();
    for s in &snap.sockets {
        *states.entry(s.state).or_default() += 1;
    }
    let flagged = snap.sockets.iter().filter(|s| !s.flags.is_empty()).count();
    // Nagle is judged from the options: where they could not be read, "0
    // flagged" would claim more than was looked at.
    let unjudged = snap
        .sockets
        .iter()
        .filter(|s| s.state == State::Established && s.options.is_none())
        .count();
    let mut head = format!(
        "{} TCP socket{} ({}) in {} group{}; {} flagged",
        snap.sockets.len(),
        if snap.sockets.len() == 1 { "" } else { "s" },
        count_list(states.iter().map(|(s, n)| (s.name(), *n))),
        groups.len(),
        if groups.len() == 1 { "" } else { "s" },
        flagged
    );
    if unjudged > 0 {
        head += &format!(
            " (nagle_on not judged on {unjudged} established socket{}: options unreadable, see below)",
            if unjudged == 1 { "" } else { "s" }
        );
    }
    wrap(&head, "", "  ", opts.width, w)?;
    for g in &groups {
        writeln!(w)?;
        group(g, opts, w)?;
    }
    if !snap.could_not_read.is_empty() {
        writeln!(w)?;
        for n in &snap.could_not_read {
            wrap(
                &format!("could not read {}: {}", n.what, n.reason),
                "",
                "  ",
                opts.width,
                w,
            )?;
        }
    }
    Ok(())
}

fn count_list<'a>(items: impl Iterator<Item = (&'a str, usize)>) -> String {
    let v: Vec<String> = items.map(|(name, n)| format!("{n} {name}")).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// `nginx pid 812 (also held by pid 811)`; for sockets no descriptor
/// refers to (TIME_WAIT), says so rather than "unknown".
fn who(s: &Socket) -> String {
    let mut out = match s.process {
        Some(p) => format!(
            "{} pid {}",
            p.command.as_ref().map_or("?", |c| c.as_str()),
            p.pid
        ),
        None if s.inode == 0 => "no process (closed by its owner)".to_string(),
        None => "process unknown".to_string(),
    };
    if !s.also_held_by.is_empty() {
        let pids: Vec<String> = s.also_held_by.iter().map(|o| o.pid.to_string()).collect();
        out += &format!(" (also held by pid {})", pids.join(", "));
    }
    out
}

/// One group: its head, the summary of its connections, its flags and its
/// worst sockets.
fn group(g: &Group<'_>, opts: TextOptions, w: &mut impl Write) -> io::Result<()> {
    group_head(g, opts, w)?;
    if !g.members.is_empty() {
        summary(g, opts.width, w)?;
    }
    group_flags(g, opts, w)?;
    if g.members.is_empty() {
        return Ok(());
    }
    worst_sockets(g, opts, w)
}

/// The group's first line: the listener and its accept queue, or the
/// process and its sockets' peer or local address.
fn group_head(g: &Group<'_>, opts: TextOptions, w: &mut impl Write) -> io::Result<()> {
    match g.key {
        GroupKey::Listener(addr) => {
            let l = g.listeners[0];
            let queued: u32 = g.listeners.iter().map(|l| l.recv_q).sum();
            let backlog: u32 = g.listeners.iter().map(|l| l.send_q).max().unwrap_or(0);
            let mut head = format!(
                "{} listening on {addr}: accept queue {queued}/{backlog}",
                who(l)
            );
            if g.listeners.len() > 1 {
                head += &format!(" ({} listening sockets)", g.listeners.len());
            }
            if let Some(m) = l.memory {
                head += &format!(", rcvbuf {}", bytes(u64::from(m.rcvbuf)));
            }
            // The listener's own TCP_NODELAY says little: servers set it on
            // each accepted socket (the summary counts those). Shown only
            // when no accepted socket is.
            if let Some(o) = l.options.filter(|_| g.members.is_empty()) {
                head += &format!(
                    ", TCP_NODELAY {} on the listening socket (accepted sockets may set their own)",
                    on_off(o.tcp_nodelay)
                );
            }
            wrap(&head, "", "  ", opts.width, w)?;
        }
        GroupKey::Client(_, remote) => {
            let s = g.members[0];
            let n = g.members.len();
            wrap(
                &format!(
                    "{}: {n} socket{} to {remote}",
                    who(s),
                    if n == 1 { "" } else { "s" }
                ),
                "",
                "  ",
                opts.width,
                w,
            )?;
        }
        GroupKey::Accepted(_, local) => {
            let s = g.members[0];
            let n = g.members.len();
            wrap(
                &format!(
                    "{}: {n} connection{} accepted on {local} (its listener not selected)",
                    who(s),
                    if n == 1 { "" } else { "s" }
                ),
                "",
                "  ",
                opts.width,
                w,
            )?;
        }
    }
    Ok(())
}

/// Each kind of flag raised in the group, once: on which sockets, the
/// message of the first one, the fix.
fn group_flags(g: &Group<'_>, opts: TextOptions, w: &mut impl Write) -> io::Result<()> {
    let mut kinds: BTreeMap<FlagKind, (usize, usize, &crate::Flag)> = BTreeMap::new();
    for (listener, s) in g
        .listeners
        .iter()
        .map(|s| (true, s))
        .chain(g.members.iter().map(|s| (false, s)))
    {
        for f in &s.flags {
            let e = kinds.entry(f.kind).or_insert((0, 0, f));
            if listener {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    }
    let conns = g.members.len();
    let noun = if g.listeners.is_empty() {
        "sockets"
    } else {
        "connections"
    };
    for (kind, (on_listener, on_members, f)) in &kinds {
        let whom = match (*on_listener > 0, *on_members > 0) {
            (true, true) => format!("the listener and {on_members} of {conns} {noun}"),
            (true, false) => "the listener".to_string(),
            _ => format!("{on_members} of {conns} {noun}"),
        };
        wrap(
            &format!("! {} on {whom}: {}", kind.name(), f.message),
            "  ",
            "    ",
            opts.width,
            w,
        )?;
        wrap(&format!("fix: {}", f.fix), "    ", "      ", opts.width, w)?;
    }
    Ok(())
}

/// The group's sockets, the most flagged and slowest first: at most
/// `opts.worst` of them unless only a couple more.
fn worst_sockets(g: &Group<'_>, opts: TextOptions, w: &mut impl Write) -> io::Result<()> {
    let mut worst: Vec<&Socket> = g.members.clone();
    worst.sort_by_key(|s| {
        let t = s.tcp_info.as_ref();
        (
            std::cmp::Reverse(s.flags.len()),
            std::cmp::Reverse(t.map_or(0, |t| t.rtt_us)),
            s.remote,
        )
    });
    let shown = if worst.len() <= opts.worst + 2 {
        worst.len()
    } else {
        opts.worst
    };
    let label = if shown == worst.len() {
        "sockets"
    } else {
        "worst"
    };
    writeln!(w, "  {label}:")?;
    for s in &worst[..shown] {
        wrap(&line(s), "    ", "        ", opts.width, w)?;
    }
    if shown < worst.len() {
        writeln!(
            w,
            "    … {} more (--format json lists every socket)",
            worst.len() - shown
        )?;
    }
    Ok(())
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn summary(g: &Group<'_>, width: usize, w: &mut impl Write) -> io::Result<()> {
    let mut states: BTreeMap<State, usize> = BTreeMap::new();
    let (mut rtt, mut cwnd) = (Vec::new(), Vec::new());
    let mut min_rtt: Option<u32> = None;
    let (mut nodelay_off, mut read) = (0, 0);
    let mut retrans = 0u64;
    for s in &g.members {
        *states.entry(s.state).or_default() += 1;
        if let Some(t) = s
            .tcp_info
            .as_ref()
            .filter(|_| s.state == State::Established)
        {
            rtt.push(t.rtt_us);
            cwnd.push(t.snd_cwnd);
            if let Some(m) = t.min_rtt_us.filter(|&m| m > 0 && m != u32::MAX) {
                min_rtt = Some(min_rtt.map_or(m, |x| x.min(m)));
            }
            retrans += u64::from(t.total_retrans);
        }
        if let Some(o) = s.options {
            read += 1;
            nodelay_off += usize::from(!o.tcp_nodelay);
        }
    }
    let mut out = format!(
        "{} socket{}: {}",
        g.members.len(),
        if g.members.len() == 1 { "" } else { "s" },
        count_list(states.iter().map(|(s, n)| (s.name(), *n)))
    );
    if let Some((lo, med, hi)) = spread(&mut rtt) {
        out += &format!(
            "; rtt {}",
            range(ms(lo.into()), ms(med.into()), ms(hi.into()))
        );
        if let Some(m) = min_rtt.filter(|&m| inflated(med, m)) {
            out += &format!(
                " (min_rtt {}: the path is that fast; the smoothed rtt counts the time the \
                 peer's ACKs were delayed)",
                ms(m.into())
            );
        }
    }
    if let Some((lo, med, hi)) = spread(&mut cwnd) {
        out += &format!(
            "; cwnd {}",
            range(lo.to_string(), med.to_string(), hi.to_string())
        );
    }
    if retrans > 0 {
        out += &format!(
            "; {retrans} retransmission{}",
            if retrans == 1 { "" } else { "s" }
        );
    }
    if read > 0 {
        out += &format!("; TCP_NODELAY off on {nodelay_off} of {read}");
    }
    wrap(&out, "  ", "    ", width, w)
}

/// A smoothed rtt far above the connection's minimum: delayed ACKs (or
/// queueing) inflate it, the path itself is faster.
fn inflated(rtt_us: u32, min_rtt_us: u32) -> bool {
    rtt_us >= 1000 && rtt_us / 4 > min_rtt_us
}

/// `0.05 – 0.31 ms (median 0.11 ms)`, or one value when they print alike.
fn range(lo: String, med: String, hi: String) -> String {
    if lo == hi {
        lo
    } else {
        format!("{lo} – {hi} (median {med})")
    }
}

/// (min, median, max).
fn spread(v: &mut [u32]) -> Option<(u32, u32, u32)> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some((v[0], v[v.len() / 2], v[v.len() - 1]))
}

/// One socket on one line.
pub fn line(s: &Socket) -> String {
    let mut out = format!("{} ⇄ {} {}", s.local, s.remote, s.state.name());
    if let Some(t) = s.tcp_info.as_ref().filter(|_| s.state != State::Listen) {
        out += &format!(" rtt {}", ms(t.rtt_us.into()));
        if let Some(m) = t
            .min_rtt_us
            .filter(|&m| m > 0 && m != u32::MAX && inflated(t.rtt_us, m))
        {
            out += &format!(" (min {}: delayed ACKs inflate it)", ms(m.into()));
        }
        out += &format!(" cwnd {}", t.snd_cwnd);
        if let (Some(busy), Some(rwnd)) = (t.busy_us, t.rwnd_limited_us) {
            if busy > 0 && rwnd > 0 {
                out += &format!(" rwnd_limited {:.0}%", rwnd as f64 * 100.0 / busy as f64);
            }
        }
        if let (Some(busy), Some(sb)) = (t.busy_us, t.sndbuf_limited_us) {
            if busy > 0 && sb > 0 {
                out += &format!(" sndbuf_limited {:.0}%", sb as f64 * 100.0 / busy as f64);
            }
        }
        if let Some(w) = t.snd_wnd {
            out += &format!(" peer window {}", bytes(w.into()));
        }
    }
    if let Some(m) = s.memory.filter(|_| s.state != State::TimeWait) {
        out += &format!(" rcvbuf {}", bytes(m.rcvbuf.into()));
    }
    if let Some(o) = s.options {
        out += &format!(" nodelay {}", on_off(o.tcp_nodelay));
    }
    if s.send_q > 0 || s.recv_q > 0 {
        out += &format!(" send-q {} recv-q {}", s.send_q, s.recv_q);
    }
    if !s.flags.is_empty() {
        let kinds: Vec<&str> = s.flags.iter().map(|f| f.kind.name()).collect();
        out += &format!(" [{}]", kinds.join(", "));
    }
    out
}

#[cfg(test)]
mod wrap_tests {
    use super::wrap;

    #[test]
    fn a_count_stays_with_its_total_and_a_number_with_its_unit() {
        let mut out = Vec::new();
        let text = "rcvbuf 128 KB; cwnd 138; TCP_NODELAY off on 0 of 4 (and 12 of 40)";
        for width in 8..60 {
            out.clear();
            wrap(text, "", "  ", width, &mut out).unwrap();
            let s = String::from_utf8(out.clone()).unwrap();
            assert!(s.contains("0 of 4"), "width {width}: {s}");
            assert!(
                s.contains("(and 12 of 40)") || s.contains("12 of 40)"),
                "width {width}: {s}"
            );
            assert!(s.contains("128 KB;"), "width {width}: {s}");
        }
    }
}
