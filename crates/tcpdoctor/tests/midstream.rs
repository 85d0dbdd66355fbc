//! A capture that begins after the handshake (and whose ACKs give no
//! undelayed sample) has no round trip of its own: the server is blamed only
//! for what lies beyond the quickest answer it gave, when its packets crossed
//! a router before the capture point; on the server's own host all of the
//! wait is its own.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `analyze --from 0.1` (after the handshake) of a fixture: its JSON.
fn mid_stream(fixture: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(fixture);
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["analyze", "--format", "json", "--from", "0.1"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The first finding's kind and typical delay, and the first connection's
/// slowest exchange's budget part `part` (ms, 0 when absent).
fn verdict(v: &Value, part: &str) -> (String, f64, f64) {
    let f = &v["findings"][0];
    let c = &v["connections"][0];
    assert!(c["rtt_ms"].is_null(), "the cut keeps no round trip: {c}");
    let budget = &c["slowest_exchanges"][0]["budget_ms"];
    (
        f["kind"].as_str().unwrap().to_string(),
        f["typical_delay_ms"].as_f64().unwrap(),
        budget[part].as_f64().unwrap_or(0.0),
    )
}

#[test]
fn beyond_a_router_the_quickest_answer_is_the_paths() {
    // Captured at the client, 35 ms from a server that thinks 300 ms: the
    // server's TTL is decremented, and it acknowledged the request at once
    // (one round trip): that much of the wait is the path's.
    let v = mid_stream("server-delay.client.pcap");
    let (kind, typical, network) = verdict(&v, "network");
    assert_eq!(kind, "server_delay");
    assert!((295.0..=306.0).contains(&typical), "{typical}");
    assert!((33.0..=37.0).contains(&network), "{network}");
}

#[test]
fn on_the_servers_host_the_wait_is_the_servers() {
    // The same case captured on the server: its TTL is its initial one, no
    // router lies between, and none of the wait goes to the path.
    let v = mid_stream("server-delay.server.pcap");
    let (kind, typical, network) = verdict(&v, "network");
    assert_eq!(kind, "server_delay");
    assert!((295.0..=306.0).contains(&typical), "{typical}");
    assert_eq!(network, 0.0);
}
