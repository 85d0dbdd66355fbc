//! Runs the real `tcpdoctor` binary on the committed captures (made with real
//! software in network namespaces; see fixtures/README.md) and on bad input.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    root().join("fixtures").join(name)
}

fn run(args: &[&str]) -> Output {
    // The text report drops to ASCII under a non-UTF-8 locale: pin one.
    Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("run tcpdoctor")
}

fn analyze_json(path: &Path) -> Value {
    let out = run(&["analyze", "--format", "json", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn findings(v: &Value) -> Vec<&Value> {
    v["findings"].as_array().unwrap().iter().collect()
}

fn kinds(v: &Value) -> Vec<&str> {
    findings(v)
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect()
}

fn assert_nagle(v: &Value, role: &str, endpoint_prefix: &str) -> Value {
    let f = findings(v);
    assert!(!f.is_empty(), "no finding");
    let f = f[0].clone();
    assert_eq!(f["kind"], "nagle_delayed_ack");
    assert_eq!(f["culprit"]["role"], role);
    let ep = f["culprit"]["endpoint"].as_str().unwrap();
    assert!(ep.starts_with(endpoint_prefix), "{ep}");
    // Linux peers: the delayed-ACK timer is 40 ms; the stall is that plus a little.
    let typical = f["typical_delay_ms"].as_f64().unwrap();
    assert!((35.0..70.0).contains(&typical), "typical {typical}");
    let ack = f["details"]["ack_delay_ms"].as_f64().unwrap();
    assert!((30.0..70.0).contains(&ack), "ack delay {ack}");
    assert!(f["share_of_time"].as_f64().unwrap() > 0.5);
    assert!(f["occurrences"].as_u64().unwrap() >= 10);
    // Evidence frames are 1-based: small segment, delayed ACK, held data.
    let ev = &f["evidence"][0]["frames"];
    let frames: Vec<u64> = ev
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(frames.len(), 3);
    assert!(frames[0] >= 1 && frames[0] < frames[1] && frames[1] < frames[2]);
    assert!(f["wireshark_filter"]
        .as_str()
        .unwrap()
        .contains("frame.number >="));
    assert!(f["ladder"]["rows"].as_array().unwrap().len() >= 3);
    f
}

#[test]
fn nginx_nodelay_off_server_side_names_nginx_and_its_fix() {
    let v = analyze_json(&fixture("nginx-nodelay-off.server.pcap"));
    let f = assert_nagle(&v, "server", "10.71.0.2:8080");
    assert_eq!(f["details"]["software"], "nginx");
    assert!(f["fix"].as_str().unwrap().contains("tcp_nodelay on;"));
    let p50 = v["capture"]["exchange_latency_ms"]["p50"].as_f64().unwrap();
    assert!(p50 > 35.0, "p50 {p50}");
}

#[test]
fn nginx_nodelay_on_client_side_is_quiet() {
    let v = analyze_json(&fixture("nginx-nodelay-on.client.pcap"));
    assert!(kinds(&v).is_empty(), "{:?}", kinds(&v));
    let p50 = v["capture"]["exchange_latency_ms"]["p50"].as_f64().unwrap();
    assert!(p50 < 5.0, "p50 {p50}");
    assert!(v["capture"]["link_types"][0]
        .as_str()
        .unwrap()
        .contains("SLL"));
}

#[test]
fn jdk_httpserver_default_client_side_names_the_jvm_flag() {
    let v = analyze_json(&fixture("jdk-default.client.pcap"));
    let f = assert_nagle(&v, "server", "10.71.0.2:");
    assert_eq!(f["details"]["software"], "jdk-httpserver");
    assert!(f["fix"]
        .as_str()
        .unwrap()
        .contains("-Dsun.net.httpserver.nodelay=true"));
}

#[test]
fn jdk_httpserver_nodelay_pcapng_is_quiet() {
    let v = analyze_json(&fixture("jdk-nodelay.server.pcapng"));
    assert!(kinds(&v).is_empty(), "{:?}", kinds(&v));
    assert!(v["capture"]["exchanges"].as_u64().unwrap() > 100);
}

#[test]
fn client_writing_headers_then_body_at_a_router_blames_the_client() {
    let v = analyze_json(&fixture("client-write-write.router.pcap"));
    let f = assert_nagle(&v, "client", "10.71.1.2");
    assert!(f["fix"].as_str().unwrap().contains("one write"));
}

#[test]
fn client_single_write_is_quiet() {
    let v = analyze_json(&fixture("client-single-write.router.pcap"));
    assert!(kinds(&v).is_empty(), "{:?}", kinds(&v));
}

#[test]
fn small_receive_buffer_upload_names_the_window_ceiling_at_the_server() {
    window_ceiling(&fixture("upload-rcvbuf4k.server.pcap"));
}

#[test]
fn small_receive_buffer_upload_names_the_window_ceiling_at_the_client() {
    window_ceiling(&fixture("upload-rcvbuf4k.client.pcap"));
}

fn window_ceiling(path: &Path) {
    let v = analyze_json(path);
    let f = findings(&v)[0];
    assert_eq!(f["kind"], "receive_window_limited");
    assert_eq!(f["culprit"]["role"], "server");
    assert_eq!(f["culprit"]["endpoint"], "10.71.2.2:8081");
    let d = &f["details"];
    let mss_multiple = d["window_mss"].as_f64().unwrap();
    assert!(
        (0.5..=4.0).contains(&mss_multiple),
        "window {mss_multiple} MSS"
    );
    let rtt = d["rtt_ms"].as_f64().unwrap();
    assert!((25.0..50.0).contains(&rtt), "rtt {rtt}");
    // Throughput reached sits at the ceiling rwnd / RTT.
    let ceiling = d["ceiling_bytes_per_sec"].as_f64().unwrap();
    let reached = d["throughput_bytes_per_sec"].as_f64().unwrap();
    assert!(
        reached <= ceiling * 1.3 && reached >= ceiling * 0.5,
        "{reached} vs {ceiling}"
    );
    assert!(d["share_of_transfer"].as_f64().unwrap() > 0.8);
    assert!(f["fix"].as_str().unwrap().contains("rcvbuf"));
    // The snaplen (128) cut payloads, not lengths: all 605 KB are counted.
    assert!(d["bytes"].as_u64().unwrap() >= 619_520);
    // The exchange's time is in sending the request, not in the server.
    let conn = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["server"] == "10.71.2.2:8081")
        .unwrap();
    let ex = &conn["slowest_exchanges"][0];
    assert!(ex["request_ms"].as_f64().unwrap() > 5000.0, "{ex}");
    assert!(ex["wait_ms"].as_f64().unwrap() < 100.0, "{ex}");
    assert!(ex["request_bytes"].as_u64().unwrap() >= 619_520);
}

#[test]
fn default_receive_buffer_upload_is_quiet() {
    let v = analyze_json(&fixture("upload-default.client.pcap"));
    assert!(kinds(&v).is_empty(), "{:?}", kinds(&v));
}

#[test]
fn server_time_inside_a_response_is_the_servers_at_every_vantage_point() {
    // A server flushing chunked headers, then computing the body for 300 ms.
    for file in [
        "server-delay-inside.client.pcap",
        "server-delay-inside.server.pcap",
        "server-delay-inside.router.pcap",
    ] {
        let v = analyze_json(&fixture(file));
        let f = findings(&v)[0];
        assert_eq!(f["kind"], "server_delay", "{file}");
        assert_eq!(f["culprit"]["endpoint"], "10.71.2.2:8080", "{file}");
        assert_eq!(f["details"]["where"], "inside_response", "{file}");
        let typical = f["typical_delay_ms"].as_f64().unwrap();
        assert!((295.0..320.0).contains(&typical), "{file}: {typical}");
        // The budget says server, not transfer.
        let m = &v["capture"]["latency_budget"]["median"];
        let server = m["parts_ms"]["server"].as_f64().unwrap();
        let transfer = m["parts_ms"]["transfer"].as_f64().unwrap_or(0.0);
        assert!(server >= 295.0 && transfer < 5.0, "{file}: {m}");
    }
    // Its twin has the body ready at once: only the round trips are left.
    let v = analyze_json(&fixture("server-body-ready.client.pcap"));
    let all: Vec<&str> = kinds(&v)
        .into_iter()
        .chain(
            v["minor_findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["kind"].as_str().unwrap()),
        )
        .collect();
    assert_eq!(all, ["network_latency"]);
}

#[test]
fn one_request_per_connection_pays_a_handshake_round_trip_each() {
    for file in [
        "handshake-round-trips.client.pcap",
        "handshake-round-trips.server.pcap",
    ] {
        let v = analyze_json(&fixture(file));
        let f = findings(&v)[0];
        assert_eq!(f["kind"], "network_latency", "{file}");
        assert_eq!(f["details"]["cause"], "new_connections", "{file}");
        assert_eq!(f["details"]["handshake_round_trips"], 10, "{file}");
        assert!(f["fix"].as_str().unwrap().starts_with("Reuse connections"));
    }
    // At the client both round trips of each exchange are in view.
    let v = analyze_json(&fixture("handshake-round-trips.client.pcap"));
    assert_eq!(findings(&v)[0]["details"]["request_round_trips"], 10);
    assert!(findings(&v)[0]["share_of_time"].as_f64().unwrap() > 0.8);
    // The twin reuses one connection: the round trips remain, the handshakes do not.
    let v = analyze_json(&fixture("handshake-keepalive.client.pcap"));
    let f = findings(&v)[0];
    assert_eq!(f["kind"], "network_latency");
    assert_eq!(f["details"]["cause"], "round_trips");
    assert_eq!(f["details"]["handshake_round_trips"], 1);
}

#[test]
fn stdin_gives_the_same_answer_as_the_file() {
    let path = root().join("examples/nginx-nagle.pcap");
    let bytes = std::fs::read(&path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["analyze", "--format", "json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success());
    let mut from_stdin: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut from_file = analyze_json(&path);
    // Only the input they name differs.
    assert_eq!(from_stdin["input"]["file"], "-");
    from_stdin["input"].take();
    from_file["input"].take();
    assert_eq!(from_stdin, from_file);
}

#[test]
fn ctrl_c_while_reading_stdin_still_reports_what_was_read() {
    let bytes = std::fs::read(root().join("examples/nginx-nagle.pcap")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["analyze", "--format", "json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&bytes).unwrap();
    stdin.flush().unwrap();
    // Give it time to install its handler and read, then interrupt it like a terminal would.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    std::thread::sleep(std::time::Duration::from_millis(100));
    drop(stdin); // the capturing process exits and closes the pipe
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(findings(&v)[0]["kind"], "nagle_delayed_ack");
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
}

#[test]
fn text_report_leads_with_the_finding_and_draws_a_ladder() {
    let out = run(&[
        "analyze",
        root().join("examples/nginx-nagle.pcap").to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("1. nagle_delayed_ack — server 10.71.0.2:8080"),
        "{text}"
    );
    assert!(text.contains("ladder of one exchange"));
    assert!(text.contains("(delayed ACK)"));
    assert!(text.contains("tcp_nodelay on;"));
}

#[test]
fn fail_on_finding_sets_exit_status() {
    let off = fixture("nginx-nodelay-off.server.pcap");
    let on = fixture("nginx-nodelay-on.client.pcap");
    let a = run(&[
        "analyze",
        "--fail-on-finding",
        "--format",
        "json",
        off.to_str().unwrap(),
    ]);
    assert_eq!(a.status.code(), Some(1));
    let b = run(&[
        "analyze",
        "--fail-on-finding",
        "--format",
        "json",
        on.to_str().unwrap(),
    ]);
    assert_eq!(b.status.code(), Some(0));
}

fn temp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn not_a_capture_is_a_clear_error() {
    let p = temp("notes.txt", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let out = run(&["analyze", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("notes.txt") && err.contains("at byte 0") && err.contains("not a pcap"),
        "{err}"
    );
    let missing = run(&["analyze", "/nonexistent/x.pcap"]);
    assert_eq!(missing.status.code(), Some(2));
    let empty = temp("empty.pcap", b"");
    assert_eq!(
        run(&["analyze", empty.to_str().unwrap()]).status.code(),
        Some(2)
    );
    let usage = run(&["analyze"]);
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn truncated_capture_is_analysed_up_to_the_cut_with_a_warning() {
    let bytes = std::fs::read(fixture("nginx-nodelay-off.server.pcap")).unwrap();
    let cut = bytes.len() * 2 / 3 + 7;
    let p = temp("cut.pcap", &bytes[..cut]);
    let out = run(&["analyze", "--format", "json", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = v["capture"]["warnings"][0].as_str().unwrap();
    assert!(w.contains("truncated at byte"), "{w}");
    assert_eq!(findings(&v)[0]["kind"], "nagle_delayed_ack");
}

#[test]
fn unknown_link_type_is_refused_by_name() {
    let mut b = std::fs::read(fixture("nginx-nodelay-off.server.pcap")).unwrap();
    b[20..24].copy_from_slice(&147u32.to_le_bytes());
    let p = temp("dlt147.pcap", &b);
    let out = run(&["analyze", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("link type 147"));
}

#[test]
fn garbage_packets_are_counted_not_fatal() {
    use tcpdoctor_capture::write::PcapWriter;
    use tcpdoctor_capture::CaptureReader;
    let src = std::fs::read(fixture("nginx-nodelay-off.server.pcap")).unwrap();
    let mut r = CaptureReader::new(&src[..]).unwrap();
    let mut w = PcapWriter::new(Vec::new(), tcpdoctor_wire::LinkType::Ethernet, 65535).unwrap();
    let mut n = 0u64;
    while let Some(p) = r.next_packet().unwrap() {
        n += 1;
        if n.is_multiple_of(50) {
            // A frame cut inside its IP header, and one with a bogus IP version.
            w.write_packet(p.ts, &p.data[..20], p.orig_len).unwrap();
            let mut bad = p.data.to_vec();
            bad[14] = 0x95;
            w.write_packet(p.ts, &bad, p.orig_len).unwrap();
        } else {
            w.write_packet(p.ts, p.data, p.orig_len).unwrap();
        }
    }
    let p = temp("garbage.pcap", &w.into_inner());
    let v = analyze_json(&p);
    let undecodable: u64 = v["capture"]["undecodable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["count"].as_u64().unwrap())
        .sum();
    assert_eq!(undecodable, 2 * (n / 50));
    assert_eq!(v["capture"]["packets"].as_u64().unwrap(), n + n / 50);
    assert_eq!(findings(&v)[0]["kind"], "nagle_delayed_ack");
}

#[test]
fn vantage_is_told_from_ttls() {
    for (file, place) in [
        ("rto.client.pcap", "client"),
        ("upload-rcvbuf4k.server.pcap", "server"),
        ("server-delay.client.pcap", "client"),
    ] {
        let v = analyze_json(&fixture(file));
        assert_eq!(v["capture"]["vantage"]["place"], place, "{file}");
        assert_eq!(v["capture"]["vantage"]["from"], "ttl", "{file}");
    }
    // Two namespaces on one veth: both TTLs initial, round trip in microseconds.
    let v = analyze_json(&fixture("nginx-nodelay-off.server.pcap"));
    assert_eq!(v["capture"]["vantage"]["place"], "unknown");
}

#[test]
fn pcapng_with_an_unknown_link_type_counts_those_frames_and_analyses_the_rest() {
    use tcpdoctor_capture::write::PcapNgWriter;
    use tcpdoctor_capture::CaptureReader;
    let src = std::fs::read(fixture("client-write-write.router.pcap")).unwrap();
    let mut r = CaptureReader::new(&src[..]).unwrap();
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let eth = w
        .add_interface(tcpdoctor_wire::LinkType::Ethernet, 0, 9)
        .unwrap();
    let odd = w
        .add_interface(tcpdoctor_wire::LinkType::Unknown(147), 0, 6)
        .unwrap();
    let mut n = 0u64;
    while let Some(p) = r.next_packet().unwrap() {
        w.write_packet(eth, p.ts.nanos() as u64, p.data, p.orig_len)
            .unwrap();
        if n.is_multiple_of(10) {
            w.write_packet(odd, (p.ts.nanos() / 1000) as u64, b"not ethernet", 12)
                .unwrap();
        }
        n += 1;
    }
    let bytes = w.into_inner();
    let p = temp("mixed.pcapng", &bytes);
    let v = analyze_json(&p);
    let undecodable = &v["capture"]["undecodable"][0];
    assert_eq!(undecodable["reason"], "link type 147 is not supported");
    assert_eq!(undecodable["count"].as_u64().unwrap(), n.div_ceil(10));
    assert_eq!(findings(&v)[0]["kind"], "nagle_delayed_ack");
    // Cut the same file mid-block: analysed up to there, with a warning.
    let cut = temp("mixed-cut.pcapng", &bytes[..bytes.len() * 3 / 4]);
    let v = analyze_json(&cut);
    assert!(v["capture"]["warnings"][0]
        .as_str()
        .unwrap()
        .contains("truncated at byte"));
}

#[test]
fn text_report_is_ascii_under_a_non_utf8_locale() {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args([
            "analyze",
            fixture("nginx-nodelay-off.server.pcap").to_str().unwrap(),
        ])
        .env("LC_ALL", "C")
        .output()
        .expect("run tcpdoctor");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.is_ascii(), "{text}");
    assert!(text.contains("nagle_delayed_ack -- server"), "{text}");
}

#[test]
fn html_report_and_annotated_capture() {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-report-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (html, ng) = (dir.join("r.html"), dir.join("a.pcapng"));
    let cap = fixture("upload-rcvbuf4k.client.pcap");
    let out = run(&[
        "analyze",
        cap.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--annotate",
        ng.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("receive_window_limited"));
    assert!(page.contains("class=\"chart tseq\""));
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "no network loads"
    );
    let doc = analyze_json(&ng);
    assert_eq!(doc["capture"]["packets"], 865);
    let _ = std::fs::remove_dir_all(&dir);
    // --annotate needs a file.
    let out = run(&["analyze", "-", "--annotate", "x.pcapng"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn refused_connections_are_a_finding_and_each_connection_says_how_it_ended() {
    let v = analyze_json(&fixture("connection-refused.client.pcap"));
    let f = findings(&v);
    assert_eq!(f[0]["kind"], "connection_refused");
    assert_eq!(f[0]["culprit"]["role"], "server");
    assert_eq!(f[0]["details"]["requests_lost"], 3);
    let ends: Vec<&str> = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["end"].as_str().unwrap())
        .collect();
    assert_eq!(
        ends.iter().filter(|e| **e == "refused").count(),
        3,
        "{ends:?}"
    );
    assert_eq!(ends.iter().filter(|e| **e == "fin").count(), 3, "{ends:?}");
    // The document says what made it.
    assert_eq!(v["schema"], 1);
    assert_eq!(v["command"], "analyze");
    assert!(v["tool_version"].as_str().is_some());
    assert!(v["input"]["file"]
        .as_str()
        .unwrap()
        .ends_with("connection-refused.client.pcap"));
    // The text table shows it too.
    let out = run(&[
        "analyze",
        fixture("connection-refused.client.pcap").to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("refused by server"), "{text}");
    assert!(text.contains("3 request(s) failed"), "{text}");
}

#[test]
fn resets_blame_the_server_or_the_path_by_ttl() {
    for (file, role) in [
        ("connection-reset.client.pcap", "server"),
        ("connection-reset.server.pcap", "server"),
        ("connection-reset-path.client.pcap", "network"),
    ] {
        let v = analyze_json(&fixture(file));
        let f = findings(&v);
        assert_eq!(f[0]["kind"], "connection_reset", "{file}");
        assert_eq!(f[0]["culprit"]["role"], role, "{file}");
        assert_eq!(f[0]["details"]["requests_lost"], 3, "{file}");
        assert_eq!(f[0]["details"]["by_path"], role == "network", "{file}");
    }
    // Their twins: every request answered, nothing failed.
    for file in [
        "connection-kept.client.pcap",
        "connection-accepted.client.pcap",
    ] {
        let v = analyze_json(&fixture(file));
        assert!(
            !kinds(&v).iter().any(|k| k.starts_with("connection_")),
            "{file}: {:?}",
            kinds(&v)
        );
    }
}

/// Connection N is Wireshark's tcp.stream N-1, and each finding's filter
/// shows exactly its evidence's frames there (checked with tshark when it is
/// installed).
#[test]
fn wireshark_filters_select_the_evidence_by_tcp_stream() {
    let have_tshark = Command::new("tshark").arg("-v").output().is_ok();
    for file in [
        "connection-reset.client.pcap",
        "nginx-nodelay-off.server.pcap",
        "rto.client.pcap",
    ] {
        let v = analyze_json(&fixture(file));
        for c in v["connections"].as_array().unwrap() {
            assert_eq!(
                c["tcp_stream"].as_u64(),
                Some(c["id"].as_u64().unwrap() - 1)
            );
        }
        let f = &findings(&v)[0];
        let filter = f["wireshark_filter"].as_str().unwrap();
        let ev = &f["evidence"][0];
        assert!(
            filter.starts_with(&format!("tcp.stream eq {}", ev["tcp_stream"])),
            "{filter}"
        );
        if !have_tshark {
            continue;
        }
        let out = Command::new("tshark")
            .args(["-r", fixture(file).to_str().unwrap(), "-Y", filter])
            .args(["-T", "fields", "-e", "frame.number"])
            .output()
            .unwrap();
        let shown: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        for fr in ev["frames"].as_array().unwrap() {
            assert!(
                shown.contains(&fr.as_u64().unwrap()),
                "{file}: {filter}: {shown:?}"
            );
        }
    }
}

/// The JSON documents of the commands that need no root or network all say
/// which schema, version, command and input made them; floats carry no
/// binary noise (6 decimals at most).
#[test]
fn every_json_document_names_schema_version_command_and_input() {
    let pcap = fixture("nginx-nodelay-off.server.pcap");
    for (args, command) in [
        (
            vec!["analyze", "--format", "json", pcap.to_str().unwrap()],
            "analyze",
        ),
        (vec!["lab", "list", "--format", "json"], "lab list"),
        (vec!["sysctl", "--format", "json"], "sysctl"),
    ] {
        let out = run(&args);
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["schema"], 1, "{args:?}");
        assert_eq!(v["command"], command);
        assert_eq!(v["tool_version"], env!("CARGO_PKG_VERSION"));
        assert!(v["input"].is_object(), "{args:?}");
        fn check(v: &Value) {
            match v {
                Value::Number(n) if n.is_f64() => {
                    let s = n.to_string();
                    let decimals = s.split_once('.').map_or(0, |(_, d)| d.len());
                    assert!(decimals <= 6 || s.contains('e'), "{s}");
                }
                Value::Array(a) => a.iter().for_each(check),
                Value::Object(m) => m.values().for_each(check),
                _ => {}
            }
        }
        check(&v);
    }
}

/// Every kind the rule registry makes is documented where users look: the
/// cause catalogue's table (docs/causes/README.md) and a page of its own,
/// the JSON schema (docs/json.md), and `analyze --help`.
#[test]
fn every_registered_kind_is_documented() {
    let docs = root().join("docs");
    let catalogue = std::fs::read_to_string(docs.join("causes/README.md")).unwrap();
    let json = std::fs::read_to_string(docs.join("json.md")).unwrap();
    let help = String::from_utf8(run(&["analyze", "--help"]).stdout).unwrap();
    let schema = json
        .split("\"kind\": ")
        .nth(1)
        .and_then(|s| s.split("\"culprit\"").next())
        .unwrap();
    for kind in tcpdoctor_engine::rules::Kind::ALL {
        let name = kind.name();
        assert!(
            catalogue.contains(&format!("| `{name}` |")),
            "docs/causes/README.md table lacks {name}"
        );
        assert!(
            docs.join(format!("causes/{name}.md")).is_file(),
            "docs/causes/{name}.md is missing"
        );
        assert!(
            schema.contains(&format!("\"{name}\"")),
            "docs/json.md schema lacks {name}"
        );
        assert!(help.contains(name), "analyze --help lacks {name}");
    }
    assert!(tcpdoctor_engine::rules::Kind::ALL.len() >= 17);
}

fn text_of(path: &Path) -> String {
    let out = run(&["analyze", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_median_line_says_when_the_time_lost_is_elsewhere() {
    // Two exchanges around 115 ms, and 613 ms lost in the findings: the
    // median alone would hide where the time went.
    let t = text_of(&fixture("slow-start-warm.client.pcap"));
    assert!(
        t.contains("budget     exchanges around the median take 115.3 ms")
            && t.contains("but the findings below lost")
            && t.contains("slowest exchange took 828.6 ms"),
        "{t}"
    );
    assert!(
        t.contains("· 1 connection ·") && t.contains("1 of 1 connection)"),
        "{t}"
    );
    // Nagle on every exchange: the median is the story, nothing added.
    let t = text_of(&fixture("nginx-nodelay-off.server.pcap"));
    assert!(t.contains("exchanges around the median take"), "{t}");
    assert!(!t.contains("but the findings below lost"), "{t}");
}

#[test]
fn no_share_of_exchange_time_when_no_exchange_completed() {
    let path = root().join("fixtures/corpus/zeek-tcp-timestamp.pcap");
    let v = analyze_json(&path);
    assert_eq!(v["capture"]["exchanges"], 0);
    assert!(!findings(&v).is_empty());
    let t = text_of(&path);
    assert!(t.contains("lost (no exchange completed)"), "{t}");
    assert!(!t.contains("of exchange time"), "{t}");
    let dir = std::env::temp_dir().join(format!("tcpdoctor-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("r.html");
    let out = run(&[
        "analyze",
        "--html",
        html.to_str().unwrap(),
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let h = std::fs::read_to_string(&html).unwrap();
    assert!(h.contains("lost (no exchange completed)") && !h.contains("of exchange time"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sockets_of_a_pid_no_process_has_is_an_error() {
    if Path::new("/proc/999999").exists() {
        return;
    }
    let out = run(&["sockets", "--pid", "999999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pid 999999: no such process"));
}

/// What bash completion offers for the words typed so far (the last one
/// being completed), run in an empty directory but for one file.
fn bash_completes(words: &[&str]) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-compl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a-file-here"), "").unwrap();
    let script = run(&["completions", "bash"]).stdout;
    let script_path = dir.join("tcpdoctor.bash");
    std::fs::write(&script_path, script).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let n = words.len() - 1;
    let prog = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={n}; _tcpdoctor tcpdoctor '{}' '{}'; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script_path.display(),
        quoted.join(" "),
        words[n],
        words[n - 1]
    );
    let out = Command::new("bash")
        .args(["--norc", "-c", &prog])
        .current_dir(&dir)
        .output()
        .expect("bash");
    let got = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    got
}

#[test]
fn completions_offer_interfaces_states_and_cases_not_files() {
    if Command::new("bash").arg("--version").output().is_err() {
        return;
    }
    let iface = bash_completes(&["tcpdoctor", "watch", "-i", ""]);
    assert!(
        iface.contains(&"any".to_string()) && iface.contains(&"lo".to_string()),
        "{iface:?}"
    );
    assert!(
        !iface.iter().any(|w| w.contains("a-file-here")),
        "{iface:?}"
    );
    let iface = bash_completes(&["tcpdoctor", "watch", "--interface", "l"]);
    assert!(
        iface.contains(&"lo".to_string()) && !iface.contains(&"any".to_string()),
        "{iface:?}"
    );
    let states = bash_completes(&["tcpdoctor", "sockets", "--state", ""]);
    for s in ["established", "listen", "time-wait", "connected", "all"] {
        assert!(states.contains(&s.to_string()), "{s}: {states:?}");
    }
    assert!(
        !states.iter().any(|w| w.contains("a-file-here")),
        "{states:?}"
    );
    let cases = bash_completes(&["tcpdoctor", "lab", "run", ""]);
    assert!(
        cases.contains(&"nagle-delayed-ack".to_string()),
        "{cases:?}"
    );
    assert!(!cases.iter().any(|w| w.starts_with('-')), "{cases:?}");
    let options = bash_completes(&["tcpdoctor", "lab", "run", "--comp"]);
    assert_eq!(options, ["--compare"]);
    // An interval is not a file either.
    let interval = bash_completes(&["tcpdoctor", "ping", "-i", ""]);
    assert!(
        !interval.iter().any(|w| w.contains("a-file-here")),
        "{interval:?}"
    );
}

#[test]
fn sockets_state_still_accepts_any_case_and_ss_aliases() {
    for v in ["LISTEN", "listening", "connected"] {
        let out = run(&["sockets", "--state", v, "--format", "json"]);
        assert!(
            out.status.success(),
            "{v}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = run(&["sockets", "--state", "bogus"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bogus") && err.contains("established"),
        "{err}"
    );
}

/// The frames drawn in the ladder of finding `n` of an HTML report.
fn ladder_frames(page: &str, n: usize) -> Vec<u64> {
    let start = page
        .find(&format!("id=\"finding-{n}\""))
        .expect("the finding");
    let end = page[start + 1..]
        .find("id=\"finding-")
        .map_or(page.len(), |e| start + 1 + e);
    let part = &page[start..end];
    let Some(svg) = part.find("class=\"chart ladder\"") else {
        return Vec::new();
    };
    let svg = &part[svg..part[svg..].find("</svg>").map_or(part.len(), |e| svg + e)];
    svg.match_indices("<title>frame ")
        .filter_map(|(i, m)| {
            svg[i + m.len()..]
                .split(' ')
                .next()
                .and_then(|f| f.parse().ok())
        })
        .collect()
}

#[test]
fn a_findings_ladder_draws_the_exchange_its_evidence_names() {
    // network_latency cites the handshake and the first exchange (frames 1,
    // 3, 4, 8); the engine's own ladder holds the connection's last packets.
    let cap = fixture("network-latency.client.pcap");
    let v = analyze_json(&cap);
    let f = &findings(&v)[0];
    assert_eq!(f["kind"], "network_latency");
    let named: Vec<u64> = f["evidence"][0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    let dir = std::env::temp_dir().join(format!("tcpdoctor-ladder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("r.html");
    let out = run(&[
        "analyze",
        cap.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let drawn = ladder_frames(&page, 1);
    assert_eq!(drawn.first(), named.iter().min(), "{drawn:?} vs {named:?}");
    assert_eq!(drawn.last(), named.iter().max(), "{drawn:?} vs {named:?}");
    assert!(
        named.iter().all(|f| drawn.contains(f)),
        "{drawn:?} vs {named:?}"
    );
    // Read from standard input there is no second pass: a ladder that does
    // not show the evidence's packets is left out, and the page says so.
    let bytes = std::fs::read(&cap).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["analyze", "-", "--html", html.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    assert!(child.wait().unwrap().success());
    let page = std::fs::read_to_string(&html).unwrap();
    let drawn = ladder_frames(&page, 1);
    assert!(
        drawn.is_empty() || named.iter().any(|f| drawn.contains(f)),
        "{drawn:?} vs {named:?}"
    );
    assert!(page.contains("No ladder: the packets of the exchange the evidence names"));
    // Evidence naming no frame (a server's time over a whole connection)
    // keeps the engine's ladder.
    let cap = fixture("close-delimited.client.pcap");
    let out = run(&[
        "analyze",
        cap.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!ladder_frames(&page, 1).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_manual_page_per_command_with_the_usual_sections() {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = run(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let have_groff = Command::new("groff").arg("--version").output().is_ok();
    for name in [
        "tcpdoctor",
        "tcpdoctor-analyze",
        "tcpdoctor-watch",
        "tcpdoctor-sockets",
        "tcpdoctor-top",
        "tcpdoctor-sysctl",
        "tcpdoctor-lab",
        "tcpdoctor-lab-run",
        "tcpdoctor-completions",
    ] {
        let path = dir.join(format!("{name}.1"));
        let page = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        for section in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH DESCRIPTION",
            ".SH OPTIONS",
            ".SH \"EXIT STATUS\"",
            ".SH EXAMPLES",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(page.contains(section), "{name} lacks {section}");
        }
        assert!(!page.contains("EXTRA"), "{name}");
        assert!(
            page.is_ascii(),
            "{name}: characters outside ASCII are groff escapes"
        );
        // Examples are not refilled.
        let ex = &page[page.find(".SH EXAMPLES").unwrap()..];
        assert!(
            ex.starts_with(".SH EXAMPLES\n.nf\n"),
            "{name}: {}",
            &ex[..60.min(ex.len())]
        );
        if have_groff {
            let g = Command::new("groff")
                .args(["-ww", "-z", "-man"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                g.stderr.is_empty(),
                "{name}: {}",
                String::from_utf8_lossy(&g.stderr)
            );
        }
    }
    let analyze = std::fs::read_to_string(dir.join("tcpdoctor-analyze.1")).unwrap();
    assert!(
        analyze.contains("\\fB\\-\\-parquet\\fR \\fIDIR\\fR"),
        "options with their values"
    );
    assert!(analyze.contains("Exit status") || analyze.contains("0 analysed"));
    let lab_run = std::fs::read_to_string(dir.join("tcpdoctor-lab-run.1")).unwrap();
    assert!(lab_run.contains("nagle\\-delayed\\-ack \\-\\-compare"));
    // One page on standard output.
    let one = run(&["man", "lab", "run"]);
    assert!(one.status.success());
    assert_eq!(String::from_utf8(one.stdout).unwrap(), lab_run);
    assert_eq!(run(&["man", "bogus"]).status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_text_report_says_when_a_ladder_is_not_the_evidences_exchange() {
    let out = run(&[
        "analyze",
        fixture("network-latency.client.pcap").to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "ladder of the connection's last packets, not the exchange the evidence names"
        ),
        "{text}"
    );
    assert!(
        !text.contains("ladder of one exchange (connection 1)"),
        "{text}"
    );
}
