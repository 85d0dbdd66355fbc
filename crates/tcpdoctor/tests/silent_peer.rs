//! A peer that stops answering: data re-sent on the timer and never
//! acknowledged is not a loss that recovered, and a close nobody waits for
//! costs nobody anything. From lab case `peer-gone`, `rto.client.pcap`
//! (fixtures/README.md) and nDPI's captures (fixtures/corpus/CORPUS.md, item
//! 21), read frame by frame with tshark.

#![allow(clippy::unwrap_used)]

mod common;

use common::{fixture, kinds};

/// The `retransmission_timeout` findings of `v` and how many of their
/// episodes the peer never answered.
fn never_answered(v: &serde_json::Value) -> Vec<u64> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "retransmission_timeout")
        .map(|f| f["details"]["never_answered"].as_u64().unwrap())
        .collect()
}

/// Lab case `peer-gone`: from 0.5 s the server answers nothing and the 4th
/// request is re-sent on the timer until the client gives up. That loss was
/// never recovered, and the finding says the peer stopped answering. In
/// `rto.client.pcap` the outage ends and the re-sent data is acknowledged:
/// a loss the timer recovered.
#[test]
fn data_a_peer_never_answers_is_no_recovered_loss() {
    let v = common::analyze(&fixture("peer-gone.client.pcap"), &[]);
    assert_eq!(
        kinds(&v).first().map(String::as_str),
        Some("retransmission_timeout/network")
    );
    assert_eq!(never_answered(&v), [1]);
    let why = v["findings"][0]["explanation"].as_str().unwrap();
    assert!(why.contains("stopped answering"), "{why}");
    let v = common::analyze(&fixture("rto.client.pcap"), &[]);
    assert_eq!(never_answered(&v), [0]);
    let why = v["findings"][0]["explanation"].as_str().unwrap();
    assert!(!why.contains("stopped answering"), "{why}");
    // nDPI's conncheck: three servers answer the handshake, then nothing.
    let v = common::analyze(&fixture("corpus/ndpi-conncheck.pcap"), &[]);
    assert_eq!(never_answered(&v), [1, 1, 1]);
}

/// nDPI's tls_alert, stream 1: the client's closing alert and its FIN are
/// re-sent for 3.7 s to a server that never answers. The client had
/// finished: nobody waited, and nothing is named.
#[test]
fn a_goodbye_nobody_waits_for_is_no_loss() {
    let v = common::analyze(&fixture("corpus/ndpi-tls-alert.pcap"), &[]);
    assert_eq!(kinds(&v), Vec::<String>::new());
    assert_eq!(
        v["connections"][1]["retransmissions"]["client_to_server"],
        4
    );
}
