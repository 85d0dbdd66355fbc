//! A message broker's protocols (AMQP 0-9-1, MQTT, STOMP, NATS) are not
//! request and response: a broker delivers when a publisher publishes, a
//! client acknowledges a delivery and expects nothing back, either side sends
//! its own keep-alive. Their framing tells which messages ask for an answer;
//! server data while nothing is owed opens no exchange, and a client message
//! after messages that asked nothing starts a request of its own. Every
//! capture here is from nDPI's test data (fixtures/corpus/CORPUS.md), read
//! frame by frame with tshark.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

mod common;

use common::{fixture, frames, kinds};

/// Celery over RabbitMQ: the broker delivers to the consumer 0.4 ms after a
/// publisher publishes on another connection; the consumer's Basic.Ack
/// before it (frame 31) asked for nothing. Read as request and response, the
/// publisher's pace was 984 ms of the broker's `server_delay`.
#[test]
fn a_deliveries_wait_is_not_the_brokers() {
    let v = common::analyze(&fixture("corpus/ndpi-amqp.pcap"), &[]);
    assert_eq!(kinds(&v), Vec::<String>::new());
}

/// NATS: the server's own PING 2.19 s after its PONG (frames 22 → 24) is a
/// keep-alive of its own, not the rest of the PONG.
#[test]
fn a_servers_own_ping_is_not_the_rest_of_its_answer() {
    let v = common::analyze(&fixture("corpus/ndpi-nats.pcap"), &[]);
    assert_eq!(kinds(&v), Vec::<String>::new());
}

/// STOMP: SUBSCRIBE without a receipt (frame 8) asks for nothing; the SEND
/// 9.8 s later (frame 10) is a request of its own, not the rest of a request
/// the client paused inside.
#[test]
fn a_publish_after_a_subscription_is_a_request_of_its_own() {
    let v = common::analyze(&fixture("corpus/ndpi-stomp.pcapng"), &[]);
    assert_eq!(kinds(&v), Vec::<String>::new());
}

/// MQTT on port 17501 (told by its packets, not its port): the 4 to 27 s
/// between the broker's deliveries are not its think time, and the client's
/// PUBACK 1 ms after a delivery (frame 50 on connection 3) answers it: the
/// IP ID it skips was taken by the host's UDP broadcast (frame 43), not by a
/// packet lost. What is left is real: each PUBLISH waits for the broker's
/// delayed ACK of the PUBACK before it (frames 49, 53, 56: 37.6 ms).
#[test]
fn mqtt_deliveries_leave_the_clients_nagle_wait() {
    let v = common::analyze(&fixture("corpus/ndpi-coap_mqtt.pcap"), &[]);
    assert_eq!(kinds(&v), ["nagle_delayed_ack/client"]);
    let f = &v["findings"][0];
    assert_eq!(f["occurrences"], 36);
    let fr = frames(f);
    assert!(fr.windows(2).all(|w| w[0] < w[1]), "{fr:?}");
}

/// The quiet twin: MQTT's CONNECT and SUBSCRIBE sent before any answer both
/// ask for one, so CONNACK and SUBACK (frames 4, 5) are one response, and
/// the round trip to a broker twelve hops away stays the verdict.
#[test]
fn pipelined_requests_keep_their_answers() {
    let v = common::analyze(&fixture("corpus/ndpi-mqtt.pcap"), &[]);
    let first = &v["findings"][0];
    assert_eq!(first["kind"], "network_latency");
    assert_eq!(frames(first), [2, 5]);
}

/// The quiet twin of an answer's IP ID: data sent again on the timer after
/// a silence, with nothing from the peer before it, is still a loss before
/// the capture point (a request lost between the client and a router).
#[test]
fn a_re_send_after_silence_is_still_a_loss() {
    for name in ["request-lost.router.pcap", "response-lost.client.pcap"] {
        let v = common::analyze(&fixture(name), &[]);
        let text = v.to_string();
        assert!(
            kinds(&v)
                .first()
                .is_some_and(|k| k.starts_with("retransmission_timeout")),
            "{name}: {:?}",
            kinds(&v)
        );
        assert!(text.contains("IP ID skips"), "{name}");
    }
}

fn all_kinds(v: &Value) -> Vec<String> {
    let mut k = kinds(v);
    for f in v["minor_findings"].as_array().unwrap() {
        k.push(f["kind"].as_str().unwrap().to_string());
    }
    k
}

/// A Stratum pool pushes new work when it likes: five of its pushes follow a
/// silence with the pool's IP ID one past the last seen (frames 355 → 357).
/// Lost or not, nobody waited for a push; read as a loss re-sent on the
/// timer it was 5 s of `retransmission_timeout` and the first verdict. The
/// submissions wait one round trip each (80 ms).
#[test]
fn a_pushed_job_after_an_ip_id_skip_is_nobodys_wait() {
    let v = common::analyze(&fixture("corpus/ndpi-mining.pcapng"), &[]);
    let k = all_kinds(&v);
    assert!(
        !k.iter().any(|k| k.starts_with("retransmission_timeout")),
        "{k:?}"
    );
    assert_eq!(kinds(&v)[0], "network_latency/network");
    // Where a client waited, the same inference still names the loss:
    // `a_re_send_after_silence_is_still_a_loss`.
}

/// Apple's push service (port 5223, a connection picked up mid-stream)
/// re-sends a 309 B push five times to a phone that no longer answers
/// (frames 85-90): nobody waited for it. Read as a loss, it was 20 s of
/// `retransmission_timeout` and the first verdict.
#[test]
fn a_push_re_sent_to_a_peer_that_is_gone_is_nobodys_wait() {
    let v = common::analyze(&fixture("corpus/ndpi-whatsapp-login-chat.pcap"), &[]);
    let k = kinds(&v);
    assert!(
        !k.iter().any(|x| x.starts_with("retransmission_timeout")),
        "{k:?}"
    );
    // The requests on the other connections are still answered a round
    // trip later, and time is still found.
    assert!(!k.is_empty());
}
