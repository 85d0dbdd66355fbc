//! The verdict on real captures: it names the mechanism and culprit when a
//! finding does, and says nothing costs time on a healthy capture.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use tcpdoctor_capture::CaptureReader;
use tcpdoctor_engine::{model::Analysis, Engine, Options};
use tcpdoctor_report::{verdict, Symptom};

fn analyse(rel: &str) -> Analysis {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    let file = File::open(&path).expect("fixture");
    let mut reader = CaptureReader::new(BufReader::new(file)).expect("capture");
    let mut engine = Engine::new(Options::default());
    while let Some(p) = reader.next_packet().expect("packet") {
        engine.push(p.ts, p.link, p.data, p.orig_len);
    }
    engine.finish()
}

fn symptom() -> Symptom {
    Symptom {
        rtt_ms: Some(0.05),
        rtt_method: "TCP SYN",
        p50_ms: Some(44.0),
        p99_ms: Some(48.0),
        failure: None,
    }
}

#[test]
fn nagle_capture_names_the_delayed_ack_the_server_and_the_fix() {
    let a = analyse("examples/nginx-nagle.pcap");
    let v = verdict(&symptom(), Some(&a));
    assert!(
        v.headline.starts_with("requests take 44.0 ms at p50"),
        "{}",
        v.headline
    );
    assert!(
        v.headline.contains("round trip is 0.05 ms (TCP SYN)"),
        "{}",
        v.headline
    );
    let cause = v.cause.as_deref().expect("a cause");
    assert!(cause.contains("delayed ACK"), "{cause}");
    assert!(cause.contains("10.71.0.2:8080 (server)"), "{cause}");
    assert!(cause.contains("nagle_delayed_ack"), "{cause}");
    let fix = v.fix.as_deref().expect("a fix");
    assert!(fix.contains("tcp_nodelay on"), "{fix}");
}

#[test]
fn window_capture_names_the_receiver_window() {
    let a = analyse("fixtures/upload-rcvbuf4k.client.pcap");
    let v = verdict(&symptom(), Some(&a));
    let cause = v.cause.as_deref().expect("a cause");
    assert!(cause.contains("receive window of ~"), "{cause}");
    assert!(cause.contains("(server)"), "{cause}");
}

#[test]
fn healthy_capture_has_no_cause_and_no_fix() {
    let a = analyse("fixtures/nginx-nodelay-on.client.pcap");
    let v = verdict(&symptom(), Some(&a));
    assert_eq!(v.fix, None);
    let cause = v.cause.as_deref().expect("a statement");
    assert!(
        cause.starts_with("no TCP mechanism costs more than 1%"),
        "{cause}"
    );
}

#[test]
fn without_a_capture_only_the_symptom_is_stated() {
    let v = verdict(&symptom(), None);
    assert_eq!(v.cause, None);
    assert_eq!(
        v.sentence(),
        "requests take 44.0 ms at p50 (48.0 ms at p99) while the round trip is 0.05 ms (TCP SYN)"
    );
}

#[test]
fn a_refused_port_leads_the_verdict_when_nothing_completed() {
    let a = analyse("fixtures/connection-refused.client.pcap");
    let s = Symptom {
        p50_ms: None,
        p99_ms: None,
        failure: Some("connection refused by 10.71.2.2:8080".into()),
        ..symptom()
    };
    let v = verdict(&s, Some(&a));
    assert!(
        v.headline
            .starts_with("connection refused by 10.71.2.2:8080"),
        "{}",
        v.headline
    );
    // Said once, not twice.
    assert_eq!(
        v.sentence().matches("connection refused by").count(),
        1,
        "{}",
        v.sentence()
    );
    // Without a capture, the headline still says why.
    let v = verdict(&s, None);
    assert_eq!(
        v.headline,
        "no request completed: connection refused by 10.71.2.2:8080 while the round trip is 0.05 ms (TCP SYN)"
    );
}
