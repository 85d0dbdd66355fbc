use super::*;
use std::net::IpAddr;

use tcpdoctor_wire::TcpFlags;

const C: &str = "10.0.0.1";
const S: &str = "10.0.0.2";
const F_SYN: u16 = TcpFlags::SYN;
const F_ACK: u16 = TcpFlags::ACK;
const F_FIN: u16 = TcpFlags::FIN;
const F_RST: u16 = TcpFlags::RST;

fn seg(
    from_client: bool,
    seq: u32,
    ack: u32,
    flags: u16,
    len: u32,
    window: u16,
) -> TcpSegment<'static> {
    let (src, dst, sp, dp) = if from_client {
        (C, S, 40000, 80)
    } else {
        (S, C, 80, 40000)
    };
    // MSS 1460, window scale 7 on SYNs.
    let options_raw: &'static [u8] = if flags & F_SYN != 0 {
        &[2, 4, 5, 0xB4, 1, 3, 3, 7]
    } else {
        &[]
    };
    TcpSegment {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        ttl: 64,
        ip_id: 0,
        src_port: sp,
        dst_port: dp,
        seq,
        ack,
        flags: TcpFlags(flags),
        window,
        options_raw,
        payload_len: len,
        payload: &[],
        length_clamped: false,
    }
}

#[derive(Default)]
struct Log {
    segments: Vec<(u64, Dir, SegKind, u32, u32, u32)>,
    exchanges: Vec<Exchange>,
    closed: Vec<Connection>,
}

impl Analyzer for Log {
    type Conn = u32;
    fn segment(&mut self, _c: &Connection, n: &mut u32, s: &Segment<'_>) {
        *n += 1;
        self.segments
            .push((s.frame, s.dir, s.kind, s.seq, s.in_flight, s.peer_window));
    }
    fn exchange(&mut self, _c: &Connection, _n: &mut u32, e: &Exchange) {
        self.exchanges.push(*e);
    }
    fn close(&mut self, c: &Connection, n: &mut u32) {
        assert_eq!(c.packets, u64::from(*n));
        self.closed.push(c.clone());
    }
}

fn run(pkts: &[(i64, TcpSegment<'static>)]) -> Log {
    let mut t = Tracker::new(Log::default(), Config::default());
    for (i, (ms, s)) in pkts.iter().enumerate() {
        t.push(i as u64 + 1, Timestamp::from_nanos(ms * 1_000_000), s);
    }
    t.finish()
}

/// Handshake, one request/response, FIN/FIN. Capture 1 ms from the client, 9 ms from the server.
fn conversation() -> Vec<(i64, TcpSegment<'static>)> {
    vec![
        (0, seg(true, 1000, 0, F_SYN, 0, 64240)),
        (18, seg(false, 5000, 1001, F_SYN | F_ACK, 0, 65160)),
        (20, seg(true, 1001, 5001, F_ACK, 0, 502)),
        (21, seg(true, 1001, 5001, F_ACK, 100, 502)),
        (39, seg(false, 5001, 1101, F_ACK, 0, 509)),
        (40, seg(false, 5001, 1101, F_ACK, 3000, 509)),
        (42, seg(true, 1101, 8001, F_ACK, 0, 502)),
        (43, seg(true, 1101, 8001, F_ACK | F_FIN, 0, 502)),
        (61, seg(false, 8001, 1102, F_ACK | F_FIN, 0, 509)),
        (63, seg(true, 1102, 8002, F_ACK, 0, 502)),
    ]
}

#[test]
fn handshake_roles_rtt_and_exchange() {
    let log = run(&conversation());
    assert_eq!(log.closed.len(), 1);
    let c = &log.closed[0];
    assert_eq!(c.role_source, RoleSource::Syn);
    assert_eq!(c.client.addr.to_string(), "10.0.0.1:40000");
    assert_eq!(c.handshake.server_side_ns(), Some(18_000_000));
    assert_eq!(c.handshake.client_side_ns(), Some(2_000_000));
    assert_eq!(c.client.bytes, 100);
    assert_eq!(c.server.bytes, 3000);
    // 3000 bytes acknowledged by one ACK is >= 2 MSS: an immediate ACK, a clean sample.
    assert_eq!(c.server.rtt_to_peer_ns, Some(2_000_000));
    assert_eq!(log.exchanges.len(), 1);
    let e = log.exchanges[0];
    assert!(e.is_complete());
    assert_eq!(e.request_first.unwrap().frame, 4);
    assert_eq!(e.request_acked.unwrap().frame, 5);
    assert_eq!(e.response_last.unwrap().frame, 6);
    // A fresh connection's first exchange counts from its first SYN.
    assert_eq!(e.setup.unwrap().frame, 1);
    assert_eq!(e.duration_ns(), 40_000_000);
}

/// A client's message, acknowledged, then 100 ms later another, and only
/// then the server's answer: with a protocol that does not say where a
/// message ends, the second starts a message of its own (nobody waited
/// through the pause); an HTTP request's body after its headers does not.
#[test]
fn a_pause_after_an_acknowledged_message_starts_another_unless_http_says_not() {
    let run_with = |first: &'static [u8]| {
        let mut a = seg(true, 1001, 5001, F_ACK, 100, 502);
        a.payload = first;
        let mut b = seg(true, 1101, 5001, F_ACK, 100, 502);
        b.payload = b"rest";
        let mut pkts = conversation()[..3].to_vec();
        pkts.extend([
            (21, a),
            (23, seg(false, 5001, 1101, F_ACK, 0, 509)),
            (121, b),
            (123, seg(false, 5001, 1201, F_ACK, 100, 509)),
        ]);
        run(&pkts).exchanges
    };
    let other = run_with(b"\x00\x01heartbeat");
    assert_eq!(other.len(), 2);
    assert!(!other[0].is_complete());
    assert_eq!(other[1].request_first.unwrap().frame, 6);
    let http = run_with(b"POST /upload HTTP/1.1\r\n");
    assert_eq!(http.len(), 1);
    assert_eq!(http[0].request_first.unwrap().frame, 4);
}

/// Captures joined out of time order: a stretch from hours later comes
/// first in the file. The connection of the earlier stretch is one
/// connection, not one per packet timed out on the later stretch's clock.
#[test]
fn a_stretch_of_capture_earlier_than_the_last_keeps_its_connections_whole() {
    let mut later = seg(true, 1, 0, F_SYN, 0, 64240);
    later.src_port = 50000;
    let mut pkts = vec![(10_000_000, later)];
    pkts.extend(conversation());
    let log = run(&pkts);
    assert_eq!(log.closed.len(), 2);
    let c = log
        .closed
        .iter()
        .find(|c| c.client.addr.port() == 40000)
        .unwrap();
    assert_eq!(c.packets, 10);
    assert_eq!(log.exchanges.len(), 1);
    assert!(log.exchanges[0].is_complete());
}

/// The server acknowledging client bytes the capture never saw, after its
/// response began, means another request: the data that follows answers it
/// and is an exchange of its own, not the end of the response before.
#[test]
fn an_ack_of_unseen_client_bytes_starts_a_new_exchange() {
    let mut c = conversation();
    c.truncate(6);
    // The client's second request (100 bytes at 1101) is not captured; the
    // server ACKs it and answers 50 ms later.
    c.push((42, seg(true, 1101, 8001, F_ACK, 0, 502)));
    c.push((60, seg(false, 8001, 1201, F_ACK, 0, 509)));
    c.push((110, seg(false, 8001, 1201, F_ACK, 500, 509)));
    let log = run(&c);
    let log_ex: Vec<_> = log
        .exchanges
        .iter()
        .map(|e| (e.start().unwrap().frame, e.end().unwrap().frame))
        .collect();
    assert_eq!(log_ex, vec![(1, 6), (9, 9)], "{log_ex:?}");
}

/// Server data answering the client's close (a TLS alert after the client's
/// FIN, sent once the response had begun) is waited for by nobody: the
/// exchange ends with the response. A client that half-closes right after
/// its request still waits for the response, which stays in the exchange.
#[test]
fn data_after_the_clients_close_is_not_part_of_the_response() {
    let mut c = conversation();
    c.truncate(7);
    c.push((1400, seg(true, 1101, 8001, F_ACK | F_FIN, 0, 502)));
    c.push((1420, seg(false, 8001, 1102, F_ACK, 24, 509)));
    let log = run(&c);
    let ends: Vec<_> = log
        .exchanges
        .iter()
        .map(|e| e.end().unwrap().frame)
        .collect();
    assert_eq!(ends, vec![6], "{ends:?}");

    let half_close = vec![
        (0, seg(true, 1000, 0, F_SYN, 0, 64240)),
        (18, seg(false, 5000, 1001, F_SYN | F_ACK, 0, 65160)),
        (20, seg(true, 1001, 5001, F_ACK, 0, 502)),
        (21, seg(true, 1001, 5001, F_ACK, 100, 502)),
        (22, seg(true, 1101, 5001, F_ACK | F_FIN, 0, 502)),
        (300, seg(false, 5001, 1102, F_ACK, 3000, 509)),
    ];
    let log = run(&half_close);
    let ends: Vec<_> = log
        .exchanges
        .iter()
        .map(|e| e.end().unwrap().frame)
        .collect();
    assert_eq!(ends, vec![6], "{ends:?}");
}

#[test]
fn windows_are_scaled_except_on_syn() {
    let log = run(&conversation());
    // Frame 4: the client's data; the server last advertised 65160 on its SYN-ACK (unscaled).
    assert_eq!(log.segments[3].5, 65160);
    // Frame 6: the server's data; the client advertised 502 << 7.
    assert_eq!(log.segments[5].5, 502 << 7);
    assert_eq!(log.segments[5].4, 3000);
}

#[test]
fn retransmission_and_keepalive() {
    let mut p = conversation();
    p.truncate(7);
    p.push((50, seg(false, 5001, 1101, F_ACK, 1000, 509)));
    p.push((60, seg(false, 8000, 1101, F_ACK, 1, 509)));
    let log = run(&p);
    let kinds: Vec<SegKind> = log.segments.iter().map(|s| s.2).collect();
    assert_eq!(kinds[7], SegKind::Retransmission);
    assert_eq!(kinds[8], SegKind::KeepAliveOrProbe);
    assert_eq!(log.closed[0].server.retransmissions, 1);
}

#[test]
fn missing_handshake_guesses_server_by_port() {
    let p: Vec<_> = conversation().into_iter().skip(3).collect();
    let log = run(&p);
    let c = &log.closed[0];
    assert_eq!(c.role_source, RoleSource::Port);
    assert_eq!(c.server.addr.to_string(), "10.0.0.2:80");
    assert_eq!(c.exchanges, 1);
}

#[test]
fn finished_connection_is_freed_at_once() {
    let mut t = Tracker::new(Log::default(), Config::default());
    for (i, (ms, s)) in conversation().iter().enumerate() {
        t.push(i as u64 + 1, Timestamp::from_nanos(ms * 1_000_000), s);
    }
    // Both FINs acknowledged: closed and freed before the capture ends
    // (memory and the open count stay those of the connections still open).
    assert_eq!(t.analyzer().closed.len(), 1);
    assert_eq!(t.open_connections(), 0);
}

#[test]
fn a_fin_never_acknowledged_is_sent_again_within_the_connection() {
    // The server's FIN is not acknowledged (its ACK lost before the capture
    // point): the FIN comes again 0.3, 0.9, 2.1 and 4.5 s later, each backoff
    // longer than the grace period of a connection that is over.
    let mut p = conversation();
    p.pop();
    for ms in [361, 961, 2161, 4561] {
        p.push((ms, seg(false, 8001, 1102, F_ACK | F_FIN, 0, 509)));
    }
    let log = run(&p);
    assert_eq!(log.closed.len(), 1);
    assert_eq!(log.closed[0].packets, 13);
    assert_eq!(log.closed[0].server.fin.unwrap().frame, 9);
}

#[test]
fn reset_connection_is_not_counted_unclosed_while_held() {
    // Ends with a RST instead of the FIN exchange: held for its grace period
    // (capture time, which stands still when no packet comes), not open.
    let mut p = conversation();
    p.truncate(6);
    p.push((41, seg(true, 1101, 8001, F_RST | F_ACK, 0, 0)));
    let mut t = Tracker::new(Log::default(), Config::default());
    for (i, (ms, s)) in p.iter().enumerate() {
        t.push(i as u64 + 1, Timestamp::from_nanos(ms * 1_000_000), s);
    }
    assert_eq!(t.open_connections(), 1);
    assert_eq!(t.unclosed_connections(), 0);
    // A half-done handshake is not closed.
    let mut t = Tracker::new(Log::default(), Config::default());
    let (ms, s) = &conversation()[0];
    t.push(1, Timestamp::from_nanos(ms * 1_000_000), s);
    assert_eq!(t.unclosed_connections(), 1);
}

#[test]
fn port_reuse_starts_a_new_connection() {
    // The first connection's last ACK is missing, so it lingers as closed;
    // a new SYN on the same tuple 500 ms later is a new connection.
    let mut p = conversation();
    p.pop();
    let mut again = conversation();
    for (t, s) in again.iter_mut() {
        *t += 500;
        if s.src_port == 40000 {
            s.seq = s.seq.wrapping_add(777_777);
        } else {
            s.ack = s.ack.wrapping_add(777_777);
        }
    }
    again.pop();
    p.extend(again);
    let mut t = Tracker::new(Log::default(), Config::default());
    for (i, (ms, s)) in p.iter().enumerate() {
        t.push(i as u64 + 1, Timestamp::from_nanos(ms * 1_000_000), s);
    }
    assert_eq!(t.analyzer().closed.len(), 1);
    assert_eq!(t.open_connections(), 1);
    let log = t.finish();
    assert_eq!(log.closed.len(), 2);
    assert_eq!(log.closed[1].id, 2);
    assert_eq!(log.closed[1].client.bytes, 100);
    assert_eq!(log.closed[1].first.frame, 10);
}

/// The conversation with the addresses swapped: the client is now the
/// higher (address, port) of the tuple.
fn mirrored() -> Vec<(i64, TcpSegment<'static>)> {
    let (c, s): (IpAddr, IpAddr) = (C.parse().unwrap(), S.parse().unwrap());
    let swap = |a: IpAddr| if a == c { s } else { c };
    conversation()
        .into_iter()
        .map(|(t, mut seg)| {
            seg.src = swap(seg.src);
            seg.dst = swap(seg.dst);
            (t, seg)
        })
        .collect()
}

#[test]
fn directions_whichever_end_is_lower() {
    let dirs = |log: &Log| log.segments.iter().map(|s| s.1).collect::<Vec<Dir>>();
    let plain = run(&conversation());
    // Client lower, SYN seen; client higher, SYN seen; client higher, SYN-ACK first.
    for (p, role) in [
        (mirrored(), RoleSource::Syn),
        (mirrored().into_iter().skip(1).collect(), RoleSource::SynAck),
    ] {
        let log = run(&p);
        let c = &log.closed[0];
        assert_eq!(c.role_source, role);
        assert_eq!(c.client.addr.to_string(), "10.0.0.2:40000");
        assert_eq!((c.client.bytes, c.server.bytes), (100, 3000));
        let skipped = plain.segments.len() - log.segments.len();
        assert_eq!(dirs(&log), dirs(&plain)[skipped..]);
    }
}

#[test]
fn both_ends_the_same_count_as_the_client() {
    let mut p = conversation();
    for (_, s) in p.iter_mut() {
        s.src = C.parse().unwrap();
        s.dst = C.parse().unwrap();
        (s.src_port, s.dst_port) = (40000, 40000);
    }
    let log = run(&p);
    assert!(log.segments.iter().all(|s| s.1 == Dir::ClientToServer));
    assert_eq!(log.closed[0].client.packets, p.len() as u64);
}

/// Keeps the connections closed, nothing else.
#[derive(Default)]
struct Closed(Vec<Connection>);

impl Analyzer for Closed {
    type Conn = ();
    fn segment(&mut self, _c: &Connection, _s: &mut (), _seg: &Segment<'_>) {}
    fn exchange(&mut self, _c: &Connection, _s: &mut (), _e: &Exchange) {}
    fn close(&mut self, c: &Connection, _s: &mut ()) {
        self.0.push(c.clone());
    }
}

#[test]
fn a_handshake_captured_twice_is_one_handshake() {
    // A mirror port: the SYN and the SYN-ACK each captured twice, 1 µs apart.
    let mut p: Vec<(i64, TcpSegment<'static>)> = Vec::new();
    for (i, (ms, s)) in conversation().into_iter().enumerate() {
        p.push((ms * 1_000_000, s.clone()));
        if i < 2 {
            p.push((ms * 1_000_000 + 1_000, s));
        }
    }
    let mut t = Tracker::new(Closed::default(), Config::default());
    for (i, (ns, s)) in p.iter().enumerate() {
        t.push(i as u64 + 1, Timestamp::from_nanos(*ns), s);
    }
    let c = &t.finish().0[0];
    let hs = &c.handshake;
    assert_eq!((hs.syn_count, hs.synack_count), (1, 1));
    assert_eq!(c.client.duplicates + c.server.duplicates, 2);
    assert_eq!(c.packets, 12);
    // Both legs from the first copies: the round trip at one capture point.
    assert_eq!(hs.syn.unwrap().frame, 1);
    assert_eq!(hs.synack_before_ack.unwrap().frame, 3);
    assert_eq!(hs.rtt_ns(), Some(20_000_000));
}

/// `s` carrying a timestamps option (RFC 7323) with `tsval`.
fn with_ts(mut s: TcpSegment<'static>, tsval: u32) -> TcpSegment<'static> {
    let mut o = s.options_raw.to_vec();
    o.extend_from_slice(&[1, 1, 8, 10]);
    o.extend_from_slice(&tsval.to_be_bytes());
    o.extend_from_slice(&0u32.to_be_bytes());
    s.options_raw = Box::leak(o.into_boxed_slice());
    s
}

/// A request answered after a queue grew on the server's way back: the
/// round trip at the response is the handshake's plus what the server's
/// clock shows the response took longer, and only with a 1 kHz clock.
#[test]
fn the_round_trip_at_a_response_follows_the_servers_clock() {
    // Capture times in µs; the server's clock ticks at `hz`.
    let run_ts = |hz: u32, ts: bool| {
        let stamp = |s: TcpSegment<'static>, v: u32| if ts { with_ts(s, v) } else { s };
        let pkts = [
            (300, stamp(seg(true, 1000, 0, F_SYN, 0, 64240), 1)),
            (
                20_300,
                stamp(seg(false, 5000, 1001, F_SYN | F_ACK, 0, 65160), 1000),
            ),
            (20_400, stamp(seg(true, 1001, 5001, F_ACK, 0, 502), 21)),
            (200_400, stamp(seg(true, 1001, 5001, F_ACK, 100, 502), 201)),
            // Left the server 210 ms after its SYN-ACK, arrived 240.1 ms after it.
            (
                260_400,
                stamp(
                    seg(false, 5001, 1101, F_ACK, 300, 509),
                    1000 + 210 * hz / 1000,
                ),
            ),
            (260_500, stamp(seg(true, 1101, 5301, F_ACK, 0, 502), 262)),
        ];
        let mut t = Tracker::new(Log::default(), Config::default());
        for (i, (us, s)) in pkts.iter().enumerate() {
            t.push(i as u64 + 1, Timestamp::from_nanos(us * 1000), s);
        }
        t.finish()
    };
    let log = run_ts(1000, true);
    let (c, e) = (&log.closed[0], &log.exchanges[0]);
    assert_eq!(c.distance_to(Dir::ServerToClient), Some(20_000_000));
    // 30.1 ms longer, less the clock's 1 ms resolution.
    assert_eq!(c.distance_for(e), Some(49_100_000));
    // A 250 Hz clock (an older kernel) is not read as a queue.
    let log = run_ts(250, true);
    assert_eq!(
        log.closed[0].distance_for(&log.exchanges[0]),
        Some(20_000_000)
    );
    // Nor is a capture without timestamps.
    let log = run_ts(1000, false);
    assert_eq!(
        log.closed[0].distance_for(&log.exchanges[0]),
        Some(20_000_000)
    );
}

/// The delivery rate is the fastest the receiver's ACKs showed the data
/// arriving, over a round trip: a server whose full segments arrive one a
/// millisecond (11.68 Mbit/s) measures that; one sending short segments
/// (each the end of a write: its application had no more) measures nothing,
/// as its rate is the application's.
#[test]
fn the_delivery_rate_is_the_paths_not_the_applications() {
    let run_with = |len: u32| {
        let mut pkts = vec![
            (0, seg(true, 1000, 0, F_SYN, 0, 64240)),
            (20, seg(false, 5000, 1001, F_SYN | F_ACK, 0, 65160)),
            (20, seg(true, 1001, 5001, F_ACK, 0, 502)),
            (21, seg(true, 1001, 5001, F_ACK, 100, 502)),
        ];
        let mut next = 5001u32;
        for i in 0..60 {
            next += len;
            pkts.push((41 + i, seg(false, next - len, 1101, F_ACK, len, 509)));
            if i % 2 == 1 {
                pkts.push((41 + i, seg(true, 1101, next, F_ACK, 0, 502)));
            }
        }
        let log = run(&pkts);
        log.closed[0].server.rate.best()
    };
    let (bytes, ns) = run_with(1460).expect("a sample");
    // At least a round trip (20 ms) and 8 segments, at 1460 bytes a millisecond.
    assert!(ns >= 20_000_000, "{ns}");
    assert_eq!(u64::from(bytes) * 1_000_000 / ns as u64, 1460);
    assert_eq!(
        DeliveryRate::time_for((bytes, ns), 14_600),
        10_000_000,
        "10 segments take 10 ms"
    );
    assert_eq!(run_with(1000), None);
}

/// A sender whose data is all acknowledged and who sends its next data
/// later than that ACK could have released it had nothing to send: its
/// rate is the application's, not the path's, and is not taken. Two full
/// segments a round trip apart, each pair acknowledged at once (as a
/// receiver's capture shows a window-bound sender), is the path's rate.
#[test]
fn a_sender_idle_with_everything_acknowledged_measures_no_rate() {
    let run_every = |gap: i64| {
        let mut pkts = vec![
            (0, seg(true, 1000, 0, F_SYN, 0, 64240)),
            (20, seg(false, 5000, 1001, F_SYN | F_ACK, 0, 65160)),
            (20, seg(true, 1001, 5001, F_ACK, 0, 502)),
            (21, seg(true, 1001, 5001, F_ACK, 100, 502)),
        ];
        let mut next = 5001u32;
        for i in 0..30 {
            let at = 41 + gap * i;
            for _ in 0..2 {
                next += 1460;
                pkts.push((at, seg(false, next - 1460, 1101, F_ACK, 1460, 509)));
            }
            pkts.push((at, seg(true, 1101, next, F_ACK, 0, 502)));
        }
        run(&pkts).closed[0].server.rate.best()
    };
    let (bytes, ns) = run_every(20).expect("the window's rate");
    assert_eq!(u64::from(bytes) * 20_000_000 / ns as u64, 2920);
    // 30 ms after the ACK: beyond the 20 ms round trip, a quarter of it and 2 ms.
    assert_eq!(run_every(30), None);
}

#[test]
fn a_flight_paced_within_half_a_round_trip_is_moving_not_pausing() {
    // One response of six segments `gap` ms apart on a 20 ms path.
    let train_of = |len: u32, gap: i64| {
        let mut pkts = vec![
            (0, seg(true, 1000, 0, F_SYN, 0, 64240)),
            (20, seg(false, 5000, 1001, F_SYN | F_ACK, 0, 65160)),
            (20, seg(true, 1001, 5001, F_ACK, 0, 502)),
            (21, seg(true, 1001, 5001, F_ACK, 100, 502)),
        ];
        let mut next = 5001u32;
        for i in 0..6 {
            pkts.push((41 + gap * i, seg(false, next, 1101, F_ACK, len, 509)));
            next += len;
        }
        pkts.push((41 + gap * 6, seg(true, 1101, next, F_ACK | F_FIN, 0, 502)));
        let log = run(&pkts);
        log.exchanges[0].train_ns[Dir::ServerToClient.index()]
    };
    // Full segments 2 ms apart: the path's (or the sender's pacing) spacing.
    assert_eq!(train_of(1460, 2), 10_000_000);
    // A short segment ends a write: what follows 2 ms later is a pause.
    assert_eq!(train_of(1000, 2), 0);
    // Full segments 12 ms apart: more than half the round trip, a window's wait.
    assert_eq!(train_of(1460, 12), 0);
}

#[test]
fn a_clock_running_backwards_gives_no_round_trip() {
    // The SYN stamped later than the SYN-ACK that answers it (a capture
    // whose clock was set back, or a damaged record): no negative round trip.
    let pkts = vec![
        (100, seg(true, 1000, 0, F_SYN, 0, 64240)),
        (20, seg(false, 5000, 1001, F_SYN | F_ACK, 0, 65160)),
        (21, seg(true, 1001, 5001, F_ACK, 0, 502)),
        (22, seg(true, 1001, 5001, F_ACK, 100, 502)),
        (10, seg(false, 5001, 1101, F_ACK, 0, 509)),
    ];
    let c = &run(&pkts).closed[0];
    assert_eq!(c.handshake.server_side_ns(), None);
    assert_eq!(c.handshake.rtt_ns(), None);
    assert_eq!(c.client.rtt_to_peer_ns, None);
    assert_eq!(c.path_rtt_ns(), None);
}

#[test]
fn a_sender_repeating_a_size_a_little_below_the_mss_sends_full_segments_at_it() {
    // MSS 1460 both ways; the server's segments are `len` bytes, `n` of them.
    let smss_after = |len: u32, n: u32| {
        let mut pkts = vec![
            (0, seg(true, 1000, 0, F_SYN, 0, 64240)),
            (20, seg(false, 5000, 1001, F_SYN | F_ACK, 0, 65160)),
            (20, seg(true, 1001, 5001, F_ACK, 0, 502)),
            (21, seg(true, 1001, 5001, F_ACK, 100, 502)),
        ];
        let mut next = 5001u32;
        for _ in 0..n {
            pkts.push((41, seg(false, next, 1101, F_ACK, len, 509)));
            next += len;
        }
        run(&pkts).closed[0].smss(Dir::ServerToClient)
    };
    // A tunnel's 20 bytes: four segments of 1440 make 1440 the full size.
    assert_eq!(smss_after(1440, 4), 1440);
    assert_eq!(smss_after(1440, 3), 1460);
    // Far below: messages, not a smaller full size.
    assert_eq!(smss_after(1000, 6), 1460);
}

#[test]
fn one_counted_packet_is_enough_to_see_a_number_skipped_after_a_timer() {
    use crate::conn::IpIds;
    const MS: i64 = 1_000_000;
    // A server's ACK of the request, then its response lost before the
    // capture and sent again 228 ms later: one number skipped.
    let mut ids = IpIds::default();
    assert_eq!(ids.step(0x0e89, 1, 41 * MS), 0);
    assert_eq!(ids.step(0x0e8b, 1, 269 * MS), 1);
    assert_eq!(ids.step(0x0e8c, 1, 289 * MS), 0);
    // A server thinking as long: its numbers in step, nothing unseen.
    let mut ids = IpIds::default();
    ids.step(0x31d9, 1, 70 * MS);
    assert_eq!(ids.step(0x31da, 1, 374 * MS), 0);
    // A skip with no silence before it is another numbering: nothing is
    // read from the counter after it, silence or not.
    let mut ids = IpIds::default();
    ids.step(10, 1, 0);
    assert_eq!(ids.step(12, 1, MS), 0);
    assert_eq!(ids.step(14, 1, 500 * MS), 0);
}
