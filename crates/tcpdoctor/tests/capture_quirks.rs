//! What a capture does to packets is not what the endpoints did: a packet
//! captured twice, a header whose length the frame contradicts, loopback's
//! 64 KB segments. Each capture is from nDPI's or Zeek's test data
//! (fixtures/corpus/CORPUS.md, items 17-19 and 22-26), read frame by frame with
//! tshark; a sender that shows Nagle off by its own segments; a segment
//! overtaken on the path; a re-send the receiver reports as a duplicate; a
//! capture that sees one direction; files merged out of time order.

#![allow(clippy::unwrap_used)]

mod common;

use common::{fixture, kinds};

/// No finding (as kind/role) starts with any of `prefixes`.
fn assert_none_of(k: &[String], prefixes: &[&str]) {
    for p in prefixes {
        assert!(!k.iter().any(|x| x.starts_with(p)), "{p} in {k:?}");
    }
}

/// How many of the capture's warnings contain `text`.
fn warnings_with(v: &serde_json::Value, text: &str) -> usize {
    v["capture"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w.as_str().unwrap().contains(text))
        .count()
}

/// Every packet of psiphon3.pcap is there twice: same IP ID, same TSval, the
/// copy up to 7 ms later and after other packets (ClientHello frames 6 and
/// 8, IP ID 0x9f8c). Copies are no re-sends: no loss is named, and the
/// 13 data segments and 2 SYNs seen again are counted as duplicates.
#[test]
fn a_packet_captured_twice_is_no_loss() {
    let v = common::analyze(&fixture("corpus/ndpi-psiphon3.pcap"), &[]);
    let k = kinds(&v);
    assert_none_of(
        &k,
        &["packet_loss/", "retransmission_timeout/", "syn_retransmit/"],
    );
    assert_eq!(v["capture"]["duplicates"], 15);
    assert_eq!(
        v["connections"][0]["retransmissions"]["client_to_server"],
        0
    );
    assert_eq!(
        k.first().map(String::as_str),
        Some("network_latency/network")
    );
}

/// Frames 7, 26, 35, 39 and 85 of zeek-tcp-reassembly.pcap say more bytes
/// of IP than the frame holds (1500 in 1492; tshark: "IPv4 total length
/// exceeds packet length"): the malformed headers are reported. (Their
/// payload, held to what the frame holds, is compared with tshark's count by
/// tests/e2e/oracle.py.)
#[test]
fn a_length_the_frame_does_not_hold_is_not_data() {
    let v = common::analyze(&fixture("corpus/zeek-tcp-reassembly.pcap"), &[]);
    let warnings = v["capture"]["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w.as_str().unwrap().starts_with(
            "5 TCP segment(s) had an IP total length beyond the frame's length on the wire"
        )),
        "{warnings:?}"
    );
}

/// A Raft leader sends 40-160 B every 125 ms over loopback (MSS 65483, a
/// 64 KB window): no flight comes near the window, so the window limits
/// nothing.
#[test]
fn small_messages_on_loopback_do_not_fill_the_window() {
    let v = common::analyze(&fixture("corpus/ndpi-raft.pcap"), &[]);
    let k = kinds(&v);
    assert!(!k.iter().any(|x| x == "receive_window_limited"), "{k:?}");
}

/// nDPI's ieee_c37118: a measurement unit sends a 54 B frame every 20 ms,
/// the second before the first is acknowledged (frames 10, 11, ACK 12):
/// Nagle is off on its socket, so no hold of its is Nagle's. nDPI's EAQ:
/// the 1382 B segment before a 2764 B one is a full segment through a VPN
/// (MSS 1460 announced), not a small one.
#[test]
fn nagle_is_not_named_where_the_packets_disprove_it() {
    for f in ["corpus/ndpi-ieee-c37118.pcap", "corpus/ndpi-eaq.pcap"] {
        let k = kinds(&common::analyze(&fixture(f), &[]));
        assert!(
            !k.iter().any(|x| x.starts_with("nagle_delayed_ack/")),
            "{f}: {k:?}"
        );
    }
    // Where the small segments wait for each ACK, Nagle is still named.
    let k = kinds(&common::analyze(
        &fixture("corpus/ndpi-coap_mqtt.pcap"),
        &[],
    ));
    assert_eq!(
        k.first().map(String::as_str),
        Some("nagle_delayed_ack/client")
    );
}

/// nDPI's google_ssl: the first two segments of a response arrive 0.3 and
/// 1.3 s after its tail, numbered before it (IP IDs 0x797e and 0x797f,
/// the tail 0x7980): originals overtaken on the path, not re-sends of
/// data lost before the capture. The server's later re-sends repeat data
/// already acknowledged. No loss is named.
#[test]
fn a_segment_overtaken_on_the_path_is_no_loss() {
    let v = common::analyze(&fixture("corpus/ndpi-google-ssl.pcap"), &[]);
    let k = kinds(&v);
    assert_none_of(&k, &["packet_loss/", "retransmission_timeout/"]);
    assert_eq!(k.first().map(String::as_str), Some("server_delay/server"));
}

/// nDPI's punycode-idn: a request sent again after 145 ms; the ACK that
/// covers it (frame 10) is followed 6 µs later by one reporting the re-sent
/// bytes as a duplicate (D-SACK, frame 11): the original had arrived. No
/// loss is named.
#[test]
fn a_re_send_reported_as_a_duplicate_in_the_next_ack_is_no_loss() {
    let v = common::analyze(&fixture("corpus/ndpi-punycode-idn.pcap"), &[]);
    let k = kinds(&v);
    assert_none_of(&k, &["packet_loss/", "retransmission_timeout/"]);
    assert_eq!(
        v["connections"][0]["retransmissions"]["client_to_server"],
        1
    );
}

/// nDPI's http_asymmetric: three GETs (frames 4, 10, 16) whose answers were
/// captured with other addresses (192.168.1.146:80 -> 192.168.1.103:1044, a
/// NAT between): each half is a connection seen one way. Without the other
/// side's ACKs a pause proves nothing (the base named the browser's 89 ms
/// between its requests client_delay): nothing is named, and the capture
/// says which connections it saw one way. A capture of both directions says
/// nothing of the kind.
#[test]
fn a_connection_seen_one_way_proves_no_wait() {
    let v = common::analyze(&fixture("corpus/ndpi-http-asymmetric.pcapng"), &[]);
    assert_eq!(kinds(&v), Vec::<String>::new());
    assert_eq!(
        warnings_with(&v, "2 of 2 connection(s) were captured one way only"),
        1
    );
    let v = common::analyze(&fixture("corpus/ndpi-punycode-idn.pcap"), &[]);
    assert_eq!(warnings_with(&v, "captured one way only"), 0);
}

/// nDPI's yandex: captures joined out of time order (frame 86 is at 1843 s,
/// after frame 68 at 3803 s; frame 104 at -342 s). The connection of frames
/// 86-103 (18 packets, one handshake) was cut into a connection per packet,
/// each past its idle deadline on the later stretch's clock the moment it
/// opened. tshark counts 9 conversations; so does the analysis now.
#[test]
fn connections_captured_before_an_earlier_stretch_are_whole() {
    let v = common::analyze(&fixture("corpus/ndpi-yandex.pcapng"), &[]);
    assert_eq!(v["capture"]["connections"], 9);
    let c = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["client"] == "192.168.1.249:42954")
        .unwrap();
    assert_eq!(c["packets"], 18);
    assert_eq!(c["exchanges"], 1);
}

/// nDPI's raft: the leader's AppendEntries every 125 ms (frames 23, 27, 31
/// ...), each acknowledged within 10 us and never answered. Each is a
/// message of its own, not one request paused inside: no client_delay.
#[test]
fn messages_nobody_answers_are_not_one_request_paused_inside() {
    let v = common::analyze(&fixture("corpus/ndpi-raft.pcap"), &[]);
    assert_none_of(&kinds(&v), &["client_delay/"]);
}
