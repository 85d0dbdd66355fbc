//! Parsing and judging on real netlink replies (`fixtures/*.bin`, recorded
//! with `fixtures/dump.py`), the /proc record parsers, and a live snapshot of
//! this test process's own sockets.

use super::*;
use crate::netlink::{messages, DiagMsg, Message};
use proptest::prelude::*;

/// nginx 1.22 in a namespace, `tcp_nodelay off` on :8080 and `on` on :80,
/// each under `wrk -c 4`: 2 listeners (master and worker share them), 8
/// established server sockets. The :8080 ones were caught holding a
/// response body: 1 segment unacked, 714 bytes not sent (Nagle).
const NGINX: &[u8] = include_bytes!("../fixtures/nginx-wrk-v4.bin");
/// IPv6 loopback: a listener with SO_RCVBUF 4096, the connection it
/// accepted (3000 bytes received, 100 read, peer shut down: CLOSE-WAIT) and
/// the client (FIN-WAIT-2).
const LOOPBACK_V6: &[u8] = include_bytes!("../fixtures/loopback-v6.bin");

const RMEM: Context = Context {
    tcp_rmem: Some([4096, 131_072, 33_554_432]),
    tcp_wmem: Some([4096, 16_384, 4_194_304]),
};

fn parse(buf: &[u8]) -> (Vec<Socket>, bool) {
    let mut out = Vec::new();
    let mut done = false;
    for m in messages(buf) {
        match m.expect("well-formed fixture") {
            Message::Socket { msg, .. } => out.push(Socket::from_diag(&msg)),
            Message::Done => done = true,
            other => panic!("unexpected {other:?}"),
        }
    }
    (out, done)
}

fn find<'a>(v: &'a [Socket], local: &str, remote: &str) -> &'a Socket {
    v.iter()
        .find(|s| s.local.to_string() == local && s.remote.to_string() == remote)
        .unwrap_or_else(|| panic!("no socket {local} {remote}"))
}

fn options(nodelay: bool, rcvbuf: u32) -> SockOptions {
    SockOptions {
        tcp_nodelay: nodelay,
        tcp_cork: false,
        tcp_quickack: false,
        so_rcvbuf: rcvbuf,
        so_sndbuf: 69_120,
        tcp_notsent_lowat: 0,
        congestion: ShortName::parse(b"bbr\0"),
    }
}

fn nginx(pid: u32) -> Option<Process> {
    Some(Process {
        pid,
        command: ShortName::parse(b"nginx"),
    })
}

#[test]
fn the_request_is_what_the_kernel_expects() {
    let r = netlink::dump_request(netlink::AF_INET6, u32::MAX, 7);
    // nlmsghdr: length 72, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST|NLM_F_DUMP, seq 7, pid 0.
    assert_eq!(&r[0..4], &72u32.to_ne_bytes());
    assert_eq!(&r[4..6], &20u16.to_ne_bytes());
    assert_eq!(&r[6..8], &0x301u16.to_ne_bytes());
    assert_eq!(&r[8..12], &7u32.to_ne_bytes());
    assert_eq!(&r[12..16], &[0; 4]);
    // inet_diag_req_v2: AF_INET6, IPPROTO_TCP, INFO|CONG|SKMEMINFO|SHUTDOWN, states.
    assert_eq!(&r[16..20], &[10, 6, 0b1100_1010, 0]);
    assert_eq!(&r[20..24], &[0xff; 4]);
    assert!(
        r[24..].iter().all(|&b| b == 0),
        "sockid zero: match on states only"
    );
}

#[test]
fn a_real_dump_of_nginx_under_wrk_parses() {
    let (v, done) = parse(NGINX);
    assert!(done, "ends with NLMSG_DONE");
    assert_eq!(v.len(), 10);
    let listeners: Vec<&Socket> = v.iter().filter(|s| s.state == State::Listen).collect();
    assert_eq!(listeners.len(), 2);
    for l in &listeners {
        assert_eq!(l.remote.to_string(), "0.0.0.0:0");
        assert_eq!(
            (l.recv_q, l.send_q),
            (0, 511),
            "accept queue empty, backlog 511"
        );
        assert_ne!(l.inode, 0);
    }
    let held = find(&v, "10.83.9.2:8080", "10.83.9.1:40310");
    assert_eq!(held.state, State::Established);
    assert_eq!(
        held.congestion.map(|c| c.to_string()).as_deref(),
        Some("bbr")
    );
    let m = held.memory.expect("skmeminfo");
    assert_eq!((m.rcvbuf, m.sndbuf, m.drops), (131_072, 69_120, Some(0)));
    let t = held.tcp_info.as_ref().expect("tcp_info");
    assert_eq!(
        (t.unacked, t.notsent_bytes),
        (1, Some(714)),
        "Nagle holding the body"
    );
    assert_eq!(
        (t.snd_mss, t.data_segs_out, t.data_segs_in),
        (1448, Some(567), Some(284))
    );
    assert_eq!(
        (t.bytes_sent, t.bytes_received),
        (Some(269_654), Some(11_360))
    );
    assert_eq!(
        (t.rtt_us, t.ato_us),
        (20_435, 40_000),
        "the RTT estimate includes the peer's delayed ACKs"
    );
    assert_eq!(t.snd_wnd, Some(1_036_288));
    assert_eq!(held.send_q, 952, "238 B unacked + 714 B not sent");
    assert_eq!(held.shutdown, None);
    let fast = find(&v, "10.83.9.2:80", "10.83.9.1:52270");
    assert!(fast.tcp_info.as_ref().and_then(|t| t.bytes_acked) > Some(90_000_000));
}

#[test]
fn nagle_is_flagged_where_nodelay_is_off_and_only_there() {
    let (mut v, _) = parse(NGINX);
    for s in &mut v {
        s.options = Some(options(
            s.local.port() == 80,
            s.memory.map_or(0, |m| m.rcvbuf),
        ));
        s.process = nginx(5217);
        s.flags = judge::flags(s, &RMEM);
    }
    for s in &v {
        let nagle = s.flags.iter().any(|f| f.kind == FlagKind::NagleOn);
        let expected = s.state == State::Established && s.local.port() == 8080;
        assert_eq!(nagle, expected, "{}", text::line(s));
    }
    let f = &find(&v, "10.83.9.2:8080", "10.83.9.1:40310").flags[0];
    assert!(
        f.message
            .contains("567 segments of 475 B on average, below the MSS of 1448 B"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("714 B"),
        "the held bytes are evidence: {}",
        f.message
    );
    assert!(f.fix.contains("tcp_nodelay on"), "{}", f.fix);
    // Nothing else is wrong with these sockets.
    assert!(v
        .iter()
        .all(|s| s.flags.iter().all(|f| f.kind == FlagKind::NagleOn)));
}

#[test]
fn without_options_nagle_is_not_guessed() {
    let (mut v, _) = parse(NGINX);
    for s in &mut v {
        s.flags = judge::flags(s, &RMEM);
    }
    assert!(v.iter().all(|s| s.flags.is_empty()));
}

#[test]
fn a_bulk_sender_is_not_request_response() {
    let (v, _) = parse(NGINX);
    let mut s = find(&v, "10.83.9.2:80", "10.83.9.1:52270").clone();
    s.options = Some(options(false, 131_072));
    // Full segments out: 1448 bytes per data segment on average.
    let t = s.tcp_info.as_mut().expect("tcp_info");
    t.bytes_sent = Some(1448 * 1000);
    t.data_segs_out = Some(1000);
    assert!(judge::flags(&s, &RMEM).is_empty());
    // Nothing received: a one-way stream, not a request/response.
    let t = s.tcp_info.as_mut().expect("tcp_info");
    t.bytes_sent = Some(100 * 1000);
    t.bytes_retrans = Some(0);
    t.bytes_received = Some(0);
    t.data_segs_in = Some(0);
    assert!(judge::flags(&s, &RMEM).is_empty());
}

#[test]
fn a_small_receive_buffer_is_flagged_on_the_listener_and_its_connection() {
    let (mut v, done) = parse(LOOPBACK_V6);
    assert!(done);
    for s in &mut v {
        s.flags = judge::flags(s, &RMEM);
    }
    let l = find(&v, "[::1]:9999", "[::]:0");
    assert_eq!(l.state, State::Listen);
    assert_eq!(l.memory.map(|m| m.rcvbuf), Some(8192));
    assert_eq!(l.flags.len(), 1);
    assert_eq!(l.flags[0].kind, FlagKind::SmallRcvbuf);
    assert!(
        l.flags[0]
            .message
            .starts_with("SO_RCVBUF 4 KB pins the window"),
        "{}",
        l.flags[0].message
    );
    assert!(
        l.flags[0].message.contains("inherits"),
        "{}",
        l.flags[0].message
    );
    let accepted = v
        .iter()
        .find(|s| s.state == State::CloseWait)
        .expect("close-wait");
    assert_eq!(
        accepted.recv_q, 2901,
        "3000 received, 100 read, and the FIN's sequence number"
    );
    assert_eq!(
        accepted.shutdown,
        Some("rd"),
        "the peer shut down: nothing more to receive"
    );
    assert!(accepted
        .flags
        .iter()
        .any(|f| f.kind == FlagKind::SmallRcvbuf));
    let client = v
        .iter()
        .find(|s| s.state == State::FinWait2)
        .expect("fin-wait-2");
    assert_eq!(client.memory.map(|m| m.rcvbuf), Some(131_072));
    assert!(client.flags.is_empty(), "{:?}", client.flags);
    assert!(client.remote.is_ipv6() && client.remote.port() == 9999);
}

#[test]
fn limited_time_retransmissions_and_a_full_accept_queue_are_flagged() {
    let (v, _) = parse(NGINX);
    let mut s = find(&v, "10.83.9.2:80", "10.83.9.1:52270").clone();
    let t = s.tcp_info.as_mut().expect("tcp_info");
    t.busy_us = Some(2_000_000);
    t.rwnd_limited_us = Some(1_120_000);
    t.snd_wnd = Some(4096);
    t.rtt_us = 40_000;
    let f = judge::flags(&s, &RMEM);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].kind, FlagKind::RwndLimited);
    assert!(
        f[0].message
            .starts_with("rwnd_limited 56% of busy time (1.12 s of 2.00 s)"),
        "{}",
        f[0].message
    );
    assert!(
        f[0].message.contains("~100 KB/s"),
        "4 KB per 40 ms: {}",
        f[0].message
    );
    // Below the share: quiet.
    s.tcp_info.as_mut().expect("tcp_info").rwnd_limited_us = Some(300_000);
    assert!(judge::flags(&s, &RMEM).is_empty());

    let t = s.tcp_info.as_mut().expect("tcp_info");
    t.sndbuf_limited_us = Some(1_500_000);
    let f = judge::flags(&s, &RMEM);
    assert_eq!(
        f.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [FlagKind::SndbufLimited]
    );
    assert!(
        f[0].message.starts_with("sndbuf_limited 75% of busy time"),
        "{}",
        f[0].message
    );

    let t = s.tcp_info.as_mut().expect("tcp_info");
    t.sndbuf_limited_us = Some(0);
    // 3570 of 90 MB retransmitted (this socket's real numbers): no flag.
    assert!(judge::flags(&s, &RMEM).is_empty());
    let t = s.tcp_info.as_mut().expect("tcp_info");
    t.bytes_retrans = Some(2_000_000);
    let f = judge::flags(&s, &RMEM);
    assert_eq!(
        f.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [FlagKind::Retransmissions]
    );
    let t = s.tcp_info.as_mut().expect("tcp_info");
    t.total_retrans = 1;
    t.lost = 1;
    let f = judge::flags(&s, &RMEM);
    assert!(
        f[0].message.starts_with("1 segment retransmitted")
            && f[0].message.contains("; 1 segment considered lost now"),
        "{}",
        f[0].message
    );

    let mut l = v
        .iter()
        .find(|s| s.state == State::Listen)
        .expect("listener")
        .clone();
    assert!(judge::flags(&l, &RMEM).is_empty());
    l.recv_q = 511;
    let f = judge::flags(&l, &RMEM);
    assert_eq!(
        f.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [FlagKind::AcceptQueueFull]
    );
    assert!(
        f[0].message.contains("511 connections wait"),
        "{}",
        f[0].message
    );
}

#[test]
fn text_groups_server_sockets_under_their_listener() {
    let (mut v, _) = parse(NGINX);
    for s in &mut v {
        s.options = Some(options(s.local.port() == 80, 131_072));
        s.process = nginx(5217);
        if s.state == State::Listen {
            s.also_held_by = vec![nginx(5216).expect("process")];
        }
        s.flags = judge::flags(s, &RMEM);
    }
    let groups = text::groups(&v);
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(
        groups[0].key,
        text::GroupKey::Listener("10.83.9.2:8080".parse().expect("addr"))
    );
    assert_eq!((groups[0].listeners.len(), groups[0].members.len()), (1, 4));
    assert_eq!(groups[1].members.len(), 4);
    let snap = Snapshot {
        schema: 1,
        sockets: v,
        could_not_read: vec![],
        context: RMEM,
    };
    let mut out = Vec::new();
    text::render(&snap, text::TextOptions::default(), &mut out).expect("render");
    let out = String::from_utf8(out).expect("utf-8");
    assert!(
        out.starts_with("10 TCP sockets (8 established, 2 listen) in 2 groups; 4 flagged\n"),
        "{out}"
    );
    assert!(
        out.contains("nginx pid 5217 (also held by pid 5216) listening on 10.83.9.2:8080"),
        "{out}"
    );
    assert!(out.contains("! nagle_on on 4 of 4 connections"), "{out}");
    assert!(out.contains("TCP_NODELAY off on 4 of 4"), "{out}");
    assert!(out.contains("TCP_NODELAY off on 0 of 4"), "{out}");
}

/// The NGINX sockets as root sees them: nginx holds all; the listeners have
/// TCP_NODELAY off (nginx sets it on each accepted socket), the :80 sockets on.
fn nginx_as_root() -> Vec<Socket> {
    let (mut v, _) = parse(NGINX);
    for s in &mut v {
        let listener = s.state == State::Listen;
        s.options = Some(options(s.local.port() == 80 && !listener, 131_072));
        s.process = nginx(5217);
        s.flags = judge::flags(s, &RMEM);
    }
    v
}

fn rendered(sockets: Vec<Socket>, notes: Vec<Note>, width: usize) -> String {
    let snap = Snapshot {
        schema: 1,
        sockets,
        could_not_read: notes,
        context: RMEM,
    };
    let mut out = Vec::new();
    let opts = text::TextOptions { worst: 3, width };
    text::render(&snap, opts, &mut out).expect("render");
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn listener_lines_leave_its_nodelay_to_the_accepted_sockets() {
    let out = rendered(nginx_as_root(), vec![], 100);
    let head = out
        .lines()
        .find(|l| l.contains("listening on 10.83.9.2:80:"))
        .expect("the :80 listener");
    assert!(!head.contains("TCP_NODELAY"), "{out}");
    assert!(out.contains("TCP_NODELAY off on 0 of 4"), "{out}");
    // A listener alone says whose value it is.
    let alone: Vec<Socket> = nginx_as_root()
        .into_iter()
        .filter(|s| s.state == State::Listen)
        .collect();
    let out = rendered(alone, vec![], 200);
    assert!(
        out.contains(
            "TCP_NODELAY off on the listening socket (accepted sockets may set their own)"
        ),
        "{out}"
    );
}

#[test]
fn text_lines_fit_the_width() {
    for width in [60, 100] {
        let out = rendered(nginx_as_root(), vec![], width);
        for l in out.lines() {
            // A single word longer than the width is left whole.
            let longest = l.split(' ').map(|w| w.chars().count()).max().unwrap_or(0);
            assert!(
                l.chars().count() <= width.max(longest + 8),
                "{} > {width}: {l}",
                l.chars().count()
            );
        }
    }
}

#[test]
fn accepted_sockets_without_their_listener_are_one_group() {
    // `--state connected`: the listeners are not in the dump. The four :8080
    // sockets are one group (one Nagle paragraph), not one per client port.
    let v: Vec<Socket> = nginx_as_root()
        .into_iter()
        .filter(|s| s.state != State::Listen)
        .collect();
    let groups = text::groups(&v);
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert!(groups
        .iter()
        .all(|g| matches!(g.key, text::GroupKey::Accepted(Some(5217), _)) && g.members.len() == 4));
    let out = rendered(v, vec![], 100);
    assert_eq!(out.matches("! nagle_on").count(), 1, "{out}");
    assert!(
        out.contains("4 connections accepted on 10.83.9.2:8080"),
        "{out}"
    );
}

#[test]
fn an_rtt_far_above_min_rtt_is_said_to_be_inflated() {
    let mut v = nginx_as_root();
    for s in v.iter_mut().filter(|s| s.state == State::Established) {
        let t = s.tcp_info.as_mut().expect("tcp_info");
        t.rtt_us = 21_000;
        t.min_rtt_us = Some(8);
    }
    let out = rendered(v, vec![], 400);
    assert!(
        out.contains("rtt 21 ms (min_rtt 0.01 ms: the path is that fast; the smoothed rtt counts the time the peer's ACKs were delayed)"),
        "{out}"
    );
    assert!(
        out.contains("rtt 21 ms (min 0.01 ms: delayed ACKs inflate it)"),
        "{out}"
    );
}

#[test]
fn an_unprivileged_headline_says_nagle_was_not_judged() {
    let (mut v, _) = parse(NGINX);
    for s in &mut v {
        s.flags = judge::flags(s, &RMEM);
    }
    let note = Note {
        what: "options",
        count: 10,
        reason: "hidden".into(),
    };
    let out = rendered(v, vec![note], 200);
    let head = out.lines().next().expect("headline");
    assert!(
        head.ends_with("; 0 flagged (nagle_on not judged on 8 established sockets: options unreadable, see below)"),
        "{head}"
    );
}

#[test]
fn clients_group_by_process_and_remote_endpoint() {
    let (v, _) = parse(LOOPBACK_V6);
    let groups = text::groups(&v);
    // The listener with its accepted socket, and the client to [::1]:9999.
    assert_eq!(groups.len(), 2, "{groups:?}");
    let client = groups
        .iter()
        .find(|g| matches!(g.key, text::GroupKey::Client(None, a) if a.port() == 9999))
        .expect("client group");
    assert_eq!(client.members.len(), 1);
}

#[test]
fn json_has_the_documented_shape() {
    let (mut v, _) = parse(NGINX);
    v[0].process = nginx(1);
    let snap = Snapshot {
        schema: 1,
        sockets: v,
        could_not_read: vec![Note {
            what: "options",
            count: 3,
            reason: "r".into(),
        }],
        context: RMEM,
    };
    let j: serde_json::Value = serde_json::to_value(&snap).expect("json");
    assert_eq!(j["schema"], 1);
    let s = &j["sockets"][0];
    for key in [
        "local", "remote", "state", "inode", "process", "options", "tcp_info", "flags", "memory",
    ] {
        assert!(s.get(key).is_some(), "missing {key}: {s}");
    }
    assert_eq!(s["process"]["command"], "nginx");
    assert!(s["options"].is_null());
    assert!(s.get("fd").is_none(), "internal");
    assert_eq!(j["could_not_read"][0]["what"], "options");
}

#[test]
fn every_truncation_of_a_reply_is_refused_or_read_without_panic() {
    for buf in [NGINX, LOOPBACK_V6] {
        for cut in 0..buf.len() {
            let mut n = 0;
            for m in messages(&buf[..cut]) {
                match m {
                    Ok(Message::Socket { msg, .. }) => {
                        let s = Socket::from_diag(&msg);
                        let _ = judge::flags(&s, &RMEM);
                        n += 1;
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            assert!(n <= 10);
        }
    }
    assert!(DiagMsg::new(&[0u8; 71]).is_none());
}

proptest! {
    #[test]
    fn random_replies_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..2048)) {
        for m in messages(&buf) {
            if let Ok(Message::Socket { msg, .. }) = m {
                let s = Socket::from_diag(&msg);
                let _ = judge::flags(&s, &RMEM);
                let _ = text::line(&s);
            }
        }
    }

    #[test]
    fn mutated_replies_never_panic(at in 0usize..4580, byte in any::<u8>()) {
        let mut buf = NGINX.to_vec();
        let at = at % buf.len();
        buf[at] = byte;
        for m in messages(&buf) {
            if let Ok(Message::Socket { msg, .. }) = m {
                let s = Socket::from_diag(&msg);
                let _ = judge::flags(&s, &RMEM);
            }
        }
    }

    #[test]
    fn random_dirents_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..512)) {
        for (_, name) in procfs::dirents(&buf) {
            let _ = procfs::number(name.to_bytes());
        }
    }
}

#[test]
fn proc_records_parse() {
    // Two linux_dirent64 records: "." (DT_DIR) and "17" (DT_LNK).
    let mut buf = Vec::new();
    for (name, kind) in [(&b"."[..], 4u8), (&b"17"[..], 10u8)] {
        let reclen = (19 + name.len() + 1).next_multiple_of(8);
        let start = buf.len();
        buf.extend_from_slice(&1u64.to_ne_bytes());
        buf.extend_from_slice(&0i64.to_ne_bytes());
        buf.extend_from_slice(&(reclen as u16).to_ne_bytes());
        buf.push(kind);
        buf.extend_from_slice(name);
        buf.resize(start + reclen, 0);
    }
    let got: Vec<(u8, Vec<u8>)> = procfs::dirents(&buf)
        .map(|(k, n)| (k, n.to_bytes().to_vec()))
        .collect();
    assert_eq!(got, [(4, b".".to_vec()), (10, b"17".to_vec())]);
    // A record running past the buffer ends the listing.
    assert_eq!(procfs::dirents(&buf[..buf.len() - 1]).count(), 1);

    assert_eq!(procfs::parse_socket_link(b"socket:[123456]"), Some(123_456));
    assert_eq!(procfs::parse_socket_link(b"socket:[]"), None);
    assert_eq!(procfs::parse_socket_link(b"pipe:[123]"), None);
    assert_eq!(
        procfs::parse_socket_link(b"socket:[99999999999]"),
        None,
        "above u32"
    );
    assert_eq!(procfs::number(b"0"), Some(0));
    assert_eq!(procfs::number(b"-1"), None);
    assert_eq!(procfs::number(b"4294967295"), Some(u32::MAX));
    assert_eq!(procfs::number(b"4294967296"), None);
    // A command may contain spaces and parentheses: the ppid follows the last ')'.
    assert_eq!(
        procfs::parse_stat_ppid(b"812 (nginx) S 811 812 812 0 -1"),
        Some(811)
    );
    assert_eq!(procfs::parse_stat_ppid(b"9 (a) b) c) R 1 9"), Some(1));
    assert_eq!(procfs::parse_stat_ppid(b"9 (x"), None);
    assert_eq!(
        judge::parse_triple("4096\t131072\t6291456\n"),
        Some([4096, 131_072, 6_291_456])
    );
    assert_eq!(judge::parse_triple("4096 131072"), None);
}

#[test]
fn states_and_masks() {
    for (i, s) in State::ALL.iter().enumerate() {
        assert_eq!(State::from_kernel(i as u8 + 1), *s);
        assert_ne!(s.mask() & (1 << (i + 1)), 0);
        assert_eq!(State::parse(s.name()), Some(*s));
    }
    assert_eq!(State::from_kernel(12), State::SynRecv, "TCP_NEW_SYN_RECV");
    assert_eq!(State::parse("listening"), Some(State::Listen));
    assert_eq!(State::parse("bogus"), None);
}

/// A live snapshot of this process's own loopback connection: found with
/// its process, and its options read back through pidfd_getfd (allowed on
/// our own process without privileges).
#[test]
fn a_live_snapshot_finds_our_own_socket_and_its_options() {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let (mut a, _) = listener.accept().expect("accept");
    c.set_nodelay(true).expect("nodelay");
    c.write_all(b"ping").expect("write");
    let mut b = [0u8; 4];
    a.read_exact(&mut b).expect("read");
    let snap = snapshot(&Query {
        port: Some(port),
        ..Query::default()
    })
    .expect("netlink works unprivileged");
    let me = std::process::id();
    // Listener, client and accepted socket (all ours).
    assert_eq!(snap.sockets.len(), 3, "{:?}", snap.sockets);
    let client = snap
        .sockets
        .iter()
        .find(|s| s.remote.port() == port)
        .expect("the client socket");
    assert_eq!(client.process.map(|p| p.pid), Some(me));
    let o = client.options.expect("our own options are readable");
    assert!(o.tcp_nodelay);
    assert!(o.so_rcvbuf > 0 && o.so_sndbuf > 0);
    assert_eq!(
        Some(o.so_rcvbuf),
        client.memory.map(|m| m.rcvbuf),
        "the same buffer, two ways"
    );
    let server = snap
        .sockets
        .iter()
        .find(|s| s.local.port() == port && s.state == State::Established)
        .expect("the accepted socket");
    assert!(!server.options.expect("options").tcp_nodelay);
    assert_eq!(
        server.tcp_info.as_ref().and_then(|t| t.bytes_received),
        Some(4)
    );
    // --pid keeps only a process's sockets.
    let none = snapshot(&Query {
        port: Some(port),
        pid: Some(u32::MAX),
        ..Query::default()
    })
    .expect("snapshot");
    assert!(none.sockets.is_empty());
}

/// The two-thread pass finds the same owners and options as one thread.
#[test]
fn the_parallel_pass_agrees_with_the_sequential_one() {
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let mut keep = Vec::new();
    for i in 0..40 {
        let c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        c.set_nodelay(i % 2 == 0).expect("nodelay");
        keep.push(c);
        keep.push(listener.accept().expect("accept").0);
    }
    let query = Query {
        port: Some(port),
        ..Query::default()
    };
    let mut sockets = Vec::new();
    dump(&query, &mut sockets, &mut Vec::new()).expect("dump");
    assert_eq!(sockets.len(), 81);
    let dir = procfs::open_proc().expect("/proc");
    let list = procfs::list(&dir).expect("list");
    let mut results = Vec::new();
    for parallel_from in [usize::MAX, 0] {
        let mut s = sockets.clone();
        let pass = owners::Pass {
            options: true,
            parallel_from,
        };
        let found = owners::walk(&dir, &list, &s, None, pass);
        owners::apply(&mut s, found, &list, &mut Vec::new());
        let view: Vec<_> = s.iter().map(|s| (s.inode, s.process, s.options)).collect();
        assert!(
            view.iter().all(|(_, p, o)| p.is_some() && o.is_some()),
            "{view:?}"
        );
        results.push(view);
    }
    assert_eq!(results[0], results[1]);
    let nodelay = results[0]
        .iter()
        .filter(|(_, _, o)| o.is_some_and(|o| o.tcp_nodelay))
        .count();
    assert_eq!(nodelay, 20, "the 20 clients that set TCP_NODELAY");
}

/// `owners_only` (what `top` asks every second) names the same holders as a
/// full snapshot and reads no options.
#[test]
fn an_owners_only_snapshot_names_the_same_holders_without_options() {
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let mut keep = Vec::new();
    for _ in 0..5 {
        keep.push(TcpStream::connect(("127.0.0.1", port)).expect("connect"));
        keep.push(listener.accept().expect("accept").0);
    }
    let full = Query {
        port: Some(port),
        ..Query::default()
    };
    let light = Query {
        owners_only: true,
        ..full.clone()
    };
    let owners = |q: &Query| {
        let snap = snapshot(q).expect("snapshot");
        let mut v: Vec<_> = snap
            .sockets
            .iter()
            .map(|s| (s.inode, s.process.map(|p| p.pid), s.options.is_some()))
            .collect();
        v.sort_unstable();
        v
    };
    let (a, b) = (owners(&full), owners(&light));
    assert_eq!(a.len(), 11, "a listener, 5 clients, 5 accepted: {a:?}");
    let me = Some(std::process::id());
    assert!(a.iter().all(|&(_, p, o)| p == me && o), "{a:?}");
    assert!(b.iter().all(|&(_, p, o)| p == me && !o), "{b:?}");
    let inodes = |v: &[(u32, Option<u32>, bool)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
    assert_eq!(inodes(&a), inodes(&b));
}
