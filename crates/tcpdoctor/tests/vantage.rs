//! The header's vantage and a finding's words about it agree.

#![allow(clippy::unwrap_used)]

use tcpdoctor_engine::{Engine, Options};
use tcpdoctor_wire::build::FrameSpec;
use tcpdoctor_wire::{LinkType, TcpFlags, Timestamp};

const SYN: u16 = TcpFlags::SYN;
const ACK: u16 = TcpFlags::ACK;
const PSH: u16 = TcpFlags::PSH | TcpFlags::ACK;

/// An Ethernet frame between 10.0.0.1:`port` and 10.0.0.2:80, the server's
/// with TTL `server_ttl`.
fn frame(
    port: u16,
    client: bool,
    seq: u32,
    ack: u32,
    flags: u16,
    len: usize,
    server_ttl: u8,
) -> Vec<u8> {
    let (c, s) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let mut f = FrameSpec {
        src: if client { c } else { s },
        dst: if client { s } else { c },
        src_port: if client { port } else { 80 },
        dst_port: if client { 80 } else { port },
        seq,
        ack,
        flags,
        window: 65000,
        mss: (flags & SYN != 0).then_some(1460),
        window_scale: (flags & SYN != 0).then_some(7),
        payload_len: len,
    }
    .ethernet();
    if !client {
        // The IPv4 TTL: one router between the server and the capture.
        f[14 + 8] = server_ttl;
    }
    f
}

#[test]
fn a_syn_retransmit_finding_does_not_contradict_the_vantage_line() {
    // Connection 1 tells the vantage: the server's packets come through a
    // router (TTL 63), the client's do not (64). Connection 2's SYN waited
    // for a retry; its own packets tell nothing (initial TTLs, both sides of
    // its handshake 0.1 ms apart).
    let mut frames: Vec<(i64, Vec<u8>)> = vec![
        (0, frame(40001, true, 0, 0, SYN, 0, 63)),
        (20_000, frame(40001, false, 0, 1, SYN | ACK, 0, 63)),
        (20_010, frame(40001, true, 1, 1, ACK, 0, 63)),
        (21_000, frame(40001, true, 1, 1, PSH, 100, 63)),
        (41_000, frame(40001, false, 1, 101, PSH, 500, 63)),
        (41_010, frame(40001, true, 101, 501, ACK, 0, 63)),
    ];
    let t = 100_000;
    frames.extend([
        (t, frame(40002, true, 0, 0, SYN, 0, 64)),
        (t + 1_000_000, frame(40002, true, 0, 0, SYN, 0, 64)),
        (t + 1_000_100, frame(40002, false, 0, 1, SYN | ACK, 0, 64)),
        (t + 1_000_110, frame(40002, true, 1, 1, ACK, 0, 64)),
        (t + 1_000_200, frame(40002, true, 1, 1, PSH, 100, 64)),
        (t + 1_000_400, frame(40002, false, 1, 101, PSH, 500, 64)),
        (t + 1_000_410, frame(40002, true, 101, 501, ACK, 0, 64)),
    ]);
    let mut e = Engine::new(Options::default());
    for (us, f) in &frames {
        e.push(
            Timestamp::from_nanos(1_700_000_000_000_000_000 + us * 1000),
            LinkType::Ethernet,
            f,
            f.len() as u32,
        );
    }
    let a = e.finish();
    let v = a.capture.vantage.as_ref().expect("a vantage");
    assert_eq!((v.place, v.from), ("client", "ttl"));
    let f = a
        .findings
        .iter()
        .chain(&a.minor_findings)
        .find(|f| f.kind == "syn_retransmit")
        .expect("syn_retransmit");
    assert!(
        !f.explanation.contains("cannot be told from the packets"),
        "{}",
        f.explanation
    );
    assert!(
        f.explanation
            .contains("This connection's own packets cannot tell")
            && f.explanation
                .contains("the vantage line tells it from the capture's other connections"),
        "{}",
        f.explanation
    );
}
