//! A TLS message that begins with one small record of a multiplexed
//! protocol's control frame (HTTP/2's SETTINGS ACK) starts with the data
//! after it: the pause between them is the sender's time before its message,
//! not inside it.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

mod common;

use common::{fixture, frames};

/// The first finding of `kind`.
fn finding(v: &Value, kind: &str) -> Value {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} finding"))
        .clone()
}

/// The exchange of connection `stream` (tshark's `tcp.stream`) with `index`.
fn exchange(v: &Value, stream: u64, index: u64) -> Value {
    v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["tcp_stream"] == stream)
        .flat_map(|c| c["slowest_exchanges"].as_array().unwrap())
        .find(|e| e["index"] == index)
        .unwrap_or_else(|| panic!("no exchange {index} on stream {stream}"))
        .clone()
}

/// curl over HTTP/2 (nDPI's capture): the server acknowledges the client's
/// SETTINGS at once (frame 22, a 33-byte record that also acknowledges the
/// request), and its response's HEADERS come 784 ms later (frame 24, as
/// tshark shows). The server took that time before its response.
#[test]
fn a_servers_settings_ack_does_not_start_its_response() {
    let v = common::analyze(&fixture("corpus/ndpi-443-curl.pcap"), &[]);
    let f = finding(&v, "server_delay");
    assert_eq!(f["culprit"]["role"], "server");
    assert_eq!(f["details"]["where"], "before_response", "{f:#}");
    let frames = frames(&f);
    // The request's last segment, then the response's first.
    assert_eq!(frames.first(), Some(&20), "{frames:?}");
    assert_eq!(frames.last(), Some(&24), "{frames:?}");
    // Frames: setup, request first and last, request ACKed, response first
    // and last. The response's bytes are tshark's `tcp.len` summed over the
    // server's frames 24 to 95.
    let e = exchange(&v, 0, 2);
    assert_eq!(
        e["frames"],
        serde_json::json!([16, 20, 22, 24, 95]),
        "{e:#}"
    );
    assert_eq!(e["response_bytes"], 62652);
}

/// Responses that begin with a record of data (TLS 1.3, 287 and 517 bytes)
/// start there, though a small record follows them.
#[test]
fn a_response_that_begins_with_data_is_not_trimmed() {
    let v = common::analyze(&fixture("corpus/zeek-tls13-ech.pcap"), &[]);
    let e = exchange(&v, 2, 3);
    assert_eq!(
        e["frames"],
        serde_json::json!([60, 60, 61, 62, 63]),
        "{e:#}"
    );
    assert_eq!(e["response_bytes"], 287 + 31);
    let e = exchange(&v, 1, 2);
    assert_eq!(e["frames"][3], 22, "{e:#}");
    assert_eq!(e["response_bytes"], 517);
}

/// Picked up mid-stream (no handshake in the capture), an HTTP/2 client's
/// request (frames 3-4, records of application data) is answered by a
/// 33-byte SETTINGS ACK at once (frame 8) and the response 31 ms later
/// (frame 12): the server's time before its response.
#[test]
fn mid_stream_tls_is_told_by_its_records() {
    let v = common::analyze(&fixture("corpus/ndpi-http-ipv6.pcap"), &[]);
    let f = finding(&v, "server_delay");
    assert_eq!(f["details"]["where"], "before_response", "{f:#}");
    assert_eq!(frames(&f), vec![4, 7, 12]);
}
