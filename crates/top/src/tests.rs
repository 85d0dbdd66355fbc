//! Format files copied from a 6.18 kernel, raw records built from them, and
//! synthetic event sequences through the tracker and the findings.

use std::net::SocketAddr;

use crate::decode::{ca, state, Anomaly, Detail, Event, Io, Kind, Layout, Probe};
use crate::findings::FindingKind;
use crate::format::Format;
use crate::record::{Record, Records, RECORD_LOST, RECORD_SAMPLE};
use crate::tracker::{Filter, ProcName, Tracker};

const TCP_PROBE: &str = include_str!("testdata/tcp_probe.format");
const RETRANSMIT: &str = include_str!("testdata/tcp_retransmit_skb.format");
const CONG: &str = include_str!("testdata/tcp_cong_state_set.format");
const SEND_RESET: &str = include_str!("testdata/tcp_send_reset.format");
const SET_STATE: &str = include_str!("testdata/inet_sock_set_state.format");
const SEND_LENGTH: &str = include_str!("testdata/sock_send_length.format");
const EXCEED: &str = include_str!("testdata/sock_exceed_buf_limit.format");

fn layout(kind: Kind, text: &str) -> Layout {
    Layout::new(kind, &Format::parse(text)).expect("a layout")
}

// ---- format files ----

#[test]
fn format_of_tcp_probe_gives_offsets_sizes_and_id() {
    let f = Format::parse(TCP_PROBE);
    assert_eq!(f.name, "tcp_probe");
    assert_eq!(f.id, Some(2273));
    let saddr = f.field("saddr").expect("saddr");
    assert_eq!((saddr.offset, saddr.size, saddr.signed), (8, 28, false));
    assert_eq!(saddr.decl, "__u8 saddr[28]");
    let cookie = f.field("sock_cookie").expect("sock_cookie");
    assert_eq!((cookie.offset, cookie.size), (112, 8));
    let sk = f.field("skaddr").expect("skaddr");
    assert_eq!((sk.offset, sk.size), (128, 8));
    let pid = f.field("common_pid").expect("common_pid");
    assert!(pid.signed);
    assert_eq!(f.fields.len(), 4 + 17);
}

#[test]
fn format_arrays_enums_and_longs_are_named_by_their_last_word() {
    let f = Format::parse(EXCEED);
    assert_eq!(f.field("name").map(|x| (x.offset, x.size)), Some((8, 32)));
    assert_eq!(f.field("sysctl_mem").map(|x| x.size), Some(24));
    assert_eq!(f.field("kind").map(|x| x.offset), Some(92));
    let r = Format::parse(SEND_RESET);
    assert_eq!(
        r.field("reason").map(|x| (x.offset, x.decl.as_str())),
        Some((28, "enum sk_rst_reason reason"))
    );
    let s = Format::parse(SET_STATE);
    assert_eq!(
        s.field("saddr_v6").map(|x| (x.offset, x.size)),
        Some((40, 16))
    );
}

#[test]
fn format_lines_without_an_offset_are_left_out_not_guessed() {
    let f = Format::parse("name: x\nID: 7\nformat:\n\tfield:int a;\tsize:4;\tsigned:1;\n\tfield:int b;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] msg;\toffset:12;\tsize:4;\tsigned:0;\n");
    assert_eq!(f.id, Some(7));
    assert!(f.field("a").is_none());
    assert_eq!(f.field("b").map(|x| x.offset), Some(8));
    assert!(f.field("msg").is_some_and(|m| m.dynamic));
}

#[test]
fn a_field_missing_on_this_kernel_is_reported_and_reads_none() {
    // tcp_probe as older kernels had it: no srtt, no snd_wnd.
    let old: String = TCP_PROBE
        .lines()
        .filter(|l| !l.contains(" srtt;") && !l.contains(" snd_wnd;"))
        .map(|l| format!("{l}\n"))
        .collect();
    let l = layout(Kind::Probe, &old);
    assert_eq!(l.missing, vec!["snd_wnd", "srtt"]);
    let raw = probe_raw(&l, [10, 0, 0, 1], 80, [10, 0, 0, 2], 5555, 1000, 2000, 50);
    let ev = l.decode(&raw).expect("decodes");
    let Detail::Probe(p) = ev.detail else {
        panic!("a probe")
    };
    assert_eq!((p.srtt_us, p.snd_wnd, p.cwnd), (None, None, Some(10)));
}

// ---- raw records ----

fn put(raw: &mut [u8], l: &Layout, name: &str, v: u64, text: &str) {
    let f = Format::parse(text);
    let field = f
        .field(name)
        .unwrap_or_else(|| panic!("{name} in {}", l.kind.label()));
    let b = v.to_ne_bytes();
    raw[field.offset..field.offset + field.size].copy_from_slice(&b[..field.size]);
}

fn sockaddr4(ip: [u8; 4], port: u16) -> [u8; 28] {
    let mut s = [0u8; 28];
    s[..2].copy_from_slice(&2u16.to_ne_bytes());
    s[2..4].copy_from_slice(&port.to_be_bytes());
    s[4..8].copy_from_slice(&ip);
    s
}

#[allow(clippy::too_many_arguments)]
fn probe_raw(
    l: &Layout,
    s: [u8; 4],
    sp: u16,
    d: [u8; 4],
    dp: u16,
    una: u32,
    nxt: u32,
    wnd: u32,
) -> Vec<u8> {
    let f = Format::parse(TCP_PROBE);
    let len = f
        .fields
        .iter()
        .map(|x| x.offset + x.size)
        .max()
        .unwrap_or(0);
    let mut raw = vec![0u8; len];
    put(&mut raw, l, "common_type", u64::from(l.id), TCP_PROBE);
    raw[8..36].copy_from_slice(&sockaddr4(s, sp));
    raw[36..64].copy_from_slice(&sockaddr4(d, dp));
    put(&mut raw, l, "sport", u64::from(sp), TCP_PROBE);
    put(&mut raw, l, "dport", u64::from(dp), TCP_PROBE);
    put(&mut raw, l, "family", 2, TCP_PROBE);
    put(&mut raw, l, "snd_una", u64::from(una), TCP_PROBE);
    put(&mut raw, l, "snd_nxt", u64::from(nxt), TCP_PROBE);
    put(&mut raw, l, "snd_cwnd", 10, TCP_PROBE);
    if Format::parse(TCP_PROBE).field("snd_wnd").is_some()
        && l.field(crate::decode::Slot::SndWnd).is_some()
    {
        put(&mut raw, l, "snd_wnd", u64::from(wnd), TCP_PROBE);
        put(&mut raw, l, "srtt", 250, TCP_PROBE);
    }
    put(&mut raw, l, "rcv_wnd", 65535, TCP_PROBE);
    put(&mut raw, l, "skaddr", 0xffff_8880_1234_5678, TCP_PROBE);
    raw
}

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("an address")
}

#[test]
fn tcp_probe_decodes_sockaddr_addresses_ports_and_windows() {
    let l = layout(Kind::Probe, TCP_PROBE);
    assert!(l.missing.is_empty(), "{:?}", l.missing);
    let raw = probe_raw(
        &l,
        [10, 0, 0, 1],
        80,
        [10, 0, 0, 2],
        40000,
        1000,
        3896,
        65536,
    );
    let mut raw = raw;
    put(&mut raw, &l, "sock_cookie", 0x1_0000_2a2b, TCP_PROBE);
    let ev = l.decode(&raw).expect("decodes");
    assert_eq!(ev.sk, 0xffff_8880_1234_5678);
    assert_eq!(ev.tuple, Some((sa("10.0.0.1:80"), sa("10.0.0.2:40000"))));
    let Detail::Probe(p) = ev.detail else {
        panic!("a probe")
    };
    assert_eq!(p.cookie, Some(0x1_0000_2a2b));
    assert_eq!(p.snd_una, Some(1000));
    assert_eq!(p.snd_nxt, Some(3896));
    assert_eq!(p.snd_wnd, Some(65536));
    assert_eq!(p.srtt_us, Some(250));
    assert_eq!(p.cwnd, Some(10));
}

#[test]
fn a_truncated_record_is_an_anomaly_not_a_panic() {
    let l = layout(Kind::Probe, TCP_PROBE);
    let raw = probe_raw(&l, [10, 0, 0, 1], 80, [10, 0, 0, 2], 40000, 1, 2, 3);
    for cut in 0..raw.len() {
        let r = l.decode(&raw[..cut]);
        assert_eq!(r, Err(Anomaly::Truncated), "cut at {cut}");
    }
    assert!(l.decode(&raw).is_ok());
}

fn retransmit_raw(l: &Layout, family: u16, s6: [u8; 16], d6: [u8; 16], st: i32) -> Vec<u8> {
    let mut raw = vec![0u8; 80];
    put(&mut raw, l, "common_type", u64::from(l.id), RETRANSMIT);
    put(&mut raw, l, "skaddr", 0x1000, RETRANSMIT);
    put(&mut raw, l, "state", st as u32 as u64, RETRANSMIT);
    put(&mut raw, l, "sport", 443, RETRANSMIT);
    put(&mut raw, l, "dport", 51000, RETRANSMIT);
    put(&mut raw, l, "family", u64::from(family), RETRANSMIT);
    raw[34..38].copy_from_slice(&[192, 0, 2, 1]);
    raw[38..42].copy_from_slice(&[192, 0, 2, 2]);
    raw[42..58].copy_from_slice(&s6);
    raw[58..74].copy_from_slice(&d6);
    raw
}

#[test]
fn retransmit_decodes_ipv4_ipv6_and_v4_mapped() {
    let l = layout(Kind::Retransmit, RETRANSMIT);
    let v6a: [u8; 16] = "2001:db8::1"
        .parse::<std::net::Ipv6Addr>()
        .expect("v6")
        .octets();
    let v6b: [u8; 16] = "2001:db8::2"
        .parse::<std::net::Ipv6Addr>()
        .expect("v6")
        .octets();
    let ev = l.decode(&retransmit_raw(&l, 2, v6a, v6b, 1)).expect("v4");
    assert_eq!(ev.tuple, Some((sa("192.0.2.1:443"), sa("192.0.2.2:51000"))));
    assert_eq!(
        ev.detail,
        Detail::Retransmit {
            state: Some(1),
            err: 0
        }
    );
    let ev = l.decode(&retransmit_raw(&l, 10, v6a, v6b, 2)).expect("v6");
    assert_eq!(
        ev.tuple,
        Some((sa("[2001:db8::1]:443"), sa("[2001:db8::2]:51000")))
    );
    let mapped: [u8; 16] = "::ffff:198.51.100.7"
        .parse::<std::net::Ipv6Addr>()
        .expect("v6")
        .octets();
    let ev = l
        .decode(&retransmit_raw(&l, 10, mapped, v6b, 1))
        .expect("mapped");
    assert_eq!(ev.tuple.map(|t| t.0), Some(sa("198.51.100.7:443")));
    assert_eq!(
        l.decode(&retransmit_raw(&l, 1, v6a, v6b, 1)),
        Err(Anomaly::Family)
    );
}

#[test]
fn send_length_signs_and_peeks() {
    let l = layout(Kind::SendLength, SEND_LENGTH);
    let mut raw = vec![0u8; 28];
    put(&mut raw, &l, "sk", 0x2000, SEND_LENGTH);
    put(&mut raw, &l, "family", 10, SEND_LENGTH);
    put(&mut raw, &l, "protocol", 6, SEND_LENGTH);
    put(&mut raw, &l, "ret", (-11i32) as u32 as u64, SEND_LENGTH);
    let ev = l.decode(&raw).expect("decodes");
    let Detail::Send(io) = ev.detail else {
        panic!("send")
    };
    assert_eq!(io.ret, -11);
    assert_eq!(io.bytes(), 0);
    assert!(io.is_tcp());
    assert_eq!(ev.tuple, None);
    let peek = Io {
        ret: 100,
        flags: 2,
        family: Some(2),
        protocol: Some(6),
    };
    assert_eq!(peek.bytes(), 0);
    let udp = Io {
        ret: 100,
        flags: 0,
        family: Some(2),
        protocol: Some(17),
    };
    assert!(!udp.is_tcp());
}

#[test]
fn an_event_decoded_into_again_keeps_nothing_of_the_record_before() {
    // The drain decodes every record into one event: a socket call's record
    // after a probe's has no addresses and no probe left in it.
    let probe = layout(Kind::Probe, TCP_PROBE);
    let send = layout(Kind::SendLength, SEND_LENGTH);
    let first = probe_raw(&probe, [10, 0, 0, 1], 80, [10, 0, 0, 2], 40000, 1, 2, 3);
    let mut ev = probe.decode(&first).expect("probe decodes");
    assert!(ev.tuple.is_some());
    let mut raw = vec![0u8; 28];
    put(&mut raw, &send, "sk", 0x2000, SEND_LENGTH);
    put(&mut raw, &send, "family", 2, SEND_LENGTH);
    put(&mut raw, &send, "protocol", 6, SEND_LENGTH);
    put(&mut raw, &send, "ret", 700, SEND_LENGTH);
    send.decode_into(&raw, &mut ev).expect("send decodes");
    assert_eq!(ev, send.decode(&raw).expect("send decodes"));
    assert_eq!(ev.kind, Kind::SendLength);
    assert_eq!(ev.tuple, None);
    assert!(matches!(ev.detail, Detail::Send(io) if io.ret == 700 && io.is_tcp()));
}

#[test]
fn a_field_of_a_width_no_integer_has_reads_as_a_truncated_record() {
    let odd = SEND_LENGTH.replace("offset:20;\tsize:4;", "offset:20;\tsize:3;");
    assert_ne!(odd, SEND_LENGTH);
    let l = layout(Kind::SendLength, &odd);
    assert_eq!(l.decode(&[0u8; 64]), Err(Anomaly::Truncated));
}

#[test]
fn send_reset_takes_addresses_from_its_sockaddrs() {
    let l = layout(Kind::SendReset, SEND_RESET);
    let mut raw = vec![0u8; 88];
    put(&mut raw, &l, "skaddr", 0x3000, SEND_RESET);
    put(&mut raw, &l, "state", 1, SEND_RESET);
    raw[32..60].copy_from_slice(&sockaddr4([10, 1, 1, 1], 8080));
    raw[60..88].copy_from_slice(&sockaddr4([10, 1, 1, 2], 33000));
    let ev = l.decode(&raw).expect("decodes");
    assert_eq!(ev.tuple, Some((sa("10.1.1.1:8080"), sa("10.1.1.2:33000"))));
}

#[test]
fn ring_records_samples_lost_and_a_broken_size() {
    let mut b = Vec::new();
    // sample: header, pid, tid, time, cpu, res, size, raw (4 bytes), pad to 8.
    let raw = [1u8, 2, 3, 4];
    let body = 4 + 4 + 8 + 4 + 4 + 4 + raw.len();
    let size = (8 + body).div_ceil(8) * 8;
    b.extend_from_slice(&RECORD_SAMPLE.to_ne_bytes());
    b.extend_from_slice(&0u16.to_ne_bytes());
    b.extend_from_slice(&(size as u16).to_ne_bytes());
    b.extend_from_slice(&42u32.to_ne_bytes());
    b.extend_from_slice(&43u32.to_ne_bytes());
    b.extend_from_slice(&1_000u64.to_ne_bytes());
    b.extend_from_slice(&1u32.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
    b.extend_from_slice(&raw);
    b.resize(size, 0);
    // lost: header, id, lost.
    b.extend_from_slice(&RECORD_LOST.to_ne_bytes());
    b.extend_from_slice(&0u16.to_ne_bytes());
    b.extend_from_slice(&24u16.to_ne_bytes());
    b.extend_from_slice(&7u64.to_ne_bytes());
    b.extend_from_slice(&5u64.to_ne_bytes());
    let recs: Vec<Record<'_>> = Records::new(&b).collect();
    assert_eq!(recs.len(), 2);
    let Record::Sample(s) = recs[0] else {
        panic!("a sample")
    };
    assert_eq!(
        (s.pid, s.tid, s.time_ns, s.cpu, s.raw),
        (42, 43, 1000, 1, &raw[..])
    );
    assert_eq!(recs[1], Record::Lost(5));
    // A size past the end stops the walk and says so.
    let mut bad = b.clone();
    bad[6..8].copy_from_slice(&4000u16.to_ne_bytes());
    let mut it = Records::new(&bad);
    assert_eq!(it.next(), None);
    assert!(it.broken);
    // A sample whose raw size overruns its record is malformed, not a panic.
    let mut over = b.clone();
    over[32..36].copy_from_slice(&1000u32.to_ne_bytes());
    assert_eq!(Records::new(&over).next(), Some(Record::Malformed));
}

// ---- tracker and findings ----

const SK: u64 = 0xabc0;
const PEER_SK: u64 = 0xdef0;
const SOFTIRQ: u8 = 0x10;

fn ev(kind: Kind, sk: u64, tuple: Option<(&str, &str)>, flags: u8, detail: Detail) -> Event {
    Event {
        kind,
        flags,
        sk,
        tuple: tuple.map(|(l, r)| (sa(l), sa(r))),
        detail,
    }
}

const SERVER: (&str, &str) = ("10.0.0.1:80", "10.0.0.2:40000");

fn accepted(t: &mut Tracker, now: u64) {
    t.handle(
        now,
        0,
        &ev(
            Kind::SetState,
            SK,
            Some(SERVER),
            SOFTIRQ,
            Detail::SetState {
                old: state::LISTEN,
                new: state::SYN_RECV,
                protocol: Some(6),
            },
        ),
    );
    t.handle(
        now + 1,
        0,
        &ev(
            Kind::SetState,
            SK,
            Some(SERVER),
            SOFTIRQ,
            Detail::SetState {
                old: state::SYN_RECV,
                new: state::ESTABLISHED,
                protocol: Some(6),
            },
        ),
    );
}

fn send(n: i32) -> Detail {
    Detail::Send(Io {
        ret: n,
        flags: 0,
        family: Some(2),
        protocol: Some(6),
    })
}

fn probe(una: u32, nxt: u32, wnd: u32) -> Detail {
    Detail::Probe(Probe {
        snd_una: Some(una),
        snd_nxt: Some(nxt),
        snd_wnd: Some(wnd),
        srtt_us: Some(300),
        cwnd: Some(10),
        rcv_wnd: Some(65535),
        ssthresh: None,
        data_len: Some(0),
        cookie: None,
    })
}

#[test]
fn softirq_events_are_charged_to_the_process_that_wrote() {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    // A segment in softirq while pid 999 happened to run: not the owner.
    t.handle(
        5,
        999,
        &ev(
            Kind::Probe,
            SK,
            Some(SERVER),
            SOFTIRQ,
            probe(100, 100, 65535),
        ),
    );
    t.handle(10, 4242, &ev(Kind::SendLength, SK, None, 0, send(1000)));
    t.handle(11, 4242, &ev(Kind::SendLength, SK, None, 0, send(500)));
    t.handle(
        20,
        999,
        &ev(
            Kind::Probe,
            SK,
            Some(SERVER),
            SOFTIRQ,
            probe(1600, 1600, 65535),
        ),
    );
    t.handle(
        21,
        999,
        &ev(
            Kind::Retransmit,
            SK,
            Some(SERVER),
            SOFTIRQ,
            Detail::Retransmit {
                state: Some(1),
                err: 0,
            },
        ),
    );
    assert_eq!(t.take_unnamed(), vec![4242]);
    t.name(
        4242,
        ProcName {
            command: "nginx".into(),
            cmdline: "nginx: worker process".into(),
            cgroup: "/system.slice/nginx.service".into(),
        },
    );
    let f = t.finish();
    assert_eq!(f.connections.len(), 1);
    let c = &f.connections[0];
    assert_eq!(c.pid, Some(4242));
    assert_eq!(
        (c.totals.sent, c.totals.writes, c.totals.acked),
        (1500, 2, 1500)
    );
    assert_eq!(c.write_min, Some(500));
    assert_eq!(c.role.map(|r| r.name()), Some("server"));
    let loss = f
        .findings
        .iter()
        .find(|x| x.kind == FindingKind::PacketLoss)
        .expect("packet_loss");
    assert_eq!(
        loss.process.as_ref().map(|p| (p.pid, p.command.as_deref())),
        Some((4242, Some("nginx")))
    );
    assert_eq!(loss.culprit.role, "network");
    assert_eq!(loss.culprit.endpoint, "10.0.0.1:80");
    assert!(
        loss.explanation.contains("nginx (pid 4242)"),
        "{}",
        loss.explanation
    );
}

#[test]
fn a_clean_connection_has_no_findings() {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    t.handle(10, 7, &ev(Kind::SendLength, SK, None, 0, send(100)));
    for i in 0..50u32 {
        t.handle(
            20 + u64::from(i),
            0,
            &ev(
                Kind::Probe,
                SK,
                Some(SERVER),
                SOFTIRQ,
                probe(i * 100, i * 100 + 100, 1 << 20),
            ),
        );
    }
    let f = t.finish();
    assert!(f.findings.is_empty(), "{:?}", f.findings);
}

#[test]
fn rto_is_told_from_fast_retransmit_by_the_congestion_state() {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    t.handle(10, 7, &ev(Kind::SendLength, SK, None, 0, send(100_000)));
    let cong = |s| {
        ev(
            Kind::CongState,
            SK,
            Some(SERVER),
            SOFTIRQ,
            Detail::CongState(Some(s)),
        )
    };
    let rtx = ev(
        Kind::Retransmit,
        SK,
        Some(SERVER),
        SOFTIRQ,
        Detail::Retransmit {
            state: Some(1),
            err: 0,
        },
    );
    t.handle(20, 0, &cong(ca::RECOVERY));
    t.handle(21, 0, &rtx);
    t.handle(22, 0, &cong(ca::OPEN));
    t.handle(30, 0, &cong(ca::LOSS));
    t.handle(31, 0, &rtx);
    t.handle(32, 0, &rtx);
    t.handle(33, 0, &cong(ca::OPEN));
    let f = t.finish();
    let kinds: Vec<FindingKind> = f.findings.iter().map(|x| x.kind).collect();
    assert_eq!(
        kinds,
        vec![FindingKind::RetransmissionTimeout, FindingKind::PacketLoss]
    );
    let rto = &f.findings[0];
    assert_eq!(rto.occurrences, 1);
    assert_eq!(rto.details.get("retransmissions"), Some(&2));
    assert_eq!(f.findings[1].details.get("retransmissions"), Some(&1));
}

/// A tail-loss probe whose segment had arrived (the peer's ACK was late)
/// leaves the socket Open: with the congestion states traced it is no loss;
/// one that repaired a loss ends in CWR and is.
#[test]
fn a_probe_that_repaired_nothing_is_no_loss_when_states_are_traced() {
    let run = |states: bool, cwr: bool| {
        let mut t = Tracker::new(Filter::default());
        t.states_traced = states;
        accepted(&mut t, 1);
        t.handle(10, 7, &ev(Kind::SendLength, SK, None, 0, send(100_000)));
        let rtx = Detail::Retransmit {
            state: Some(1),
            err: 0,
        };
        t.handle(20, 0, &ev(Kind::Retransmit, SK, Some(SERVER), SOFTIRQ, rtx));
        if cwr {
            for s in [ca::CWR, ca::OPEN] {
                let d = Detail::CongState(Some(s));
                t.handle(30, 0, &ev(Kind::CongState, SK, Some(SERVER), SOFTIRQ, d));
            }
        }
        let f = t.finish();
        f.findings.iter().any(|x| x.kind == FindingKind::PacketLoss)
    };
    assert!(!run(true, false), "a probe that repaired nothing");
    assert!(run(true, true), "a probe that repaired a loss (CWR)");
    assert!(run(false, false), "without the states: counted as before");
}

#[test]
fn zero_window_blames_the_reader_at_the_other_end() {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    t.handle(2, 7, &ev(Kind::SendLength, SK, None, 0, send(1_000_000)));
    // The client's socket, same host: its owner reads (slowly).
    let client = ("10.0.0.2:40000", "10.0.0.1:80");
    t.handle(
        3,
        8,
        &ev(
            Kind::SetState,
            PEER_SK,
            Some(client),
            0,
            Detail::SetState {
                old: state::CLOSE,
                new: state::SYN_SENT,
                protocol: Some(6),
            },
        ),
    );
    // A blink of zero window (the reader keeping pace): no finding.
    t.handle(
        50,
        0,
        &ev(Kind::Probe, SK, Some(SERVER), SOFTIRQ, probe(1000, 5000, 0)),
    );
    t.handle(
        60,
        0,
        &ev(
            Kind::Probe,
            SK,
            Some(SERVER),
            SOFTIRQ,
            probe(1000, 5000, 65535),
        ),
    );
    let mut blink = Tracker::new(Filter::default());
    std::mem::swap(&mut blink, &mut t);
    assert!(blink
        .finish()
        .findings
        .iter()
        .all(|x| x.kind != FindingKind::ZeroWindow));
    accepted(&mut t, 1);
    t.handle(2, 7, &ev(Kind::SendLength, SK, None, 0, send(1_000_000)));
    t.handle(
        3,
        8,
        &ev(
            Kind::SetState,
            PEER_SK,
            Some(client),
            0,
            Detail::SetState {
                old: state::CLOSE,
                new: state::SYN_SENT,
                protocol: Some(6),
            },
        ),
    );
    // 25 ms at window 0, then open.
    t.handle(
        50_000_000,
        0,
        &ev(Kind::Probe, SK, Some(SERVER), SOFTIRQ, probe(1000, 5000, 0)),
    );
    t.handle(
        75_000_000,
        0,
        &ev(Kind::Probe, SK, Some(SERVER), SOFTIRQ, probe(1000, 5000, 0)),
    );
    t.handle(
        75_100_000,
        0,
        &ev(
            Kind::Probe,
            SK,
            Some(SERVER),
            SOFTIRQ,
            probe(1000, 5000, 65535),
        ),
    );
    let f = t.finish();
    let z = f
        .findings
        .iter()
        .find(|x| x.kind == FindingKind::ZeroWindow)
        .expect("zero_window");
    assert_eq!(z.culprit.endpoint, "10.0.0.2:40000");
    assert_eq!(z.culprit.role, "client");
    assert_eq!(z.process.as_ref().map(|p| p.pid), Some(8));
    assert_eq!(z.occurrences, 2);
    assert_eq!(z.details.get("stalled_us"), Some(&25_000));
}

#[test]
fn window_bound_sender_makes_receive_window_limited_only_past_thresholds() {
    for (bound, expect) in [(9u32, false), (30, true)] {
        let mut t = Tracker::new(Filter::default());
        accepted(&mut t, 1);
        t.handle(2, 7, &ev(Kind::SendLength, SK, None, 0, send(1_000_000)));
        for i in 0..bound {
            t.handle(
                10 + u64::from(i),
                0,
                &ev(
                    Kind::Probe,
                    SK,
                    Some(SERVER),
                    SOFTIRQ,
                    probe(i * 4000, i * 4000 + 3900, 4096),
                ),
            );
        }
        let f = t.finish();
        let hit = f
            .findings
            .iter()
            .any(|x| x.kind == FindingKind::ReceiveWindowLimited);
        assert_eq!(hit, expect, "{bound} window-bound segments");
    }
}

/// Sampled `tcp_probe` (one in 8 with the window open): counts are scaled,
/// zero-window segments count one each, and the window rule needs more
/// than one sample however it is scaled.
#[test]
fn sampled_probes_are_scaled_and_need_several_samples() {
    for (samples, expect) in [(1u32, false), (2, false), (3, true)] {
        let mut t = Tracker::new(Filter::default());
        t.probe_every = 8;
        accepted(&mut t, 1);
        t.handle(2, 7, &ev(Kind::SendLength, SK, None, 0, send(1_000_000)));
        for i in 0..samples {
            t.handle(
                10 + u64::from(i),
                0,
                &ev(
                    Kind::Probe,
                    SK,
                    Some(SERVER),
                    SOFTIRQ,
                    probe(i * 4000, i * 4000 + 3900, 4096),
                ),
            );
        }
        // Two segments at window 0 (from the unsampled stream).
        for k in 0..2u64 {
            t.handle(
                100 + k,
                0,
                &ev(
                    Kind::Probe,
                    SK,
                    Some(SERVER),
                    SOFTIRQ,
                    probe(90_000, 94_000, 0),
                ),
            );
        }
        let f = t.finish();
        let c = &f.connections[0];
        assert_eq!(c.totals.segments_in, u64::from(samples) * 8 + 2);
        assert_eq!(c.window_bound_segments, u64::from(samples) * 8);
        assert_eq!(c.zero_window_segments, 2);
        let hit = f
            .findings
            .iter()
            .any(|x| x.kind == FindingKind::ReceiveWindowLimited);
        assert_eq!(hit, expect, "{samples} window-bound samples of 8");
    }
}

#[test]
fn resets_name_who_sent_them() {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    t.handle(
        2,
        7,
        &ev(
            Kind::RecvLength,
            SK,
            None,
            0,
            Detail::Recv(Io {
                ret: 10,
                flags: 0,
                family: Some(2),
                protocol: Some(6),
            }),
        ),
    );
    t.handle(
        3,
        7,
        &ev(
            Kind::SendReset,
            SK,
            Some(SERVER),
            0,
            Detail::SendReset { state: Some(1) },
        ),
    );
    let f = t.finish();
    let r = f
        .findings
        .iter()
        .find(|x| x.kind == FindingKind::ConnectionReset)
        .expect("reset");
    assert_eq!(
        (r.culprit.endpoint.as_str(), r.culprit.role),
        ("10.0.0.1:80", "server")
    );
    assert_eq!(r.process.as_ref().map(|p| p.pid), Some(7));
}

#[test]
fn port_filter_drops_other_sockets_and_their_unaddressed_writes() {
    let mut t = Tracker::new(Filter {
        port: Some(80),
        pid: None,
    });
    accepted(&mut t, 1);
    t.handle(2, 7, &ev(Kind::SendLength, SK, None, 0, send(10)));
    // Another socket: learns its (non-matching) address, then is forgotten.
    t.handle(3, 9, &ev(Kind::SendLength, 0x5555, None, 0, send(10)));
    t.handle(
        4,
        0,
        &ev(
            Kind::Probe,
            0x5555,
            Some(("10.0.0.1:22", "10.0.0.3:5000")),
            SOFTIRQ,
            probe(1, 1, 1),
        ),
    );
    // A third never gets an address.
    t.handle(5, 9, &ev(Kind::SendLength, 0x6666, None, 0, send(10)));
    let f = t.finish();
    assert_eq!(f.connections.len(), 1);
    assert_eq!(f.connections[0].local, Some(sa("10.0.0.1:80")));
    assert_eq!(f.stats.unmatched, 1);
}

#[test]
fn closed_connections_are_reported_once_then_retired() {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    t.handle(2, 7, &ev(Kind::SendLength, SK, None, 0, send(10)));
    t.handle(
        3,
        7,
        &ev(
            Kind::SetState,
            SK,
            Some(SERVER),
            0,
            Detail::SetState {
                old: state::ESTABLISHED,
                new: state::CLOSE,
                protocol: Some(6),
            },
        ),
    );
    let iv = t.interval(10);
    assert_eq!(iv.connections.len(), 1);
    assert!(iv.connections[0].closed);
    // Its destroy arrives after it was retired: no ghost connection.
    t.handle(
        4,
        0,
        &ev(Kind::Destroy, SK, Some(SERVER), SOFTIRQ, Detail::Destroy),
    );
    let iv = t.interval(10);
    assert!(iv.connections.is_empty());
    assert_eq!(iv.open, 0);
    let f = t.finish();
    assert_eq!(f.connections.len(), 1);
    assert_eq!(f.processes.len(), 1);
    assert_eq!(f.processes[0].totals.sent, 10);
}

#[test]
fn interval_deltas_count_each_byte_once() {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    t.handle(2, 7, &ev(Kind::SendLength, SK, None, 0, send(100)));
    assert_eq!(t.interval(10).processes[0].delta.sent, 100);
    t.handle(3, 7, &ev(Kind::SendLength, SK, None, 0, send(50)));
    assert_eq!(t.interval(10).processes[0].delta.sent, 50);
    assert_eq!(t.interval(10).processes[0].delta.sent, 0);
}

#[test]
fn syn_retries_of_a_client_are_syn_retransmit() {
    let mut t = Tracker::new(Filter::default());
    let c = ("10.0.0.2:40000", "10.0.0.1:80");
    t.handle(
        1,
        8,
        &ev(
            Kind::SetState,
            SK,
            Some(c),
            0,
            Detail::SetState {
                old: state::CLOSE,
                new: state::SYN_SENT,
                protocol: Some(6),
            },
        ),
    );
    t.handle(
        1_000_000_000,
        0,
        &ev(
            Kind::Retransmit,
            SK,
            Some(c),
            SOFTIRQ,
            Detail::Retransmit {
                state: Some(state::SYN_SENT),
                err: 0,
            },
        ),
    );
    let f = t.finish();
    assert_eq!(f.findings.len(), 1);
    assert_eq!(f.findings[0].kind, FindingKind::SynRetransmit);
    assert_eq!(f.findings[0].culprit.endpoint, "10.0.0.1:80");
    assert_eq!(f.findings[0].process.as_ref().map(|p| p.pid), Some(8));
}

proptest::proptest! {
    #[test]
    fn arbitrary_raw_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
        for (k, text) in [(Kind::Probe, TCP_PROBE), (Kind::Retransmit, RETRANSMIT), (Kind::CongState, CONG), (Kind::SendReset, SEND_RESET), (Kind::SetState, SET_STATE), (Kind::SendLength, SEND_LENGTH), (Kind::ExceedBufLimit, EXCEED)] {
            let l = layout(k, text);
            if let Ok(e) = l.decode(&bytes) {
                let mut t = Tracker::new(Filter::default());
                t.handle(1, 1, &e);
                let _ = t.interval(5);
                let _ = t.finish();
            }
        }
        for r in Records::new(&bytes) {
            let _ = r;
        }
    }
}

#[test]
fn a_socket_address_reused_after_destroy_is_a_new_connection() {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    t.handle(2, 7, &ev(Kind::SendLength, SK, None, 0, send(100)));
    t.handle(
        3,
        0,
        &ev(Kind::Destroy, SK, Some(SERVER), SOFTIRQ, Detail::Destroy),
    );
    // Same memory, next connection; its state changes are not seen (another
    // BPF program may hide them): the write alone starts it.
    t.handle(4, 7, &ev(Kind::SendLength, SK, None, 0, send(200)));
    t.handle(
        5,
        0,
        &ev(
            Kind::Probe,
            SK,
            Some(("10.0.0.1:80", "10.0.0.9:41000")),
            SOFTIRQ,
            probe(1, 1, 65535),
        ),
    );
    let f = t.finish();
    let mut sent: Vec<(String, u64)> = f
        .connections
        .iter()
        .map(|c| {
            (
                c.remote.map(|r| r.to_string()).unwrap_or_default(),
                c.totals.sent,
            )
        })
        .collect();
    sent.sort();
    assert_eq!(
        sent,
        vec![
            ("10.0.0.2:40000".to_string(), 100),
            ("10.0.0.9:41000".to_string(), 200)
        ]
    );
}

#[test]
fn a_connecting_socket_learns_its_local_port_later() {
    let mut t = Tracker::new(Filter {
        port: Some(80),
        pid: None,
    });
    // SYN-SENT fires before the source port is chosen.
    t.handle(
        1,
        8,
        &ev(
            Kind::SetState,
            SK,
            Some(("10.0.0.2:0", "10.0.0.1:80")),
            0,
            Detail::SetState {
                old: state::CLOSE,
                new: state::SYN_SENT,
                protocol: Some(6),
            },
        ),
    );
    t.handle(
        2,
        0,
        &ev(
            Kind::SetState,
            SK,
            Some(("10.0.0.2:40000", "10.0.0.1:80")),
            SOFTIRQ,
            Detail::SetState {
                old: state::SYN_SENT,
                new: state::ESTABLISHED,
                protocol: Some(6),
            },
        ),
    );
    let f = t.finish();
    assert_eq!(f.connections[0].local, Some(sa("10.0.0.2:40000")));
    assert_eq!(f.connections[0].pid, Some(8));
    assert_eq!(f.connections[0].role.map(|r| r.name()), Some("client"));
}

#[test]
fn synack_retries_name_the_listener_and_its_process() {
    let mut t = Tracker::new(Filter::default());
    const LISTENER: u64 = 0x7000;
    t.handle(
        1,
        77,
        &ev(
            Kind::SetState,
            LISTENER,
            Some(("0.0.0.0:8443", "0.0.0.0:0")),
            0,
            Detail::SetState {
                old: state::CLOSE,
                new: state::LISTEN,
                protocol: Some(6),
            },
        ),
    );
    for i in 0..3 {
        t.handle(
            1_000 + i,
            0,
            &ev(
                Kind::SynackRetransmit,
                LISTENER,
                Some(("10.0.0.1:8443", "10.0.0.5:50000")),
                SOFTIRQ,
                Detail::SynackRetransmit,
            ),
        );
    }
    let f = t.finish();
    assert_eq!(f.findings.len(), 1, "{:?}", f.findings);
    let s = &f.findings[0];
    assert_eq!(s.kind, FindingKind::SynRetransmit);
    assert_eq!(s.occurrences, 3);
    assert_eq!(s.culprit.endpoint, "10.0.0.1:8443");
    assert_eq!(s.process.as_ref().map(|p| p.pid), Some(77));
    assert!(s.explanation.contains("SYN-ACK"), "{}", s.explanation);
}

#[test]
fn writes_of_an_earlier_socket_at_the_same_address_are_not_the_new_connections() {
    // --port 80: another socket's writes arrive (no address), its destroy is
    // filtered out in the kernel; then nginx's child is born at that address.
    let mut t = Tracker::new(Filter {
        port: Some(80),
        pid: None,
    });
    t.handle(1, 9, &ev(Kind::SendLength, SK, None, 0, send(697)));
    accepted(&mut t, 2);
    t.handle(3, 7, &ev(Kind::SendLength, SK, None, 0, send(1000)));
    let f = t.finish();
    assert_eq!(f.connections.len(), 1);
    assert_eq!(f.connections[0].totals.sent, 1000);
    assert_eq!(f.connections[0].pid, Some(7));
    assert_eq!(f.stats.unmatched, 1);
}

/// Without state changes (a BPF program on `inet_sock_set_state`, tcplife's,
/// hides them): another port's socket reads and writes at an address, its
/// destroy (let through whatever its port) frees it, and then a connection
/// of the port starts there. None of the earlier socket's bytes are the new
/// connection's. Seen beside tcplife with other traffic on the host: nginx's
/// connection of 85 bytes received was reported with 31,215.
#[test]
fn a_freed_address_is_known_without_state_changes() {
    let mut t = Tracker::new(Filter {
        port: Some(80),
        pid: None,
    });
    t.handle(1, 9, &ev(Kind::SendLength, SK, None, 0, send(697)));
    let other = ("10.0.0.9:8080", "10.0.0.8:50000");
    t.handle(
        2,
        0,
        &ev(Kind::Destroy, SK, Some(other), SOFTIRQ, Detail::Destroy),
    );
    t.handle(3, 7, &ev(Kind::SendLength, SK, None, 0, send(1000)));
    t.handle(
        4,
        0,
        &ev(
            Kind::Probe,
            SK,
            Some(SERVER),
            SOFTIRQ,
            probe(1, 1001, 65535),
        ),
    );
    let f = t.finish();
    assert_eq!(f.connections.len(), 1);
    assert_eq!(f.connections[0].totals.sent, 1000);
    assert_eq!(f.connections[0].pid, Some(7));
    assert_eq!(f.stats.destroys, 0);
    // The other socket's destroy read after the connection of the port was
    // born at that address (samples of two CPUs): the connection stays.
    let mut t = Tracker::new(Filter {
        port: Some(80),
        pid: None,
    });
    accepted(&mut t, 1);
    t.handle(3, 7, &ev(Kind::SendLength, SK, None, 0, send(1000)));
    t.handle(
        4,
        0,
        &ev(Kind::Destroy, SK, Some(other), SOFTIRQ, Detail::Destroy),
    );
    t.handle(5, 7, &ev(Kind::SendLength, SK, None, 0, send(500)));
    let f = t.finish();
    assert_eq!(f.connections.len(), 1);
    assert_eq!(f.connections[0].totals.sent, 1500);
}

#[test]
fn cpu_lists_as_sysfs_writes_them() {
    assert_eq!(crate::parse_cpu_list("0-1\n"), vec![0, 1]);
    assert_eq!(crate::parse_cpu_list("0,2-4,7"), vec![0, 2, 3, 4, 7]);
    assert_eq!(crate::parse_cpu_list("5"), vec![5]);
    assert!(crate::parse_cpu_list("").is_empty());
    assert!(crate::parse_cpu_list("3-1,x").is_empty());
}

#[test]
fn kernel_filters_only_on_fields_the_tracepoint_has() {
    let probe = layout(Kind::Probe, TCP_PROBE);
    assert_eq!(
        crate::kernel_filter(Kind::Probe, &probe, Some(80)).as_deref(),
        Some("(sport == 80 || dport == 80)")
    );
    assert_eq!(crate::kernel_filter(Kind::Probe, &probe, None), None);
    let st = layout(Kind::SetState, SET_STATE);
    assert_eq!(
        crate::kernel_filter(Kind::SetState, &st, Some(443)).as_deref(),
        Some("protocol == 6 && (sport == 443 || dport == 443)")
    );
    // No ports on sock_send_length, none on tcp_send_reset (its addresses are sockaddrs).
    let send = layout(Kind::SendLength, SEND_LENGTH);
    assert_eq!(
        crate::kernel_filter(Kind::SendLength, &send, Some(80)).as_deref(),
        Some("protocol == 6")
    );
    let rst = layout(Kind::SendReset, SEND_RESET);
    assert_eq!(crate::kernel_filter(Kind::SendReset, &rst, Some(80)), None);
    // Every socket's destroy, whatever its port (a freed address).
    assert_eq!(crate::kernel_filter(Kind::Destroy, &probe, Some(80)), None);
}

#[test]
fn tcp_probe_is_split_by_window_when_sampled() {
    let probe = layout(Kind::Probe, TCP_PROBE);
    let s = crate::streams(Kind::Probe, &probe, Some(80), 8);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].period, 8);
    assert_eq!(
        s[0].filter.as_deref(),
        Some("(sport == 80 || dport == 80) && snd_wnd != 0")
    );
    assert_eq!(s[1].period, 1);
    assert_eq!(
        s[1].filter.as_deref(),
        Some("(sport == 80 || dport == 80) && snd_wnd == 0")
    );
    assert!(s.iter().all(|x| x.needs_filter));
    let all = crate::streams(Kind::Probe, &probe, None, 1);
    assert_eq!(all.len(), 1);
    assert_eq!((all[0].period, all[0].filter.as_deref()), (1, None));
    let s = crate::streams(Kind::Probe, &probe, None, 4);
    assert_eq!(s[1].filter.as_deref(), Some("snd_wnd == 0"));
    // Auto: split too, the sampled stream starting at every segment.
    let s = crate::streams(Kind::Probe, &probe, None, 0);
    assert_eq!(s.len(), 2);
    assert_eq!((s[0].period, s[0].sampled), (1, true));
    assert_eq!(s[0].filter.as_deref(), Some("snd_wnd != 0"));
    assert!(!s[1].sampled);
    // Every other tracepoint: one stream, every hit.
    let send = layout(Kind::SendLength, SEND_LENGTH);
    let s = crate::streams(Kind::SendLength, &send, Some(80), 8);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].period, 1);
    assert!(!s[0].needs_filter);
}

/// Writes carry no ports: sockets of other ports that only write never
/// learn an address. Those that go quiet for a whole interval are forgotten
/// then (counted), not kept until the table is full; the connection with an
/// address stays, quiet or not.
#[test]
fn unaddressed_sockets_quiet_for_an_interval_are_forgotten() {
    let mut t = Tracker::new(Filter {
        port: Some(80),
        pid: None,
    });
    accepted(&mut t, 1);
    for i in 0..100u64 {
        t.handle(
            2 + i,
            9,
            &ev(Kind::SendLength, 0x10_000 + i, None, 0, send(10)),
        );
    }
    let first = t.interval(10);
    assert_eq!(first.open, 1);
    // One of them writes again during the next interval: it stays.
    t.handle(200, 9, &ev(Kind::SendLength, 0x10_000, None, 0, send(10)));
    t.interval(10);
    assert_eq!(t.stats.unmatched, 99);
    let f = t.finish();
    assert_eq!(f.connections.len(), 1);
    assert_eq!(f.stats.unmatched, 100);
}

/// Where the unread bytes wrap, the record cut in two is joined whole and
/// every record is read once, in order.
#[test]
fn a_record_cut_by_the_rings_end_is_joined() {
    use crate::record::{rejoin, Runs};
    // Three records of 24, 40 and 16 bytes (type 99: skipped as Other).
    let mut bytes = Vec::new();
    for (i, size) in [24u16, 40, 16].into_iter().enumerate() {
        bytes.extend_from_slice(&(99 + i as u32).to_ne_bytes());
        bytes.extend_from_slice(&0u16.to_ne_bytes());
        bytes.extend_from_slice(&size.to_ne_bytes());
        bytes.resize(bytes.len() + usize::from(size) - 8, 0xab);
    }
    fn kinds(runs: [&[u8]; 3]) -> (Vec<Record<'_>>, bool) {
        let mut r = Runs::new(runs);
        let k: Vec<Record<'_>> = r.by_ref().collect();
        (k, r.broken())
    }
    let whole = kinds([&bytes, &[], &[]]);
    assert_eq!(
        whole.0,
        vec![Record::Other(99), Record::Other(100), Record::Other(101)]
    );
    for cut in [8, 24, 30, 56, 64, 72] {
        let (a, b) = bytes.split_at(cut);
        let mut joint = Vec::new();
        let runs = rejoin(a, b, &mut joint);
        assert_eq!(kinds(runs), whole, "cut at {cut}");
    }
    // A record longer than what is left: broken, not read past the end.
    let mut joint = Vec::new();
    let runs = rejoin(&bytes[..30], &bytes[30..40], &mut joint);
    let (k, broken) = kinds(runs);
    assert_eq!(k, vec![Record::Other(99)]);
    assert!(broken);
}

/// A connection no socket call named is looked up in the socket table once,
/// not every interval: a socket no process holds (closed, or never
/// accepted) would otherwise be a walk of every process's descriptors a second.
#[test]
fn an_ownerless_connection_is_looked_up_once() {
    let mut t = Tracker::new(Filter {
        port: Some(80),
        pid: None,
    });
    accepted(&mut t, 1);
    let first = t.ownerless();
    assert_eq!(first.len(), 1, "accepted in softirq: no process yet");
    assert_eq!(first[0].0, SK);
    assert!(t.ownerless().is_empty(), "looked up already");
    t.interval(10);
    assert!(t.ownerless().is_empty(), "nor in the next interval");
}

/// nginx (pid 7) answers a request with a 238-byte header and a 600-byte
/// body; the body waits for the client's delayed ACK, `hold_ms` later.
fn nagle_response(t: &mut Tracker, at: u64, base: u32, hold_ms: u64) {
    let data = |una: u32, nxt: u32, len: u32| {
        let Detail::Probe(mut p) = probe(una, nxt, 65535) else {
            unreachable!()
        };
        p.data_len = Some(len);
        Detail::Probe(p)
    };
    // The request arrives: everything sent before is acknowledged.
    t.handle(
        at,
        0,
        &ev(Kind::Probe, SK, Some(SERVER), SOFTIRQ, data(base, base, 80)),
    );
    t.handle(
        at + 10_000,
        7,
        &ev(Kind::SendLength, SK, None, 0, send(238)),
    );
    t.handle(
        at + 20_000,
        7,
        &ev(Kind::SendLength, SK, None, 0, send(600)),
    );
    // The client's pure ACK of the header, after its delayed-ACK timer.
    t.handle(
        at + 20_000 + hold_ms * 1_000_000,
        0,
        &ev(
            Kind::Probe,
            SK,
            Some(SERVER),
            SOFTIRQ,
            data(base, base + 238, 0),
        ),
    );
}

#[test]
fn nagle_is_named_in_the_interval_it_shows_and_in_the_report() {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    let mut base = 0;
    // Two holds: not yet named (a connection needs three).
    for i in 0..2 {
        nagle_response(&mut t, 1_000 + i * 100_000_000, base, 40);
        base += 838;
    }
    assert!(t.interval(10).findings.is_empty());
    // Three more, of 44 ms: the interval names the server with its own figures.
    for i in 2..5 {
        nagle_response(&mut t, 1_000 + i * 100_000_000, base, 44);
        base += 838;
    }
    let iv = t.interval(10);
    assert_eq!(iv.findings.len(), 1, "{:?}", iv.findings);
    let f = &iv.findings[0];
    assert_eq!(f.kind, FindingKind::NagleDelayedAck);
    assert_eq!(
        (f.culprit.endpoint.as_str(), f.culprit.role),
        (SERVER.0, "server")
    );
    assert_eq!(f.process.as_ref().map(|p| p.pid), Some(7));
    assert_eq!(f.occurrences, 3);
    assert_eq!(f.details["held_bytes"], 1800);
    assert_eq!(f.details["held_us"], 3 * 44_000);
    assert_eq!(f.details["sent_at_once_bytes"], 238);
    // Nothing new: the next interval names nothing.
    assert!(t.interval(10).findings.is_empty());
    let report = t.finish();
    let n: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::NagleDelayedAck)
        .collect();
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].occurrences, 5);
    assert_eq!(n[0].details["held_us"], 2 * 40_000 + 3 * 44_000);
}

// ---- ftrace pages (trace_pipe_raw) ----

const DESTROY: &str = include_str!("testdata/tcp_destroy_sock.format");
/// One page read from `per_cpu/cpu1/trace_pipe_raw` of an instance with
/// `sock:inet_sock_set_state` and `tcp:tcp_destroy_sock` enabled, while a
/// Python process opened and closed a connection to 127.0.0.1:47123.
const RAW_PAGE: &[u8] = include_bytes!("testdata/trace_pipe_raw.page");

/// A page of `events` ((time delta, record words)), with `extra` words after
/// the header of the data (time extends, padding) given as raw words first.
fn page(ts: u64, words: &[u32], flags: u64) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&ts.to_le_bytes());
    p.extend_from_slice(&((words.len() as u64 * 4) | flags).to_le_bytes());
    for w in words {
        p.extend_from_slice(&w.to_le_bytes());
    }
    p.resize(crate::ftrace::PAGE, 0);
    p
}

fn events(p: &[u8]) -> Vec<Result<(u64, Vec<u8>), ()>> {
    crate::ftrace::Page::parse(p)
        .expect("a page")
        .map(|i| match i {
            crate::ftrace::Item::Event { time_ns, raw } => Ok((time_ns, raw.to_vec())),
            crate::ftrace::Item::Malformed => Err(()),
        })
        .collect()
}

#[test]
fn a_kernel_page_gives_its_events_in_order_and_they_decode() {
    let p = crate::ftrace::Page::parse(RAW_PAGE).expect("a page");
    assert_eq!(p.missed, None);
    let set_state = layout(Kind::SetState, SET_STATE);
    let destroy = layout(Kind::Destroy, DESTROY);
    let (mut n, mut destroys, mut last, mut ours) = (0, 0, 0, 0);
    for item in p {
        let crate::ftrace::Item::Event { time_ns, raw } = item else {
            panic!("malformed event in a kernel page");
        };
        assert!(time_ns >= last, "time goes back: {time_ns} < {last}");
        last = time_ns;
        n += 1;
        let ev = match crate::decode::common_type(raw) {
            Some(2287) => set_state.decode(raw).expect("set_state decodes"),
            Some(2278) => {
                destroys += 1;
                destroy.decode(raw).expect("destroy decodes")
            }
            t => panic!("unexpected type {t:?}"),
        };
        assert_eq!(crate::decode::common_pid(raw), Some(29002));
        if let Some((l, r)) = ev.tuple {
            if l.port() == 47123 || r.port() == 47123 {
                ours += 1;
            }
        }
    }
    assert_eq!((n, destroys), (15, 3));
    assert!(ours >= 8, "{ours} events of the connection to :47123");
}

#[test]
fn ftrace_pages_small_large_extended_and_padded_events() {
    // A 2-word event after 100 ns; a time extend of 5 << 27 + 7; a large
    // event (type_len 0: its length word counts itself) after 3 ns; padding
    // of 8 bytes (a discarded event); a 1-word event after 1 ns; the rest
    // of the page padding (type 29, delta 0).
    let words = [
        100 << 5 | 2,
        0xaaaa_aaaa,
        0xbbbb_bbbb,
        7 << 5 | 30,
        5,
        3 << 5,
        12,
        0x1111_1111,
        0x2222_2222,
        1 << 5 | 29,
        4,
        1 << 5 | 1,
        0x3333_3333,
        29,
    ];
    let p = page(1_000, &words, 0);
    let ev = events(&p);
    let t1 = 1_000 + 100;
    let t2 = t1 + (5 << 27 | 7) + 3;
    assert_eq!(
        ev,
        vec![
            Ok((
                t1,
                [0xaaaa_aaaau32.to_le_bytes(), 0xbbbb_bbbbu32.to_le_bytes()].concat()
            )),
            Ok((
                t2,
                [0x1111_1111u32.to_le_bytes(), 0x2222_2222u32.to_le_bytes()].concat()
            )),
            Ok((t2 + 1, 0x3333_3333u32.to_le_bytes().to_vec())),
        ]
    );
}

#[test]
fn ftrace_pages_say_what_was_missed_and_end_at_a_bad_length() {
    // Missed events with their count stored after the data.
    let mut p = page(0, &[1 << 5 | 1, 9], 1 << 31 | 1 << 30);
    p[24..32].copy_from_slice(&42u64.to_le_bytes());
    assert_eq!(crate::ftrace::Page::parse(&p).unwrap().missed, Some(42));
    // Missed, count unknown.
    let p = page(0, &[1 << 5 | 1, 9], 1 << 31);
    assert_eq!(crate::ftrace::Page::parse(&p).unwrap().missed, Some(0));
    // An event longer than the data: one malformed item, then the end.
    let p = page(0, &[1 << 5 | 1, 9, 3 << 5 | 28, 1], 0);
    assert_eq!(
        events(&p),
        vec![Ok((1, 9u32.to_le_bytes().to_vec())), Err(())]
    );
    // A length word of 0 (less than itself).
    let p = page(0, &[0, 0], 0);
    assert_eq!(events(&p), vec![Err(())]);
    // A commit longer than the page, a page shorter than its header.
    let mut p = page(0, &[], 0);
    p[8..16].copy_from_slice(&5000u64.to_le_bytes());
    assert!(crate::ftrace::Page::parse(&p).is_none());
    assert!(crate::ftrace::Page::parse(&[0u8; 10]).is_none());
}

proptest::proptest! {
    #[test]
    fn ftrace_pages_of_any_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
        if let Some(p) = crate::ftrace::Page::parse(&bytes) {
            let mut n = 0;
            for item in p {
                if let crate::ftrace::Item::Event { raw, .. } = item {
                    proptest::prop_assert!(raw.len() <= bytes.len());
                }
                n += 1;
                proptest::prop_assert!(n <= bytes.len());
            }
        }
    }
}

#[test]
fn the_kernels_own_context_is_read_through_ftrace_socket_calls_and_samples_through_perf() {
    let probe = layout(Kind::Probe, TCP_PROBE);
    // Sampled: the window-open stream keeps perf's period; every zero window goes to ftrace.
    let s = crate::streams(Kind::Probe, &probe, Some(80), 8);
    assert!(!crate::by_ftrace(Kind::Probe, &s[0]) && crate::by_ftrace(Kind::Probe, &s[1]));
    // Auto starts at every segment, but its period changes: perf.
    let auto = crate::streams(Kind::Probe, &probe, None, 0);
    assert!(!crate::by_ftrace(Kind::Probe, &auto[0]));
    // Every segment asked for: one stream, ftrace.
    assert!(crate::by_ftrace(
        Kind::Probe,
        &crate::streams(Kind::Probe, &probe, None, 1)[0]
    ));
    let rtx = layout(Kind::Retransmit, RETRANSMIT);
    assert!(crate::by_ftrace(
        Kind::Retransmit,
        &crate::streams(Kind::Retransmit, &rtx, Some(80), 8)[0]
    ));
    let send = layout(Kind::SendLength, SEND_LENGTH);
    assert!(!crate::by_ftrace(
        Kind::SendLength,
        &crate::streams(Kind::SendLength, &send, None, 8)[0]
    ));
}

#[test]
fn reads_are_sampled_with_the_segments_and_weighed_by_the_period() {
    // The stream: one, perf (a period that changes), sampled unless every
    // read is asked for.
    let recv = layout(Kind::RecvLength, SEND_LENGTH);
    let s = crate::streams(Kind::RecvLength, &recv, Some(80), 8);
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].period, s[0].sampled, s[0].needs_filter),
        (8, true, false)
    );
    assert_eq!(s[0].filter.as_deref(), Some("protocol == 6"));
    assert!(!crate::by_ftrace(Kind::RecvLength, &s[0]));
    let auto = crate::streams(Kind::RecvLength, &recv, None, 0);
    assert_eq!((auto[0].period, auto[0].sampled), (1, true));
    let every = crate::streams(Kind::RecvLength, &recv, None, 1);
    assert_eq!((every[0].period, every[0].sampled), (1, false));
    // Writes never are: Nagle's rule needs each write's time.
    let send = layout(Kind::SendLength, SEND_LENGTH);
    assert!(!crate::streams(Kind::SendLength, &send, None, 8)[0].sampled);

    // A read sampled one in 4 stands for 4 reads of its size; the process
    // is still the reader's.
    let read = |t: &mut Tracker, now: u64, n: i32| {
        t.handle(
            now,
            7,
            &ev(
                Kind::RecvLength,
                SK,
                None,
                0,
                Detail::Recv(Io {
                    ret: n,
                    flags: 0,
                    family: Some(2),
                    protocol: Some(6),
                }),
            ),
        )
    };
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    read(&mut t, 2, 100);
    t.probe_every = 4;
    read(&mut t, 3, 1000);
    read(&mut t, 4, 0);
    let f = t.finish();
    let c = &f.connections[0];
    assert_eq!(c.totals.received, 100 + 4 * 1000);
    assert_eq!(c.totals.reads, 1 + 4);
    assert_eq!(c.pid, Some(7));
}

#[test]
fn a_process_cgroup_is_the_unified_hierarchy_path() {
    assert_eq!(
        crate::cgroup_path("0::/system.slice/nginx.service\n"),
        "/system.slice/nginx.service"
    );
    // Hybrid: the unified line, wherever it is.
    assert_eq!(
        crate::cgroup_path("4:memory:/docker/abc\n0::/docker/abc\n"),
        "/docker/abc"
    );
    // cgroup v1 only: the first hierarchy's path.
    assert_eq!(
        crate::cgroup_path("9:name=systemd:/user.slice\n"),
        "/user.slice"
    );
    assert_eq!(crate::cgroup_path(""), "");
}

#[test]
fn a_connection_keeps_its_sockets_cookie() {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    let mut p = match probe(1000, 2000, 65535) {
        Detail::Probe(p) => p,
        _ => unreachable!(),
    };
    p.cookie = Some(77);
    t.handle(
        2,
        0,
        &ev(Kind::Probe, SK, Some(SERVER), 0x10, Detail::Probe(p)),
    );
    p.cookie = Some(0);
    t.handle(
        3,
        0,
        &ev(Kind::Probe, SK, Some(SERVER), 0x10, Detail::Probe(p)),
    );
    let f = t.finish();
    assert_eq!(f.connections[0].cookie, Some(77));
}

/// A non-blocking writer that met EAGAIN, then ACKs of a flight that is
/// everything it wrote (`sent_all`), or with 48 KB more still waiting.
fn sndbuf_run(sent_all: bool) -> Vec<crate::findings::Finding> {
    let mut t = Tracker::new(Filter::default());
    accepted(&mut t, 1);
    // The first segment sets where `snd_nxt` starts.
    t.handle(
        3,
        0,
        &ev(
            Kind::Probe,
            SK,
            Some(SERVER),
            SOFTIRQ,
            probe(1000, 1000, 65535),
        ),
    );
    let written = if sent_all { 16_000 } else { 64_000 };
    t.handle(4, 42, &ev(Kind::SendLength, SK, None, 0, send(written)));
    t.handle(5, 42, &ev(Kind::SendLength, SK, None, 0, send(-11)));
    // 16 KB left: each ACK acknowledges 1 KB of it, the rest still in flight.
    for i in 0..12u32 {
        let una = 1000 + 1000 * i;
        t.handle(
            10 + u64::from(i),
            0,
            &ev(
                Kind::Probe,
                SK,
                Some(SERVER),
                SOFTIRQ,
                probe(una, 17_000, 65535),
            ),
        );
    }
    t.finish().findings
}

#[test]
fn a_writer_waiting_for_space_with_everything_in_flight_is_send_buffer_limited() {
    let f = sndbuf_run(true);
    let s: Vec<_> = f
        .iter()
        .filter(|x| x.kind == FindingKind::SendBufferLimited)
        .collect();
    assert_eq!(s.len(), 1, "{f:?}");
    assert_eq!(s[0].culprit.endpoint, "10.0.0.1:80");
    assert_eq!(s[0].culprit.role, "server");
    assert_eq!(s[0].process.as_ref().map(|p| p.pid), Some(42));
    assert_eq!(s[0].details["sndbuf_bound_segments"], 12);
    // Data still waiting to be sent: the window or the congestion window
    // holds it back, not the buffer.
    let f = sndbuf_run(false);
    assert!(
        !f.iter().any(|x| x.kind == FindingKind::SendBufferLimited),
        "{f:?}"
    );
}
