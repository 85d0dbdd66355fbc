//! Compact handshakes against full tracking: the same segments reported, the
//! same connection state at every exchange and close, whatever the packets.

use super::*;
use std::collections::BTreeMap;
use std::net::IpAddr;

use proptest::prelude::*;
use tcpdoctor_wire::TcpFlags;

const C_ISN: u32 = 1000;
const S_ISN: u32 = 5000;

/// Everything an analyzer can read of a connection (its Debug form holds
/// every field, private ones too), but whether it was compact.
fn digest(c: &Connection) -> String {
    let mut c = c.clone();
    c.compact = false;
    let (cs, sc) = (Dir::ClientToServer, Dir::ServerToClient);
    format!(
        "{c:?}\nfinished {} substantial {} half_open {} in flight {} {}",
        c.is_finished(),
        c.is_substantial(),
        c.is_half_open(),
        c.half(cs).in_flight(),
        c.half(sc).in_flight(),
    )
}

/// Per connection id: what the analyzer was told, in order.
#[derive(Default)]
struct Record {
    /// The frame being pushed: segments of other frames are replayed ones
    /// (a compact connection's handshake), shown later than in full tracking.
    pushing: u64,
    /// Per connection: each event, and the connection's state when it was
    /// reported as it happened (replayed segments have none).
    events: BTreeMap<u64, Vec<(String, Option<String>)>>,
}

impl Analyzer for Record {
    type Conn = ();
    fn segment(&mut self, c: &Connection, _: &mut (), s: &Segment<'_>) {
        let state = (s.frame == self.pushing).then(|| digest(c));
        // A compact handshake keeps no raw option bytes for its replay
        // (what they said is in the connection): the rest must be equal.
        let s = Segment { options: &[], ..*s };
        let e = (format!("segment {s:?}"), state);
        self.events.entry(c.id).or_default().push(e);
    }
    fn exchange(&mut self, c: &Connection, _: &mut (), ex: &Exchange) {
        let e = (format!("exchange {ex:?}"), Some(digest(c)));
        self.events.entry(c.id).or_default().push(e);
    }
    fn close(&mut self, c: &Connection, _: &mut ()) {
        let e = ("close".to_string(), Some(digest(c)));
        self.events.entry(c.id).or_default().push(e);
    }
}

/// One packet: (ms since the previous one, the segment).
type Pkt = (i64, TcpSegment<'static>);

type Events = BTreeMap<u64, Vec<(String, Option<String>)>>;

fn run(pkts: &[Pkt], compact: bool) -> Events {
    let config = Config {
        compact_handshakes: compact,
        ..Config::default()
    };
    let mut t = Tracker::new(Record::default(), config);
    let mut ms = 0;
    for (i, (dt, s)) in pkts.iter().enumerate() {
        ms += dt;
        let frame = i as u64 + 1;
        t.analyzer_mut().pushing = frame;
        t.push(frame, Timestamp::from_nanos(ms * 1_000_000), s);
    }
    let mut r = t.finish();
    r.pushing = u64::MAX;
    r.events
}

fn assert_same(pkts: &[Pkt]) {
    let full = run(pkts, false);
    let compact = run(pkts, true);
    assert_eq!(full.len(), compact.len(), "connections");
    for (id, events) in &full {
        let other = &compact[id];
        for (i, (a, b)) in events.iter().zip(other).enumerate() {
            assert_eq!(a.0, b.0, "connection {id}, event {i}");
            if let (Some(x), Some(y)) = (&a.1, &b.1) {
                assert_eq!(x, y, "connection {id}, event {i}: {}", a.0);
            }
        }
        assert_eq!(events.len(), other.len(), "connection {id}: events");
    }
}

const OPTS_SYN: &[u8] = &[
    2, 4, 5, 0xB4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
];
const OPTS_MSS: &[u8] = &[2, 4, 5, 0x8C];

#[allow(clippy::too_many_arguments)]
fn pkt(
    from_client: bool,
    port: u16,
    flags: u16,
    seq: u32,
    ack: u32,
    len: u32,
    window: u16,
    options_raw: &'static [u8],
    ttl: u8,
) -> TcpSegment<'static> {
    let (c, s): (IpAddr, IpAddr) = match "10.0.0.1".parse().ok().zip("10.0.0.2".parse().ok()) {
        Some(p) => p,
        None => unreachable!(),
    };
    let (src, dst, sp, dp) = if from_client {
        (c, s, port, 80)
    } else {
        (s, c, 80, port)
    };
    TcpSegment {
        src,
        dst,
        ttl,
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

const SYN: u16 = TcpFlags::SYN;
const ACK: u16 = TcpFlags::ACK;
const FIN: u16 = TcpFlags::FIN;
const RST: u16 = TcpFlags::RST;
const PSH: u16 = TcpFlags::PSH;

/// The plain handshake's packets (and the refusal), on client port `port`.
fn canonical(port: u16, refused: bool) -> Vec<Pkt> {
    let mut v = vec![(0, pkt(true, port, SYN, C_ISN, 0, 0, 64240, OPTS_SYN, 64))];
    if refused {
        v.push((1, pkt(false, port, RST | ACK, 0, C_ISN + 1, 0, 0, &[], 64)));
    } else {
        v.push((
            18,
            pkt(
                false,
                port,
                SYN | ACK,
                S_ISN,
                C_ISN + 1,
                0,
                65160,
                OPTS_SYN,
                63,
            ),
        ));
        v.push((
            2,
            pkt(true, port, ACK, C_ISN + 1, S_ISN + 1, 0, 502, &[], 64),
        ));
    }
    v
}

#[test]
fn plain_handshakes_and_what_follows_them() {
    // Each prefix of the handshake alone, then followed by a request, a
    // retry, a reset, a zero window, FINs.
    for refused in [false, true] {
        let hs = canonical(40000, refused);
        for n in 1..=hs.len() {
            let prefix = &hs[..n];
            assert_same(prefix);
            let follow: [Vec<Pkt>; 6] = [
                vec![(
                    1,
                    pkt(
                        true,
                        40000,
                        PSH | ACK,
                        C_ISN + 1,
                        S_ISN + 1,
                        100,
                        502,
                        &[],
                        64,
                    ),
                )],
                vec![(
                    1000,
                    pkt(true, 40000, SYN, C_ISN, 0, 0, 64240, OPTS_SYN, 64),
                )],
                vec![(
                    5,
                    pkt(
                        false,
                        40000,
                        SYN | ACK,
                        S_ISN,
                        C_ISN + 1,
                        0,
                        65160,
                        OPTS_SYN,
                        63,
                    ),
                )],
                vec![(1, pkt(true, 40000, RST, C_ISN + 1, 0, 0, 0, &[], 64))],
                vec![(
                    1,
                    pkt(true, 40000, ACK, C_ISN + 1, S_ISN + 1, 0, 0, &[], 64),
                )],
                vec![
                    (
                        1,
                        pkt(
                            true,
                            40000,
                            FIN | ACK,
                            C_ISN + 1,
                            S_ISN + 1,
                            0,
                            502,
                            &[],
                            64,
                        ),
                    ),
                    (
                        1,
                        pkt(
                            false,
                            40000,
                            FIN | ACK,
                            S_ISN + 1,
                            C_ISN + 2,
                            0,
                            509,
                            &[],
                            63,
                        ),
                    ),
                    (
                        1,
                        pkt(true, 40000, ACK, C_ISN + 2, S_ISN + 2, 0, 502, &[], 64),
                    ),
                ],
            ];
            for f in follow {
                let mut p = prefix.to_vec();
                p.extend(f);
                assert_same(&p);
            }
        }
    }
}

#[test]
fn half_open_connections_expire_alike() {
    // SYNs on many ports over 200 s: some answered, some refused, some not.
    let mut p = Vec::new();
    for i in 0..400u16 {
        let hs = canonical(20000 + i, i % 7 == 0);
        let n = 1 + usize::from(i % 3).min(hs.len() - 1);
        for (k, (dt, s)) in hs.into_iter().take(n).enumerate() {
            p.push((if k == 0 { 500 } else { dt }, s));
        }
    }
    assert_same(&p);
}

fn arb_pkt() -> impl Strategy<Value = Pkt> {
    let flags = prop::sample::select(vec![
        SYN,
        SYN | ACK,
        ACK,
        PSH | ACK,
        FIN | ACK,
        RST,
        RST | ACK,
        SYN | 0xC0,
        ACK | 0x40,
    ]);
    let delta = prop::sample::select(vec![0u32, 1, 2, 101, u32::MAX]);
    (
        any::<bool>(),
        flags,
        delta.clone(),
        delta,
        prop::sample::select(vec![0u32, 1, 100]),
        prop::sample::select(vec![0u16, 502, 65535]),
        prop::sample::select(vec![&[][..], OPTS_SYN, OPTS_MSS]),
        prop::sample::select(vec![0u8, 64]),
        prop::sample::select(vec![0i64, 1, 30, 80_000]),
    )
        .prop_map(|(c, flags, ds, da, len, window, opts, ttl, dt)| {
            let (seq, ack) = if c {
                (C_ISN.wrapping_add(ds), S_ISN.wrapping_add(da))
            } else {
                (S_ISN.wrapping_add(ds), C_ISN.wrapping_add(da))
            };
            let ack = if flags & ACK == 0 && da == 0 { 0 } else { ack };
            (dt, pkt(c, 40000, flags, seq, ack, len, window, opts, ttl))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_packets_after_any_handshake_prefix(
        prefix in 0usize..=3,
        refused in any::<bool>(),
        rest in prop::collection::vec(arb_pkt(), 0..8),
    ) {
        let hs = canonical(40000, refused);
        let mut p: Vec<Pkt> = hs.into_iter().take(prefix).collect();
        p.extend(rest);
        assert_same(&p);
    }
}
