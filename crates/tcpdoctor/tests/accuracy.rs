//! fixtures/ACCURACY.md is the project's published accuracy: every labelled
//! capture, the cause it was made to show, and what tcpdoctor reports first.
//! This test re-runs every row: the "reported" column must be what the binary
//! says today, "match" must be right, and the expected cause must come first.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod common;
use common::reported;

#[test]
fn published_accuracy_table_is_current_and_every_cause_comes_first() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let table = std::fs::read_to_string(dir.join("ACCURACY.md")).unwrap();
    let mut rows = 0;
    let mut matches = 0;
    let mut vantages = std::collections::BTreeSet::new();
    let mut kinds = std::collections::BTreeMap::<String, u32>::new();
    for line in table.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (file, vantage, expected, recorded, matched) = (
            cells[1].trim_matches('`'),
            cells[2],
            cells[3],
            cells[4],
            cells[5],
        );
        let now = reported(&dir.join(file));
        assert_eq!(
            now, recorded,
            "{file}: the table says {recorded}, tcpdoctor says {now}"
        );
        assert_eq!(
            matched,
            if expected == now { "yes" } else { "no" },
            "{file}"
        );
        assert_eq!(now, expected, "{file}: expected {expected} first");
        matches += 1;
        rows += 1;
        vantages.insert(vantage.to_string());
        *kinds
            .entry(expected.split('/').next().unwrap().to_string())
            .or_default() += 1;
    }
    let count = format!("{matches} of {rows} captures: the expected cause is reported first");
    assert!(table.contains(&count), "the table should say {count:?}");
    // The corpus: at least 20 captures, three vantage points.
    assert!(rows >= 20, "{rows} rows");
    assert_eq!(
        vantages.into_iter().collect::<Vec<_>>(),
        ["client", "router", "server"]
    );
    assert!(kinds["none"] >= 5, "{kinds:?}");
}

fn analyze(path: &Path) -> Value {
    analyze_args(&[path.to_str().unwrap()])
}

/// The time the findings of `kind` lost, in all (ms).
fn lost_to(v: &Value, kind: &str) -> f64 {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind)
        .map(|f| f["total_delay_ms"].as_f64().unwrap())
        .sum()
}

/// A fixture's analysis, and each budget part's share of its mean exchange.
fn budget_shares(file: &str) -> (Value, impl Fn(&str) -> f64) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let v = analyze(&root.join(file));
    let m = v["capture"]["latency_budget"]["mean"].clone();
    let total = m["total_ms"].as_f64().unwrap();
    (v, move |part: &str| {
        m["parts_ms"][part].as_f64().unwrap_or(0.0) / total
    })
}

/// Whether `kind` is among the findings, major or minor.
fn named(v: &Value, kind: &str) -> bool {
    ["findings", "minor_findings"]
        .iter()
        .flat_map(|k| v[k].as_array().unwrap().iter())
        .any(|f| f["kind"] == kind)
}

fn sum(parts: &Value) -> f64 {
    parts
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum()
}

#[test]
fn every_budget_adds_up_to_its_exchange() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().contains(".pcap") {
            continue;
        }
        let v = analyze(&path);
        for c in v["connections"].as_array().unwrap() {
            for e in c["slowest_exchanges"].as_array().unwrap() {
                let (total, parts) = (e["duration_ms"].as_f64().unwrap(), sum(&e["budget_ms"]));
                // Within 1% (and the rounding of each part to 1 µs).
                assert!(
                    (parts - total).abs() <= 0.01 * total + 0.01,
                    "{}: {e}",
                    path.display()
                );
                checked += 1;
            }
        }
        if let Some(b) = v["capture"]["latency_budget"].as_object() {
            let m = &b["median"];
            let (total, parts) = (m["total_ms"].as_f64().unwrap(), sum(&m["parts_ms"]));
            assert!(
                (parts - total).abs() <= 0.01 * total + 0.01,
                "{}: {m}",
                path.display()
            );
        }
    }
    assert!(checked > 50, "{checked}");
}

/// The median exchange's budget names the cause the capture was made to show.
#[test]
fn the_median_budget_is_led_by_the_cause() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    for (file, part, share) in [
        ("nginx-nodelay-off.server.pcap", "nagle_delayed_ack", 0.9),
        ("jdk-default.client.pcap", "nagle_delayed_ack", 0.9),
        ("upload-rcvbuf4k.server.pcap", "window_wait", 0.9),
        ("zero-window.server.pcap", "reader_wait", 0.8),
        ("rto.client.pcap", "retransmission_wait", 0.3),
        ("server-delay.client.pcap", "server", 0.85),
        ("server-delay-inside.client.pcap", "server", 0.85),
        ("server-delay-inside.server.pcap", "server", 0.95),
        ("client-delay.server.pcap", "client_idle", 0.9),
        ("syn-retransmit.client.pcap", "syn_retry_wait", 0.9),
        ("network-latency.client.pcap", "network", 0.9),
    ] {
        let v = analyze(&dir.join(file));
        let m = &v["capture"]["latency_budget"]["median"];
        let got = m["parts_ms"][part].as_f64().unwrap_or(0.0) / m["total_ms"].as_f64().unwrap();
        assert!(
            got >= share,
            "{file}: {part} is {got:.2} of the median exchange: {m}"
        );
    }
}

/// A pause inside a response that an ACK ended, with the receiver's window
/// open and nothing sent again, is the sender's congestion window: on a
/// 400 ms path whose 89 KB download comes in flights a round trip apart
/// (a capture made outside the project), those round trips are claimed, not
/// left to `transfer`. A transfer moving at the path's rate, whose pauses
/// are shorter than half a round trip, is the path's `bandwidth` (and the
/// rest of its time, a sender still ramping up, `transfer`), not a window.
#[test]
fn flights_released_by_acks_are_the_congestion_windows() {
    let share = |file: &str, part: &str| budget_shares(file).1(part);
    let flights = share("corpus/ndpi-exe-download-as-png.pcap", "congestion_wait");
    assert!(flights >= 0.3, "congestion_wait {flights:.2}");
    let moving = share("corpus/ndpi-exe-download-as-png.pcap", "transfer");
    assert!(moving <= 0.15, "transfer {moving:.2}");
    let rate = share("bulk-healthy.client.pcap", "bandwidth")
        + share("bulk-healthy.client.pcap", "transfer");
    assert!(rate >= 0.6, "bulk-healthy bandwidth and transfer {rate:.2}");
}

/// A download through a 9.3 Mbit/s shaper (a TBF with a queue) is moved at
/// the shaper's rate: the connection's delivery rate is the shaper's, less
/// the headers (1448 of every 1514 bytes on the wire are payload), and the
/// transfer's time is the path's `bandwidth`, with nothing left unexplained.
/// A server pausing inside its response moves its bytes at no measured rate
/// (each pause ends a write): its time stays the server's, none bandwidth.
#[test]
fn a_transfer_at_the_bottlenecks_rate_is_the_bandwidths_time() {
    let (v, share) = budget_shares("policer-shaped.client.pcap");
    let rate = v["connections"][0]["delivery_rate_mbit_s"]["server_to_client"]
        .as_f64()
        .expect("a delivery rate");
    let payload = 9.3 * 1448.0 / 1514.0;
    assert!(
        (payload * 0.95..=payload * 1.05).contains(&rate),
        "{rate} Mbit/s, the shaper's payload rate {payload:.2}"
    );
    assert!(
        share("bandwidth") >= 0.8,
        "bandwidth {:.2}",
        share("bandwidth")
    );
    assert!(
        share("transfer") <= 0.02,
        "transfer {:.2}",
        share("transfer")
    );
    let (_, share) = budget_shares("server-delay-inside.client.pcap");
    assert!(
        share("bandwidth") <= 0.01,
        "bandwidth {:.2}",
        share("bandwidth")
    );
    assert!(share("server") >= 0.8, "server {:.2}", share("server"));
}

/// Every share is of one stated total and overlapping time is claimed once:
/// on every capture, the findings' shares add up to at most the whole.
#[test]
fn shares_of_every_capture_add_up_to_at_most_the_whole() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !(name.ends_with(".pcap") || name.ends_with(".pcapng")) {
            continue;
        }
        let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
            .args(["analyze", "--format", "json", path.to_str().unwrap()])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let shares: Vec<f64> = ["findings", "minor_findings"]
            .iter()
            .flat_map(|k| v[k].as_array().unwrap().clone())
            .map(|f| f["share_of_time"].as_f64().unwrap())
            .collect();
        // Each share is rounded to 0.001.
        let slack = 0.0005 * shares.len() as f64;
        let sum: f64 = shares.iter().sum();
        assert!(sum <= 1.0 + slack, "{name}: shares add up to {sum}");
        checked += 1;
    }
    assert!(checked >= 40, "{checked} captures");
}

/// A re-send the receiver already had (a tail-loss probe or a timer that
/// fired early, reported back by D-SACK, RFC 2883, or answered by an ACK
/// echoing the original's timestamp, RFC 3522) is no loss: on the slow
/// reader's capture its waits are the reader's, and almost nothing is left
/// to `transfer`. Where packets were really lost, the wait stays loss's.
#[test]
fn resends_the_receiver_already_had_are_not_loss() {
    let parts = |file: &str| budget_shares(file).1;
    let slow_reader = parts("zero-window.server.pcap");
    assert_eq!(slow_reader("retransmission_wait"), 0.0);
    assert!(
        slow_reader("transfer") <= 0.01,
        "transfer {:.3}",
        slow_reader("transfer")
    );
    let receiver = slow_reader("reader_wait") + slow_reader("window_wait");
    assert!(receiver >= 0.98, "reader and window {receiver:.3}");
    // The stalls the reader ended (zero windows, a window reopened far
    // later than a round trip) are its own, apart from the window's size.
    assert!(
        slow_reader("reader_wait") >= 0.95,
        "reader {:.3}",
        slow_reader("reader_wait")
    );
    let lossy = parts("packet-loss.client.pcap");
    assert!(
        lossy("retransmission_wait") >= 0.05,
        "loss {:.3}",
        lossy("retransmission_wait")
    );
}

/// During SACK recovery the receiver's cumulative ACK stays at the hole, so
/// the right edge of its window (ack + window) stays too: a sender that
/// reaches that edge waits on the lost segment's re-send, not on the
/// receiver's buffer. Seen near the server of a lossy download (2% loss,
/// a 300 KB window), the stalls at a hole-pinned edge are the loss's time;
/// a window that is small on its own (4 KB) still is the window's.
#[test]
fn a_window_edge_pinned_by_a_hole_is_the_losss_wait() {
    let (v, lossy) = budget_shares("packet-loss.router.pcap");
    assert!(!named(&v, "receive_window_limited"), "{v:#}");
    assert_eq!(v["findings"][0]["kind"], "packet_loss");
    assert!(
        lossy("window_wait") < 0.05,
        "window {:.3}",
        lossy("window_wait")
    );
    assert!(
        lossy("retransmission_wait") >= 0.05,
        "loss {:.3}",
        lossy("retransmission_wait")
    );
    let (v, small) = budget_shares("upload-rcvbuf4k.server.pcap");
    assert!(named(&v, "receive_window_limited"));
    assert!(
        small("window_wait") >= 0.5,
        "window {:.3}",
        small("window_wait")
    );
}

/// A request lost between the client and a capture at the router's server
/// side is never seen; its resend comes a retransmission timeout after the
/// handshake, as a client idling would. The client numbers its packets one
/// by one (Linux's IPv4 identification): the number skipped is the lost
/// request, and the wait is the timer's, not the client's. A client that
/// idles as long (`client-delay`), its numbers in step, is still the client.
#[test]
fn a_request_lost_before_the_capture_is_not_the_clients_time() {
    let (v, lost) = budget_shares("request-lost.router.pcap");
    assert_eq!(v["findings"][0]["kind"], "retransmission_timeout", "{v:#}");
    assert_eq!(v["findings"][0]["culprit"]["role"], "network");
    assert!(!named(&v, "client_delay"), "{v:#}");
    assert!(
        lost("client_idle") < 0.05,
        "idle {:.3}",
        lost("client_idle")
    );
    assert!(
        lost("retransmission_wait") >= 0.3,
        "timer {:.3}",
        lost("retransmission_wait")
    );
    for idle in ["client-delay.client.pcap", "client-delay.server.pcap"] {
        let (v, share) = budget_shares(idle);
        assert_eq!(v["findings"][0]["kind"], "client_delay", "{idle}");
        assert!(!named(&v, "retransmission_timeout"), "{idle}");
        assert_eq!(share("retransmission_wait"), 0.0, "{idle}");
    }
}

/// A response lost between the router and a capture at the client is the
/// network's wait, not the server's: the server answered at once and its
/// retransmission timer sent the response again. Its IP ID, one packet
/// counted after the handshake, skips the lost one; a server thinking as
/// long keeps its IDs in step and stays `server_delay`.
#[test]
fn a_response_lost_before_the_capture_is_not_the_servers_time() {
    let (v, lost) = budget_shares("response-lost.client.pcap");
    assert_eq!(v["findings"][0]["kind"], "retransmission_timeout", "{v:#}");
    assert_eq!(v["findings"][0]["culprit"]["role"], "network");
    assert!(!named(&v, "server_delay"), "{v:#}");
    assert!(lost("server") < 0.05, "server {:.3}", lost("server"));
    assert!(
        lost("retransmission_wait") >= 0.3,
        "timer {:.3}",
        lost("retransmission_wait")
    );
    for thinking in ["server-delay.client.pcap", "server-delay.server.pcap"] {
        let (v, share) = budget_shares(thinking);
        assert_eq!(v["findings"][0]["kind"], "server_delay", "{thinking}");
        assert!(!named(&v, "retransmission_timeout"), "{thinking}");
        assert_eq!(share("retransmission_wait"), 0.0, "{thinking}");
    }
}

/// A response that waited in a queue on its way back is network time, told
/// from a slow server by the server's own timestamp clock: the round trip at
/// the response, not the handshake's, is subtracted before the server's time.
#[test]
fn a_queue_on_the_way_back_is_not_the_servers_time() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    // A short queue behind a download: up to 12 ms more on the way back
    // than at the handshake; the server answers at once.
    let v = analyze(&root.join("bufferbloat-short-queue.client.pcap"));
    let small = &v["connections"][1]["slowest_exchanges"];
    assert!(small.as_array().is_some_and(|a| !a.is_empty()));
    for ex in small.as_array().unwrap() {
        let server = ex["budget_ms"]["server"].as_f64().unwrap_or(0.0);
        assert!(server < 2.0, "server {server} ms in {ex}");
    }
    // A server thinking for seconds, whose clock ticks at 250 Hz (an older
    // kernel): still the server.
    let v = analyze(&root.join("corpus/sv-tls-cert-issuer.pcap"));
    assert_eq!(
        v["findings"][0]["kind"], "server_delay",
        "{}",
        v["findings"][0]
    );
    // A server thinking 300 ms behind a steady path: still the server.
    let v = analyze(&root.join("server-delay.client.pcap"));
    let median = &v["capture"]["latency_budget"]["median"]["parts_ms"];
    assert!(median["server"].as_f64().unwrap() >= 299.0, "{median}");
}

/// A tail re-sent by a probe (RFC 8985) with no duplicate ACK before it was
/// waited on from the sender's last new segment: the exchange would have
/// ended there. A re-send that follows a re-send (the recovery after a
/// timeout going on) is timed from itself, as before.
#[test]
fn a_probed_tail_waits_from_the_last_new_segment() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    // A scanner's request answered with 10 KB and a FIN at 57.3 ms; the
    // client acknowledges the first 1,734 bytes only, the server probes with
    // its last segment at 95.7 ms (2·SRTT after that ACK), then SACK
    // recovery re-sends the rest in three round trips, to 140.0 ms.
    let v = analyze(&root.join("corpus/sv-http-protocol-nodup.pcap"));
    let ex = &v["connections"][0]["slowest_exchanges"][2];
    let wait = ex["budget_ms"]["retransmission_wait"].as_f64().unwrap();
    assert!(wait >= 82.0, "{ex}");
    assert!(ex["budget_ms"]["transfer"].is_null(), "{ex}");
    // 92 holes re-sent after a retransmission timeout, captured at the
    // receiver: the timeout's, not 92 probes'.
    let v = analyze(&root.join("rto.client.pcap"));
    let loss = lost_to(&v, "packet_loss");
    assert!(loss < 1.0, "packet_loss {loss} ms");
    assert_eq!(v["findings"][0]["kind"], "retransmission_timeout");
}

/// fixtures/ATTRIBUTION.md lists every committed capture whose mean exchange
/// the budget attributes less than 95% of (the rest is `transfer`), with
/// why; the table must be current both ways.
#[test]
fn every_capture_is_attributed_or_listed_with_why() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let table = std::fs::read_to_string(root.join("ATTRIBUTION.md")).unwrap();
    let mut listed = std::collections::BTreeMap::new();
    for line in table.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 5, "three columns: {line}");
        let share: f64 = cells[2].trim_end_matches('%').parse().unwrap();
        assert!(cells[3].len() > 40, "{}: a reason", cells[1]);
        listed.insert(cells[1].trim_matches('`').to_string(), share);
    }
    let mut files = Vec::new();
    for sub in ["", "corpus/"] {
        for e in std::fs::read_dir(root.join(sub)).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().to_string();
            if name.ends_with(".pcap") || name.ends_with(".pcapng") {
                files.push(format!("{sub}{name}"));
            }
        }
    }
    files.sort();
    let (mut judged, mut stale) = (0, Vec::new());
    for file in &files {
        let v = analyze(&root.join(file));
        let m = &v["capture"]["latency_budget"]["mean"];
        let Some(total) = m["total_ms"].as_f64().filter(|&t| t > 0.0) else {
            continue;
        };
        judged += 1;
        let transfer = m["parts_ms"]["transfer"].as_f64().unwrap_or(0.0);
        let attributed = 100.0 * (1.0 - transfer / total);
        match listed.remove(file.as_str()) {
            Some(_) if attributed >= 95.0 => {
                stale.push(format!("{file}: {attributed:.1}% now, remove its row"))
            }
            Some(share) if (share - attributed).abs() > 0.5 => stale.push(format!(
                "{file}: the table says {share}%, it is {attributed:.1}%"
            )),
            None if attributed < 95.0 => {
                stale.push(format!("{file}: {attributed:.1}% attributed and no row"))
            }
            _ => {}
        }
    }
    assert!(listed.is_empty(), "rows of no capture: {listed:?}");
    assert!(stale.is_empty(), "stale:\n{}", stale.join("\n"));
    assert!(judged >= 100, "{judged} captures with exchanges");
}

/// Each rate limit named where the lab made it the limit, and nowhere
/// else among these: (capture, direction, limit or null for no transfer).
#[test]
fn each_transfer_is_bounded_by_the_limit_the_lab_set() {
    let cases = [
        (
            "bulk-healthy.client.pcap",
            "server_to_client",
            Some("bandwidth"),
        ),
        (
            "upload-rcvbuf4k.client.pcap",
            "client_to_server",
            Some("receive_window"),
        ),
        (
            "send-buffer-limited.server.pcap",
            "server_to_client",
            Some("send_buffer"),
        ),
        (
            "send-buffer-autotuned.client.pcap",
            "server_to_client",
            Some("bandwidth"),
        ),
        (
            "upload-default.client.pcap",
            "client_to_server",
            Some("bandwidth"),
        ),
        (
            "zero-window.client.pcap",
            "server_to_client",
            Some("receive_window"),
        ),
        (
            "slow-start.client.pcap",
            "server_to_client",
            Some("congestion"),
        ),
        (
            "slow-start-after-idle.client.pcap",
            "server_to_client",
            Some("congestion"),
        ),
        (
            "path-mtu-blackhole.client.pcap",
            "server_to_client",
            Some("loss"),
        ),
        (
            "path-mtu-icmp.client.pcap",
            "server_to_client",
            Some("bandwidth"),
        ),
        (
            "expect-100-continue.client.pcap",
            "client_to_server",
            Some("application"),
        ),
        (
            "expect-none.client.pcap",
            "client_to_server",
            Some("congestion"),
        ),
        // Small messages: no transfer beyond the initial window to bound.
        ("server-delay-inside.client.pcap", "server_to_client", None),
        ("nginx-nodelay-on.client.pcap", "server_to_client", None),
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    for (file, way, want) in cases {
        let v = analyze(&root.join(file));
        for c in v["connections"].as_array().unwrap() {
            let got = c["rate_limit"][way]["limit"].as_str();
            assert_eq!(
                got, want,
                "{file} connection {} {way}: {}",
                c["id"], c["rate_limit"]
            );
            if let Some(want) = want {
                let limits = &c["rate_limit"][way]["limits_ms"];
                let most = limits
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|x| x.as_f64().unwrap());
                assert_eq!(
                    limits[want].as_f64(),
                    most.fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x)))),
                    "{file}: the limit named is the largest"
                );
            }
        }
    }
}

#[test]
fn a_send_buffer_waits_on_a_window_and_its_fix_predicts_the_autotuned_twin() {
    // 1 MiB from a server whose SO_SNDBUF is 16 KB: flights of one size,
    // round after round, with the receiver's window wide open. The twin is
    // the same transfer with the buffer left to autotuning.
    let (v, share) = budget_shares("send-buffer-limited.client.pcap");
    let f = &v["findings"][0];
    assert_eq!(f["kind"], "send_buffer_limited", "{}", v["findings"]);
    assert_eq!(f["culprit"]["role"], "server");
    assert!(
        f["details"]["rounds"].as_u64().unwrap() >= 8,
        "{}",
        f["details"]
    );
    // The flights of one size, as tshark counts the bytes between pauses
    // (fixtures/README.md): 68,056 bytes fourteen times, after slow start's
    // 14,480, 28,960 and 36,200.
    assert_eq!(f["details"]["flight_bytes"], 68_056, "{}", f["details"]);
    // Its waits are the budget's window_wait, not the congestion window's.
    assert!(share("window_wait") >= 0.3, "{}", share("window_wait"));
    assert!(
        share("congestion_wait") <= 0.1,
        "{}",
        share("congestion_wait")
    );
    let predicted = f["predicted_after_fix"]["affected"]["p50_ms"]
        .as_f64()
        .unwrap();
    let (twin, _) = budget_shares("send-buffer-autotuned.client.pcap");
    let measured = twin["capture"]["latency_budget"]["mean"]["total_ms"]
        .as_f64()
        .unwrap();
    assert!(
        (predicted - measured).abs() <= 0.25 * measured,
        "predicted {predicted} ms after the fix, the twin took {measured} ms"
    );
    assert!(
        twin["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] != "send_buffer_limited"),
        "{}",
        twin["findings"]
    );
}

#[test]
fn resends_in_slow_start_after_a_timeout_are_the_losss_cost() {
    // Seen at the client: after the retransmission timeout the server
    // re-sends the lost data from one segment, flight by flight, each a
    // round trip after the one before. Those waits are the window
    // regrowing after the loss cut it: the loss's time (without it the
    // flights would not have shrunk), not pauses nobody explains, and not
    // the slow start of a new connection.
    let (doc, share) = budget_shares("rto.client.pcap");
    let parts = &doc["capture"]["latency_budget"]["mean"]["parts_ms"];
    let rto = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "retransmission_timeout")
        .expect("the timeout is found");
    let timer_ms = rto["total_delay_ms"].as_f64().unwrap();
    let rtt_ms = rto["details"]["rtt_ms"].as_f64().unwrap();
    let loss_ms = parts["retransmission_wait"].as_f64().unwrap();
    assert!(
        loss_ms >= timer_ms + 2.0 * rtt_ms,
        "the loss's part {loss_ms} ms holds the timer's wait ({timer_ms} ms) and the regrowth's \
         round trips ({rtt_ms} ms each)"
    );
    // The flights before the loss were slow start's: still the congestion window's.
    assert!(
        share("congestion_wait") > 0.0,
        "{}",
        share("congestion_wait")
    );
    assert!(share("transfer") < 0.05, "{}", share("transfer"));
    // Its prediction takes the regrowth out with the timer's wait (the lab's
    // `retransmission-timeout --compare` holds it against the run without
    // the outage).
    let total_ms = doc["capture"]["latency_budget"]["mean"]["total_ms"]
        .as_f64()
        .unwrap();
    let predicted = rto["predicted_after_fix"]["affected"]["p50_ms"]
        .as_f64()
        .unwrap();
    assert!(
        predicted <= total_ms - loss_ms + 1.0,
        "predicted {predicted} ms of {total_ms} ms, {loss_ms} ms of it the loss's"
    );
}

fn analyze_args(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .arg("analyze")
        .args(["--format", "json"])
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The findings of `file` analysed from `from` seconds on.
fn findings_from(file: &Path, from: &str) -> Vec<Value> {
    let v = analyze_args(&["--from", from, file.to_str().unwrap()]);
    v["findings"].as_array().unwrap().clone()
}

/// A capture that starts after the handshake: no window scale, no clean
/// round trip. A window field of 66 may be 66 KB (a scale of 10 here), so
/// nothing waits on a full window; the quickest ACK bounds the round trip
/// from above, so a 300 ms pause inside each response, everything
/// acknowledged, is still the server's. With the handshake, the same.
#[test]
fn a_capture_started_after_the_handshake_still_finds_the_servers_pause() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let file = root.join("server-delay-inside.client.pcap");
    let file = file.to_str().unwrap();
    for args in [vec![file], vec!["--from", "0.036", file]] {
        let v = analyze_args(&args);
        let c = &v["connections"][0];
        assert_eq!(
            c["handshake_rtt_ms"].is_null(),
            args.len() > 1,
            "{args:?}: {c}"
        );
        assert_eq!(v["findings"][0]["kind"], "server_delay", "{args:?}");
        for ex in c["slowest_exchanges"].as_array().unwrap() {
            let b = &ex["budget_ms"];
            assert!(b["window_wait"].is_null(), "{args:?}: {ex}");
            assert!(b["server"].as_f64().unwrap() >= 299.0, "{args:?}: {ex}");
        }
    }
}

/// An upload into a 2,896-byte receive window, captured from after the
/// handshake: the window scale is not in the capture, so the field (2,896)
/// might be 2,896 × 2^14 bytes; the client's flights ending exactly at the
/// field's edge, again and again, show the scale is 0 and the window small.
/// At the client the edge is the newest ACK's; at the server, an earlier
/// one's (the newest is still on its way). A print job to a printer with a
/// two-segment window (a capture from elsewhere), cut the same way, too.
/// Transfers held by anything else, cut the same way, gain no window finding.
#[test]
fn a_capture_started_mid_upload_still_finds_the_small_receive_window() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    for (name, from) in [
        ("upload-rcvbuf4k.client.pcap", "0.762"),
        ("upload-rcvbuf4k.client.pcap", "2.286"),
        ("upload-rcvbuf4k.server.pcap", "0.775"),
        ("upload-rcvbuf4k.server.pcap", "2.324"),
        ("corpus/ndpi-ipp.pcap", "0.255"),
    ] {
        let found = findings_from(&root.join(name), from);
        let f = found.iter().find(|f| f["kind"] == "receive_window_limited");
        let f = f.unwrap_or_else(|| panic!("{name} --from {from}: {found:?}"));
        assert_eq!(f["culprit"]["role"], "server", "{name} --from {from}");
        assert!(
            f["share_of_time"].as_f64().unwrap() > 0.4,
            "{name} --from {from}: {f}"
        );
    }
    for (name, from) in [
        ("bulk-healthy.client.pcap", "0.03"),
        ("slow-start.client.pcap", "0.1"),
        ("bufferbloat.client.pcap", "0.5"),
        ("send-buffer-limited.client.pcap", "0.1"),
        ("cwnd-collapse.server.pcap", "0.1"),
    ] {
        let found = findings_from(&root.join(name), from);
        let kinds: Vec<_> = found.iter().map(|f| f["kind"].as_str().unwrap()).collect();
        assert!(
            !kinds.contains(&"receive_window_limited"),
            "{name} --from {from}: {kinds:?}"
        );
    }
}

/// An FTP control connection with no handshake in the capture, 45 ms from
/// the server, which ACKs at once: the 45 ms is the round trip (its data
/// connections' handshakes show it), not a delayed-ACK timer, and the
/// "226" that follows each data connection's close by 0.2 ms waited on
/// that connection, not on the server thinking.
#[test]
fn a_control_connection_waits_on_its_data_connection_not_on_the_server() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let v = analyze(&root.join("corpus/zeek-ftp-numbers-in-filename.pcap"));
    let acks = v["capture"]["delayed_ack"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(acks.is_empty(), "{acks:?}");
    let server = lost_to(&v, "server_delay");
    assert!(server < 200.0, "server_delay {server} ms");
    // The LIST whose listing took 1.2 s on the data connection: that wait
    // is the other connection's.
    let control = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["server"].as_str().unwrap().ends_with(":21"))
        .unwrap();
    let waited: f64 = control["slowest_exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["budget_ms"]["other_connection"].as_f64())
        .fold(0.0, f64::max);
    assert!(waited >= 1000.0, "{control}");
    // The median exchange (a command and its answer, 46 ms) is mostly the
    // path's round trip.
    let median = &v["capture"]["latency_budget"]["median"]["parts_ms"];
    assert!(
        median["network"].as_f64().unwrap_or(0.0) >= 25.0,
        "{median}"
    );
}
