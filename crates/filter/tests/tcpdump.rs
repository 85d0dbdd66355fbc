//! The filter against tcpdump itself: the same expression on the same
//! capture must keep the same packets. Runs `tcpdump -r FILE -w OUT EXPR`
//! and compares OUT with the packets `Filter::matches` keeps. Skipped (with a
//! note) when tcpdump is not installed.
//!
//! Captures: real ones from fixtures/ and examples/ (Ethernet, Linux cooked,
//! pcapng) and tests/data/*.pcap (IPv4 with options and fragments, IPv6 with
//! a fragment header and hop-by-hop options, UDP, ICMP, ICMPv6, SCTP, a
//! non-IP frame, raw IP; see tests/data/make-mixed.py). None of them holds
//! truncated headers or ARP, where tcpdump's semantics differ on purpose
//! (see the crate documentation).

use std::path::{Path, PathBuf};
use std::process::Command;

use tcpdoctor_capture::CaptureReader;
use tcpdoctor_filter::Filter;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (timestamp µs, bytes) of every packet of a capture, with its link type.
fn packets(path: &Path) -> (tcpdoctor_filter::LinkType, Vec<(i64, Vec<u8>)>) {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = CaptureReader::new(std::io::BufReader::new(f)).expect("a capture");
    let mut out = Vec::new();
    let mut link = r.link_type();
    while let Some(p) = r.next_packet().expect("readable") {
        link = Some(p.link);
        // In µs: tcpdump writes pcapng input out as a microsecond pcap.
        out.push((p.ts.nanos() / 1000, p.data.to_vec()));
    }
    (link.unwrap_or(tcpdoctor_filter::LinkType::Ethernet), out)
}

fn tcpdump_keeps(file: &Path, expr: &str, out: &Path) -> Vec<(i64, Vec<u8>)> {
    let st = Command::new("tcpdump")
        .args(["-n", "-r"])
        .arg(file)
        .arg("-w")
        .arg(out)
        .arg(expr)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("tcpdump runs");
    assert!(
        st.success(),
        "tcpdump -r {} '{expr}' failed",
        file.display()
    );
    packets(out).1
}

fn have_tcpdump() -> bool {
    Command::new("tcpdump")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Compares ours with tcpdump's on each file; `tcpdump_expr` turns our
/// expression into the one tcpdump gets.
fn compare(files: &[PathBuf], exprs: &[&str], tcpdump_expr: impl Fn(&str) -> String) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tcpdoctor-filter-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let out = dir.join("out.pcap");
    let mut checked = 0;
    for file in files {
        let (link, all) = packets(file);
        for expr in exprs {
            let f = Filter::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
            let ours: Vec<_> = all
                .iter()
                .filter(|(_, d)| f.matches(link, d))
                .cloned()
                .collect();
            let theirs = tcpdump_keeps(file, &tcpdump_expr(expr), &out);
            assert!(
                ours == theirs,
                "{}: '{expr}': we keep {} packets, tcpdump {}; first difference at timestamp {:?}",
                file.display(),
                ours.len(),
                theirs.len(),
                ours.iter()
                    .zip(&theirs)
                    .find(|(a, b)| a != b)
                    .map(|(a, _)| a.0)
                    .or_else(|| ours
                        .get(theirs.len())
                        .or(theirs.get(ours.len()))
                        .map(|p| p.0)),
            );
            checked += 1;
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    eprintln!("{checked} (capture, expression) pairs agree with tcpdump");
}

const MIXED_EXPRS: &[&str] = &[
    "tcp",
    "udp",
    "sctp",
    "icmp",
    "icmp6",
    "ip",
    "ip6",
    "not ip and not ip6",
    "port 80",
    "tcp port 80",
    "udp port 53",
    "sctp port 443",
    "src port 80",
    "dst port 8080",
    "port 80 or 443",
    "portrange 50-500",
    "udp dst portrange 400-9000",
    "src or dst port 53",
    "host 10.0.0.1",
    "src host 10.0.0.2",
    "dst host 192.168.1.1",
    "host 10.0.0.1 and not 10.0.0.2",
    "net 10.0.0.0/8",
    "src net 10.0.0.0/24",
    "dst net 192.168.0.0/16",
    "net 0.0.0.0/0",
    "src and dst net 10.0.0.0/8",
    "host 2001:db8::1",
    "dst host fe80::1",
    "net 2001:db8::/32",
    "src net 2001:db8:1::/48",
    "ip6 net 2001:db8::/127",
    "not tcp",
    "tcp or udp and port 53",
    "not port 80 and not port 22",
    "!(icmp || icmp6) && (ip || ip6)",
    "ip and not (tcp or udp)",
    "ip6 and (tcp or udp) and not port 53",
    "(host 10.0.0.1 or host 2001:db8::2) and portrange 0-100",
    "udp and not port 53 or icmp",
    "icmp[icmptype] = icmp-echo",
    "ip and udp[4:2] > 20",
    "ip and tcp[13] & 0x3f != 0x10",
];

const REAL_EXPRS: &[&str] = &[
    "tcp port 8080",
    "port 8080 and host 10.71.0.1",
    "src port 8080",
    "dst port 8080",
    "portrange 37000-38000",
    "src host 10.71.0.2 or dst host 10.71.2.2",
    "net 10.71.1.0/24",
    "dst net 10.71.0.0/24 and not src port 37568",
    "not tcp",
    "ip6",
    "udp or icmp",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[13] & (tcp-syn|tcp-ack) == tcp-syn",
    "tcp[tcpflags] & tcp-push != 0 and dst port 8080",
    "ip[2:2] > 500",
    "tcp[14:2] < 1000",
];

#[test]
#[ignore = "needs tcpdump"]
fn keeps_what_tcpdump_keeps() {
    assert!(have_tcpdump(), "needs tcpdump installed");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    compare(
        &[data.join("mixed.pcap"), data.join("mixed-raw.pcap")],
        MIXED_EXPRS,
        |e| e.to_string(),
    );
    let r = root();
    compare(
        &[
            r.join("examples/nginx-nagle.pcap"),
            r.join("fixtures/nginx-nodelay-on.client.pcap"), // Linux cooked (SLL)
            r.join("fixtures/rto.router.pcap"),              // snaplen 128
            r.join("fixtures/jdk-nodelay.server.pcapng"),
            r.join("fixtures/syn-retransmit.client.pcap"),
        ],
        REAL_EXPRS,
        |e| e.to_string(),
    );
}

#[test]
#[ignore = "needs tcpdump"]
fn keeps_what_tcpdump_keeps_with_vlan_on_tagged_frames() {
    assert!(have_tcpdump(), "needs tcpdump installed");
    // We look through the tag; tcpdump does with `vlan and`.
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    compare(&[data.join("vlan.pcap")], MIXED_EXPRS, |e| {
        format!("vlan and ({e})")
    });
}
