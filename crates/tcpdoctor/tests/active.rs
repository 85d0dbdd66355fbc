//! `load`, `ping` and `trace` on the loopback interface and on bad input
//! (no root needed). The end-to-end tests with nginx, hping3 and routers in
//! network namespaces are tests/e2e/load.sh and tests/e2e/probe.sh.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};

use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .output()
        .expect("run tcpdoctor")
}

/// A keep-alive HTTP/1.1 server answering every request with `status` (chunked when asked).
fn serve(status: u16, chunked: bool) -> String {
    serve_on("127.0.0.1:0", status, chunked, 5)
}

fn serve_on(bind: &str, status: u16, chunked: bool, body_len: usize) -> String {
    let l = TcpListener::bind(bind).unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                loop {
                    let n = match c.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        let body = "x".repeat(body_len);
                        let r = if chunked {
                            format!("HTTP/1.1 {status} X\r\nTransfer-Encoding: chunked\r\n\r\n{body_len:x}\r\n{body}\r\n0\r\n\r\n")
                        } else {
                            format!(
                                "HTTP/1.1 {status} X\r\nContent-Length: {body_len}\r\n\r\n{body}"
                            )
                        };
                        if c.write_all(r.as_bytes()).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    match addr {
        std::net::SocketAddr::V4(a) => format!("http://{a}/"),
        std::net::SocketAddr::V6(a) => format!("http://[{}]:{}/", a.ip(), a.port()),
    }
}

fn load_json(args: &[&str]) -> (Value, i32) {
    let out = run(args);
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (v, out.status.code().unwrap())
}

#[test]
fn load_counts_requests_and_status_errors() {
    let url = serve(200, false);
    let (v, code) = load_json(&[
        "load", "-c", "2", "-t", "1", "-d", "300ms", "--format", "json", &url,
    ]);
    assert_eq!(code, 0);
    assert!(v["requests"].as_u64().unwrap() > 10, "{v}");
    assert_eq!(v["errors"]["total"], 0);
    for k in ["p50", "p75", "p90", "p99", "p999", "max", "mean"] {
        assert!(v["latency_ms"][k].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
    assert!(v["requests_per_sec"].as_f64().unwrap() > 0.0);
    assert!(v["transfer_bytes_per_sec"].as_f64().unwrap() > 0.0);

    let url = serve(503, true);
    let (v, _) = load_json(&[
        "load", "-c", "1", "-t", "1", "-d", "300ms", "--format", "json", &url,
    ]);
    assert!(v["requests"].as_u64().unwrap() > 0);
    assert_eq!(v["errors"]["status"], v["requests"]);
    assert_eq!(v["status_codes"]["503"], v["requests"]);
}

#[test]
fn load_large_bodies_and_ipv6() {
    // 1 MiB bodies, plain and chunked: every byte is read before the next request.
    for chunked in [false, true] {
        let url = serve_on("127.0.0.1:0", 200, chunked, 1 << 20);
        let (v, code) = load_json(&[
            "load", "-c", "2", "-t", "1", "-d", "300ms", "--format", "json", &url,
        ]);
        assert_eq!(code, 0, "{v}");
        let n = v["requests"].as_u64().unwrap();
        assert!(n > 2, "{v}");
        assert_eq!(v["errors"]["total"], 0, "{v}");
        assert!(v["bytes"].as_u64().unwrap() >= n << 20, "{v}");
    }
    if TcpListener::bind("[::1]:0").is_ok() {
        let url = serve_on("[::1]:0", 200, false, 5);
        let (v, code) = load_json(&[
            "load", "-c", "1", "-t", "1", "-d", "200ms", "--format", "json", &url,
        ]);
        assert_eq!(code, 0, "{v}");
        assert!(v["requests"].as_u64().unwrap() > 0);
    }
}

#[test]
fn load_open_model_keeps_the_schedule() {
    let url = serve(200, false);
    let (v, _) = load_json(&[
        "load", "-c", "4", "-t", "2", "-d", "1s", "--rate", "100", "--format", "json", &url,
    ]);
    let n = v["requests"].as_u64().unwrap();
    assert!((85..=110).contains(&n), "{n} requests for 100/s over 1 s");
    assert_eq!(v["latency_from"], "schedule");
}

#[test]
fn load_refused_is_a_connect_error_and_exit_1() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/");
    let (v, code) = load_json(&["load", "-c", "2", "-d", "200ms", "--format", "json", &url]);
    assert_eq!(code, 1);
    assert!(v["errors"]["connect"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn bad_input_is_exit_2_with_a_message() {
    for args in [
        &["load", "ftp://127.0.0.1/"][..],
        &[
            "load",
            "--cacert",
            "/nonexistent/ca.pem",
            "https://127.0.0.1/",
        ],
        &["load", "-k", "--cacert", "ca.pem", "https://127.0.0.1/"],
        &["load", "-d", "5x", "http://127.0.0.1/"],
        &["load", "-H", "no colon", "http://127.0.0.1/"],
        &["load", "--body", "@/nonexistent/file", "http://127.0.0.1/"],
        &["load", "-c", "0", "http://127.0.0.1/"],
        &["ping", "127.0.0.1:notaport"],
        &["ping", "-i", "0s", "127.0.0.1:80"],
        &["trace", "[::1"],
        &["trace", "-f", "0", "127.0.0.1:80"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: no message");
    }
}

#[test]
fn ping_connect_mode_on_loopback() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = l.local_addr().unwrap().to_string();
    let out = run(&["ping", "--connect", "-c", "3", "-i", "50ms", &target]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("3 packets transmitted, 3 packets received, 0% packet loss"),
        "{text}"
    );
    assert!(text.contains("round-trip min/avg/max/mdev"), "{text}");
}
