//! Each rule on a small synthetic exchange where it must fire, and on its
//! twin where it must stay quiet. (Real captures for every rule are in
//! `fixtures/`, exercised by the command-line tests.)

#![allow(clippy::unwrap_used, clippy::too_many_arguments)]

use tcpdoctor_engine::model::Analysis;
use tcpdoctor_engine::{Engine, Options};
use tcpdoctor_wire::build::FrameSpec;
use tcpdoctor_wire::{LinkType, TcpFlags, Timestamp};

const SYN: u16 = TcpFlags::SYN;
const ACK: u16 = TcpFlags::ACK;
const PSH: u16 = TcpFlags::PSH | TcpFlags::ACK;
const FIN: u16 = TcpFlags::FIN | TcpFlags::ACK;

/// A conversation between 10.0.0.1:40000 (client) and 10.0.0.2:80, times in µs.
#[derive(Default)]
struct Sim {
    frames: Vec<(i64, Vec<u8>)>,
    /// Window scale both SYNs offer.
    scale: u8,
}

impl Sim {
    fn seg(
        &mut self,
        us: i64,
        client: bool,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
        window: u16,
    ) -> &mut Self {
        let (c, s) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let spec = FrameSpec {
            src: if client { c } else { s },
            dst: if client { s } else { c },
            src_port: if client { 40000 } else { 80 },
            dst_port: if client { 80 } else { 40000 },
            seq,
            ack,
            flags,
            window,
            mss: (flags & SYN != 0).then_some(1460),
            window_scale: (flags & SYN != 0).then_some(self.scale),
            payload_len: len,
        };
        self.frames.push((us, spec.ethernet()));
        self
    }
    fn c(&mut self, us: i64, seq: u32, ack: u32, flags: u16, len: usize) -> &mut Self {
        self.seg(us, true, seq, ack, flags, len, 65000)
    }
    fn s(&mut self, us: i64, seq: u32, ack: u32, flags: u16, len: usize) -> &mut Self {
        self.seg(us, false, seq, ack, flags, len, 65000)
    }
    /// Handshake at t=0 with a 1 ms round trip; client seq 1, server seq 1 after it.
    fn handshake(&mut self) -> &mut Self {
        self.c(0, 0, 0, SYN, 0)
            .s(1000, 0, 1, SYN | ACK, 0)
            .c(1010, 1, 1, ACK, 0)
    }
    fn run(&self) -> Analysis {
        let mut e = Engine::new(Options::default());
        for (us, f) in &self.frames {
            e.push(
                Timestamp::from_nanos(1_700_000_000_000_000_000 + us * 1000),
                LinkType::Ethernet,
                f,
                f.len() as u32,
            );
        }
        e.finish()
    }
}

fn kinds(a: &Analysis) -> Vec<&'static str> {
    a.findings.iter().map(|f| f.kind).collect()
}

/// One request (100 B) answered after `think_us`.
fn request_response(sim: &mut Sim, at: i64, think_us: i64) {
    sim.c(at, 1, 1, PSH, 100)
        .s(at + 1000 + think_us.min(30_000), 1, 101, ACK, 0)
        .s(at + 1000 + think_us, 1, 101, PSH, 500)
        .c(at + 2000 + think_us, 101, 501, ACK, 0)
        .c(at + 3000 + think_us, 101, 501, FIN, 0)
        .s(at + 4000 + think_us, 501, 102, FIN, 0)
        .c(at + 5000 + think_us, 102, 502, ACK, 0);
}

#[test]
fn server_delay_fires_on_think_time_and_not_without() {
    let mut sim = Sim::default();
    sim.handshake();
    request_response(&mut sim, 2000, 300_000);
    let a = sim.run();
    assert_eq!(kinds(&a), ["server_delay"]);
    let f = &a.findings[0];
    assert_eq!(f.culprit.role, "server");
    assert_eq!(f.culprit.endpoint, "10.0.0.2:80");
    // 300 ms think, seen from 0.5 ms beyond the capture point.
    assert!(
        (f.typical_delay_ms - 300.0).abs() < 2.0,
        "{}",
        f.typical_delay_ms
    );

    let mut quick = Sim::default();
    quick.handshake();
    request_response(&mut quick, 2000, 100);
    assert!(kinds(&quick.run()).is_empty());
}

#[test]
fn client_delay_fires_on_idle_after_handshake() {
    let mut sim = Sim::default();
    sim.handshake();
    request_response(&mut sim, 251_010, 100);
    let a = sim.run();
    assert_eq!(kinds(&a), ["client_delay"]);
    assert_eq!(a.findings[0].culprit.role, "client");
    assert!((a.findings[0].typical_delay_ms - 250.0).abs() < 1.0);
}

#[test]
fn syn_retransmit_fires_when_the_first_syn_went_unanswered() {
    let mut sim = Sim::default();
    sim.c(0, 0, 0, SYN, 0)
        .c(1_000_000, 0, 0, SYN, 0)
        .s(1_001_000, 0, 1, SYN | ACK, 0)
        .c(1_001_010, 1, 1, ACK, 0);
    request_response(&mut sim, 1_002_000, 100);
    let a = sim.run();
    assert_eq!(kinds(&a), ["syn_retransmit"]);
    let f = &a.findings[0];
    assert_eq!(f.culprit.role, "network");
    assert!((f.typical_delay_ms - 1000.0).abs() < 1.0);
    assert_eq!(f.evidence[0].frames, [1, 2, 3]);
}

#[test]
fn syn_retransmit_fires_when_the_server_had_to_send_its_syn_ack_again() {
    let mut sim = Sim::default();
    // The first SYN-ACK never got its ACK; the server's timer sends it again.
    sim.c(0, 0, 0, SYN, 0)
        .s(1000, 0, 1, SYN | ACK, 0)
        .s(1_001_000, 0, 1, SYN | ACK, 0)
        .c(1_001_010, 1, 1, ACK, 0);
    request_response(&mut sim, 1_002_000, 100);
    let a = sim.run();
    assert_eq!(kinds(&a), ["syn_retransmit"]);
    let f = &a.findings[0];
    assert!(
        (f.typical_delay_ms - 1000.0).abs() < 1.0,
        "{}",
        f.typical_delay_ms
    );
    assert_eq!(f.evidence[0].frames, [2, 3, 4]);
}

#[test]
fn zero_window_fires_while_the_receiver_is_closed() {
    let mut sim = Sim::default();
    sim.handshake();
    sim.c(2000, 1, 1, PSH, 100)
        .s(3000, 1, 101, PSH, 1400)
        .s(3010, 1401, 101, PSH, 1400);
    // The client's buffer is full: window 0 for 500 ms, with probes.
    sim.seg(4000, true, 101, 2801, ACK, 0, 0);
    sim.s(204_000, 2800, 101, ACK, 0)
        .seg(204_100, true, 101, 2801, ACK, 0, 0);
    sim.seg(504_000, true, 101, 2801, ACK, 0, 30000);
    sim.s(504_100, 2801, 101, PSH, 1000)
        .c(505_000, 101, 3801, ACK, 0);
    let a = sim.run();
    assert_eq!(kinds(&a)[0], "zero_window");
    let f = &a.findings[0];
    assert_eq!(f.culprit.role, "client");
    assert!(
        (f.typical_delay_ms - 500.0).abs() < 1.0,
        "{}",
        f.typical_delay_ms
    );
    assert_eq!(f.details["probes"], 1);
}

/// A 10-segment response; `lose` drops segment 5 and recovers by timeout or by dup ACKs.
fn lossy(timeout: bool) -> Analysis {
    let mut sim = Sim::default();
    sim.handshake();
    sim.c(2000, 1, 1, PSH, 100);
    let mut t = 3000;
    for i in 0..10u32 {
        if i != 4 {
            sim.s(t, 1 + i * 1000, 101, ACK, 1000);
        }
        t += 10;
    }
    if timeout {
        // Only one ACK comes back; the sender waits for its timer.
        sim.c(4000, 101, 4001, ACK, 0);
        sim.s(204_000, 4001, 101, ACK, 1000);
    } else {
        sim.c(4000, 101, 4001, ACK, 0)
            .c(4010, 101, 4001, ACK, 0)
            .c(4020, 101, 4001, ACK, 0)
            .c(4030, 101, 4001, ACK, 0);
        sim.s(4100, 4001, 101, ACK, 1000);
    }
    sim.c(t + 300_000, 101, 10_001, ACK, 0);
    let mut done = Sim::default();
    std::mem::swap(&mut done.frames, &mut sim.frames);
    // Frames must be in time order, as a capture is.
    done.frames.sort_by_key(|(us, _)| *us);
    done.run()
}

#[test]
fn retransmission_timeout_versus_fast_recovery() {
    let rto = lossy(true);
    assert!(
        kinds(&rto).contains(&"retransmission_timeout"),
        "{:?}",
        kinds(&rto)
    );
    assert!(!kinds(&rto).contains(&"packet_loss"));
    let f = rto
        .findings
        .iter()
        .find(|f| f.kind == "retransmission_timeout")
        .unwrap();
    assert_eq!(f.culprit.role, "network");
    let fast = lossy(false);
    assert!(kinds(&fast).contains(&"packet_loss"), "{:?}", kinds(&fast));
    assert!(!kinds(&fast).contains(&"retransmission_timeout"));
}

#[test]
fn network_latency_fires_when_round_trips_dominate() {
    // 100 ms round trip, the server answers at once, three requests.
    let mut sim = Sim::default();
    sim.c(0, 0, 0, SYN, 0)
        .s(50_000, 0, 1, SYN | ACK, 0)
        .c(100_000, 1, 1, ACK, 0);
    let (mut cs, mut ss, mut t) = (1u32, 1u32, 100_100);
    for _ in 0..3 {
        sim.c(t, cs, ss, PSH, 100);
        cs += 100;
        sim.s(t + 50_000, ss, cs, PSH, 300);
        ss += 300;
        sim.c(t + 100_000, cs, ss, ACK, 0);
        t += 100_100;
    }
    let a = sim.run();
    assert_eq!(kinds(&a), ["network_latency"]);
    assert!((a.findings[0].details["rtt_ms"].as_f64().unwrap() - 100.0).abs() < 1.0);
    // The same exchanges over a 1 ms path: nothing to report.
    let mut near = Sim::default();
    near.handshake();
    request_response(&mut near, 2000, 100);
    assert!(kinds(&near.run()).is_empty());
}

/// Captured at the client across a 35 ms path: a GET, the server's 119-byte
/// headers one round trip later, the client's delayed ACK of them 40 ms
/// after, and the 1412-byte body `body_after_us` after the headers (five
/// keep-alive requests).
fn headers_then_body(body_after_us: i64) -> Analysis {
    let mut sim = Sim::default();
    sim.c(0, 0, 0, SYN, 0)
        .s(35_000, 0, 1, SYN | ACK, 0)
        .c(35_050, 1, 1, ACK, 0);
    let (mut cs, mut ss, mut t) = (1u32, 1u32, 35_100);
    for _ in 0..5 {
        sim.c(t, cs, ss, PSH, 80);
        cs += 80;
        sim.s(t + 35_000, ss, cs, PSH, 119);
        ss += 119;
        sim.c(t + 75_000, cs, ss, ACK, 0);
        let body = t + 35_000 + body_after_us;
        sim.s(body, ss, cs, PSH, 1412);
        ss += 1412;
        sim.c(body + 40, cs, ss, ACK, 0);
        t = body + 100;
    }
    // In time order: a body sent before the delayed ACK arrives before it.
    sim.frames.sort_by_key(|f| f.0);
    sim.run()
}

#[test]
fn server_time_inside_a_response_is_the_servers_not_transfer() {
    let a = headers_then_body(300_000);
    assert_eq!(kinds(&a), ["server_delay"]);
    let f = &a.findings[0];
    assert_eq!(f.culprit.role, "server");
    assert_eq!(f.details["where"], "inside_response");
    assert!(
        (f.typical_delay_ms - 300.0).abs() < 1.0,
        "{}",
        f.typical_delay_ms
    );
    // The body's pause is evidence: the headers and the body.
    assert!(f.evidence[0].frames.len() >= 2, "{:?}", f.evidence[0]);
    let m = &a.capture.latency_budget.as_ref().unwrap().median;
    assert!(m.parts_ms.get("server").unwrap() >= 299.0, "{m:?}");
    assert!(m.parts_ms.get("transfer").unwrap_or(0.0) < 1.0, "{m:?}");
}

#[test]
fn data_released_by_the_delayed_ack_is_nagle_not_server_time() {
    // The body leaves as the delayed ACK reaches the server: Nagle held it.
    let a = headers_then_body(75_000);
    assert_eq!(kinds(&a)[0], "nagle_delayed_ack", "{:?}", kinds(&a));
    assert!(!kinds(&a).contains(&"server_delay"), "{:?}", kinds(&a));
    let m = &a.capture.latency_budget.as_ref().unwrap().median;
    assert!(m.parts_ms.get("server").unwrap_or(0.0) < 1.0, "{m:?}");
    // The body 20 ms after the headers, before any ACK: Nagle would have
    // held it until one, the window had room and one segment in flight fills
    // no congestion window — TCP held nothing, the server wrote it then. Its
    // own time in the budget (too little for a finding), not transfer.
    let b = headers_then_body(20_000);
    assert!(!kinds(&b).contains(&"server_delay"), "{:?}", kinds(&b));
    let m = &b.capture.latency_budget.as_ref().unwrap().median;
    assert!(m.parts_ms.get("server").unwrap_or(0.0) >= 19.0, "{m:?}");
    assert!(m.parts_ms.get("transfer").unwrap_or(0.0) < 1.0, "{m:?}");
}

#[test]
fn a_pause_waiting_for_the_window_is_not_server_time() {
    // The client's window closes after the headers and reopens 300 ms later.
    let mut sim = Sim::default();
    sim.handshake();
    sim.c(2_000, 1, 1, PSH, 100)
        .s(3_000, 1, 101, PSH, 119)
        .seg(3_500, true, 101, 120, ACK, 0, 0)
        .seg(303_500, true, 101, 120, ACK, 0, 65000)
        .s(304_000, 120, 101, PSH, 1412)
        .c(305_000, 101, 1532, ACK, 0);
    let a = sim.run();
    assert!(!kinds(&a).contains(&"server_delay"), "{:?}", kinds(&a));
}

#[test]
fn client_time_inside_a_request_is_the_clients() {
    // POST headers, the server's ACK, the 100-byte body 200 ms later.
    let mut sim = Sim::default();
    sim.handshake();
    sim.c(2_000, 1, 1, PSH, 150)
        .payload_starts(b"POST /upload HTTP/1.1\r\n", 150)
        .s(3_000, 1, 151, ACK, 0)
        .c(202_000, 151, 1, PSH, 100)
        .s(203_000, 1, 251, PSH, 500)
        .c(204_000, 251, 501, ACK, 0);
    let a = sim.run();
    assert_eq!(kinds(&a), ["client_delay"]);
    assert_eq!(a.findings[0].details["where"], "inside_request");
    assert!((a.findings[0].typical_delay_ms - 200.0).abs() < 1.0);
    let m = &a.capture.latency_budget.as_ref().unwrap().median;
    assert!(m.parts_ms.get("client_idle").unwrap() >= 199.0, "{m:?}");
}

#[test]
fn a_pause_between_messages_of_an_unknown_protocol_is_nobodys() {
    // The same segments, but the first is no HTTP request: what follows
    // 200 ms after the server acknowledged it is a message of its own
    // (a heartbeat, a keystroke), and nobody waited through the pause.
    let mut sim = Sim::default();
    sim.handshake();
    sim.c(2_000, 1, 1, PSH, 150)
        .payload_starts(&[0, 0, 0, 146, 1, 7], 150)
        .s(3_000, 1, 151, ACK, 0)
        .c(202_000, 151, 1, PSH, 100)
        .s(203_000, 1, 251, PSH, 500)
        .c(204_000, 251, 501, ACK, 0);
    let a = sim.run();
    assert!(!kinds(&a).contains(&"client_delay"), "{:?}", kinds(&a));
    assert_eq!(a.capture.exchanges, 1);
}

#[test]
fn network_latency_counts_each_connections_handshake() {
    // Five connections of one request each, 100 ms round trip, the server
    // takes 35 ms: round trips are 85% of the time (one handshake and one
    // request/response per exchange), though one RTT is only 43%.
    let mut sim = Sim::default();
    for i in 0..5u16 {
        let t = i64::from(i) * 400_000;
        let port = 40_000 + i;
        let mut seg = |us: i64, client: bool, seq: u32, ack: u32, flags: u16, len: usize| {
            sim.seg(us, client, seq, ack, flags, len, 65000);
            let last = sim.frames.last_mut().unwrap();
            // The client's port: bytes 34..36 (source) or 36..38 (destination).
            let at = if client { 34 } else { 36 };
            last.1[at..at + 2].copy_from_slice(&port.to_be_bytes());
        };
        seg(t, true, 0, 0, SYN, 0);
        seg(t + 50_000, false, 0, 1, SYN | ACK, 0);
        seg(t + 100_000, true, 1, 1, ACK, 0);
        seg(t + 100_050, true, 1, 1, PSH, 100);
        seg(t + 150_000, false, 1, 101, ACK, 0);
        seg(t + 185_000, false, 1, 101, PSH, 300);
        seg(t + 235_000, true, 101, 301, ACK, 0);
        seg(t + 235_100, true, 101, 301, FIN, 0);
        seg(t + 285_000, false, 301, 102, FIN, 0);
        seg(t + 335_000, true, 102, 302, ACK, 0);
    }
    let a = sim.run();
    assert_eq!(kinds(&a), ["network_latency"], "{:?}", a.findings);
    let f = &a.findings[0];
    assert_eq!(f.details["cause"], "new_connections");
    assert_eq!(f.details["handshake_round_trips"], 5);
    assert!(f.share_of_time > 0.8, "{}", f.share_of_time);
}

#[test]
fn a_mirrored_copy_is_a_duplicate_not_a_retransmission() {
    let mut sim = Sim::default();
    sim.handshake();
    sim.c(2000, 1, 1, PSH, 100).c(2050, 1, 1, PSH, 100); // the same frame 50 µs later
    sim.s(3000, 1, 101, PSH, 500).c(4000, 101, 501, ACK, 0);
    let a = sim.run();
    assert_eq!(a.capture.duplicates, 1);
    assert_eq!(a.connections[0].retransmissions.client_to_server, 0);
    assert!(kinds(&a).is_empty());
    // 300 ms later it is a retransmission.
    let mut again = Sim::default();
    again.handshake();
    again.c(2000, 1, 1, PSH, 100).c(302_000, 1, 1, PSH, 100);
    again
        .s(303_000, 1, 101, PSH, 500)
        .c(304_000, 101, 501, ACK, 0);
    let b = again.run();
    assert_eq!(b.capture.duplicates, 0);
    assert_eq!(b.connections[0].retransmissions.client_to_server, 1);
}

/// A 1 MB response over a 100 ms round trip in flights of 10, 20, 40… full
/// segments, each flight waiting for the previous one's ACKs (slow start), or
/// sent in one go when `paced` is false.
fn flights(slow_start: bool) -> Analysis {
    flights_with_outage(slow_start, 0)
}

/// [`flights`], with the data stopping for `outage_us` before the third
/// flight, as a capture downstream of a loss recovered by the retransmission
/// timer sees it (the retransmission looks like the data simply continuing).
fn flights_with_outage(slow_start: bool, outage_us: i64) -> Analysis {
    let mut sim = Sim {
        scale: 7,
        ..Sim::default()
    };
    sim.c(0, 0, 0, SYN, 0)
        .s(50_000, 0, 1, SYN | ACK, 0)
        .c(100_000, 1, 1, ACK, 0);
    sim.c(100_100, 1, 1, PSH, 100);
    let mut t = 150_100; // the request reached the server
    let (mut seq, mut flight) = (1u32, 10u32);
    let total = 700u32;
    let mut sent = 0;
    let mut acks = Vec::new();
    let mut round = 0;
    while sent < total {
        round += 1;
        if round == 3 {
            t += outage_us;
        }
        let n = if slow_start {
            flight.min(total - sent)
        } else {
            total - sent
        };
        for _ in 0..n {
            sim.s(t, seq, 101, ACK, 1460);
            seq += 1460;
            t += 10;
        }
        sent += n;
        // The ACK of the flight comes back a round trip after it left.
        acks.push((t + 100_000, seq));
        if slow_start {
            t += 100_000;
            flight *= 2;
        }
    }
    for (at, ack) in acks {
        sim.c(at, 101, ack, ACK, 0);
    }
    sim.frames.sort_by_key(|(us, _)| *us);
    sim.run()
}

#[test]
fn congestion_limited_fires_in_slow_start_and_not_in_one_flight() {
    let a = flights(true);
    let f = a
        .findings
        .iter()
        .find(|f| f.kind == "congestion_limited")
        .expect("finding");
    assert_eq!(f.culprit.role, "network");
    assert!(f.details["rounds"].as_u64().unwrap() >= 5);
    let b = flights(false);
    assert!(
        b.findings.iter().all(|f| f.kind != "congestion_limited"),
        "{:?}",
        kinds(&b)
    );
}

#[test]
fn a_retransmission_timer_silence_is_not_a_congestion_wait() {
    // Seen downstream of the loss, 800 ms without data then the data going on
    // in place: the rounds of slow start are still counted, the silence is not.
    let a = flights_with_outage(true, 800_000);
    let f = a
        .findings
        .iter()
        .find(|f| f.kind == "congestion_limited")
        .expect("finding");
    let plain = flights(true);
    let g = plain
        .findings
        .iter()
        .find(|f| f.kind == "congestion_limited")
        .expect("finding");
    assert!(
        f.total_delay_ms < g.total_delay_ms + 1.0,
        "{} ms counted with the outage, {} ms without",
        f.total_delay_ms,
        g.total_delay_ms
    );
}

/// Captured at the client across a 40 ms path: six keep-alive GETs, 1 s
/// apart, each answered by 70 segments of 1448 B. The first response leaves
/// in slow start (10, 20, 40 segments a round trip apart); the later ones in
/// the flights `later` (each flight's segments back to back, one ACK per
/// flight).
fn keepalive_after_idle(later: &[u32]) -> Analysis {
    let mut sim = Sim {
        scale: 7,
        ..Sim::default()
    };
    sim.c(0, 0, 0, SYN, 0)
        .s(40_000, 0, 1, SYN | ACK, 0)
        .c(40_010, 1, 1, ACK, 0);
    let (mut cs, mut ss, mut t) = (1u32, 1u32, 40_100);
    for i in 0..6 {
        let flights: &[u32] = if i == 0 { &[10, 20, 40] } else { later };
        sim.c(t, cs, ss, PSH, 100);
        cs += 100;
        let mut at = t + 40_000;
        for (k, &n) in flights.iter().enumerate() {
            for j in 0..n {
                let last = k + 1 == flights.len() && j + 1 == n;
                sim.s(
                    at + i64::from(j) * 12,
                    ss,
                    cs,
                    if last { PSH } else { ACK },
                    1448,
                );
                ss += 1448;
            }
            // The flight's ACKs reach the server a round trip after it left.
            sim.c(at + i64::from(n) * 12 + 20, cs, ss, ACK, 0);
            at += 40_000;
        }
        t = at + 1_000_000;
    }
    sim.run()
}

#[test]
fn slow_start_after_idle_fires_when_a_grown_window_restarts() {
    let a = keepalive_after_idle(&[10, 20, 40]);
    assert_eq!(kinds(&a)[0], "slow_start_after_idle", "{:?}", kinds(&a));
    let f = &a.findings[0];
    assert_eq!(f.culprit.role, "server");
    assert_eq!(f.occurrences, 5);
    assert_eq!(f.details["restart_flight_bytes"], 10 * 1448);
    // Two round trips per response the grown window would not have needed.
    assert_eq!(f.details["extra_round_trips"], 10);
    assert!(
        (f.typical_delay_ms - 80.0).abs() < 2.0,
        "{}",
        f.typical_delay_ms
    );
    // The twin kept its window: each later response in one flight.
    let kept = keepalive_after_idle(&[70]);
    assert!(
        !kinds(&kept).contains(&"slow_start_after_idle"),
        "{:?}",
        kinds(&kept)
    );
    // Equal chunks a round trip apart are not slow start (an application
    // writing in pieces): no restart either.
    let paced = keepalive_after_idle(&[10, 10, 10, 10, 10, 10, 10]);
    assert!(
        !kinds(&paced).contains(&"slow_start_after_idle"),
        "{:?}",
        kinds(&paced)
    );
}

/// A 58 KB response into a 4000-byte receive window across a `rtt_us` path:
/// the server sends two segments, the client acknowledges them at once
/// (the window full: 1104 bytes left) and reopens the window `reopen_us`
/// after they arrived.
fn window_paced(rtt_us: i64, reopen_us: i64) -> Analysis {
    let mut sim = Sim::default();
    let half = rtt_us / 2;
    sim.c(0, 0, 0, SYN, 0)
        .seg(half, false, 0, 1, SYN | ACK, 0, 4000)
        .seg(rtt_us, true, 1, 1, ACK, 0, 4000);
    sim.seg(rtt_us + 10, true, 1, 1, PSH, 100, 4000);
    let (mut ss, mut t) = (1u32, rtt_us + 10 + rtt_us);
    for _ in 0..20 {
        sim.s(t, ss, 101, ACK, 1448)
            .s(t + 12, ss + 1448, 101, ACK, 1448);
        ss += 2896;
        sim.seg(t + half, true, 101, ss, ACK, 0, 1104).seg(
            t + half + reopen_us,
            true,
            101,
            ss,
            ACK,
            0,
            4000,
        );
        t += half + reopen_us + half;
    }
    sim.run()
}

#[test]
fn a_window_reopened_by_a_slow_reader_is_not_a_small_buffer() {
    // 0.2 ms path, the window reopens every 70 ms: the reader's pace.
    let a = window_paced(200, 70_000);
    let f = &a.findings[0];
    assert_eq!(
        (f.kind, f.culprit.role),
        ("receive_window_limited", "client")
    );
    assert_eq!(f.details["cause"], "slow_reader");
    assert!(f.fix.contains("reads too slowly"), "{}", f.fix);
    assert!(!f.fix.contains("Raise the receive buffer"));
    // 35 ms path, the window reopens a round trip later: the buffer's size.
    let b = window_paced(35_000, 0);
    let f = &b.findings[0];
    assert_eq!(
        (f.kind, f.culprit.role),
        ("receive_window_limited", "client")
    );
    assert_eq!(f.details["cause"], "small_receive_buffer");
}

/// A GET answered with 4096 bytes on a 1 ms path, captured at the server:
/// the first 1460-byte segment is retransmitted on the timer (backing off)
/// three times unanswered; then, when `smaller`, the data goes again in
/// 1024-byte segments that are acknowledged, otherwise the third full-size
/// retransmission is.
fn full_size_vanishing(smaller: bool) -> Analysis {
    let mut sim = Sim::default();
    sim.handshake();
    sim.c(2000, 1, 1, PSH, 100);
    let t = 2500;
    sim.s(t, 1, 101, ACK, 1460);
    for back in [200_000, 600_000, 1_400_000] {
        sim.s(t + back, 1, 101, ACK, 1460);
    }
    let mut at = t + 3_000_000;
    if smaller {
        let mut seq = 1u32;
        for n in [1024usize, 1024, 1024, 1024] {
            sim.s(at, seq, 101, PSH, n);
            seq += n as u32;
            sim.c(at + 1000, 101, seq, ACK, 0);
            at += 1100;
        }
    } else {
        at = t + 1_400_000;
        sim.c(at + 1000, 101, 1461, ACK, 0);
        sim.s(at + 1100, 1461, 101, PSH, 1460)
            .s(at + 1110, 2921, 101, PSH, 1176)
            .c(at + 2100, 101, 4097, ACK, 0);
    }
    sim.run()
}

#[test]
fn path_mtu_blackhole_when_only_smaller_segments_pass() {
    let a = full_size_vanishing(true);
    let f = &a.findings[0];
    assert_eq!((f.kind, f.culprit.role), ("path_mtu_blackhole", "network"));
    assert_eq!(f.details["lost_segment_bytes"], 1460);
    assert_eq!(f.details["passing_segment_bytes"], 1024);
    assert_eq!(f.details["full_size_retransmissions"], 3);
    // The full-size segment got through in the end: a plain timeout.
    let b = full_size_vanishing(false);
    assert_eq!(kinds(&b)[0], "retransmission_timeout", "{:?}", kinds(&b));
    assert!(!kinds(&b).contains(&"path_mtu_blackhole"));
}

/// A response of `len` bytes sent on the timer five times, never
/// acknowledged, while the client keeps sending (its duplicate ACKs): no
/// fallback to smaller segments ever comes (Linux's `tcp_mtu_probing=0`).
/// `handshake`: captured, or the connection picked up after it (no MSS
/// known: the largest segment seen stands for full size).
fn never_acknowledged(len: usize, handshake: bool) -> Analysis {
    let mut sim = Sim::default();
    if handshake {
        sim.handshake();
    }
    sim.c(2000, 1, 1, PSH, 100);
    let t = 2500;
    sim.s(t, 1, 101, PSH, len);
    for back in [200_000, 600_000, 1_400_000, 3_000_000, 6_200_000] {
        sim.s(t + back, 1, 101, PSH, len);
        sim.c(t + back + 1000, 101, 1, ACK, 0);
    }
    sim.run()
}

#[test]
fn only_a_segment_a_link_could_refuse_makes_a_black_hole() {
    // Full size (1460 B) re-sent and never through: the black hole
    // without a fallback.
    assert_eq!(
        kinds(&never_acknowledged(1460, true))[0],
        "path_mtu_blackhole"
    );
    // 25 B fit every link (IPv4 carries 536 B of data on any path): the
    // same re-sends on a connection picked up mid-stream, where 25 B is the
    // largest segment seen, are a loss of another kind (nDPI's waze.pcap: a
    // peer whose NAT mapping was gone).
    let small = never_acknowledged(25, false);
    assert!(
        !kinds(&small).contains(&"path_mtu_blackhole"),
        "{:?}",
        kinds(&small)
    );
    assert_eq!(kinds(&small)[0], "retransmission_timeout");
}

/// A connection whose handshake ACK and request the server ignores (its
/// accept queue full) until the client's third try of the request, when
/// `ignored`; otherwise the request is acknowledged at once.
fn request_ignored(ignored: bool) -> Analysis {
    let mut sim = Sim::default();
    sim.handshake();
    sim.c(1100, 1, 1, PSH, 100);
    let mut t = 1100;
    if ignored {
        for back in [200_000, 600_000] {
            sim.c(1100 + back, 1, 1, PSH, 100);
            t = 1100 + back;
        }
    }
    sim.s(t + 500, 1, 101, ACK, 0)
        .s(t + 600, 1, 101, PSH, 500)
        .c(t + 1600, 101, 501, ACK, 0);
    sim.run()
}

#[test]
fn listen_queue_overflow_when_the_server_ignores_a_completed_handshake() {
    let a = request_ignored(true);
    let f = &a.findings[0];
    assert_eq!(
        (f.kind, f.culprit.role),
        ("listen_queue_overflow", "server")
    );
    assert_eq!(f.details["ack_drops"], 1);
    assert!(
        !kinds(&a).contains(&"retransmission_timeout"),
        "{:?}",
        kinds(&a)
    );
    assert!(kinds(&request_ignored(false)).is_empty());
}

impl Sim {
    /// Writes `head` over the start of the last frame's payload of `len` bytes.
    fn payload_starts(&mut self, head: &[u8], len: usize) -> &mut Self {
        let f = &mut self.frames.last_mut().unwrap().1;
        let at = f.len() - len;
        f[at..at + head.len()].copy_from_slice(head);
        self
    }
}

/// A TLS 1.2 connection: ClientHello, the server's flight after
/// `server_us`, the client's key exchange, the server's Finished, then one
/// request and its response (records: 22 handshake, 20 CCS, 23 data).
fn tls12(server_us: i64) -> Analysis {
    let mut sim = Sim::default();
    sim.handshake();
    let hello = 200;
    sim.c(1100, 1, 1, PSH, hello)
        .payload_starts(&[22, 3, 1, 0, 195, 1], hello);
    let t = 1100 + 500 + server_us;
    sim.s(t, 1, 201, PSH, 1400)
        .payload_starts(&[22, 3, 3, 5, 0, 2], 1400);
    sim.c(t + 600, 201, 1401, PSH, 126)
        .payload_starts(&[22, 3, 3, 0, 70, 16], 126);
    sim.s(t + 1200, 1401, 327, PSH, 51)
        .payload_starts(&[20, 3, 3, 0, 1, 1], 51);
    sim.c(t + 1300, 327, 1452, PSH, 120)
        .payload_starts(&[23, 3, 3, 0, 115], 120);
    sim.s(t + 1900, 1452, 447, PSH, 700)
        .payload_starts(&[23, 3, 3, 2, 183], 700);
    sim.c(t + 2500, 447, 2152, ACK, 0);
    sim.run()
}

#[test]
fn tls_handshake_rounds_are_not_requests_and_a_slow_key_exchange_is_the_servers() {
    let slow = tls12(20_000);
    // One exchange: the request. The two handshake rounds are its setup.
    assert_eq!(slow.capture.exchanges, 1);
    assert_eq!(kinds(&slow)[0], "tls_handshake");
    let f = &slow.findings[0];
    assert_eq!(f.culprit.role, "server");
    assert_eq!(f.details["cause"], "key_exchange");
    assert_eq!(f.details["round_trips"], 2.0);
    let b = &slow
        .capture
        .latency_budget
        .as_ref()
        .unwrap()
        .median
        .parts_ms;
    let kx = b.iter().find(|p| p.0 == "tls_key_exchange").unwrap().1;
    assert!((19.0..=21.0).contains(&kx), "{kx}");
    // A server that answers at once: no finding, the exchange still one.
    let quick = tls12(50);
    assert_eq!(quick.capture.exchanges, 1);
    assert!(
        !kinds(&quick).contains(&"tls_handshake"),
        "{:?}",
        kinds(&quick)
    );
}

#[test]
fn handshake_bytes_inside_a_plain_connection_are_not_tls() {
    // An HTTP connection whose second request happens to start 22 3 1.
    let mut sim = Sim::default();
    sim.handshake();
    sim.c(1100, 1, 1, PSH, 100)
        .payload_starts(b"GET / HTTP/1.1\r\n", 100);
    sim.s(1700, 1, 101, PSH, 200)
        .payload_starts(b"HTTP/1.1 200 OK\r\n", 200);
    sim.c(2000, 101, 201, PSH, 100)
        .payload_starts(&[22, 3, 1, 0, 90, 1], 100);
    sim.s(30_000, 201, 201, PSH, 200);
    sim.c(30_500, 201, 401, ACK, 0);
    let a = sim.run();
    assert_eq!(a.capture.exchanges, 2);
    assert!(!kinds(&a).contains(&"tls_handshake"));
}
