//! The cases: one mechanism each, its setup, what it must be diagnosed as,
//! and the fix that `--compare` applies.

use std::time::Duration;

use crate::flood::SynFlood;
use crate::peers::{ClientSpec, ServerSpec, SlowRead};
use crate::topo::Vantage;

/// What the symptom is measured as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headline {
    /// Per-request latency (p50).
    Latency,
    /// Time of the whole transfer.
    Duration,
    /// Requests that failed (refused or reset connections).
    Failures,
}

/// Something done to the path while the workload runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    /// The router drops every server→client packet from `at` for `length`.
    Blackout {
        at: Duration,
        length: Duration,
    },
    /// The server's firewall drops the first SYN of every connection.
    DropFirstSyn,
    /// The server's firewall rejects every second SYN with an RST
    /// (`REJECT --reject-with tcp-reset`): a port closed to those connections.
    RejectEverySecondSyn,
    /// The router resets connections: every third request from the client is
    /// answered by an RST from the router in the server's name.
    ResetByPath,
}

/// Which server software runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Peer {
    /// The built-in server and client.
    Builtin,
    /// nginx (with wrk as the client when installed).
    Nginx,
    /// The JDK's com.sun.net.httpserver (with wrk as the client when installed).
    Jdk,
    /// A Python server (fixtures/src/http_server.py; the built-in client).
    Python,
}

impl Peer {
    pub fn name(self) -> &'static str {
        match self {
            Peer::Builtin => "builtin",
            Peer::Nginx => "nginx",
            Peer::Jdk => "jdk",
            Peer::Python => "python",
        }
    }

    /// The program a real peer needs.
    pub fn program(self) -> Option<&'static str> {
        match self {
            Peer::Builtin => None,
            Peer::Nginx => Some("nginx"),
            Peer::Jdk => Some("java"),
            Peer::Python => Some("python3"),
        }
    }

    /// Whether wrk is the client when it is installed (the seed cases' load).
    pub fn with_wrk(self) -> bool {
        matches!(self, Peer::Nginx | Peer::Jdk)
    }
}

/// The key of the certificate nginx serves with TLS (made at run time,
/// self-signed): what each full handshake's signature costs the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsKey {
    /// RSA 4096: a private-key operation of several ms per handshake.
    Rsa4096,
    /// ECDSA P-256: about a hundred times cheaper.
    EcdsaP256,
}

impl TlsKey {
    /// `openssl req -newkey` arguments.
    pub fn openssl_args(self) -> &'static [&'static str] {
        match self {
            TlsKey::Rsa4096 => &["-newkey", "rsa:4096"],
            TlsKey::EcdsaP256 => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TlsKey::Rsa4096 => "RSA 4096",
            TlsKey::EcdsaP256 => "ECDSA P-256",
        }
    }
}

/// A bottleneck on the router's client-facing link (`ethc`): what the
/// server→client direction crosses after the delay line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bottleneck {
    /// TBF rate, as tc takes it (`10mbit`).
    pub rate: &'static str,
    /// TBF queue in bytes: what waits for the link (a deep one: bufferbloat).
    pub limit_bytes: u32,
}

/// A token-bucket policer on the router's client-facing link: packets
/// towards the client beyond `packets_per_sec` (after a burst of
/// `burst_packets`) are dropped, none queued (iptables `hashlimit`; this
/// kernel has no `act_police`). The lab's packets are full-size after the
/// delay line, so a rate in packets is one in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policer {
    pub packets_per_sec: u32,
    pub burst_packets: u32,
}

/// POSTs made by curl (one process, one connection each) instead of the
/// built-in client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CurlPost {
    /// Bytes of the body (`--data-binary @file`).
    pub bytes: usize,
    /// With `Expect: 100-continue` (and `--expect100-timeout 1`); without:
    /// `Expect:` (curl sends the body at once).
    pub expect: bool,
    /// Requests (curls), one after the other.
    pub requests: usize,
}

/// Everything a phase (before or after the fix) is made of.
#[derive(Debug, Clone)]
pub struct Setup {
    /// One-way delay in the router: RTT = 2 × this.
    pub one_way: Duration,
    /// Probability that the router drops a forwarded packet.
    pub loss: f64,
    /// TBF rate on both hosts (`16mbit`…).
    pub rate: Option<String>,
    /// Congestion control of the server (`reno`, `bbr`).
    pub server_cc: Option<&'static str>,
    /// Congestion control of the client (`reno`, `bbr`): the sender of an upload.
    pub client_cc: Option<&'static str>,
    /// initcwnd on the server's route to the client.
    pub server_initcwnd: Option<u32>,
    /// net.ipv4.tcp_rmem of the client.
    pub client_rmem: Option<&'static str>,
    /// net.ipv4.tcp_slow_start_after_idle of the server (Linux default: on).
    pub server_slow_start_after_idle: bool,
    /// MTU of the router's client-facing link (`ethc`): the path MTU
    /// towards the client. None: 1500.
    pub client_link_mtu: Option<u32>,
    /// The router drops the ICMP "fragmentation needed" it sends (a
    /// firewall filtering ICMP): path MTU discovery cannot work.
    pub filter_frag_needed: bool,
    /// net.ipv4.tcp_mtu_probing of the server (Linux default: 0).
    pub server_mtu_probing: bool,
    /// net.ipv4.tcp_syncookies of the server (Linux default: 1, cookies when
    /// the SYN queue is full).
    pub server_syncookies: bool,
    /// SYNs from spoofed sources sent from the client namespace while the
    /// client runs.
    pub syn_flood: Option<SynFlood>,
    /// nginx serves HTTPS (TLS 1.2 only, ECDHE, no session resumption) with a
    /// certificate of this key, and curl is the client (one connection per request).
    pub tls: Option<TlsKey>,
    /// A bottleneck queue towards the client, in the router.
    pub bottleneck: Option<Bottleneck>,
    /// A policer towards the client, in the router.
    pub policer: Option<Policer>,
    /// curl's POSTs instead of the built-in client.
    pub curl_post: Option<CurlPost>,
    pub server: ServerSpec,
    pub client: ClientSpec,
    pub action: Action,
    /// nginx `tcp_nodelay` / JDK `sun.net.httpserver.nodelay` for the real servers.
    pub peer_nodelay: bool,
    /// nginx `listen … rcvbuf=` for the real server (bytes).
    pub peer_rcvbuf: Option<usize>,
    /// The router drops the workload's first data packet towards the
    /// server (once): a request lost before a capture at the router's
    /// server side, sent again by the client's retransmission timer.
    pub lose_first_request: bool,
    /// The router drops the workload's first data packet towards the
    /// client (once): a response lost before a capture at the client, sent
    /// again by the server's retransmission timer.
    pub lose_first_response: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            one_way: Duration::ZERO,
            loss: 0.0,
            rate: None,
            server_cc: None,
            client_cc: None,
            server_initcwnd: None,
            client_rmem: None,
            server_slow_start_after_idle: true,
            client_link_mtu: None,
            filter_frag_needed: false,
            server_mtu_probing: false,
            server_syncookies: true,
            syn_flood: None,
            tls: None,
            bottleneck: None,
            policer: None,
            curl_post: None,
            server: ServerSpec::default(),
            client: ClientSpec::default(),
            action: Action::None,
            peer_nodelay: true,
            peer_rcvbuf: None,
            lose_first_request: false,
            lose_first_response: false,
        }
    }
}

/// What a fix is ("TCP_NODELAY on the server") and how it changes a setup.
pub type Fix = (&'static str, fn(&mut Setup));

/// A case of the lab.
pub struct Case {
    pub name: &'static str,
    pub summary: &'static str,
    /// The finding it must produce first: (kind, culprit role). None: healthy.
    pub expected: Option<(&'static str, &'static str)>,
    /// A detail the expected finding must carry, `details[key] == value`
    /// (and that must be gone after the fix): which variety of the kind.
    pub detail: Option<(&'static str, &'static str)>,
    pub headline: Headline,
    pub vantage: Vantage,
    pub setup: Setup,
    /// What the fix is ("with TCP_NODELAY on the server") and how it changes the setup.
    pub fix: Option<Fix>,
    /// Real servers this case can run with (`--peer`).
    pub peers: &'static [Peer],
    /// wrk's connections when it is the client (with a real server).
    pub wrk_connections: u32,
}

const MS: fn(u64) -> Duration = Duration::from_millis;

/// Every case, in the order `lab list` shows them.
pub fn all() -> Vec<Case> {
    [
        nagle_cases(),
        receive_window_cases(),
        loss_cases(),
        connection_cases(),
        endpoint_delay_cases(),
        round_trip_cases(),
        sender_limit_cases(),
        handshake_cost_cases(),
        server_delay_cause_cases(),
        bottleneck_cases(),
        never_answered_cases(),
        healthy_cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Nagle's algorithm meeting delayed ACKs, at the server or the client.
fn nagle_cases() -> Vec<Case> {
    vec![
        Case {
            name: "nagle-delayed-ack",
            summary:
                "server writes headers then body with Nagle on; keep-alive client delays its ACKs",
            expected: Some(("nagle_delayed_ack", "server")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Server,
            setup: Setup {
                server: ServerSpec {
                    nodelay: false,
                    split_write: true,
                    body_bytes: 615,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    workers: 4,
                    requests: 0,
                    duration: Some(MS(1500)),
                    ..ClientSpec::default()
                },
                peer_nodelay: false,
                ..Setup::default()
            },
            fix: Some(("TCP_NODELAY on the server", |s| {
                s.server.nodelay = true;
                s.peer_nodelay = true;
            })),
            peers: &[Peer::Builtin, Peer::Nginx],
            wrk_connections: 100,
        },
        Case {
            name: "client-write-write",
            summary: "client sends request headers and body in two writes with Nagle on",
            expected: Some(("nagle_delayed_ack", "client")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::RouterServer,
            setup: Setup {
                server: ServerSpec {
                    body_bytes: 20,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    requests: 30,
                    upload: 100,
                    split_write: true,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("TCP_NODELAY on the client", |s| s.client.nodelay = true)),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "jdk-httpserver",
            summary: "JDK HttpServer (sun.net.httpserver.nodelay=false) answering 100-byte POSTs",
            expected: Some(("nagle_delayed_ack", "server")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                server: ServerSpec {
                    nodelay: false,
                    split_write: true,
                    body_bytes: 20,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    workers: 2,
                    requests: 0,
                    duration: Some(MS(1500)),
                    upload: 100,
                    ..ClientSpec::default()
                },
                peer_nodelay: false,
                ..Setup::default()
            },
            fix: Some(("-Dsun.net.httpserver.nodelay=true", |s| {
                s.server.nodelay = true;
                s.peer_nodelay = true;
            })),
            peers: &[Peer::Builtin, Peer::Jdk],
            wrk_connections: 4,
        },
    ]
}

/// Transfers held back by the receiver's window.
fn receive_window_cases() -> Vec<Case> {
    vec![
        Case {
            name: "small-receive-window",
            summary: "605 KB upload to a server with a 4 KB SO_RCVBUF across a 35 ms RTT",
            expected: Some(("receive_window_limited", "server")),
            detail: None,
            headline: Headline::Duration,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: Duration::from_micros(17_500),
                client_cc: Some("reno"),
                server: ServerSpec {
                    listen_rcvbuf: Some(4096),
                    body_bytes: 3,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    upload: 619_520,
                    ..ClientSpec::default()
                },
                peer_rcvbuf: Some(4096),
                ..Setup::default()
            },
            fix: Some(("SO_RCVBUF 256 KB on the server", |s| {
                s.server.listen_rcvbuf = Some(256 << 10);
                s.peer_rcvbuf = Some(256 << 10);
            })),
            peers: &[Peer::Builtin, Peer::Nginx],
            wrk_connections: 4,
        },
        Case {
            name: "zero-window",
            summary:
                "client with an 8 KB receive buffer reads 4 KB every 250 ms of a 3 MB response",
            expected: Some(("zero_window", "client")),
            detail: None,
            headline: Headline::Duration,
            vantage: Vantage::Server,
            setup: Setup {
                server: ServerSpec {
                    body_bytes: 3_000_000,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    rcvbuf: Some(8192),
                    slow_read: Some(SlowRead {
                        chunk: 4096,
                        interval: MS(250),
                        span: MS(3000),
                    }),
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("the client reading as fast as data arrives", |s| {
                s.client.slow_read = None;
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
    ]
}

/// Packets lost on the path: random loss, an outage, a path MTU black hole.
fn loss_cases() -> Vec<Case> {
    vec![
        Case {
            name: "packet-loss",
            summary: "2 MiB download across a 20 ms RTT path that drops 2% of packets",
            expected: Some(("packet_loss", "network")),
            detail: None,
            headline: Headline::Duration,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: MS(10),
                loss: 0.02,
                server: ServerSpec {
                    body_bytes: 2 << 20,
                    ..ServerSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("a path without loss", |s| s.loss = 0.0)),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "retransmission-timeout",
            summary: "2 MiB download at 16 Mbit/s; the path drops everything for 0.6 s",
            expected: Some(("retransmission_timeout", "network")),
            detail: None,
            headline: Headline::Duration,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: MS(10),
                rate: Some("16mbit".into()),
                server: ServerSpec {
                    body_bytes: 2 << 20,
                    ..ServerSpec::default()
                },
                action: Action::Blackout {
                    at: MS(300),
                    length: MS(600),
                },
                ..Setup::default()
            },
            fix: Some(("a path without the outage", |s| s.action = Action::None)),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "peer-gone",
            summary: "4 requests 200 ms apart on one keep-alive connection (10 ms RTT); from \
                      0.5 s on the server answers nothing, and the 4th request is sent again \
                      and again until the client gives up after 2 s",
            expected: Some(("retransmission_timeout", "network")),
            detail: None,
            headline: Headline::Failures,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: MS(5),
                client: ClientSpec {
                    requests: 4,
                    pause_between: MS(200),
                    timeout: Some(MS(2000)),
                    ..ClientSpec::default()
                },
                action: Action::Blackout {
                    at: MS(500),
                    length: MS(2700),
                },
                ..Setup::default()
            },
            fix: Some(("a server that keeps answering", |s| s.action = Action::None)),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "path-mtu-blackhole",
            summary: "3 responses of 30 KB through a router whose client-facing link has an MTU \
                      of 1400 and whose ICMP 'fragmentation needed' is filtered (server: \
                      tcp_mtu_probing=1)",
            expected: Some(("path_mtu_blackhole", "network")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                client_link_mtu: Some(1400),
                filter_frag_needed: true,
                // With 0 (the default) the connection never recovers.
                server_mtu_probing: true,
                server: ServerSpec {
                    body_bytes: 30_000,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    connections: 3,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some((
                "the router's ICMP 'fragmentation needed' let through",
                |s| s.filter_frag_needed = false,
            )),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
    ]
}

/// Connections slow to be accepted, refused, or reset.
fn connection_cases() -> Vec<Case> {
    vec![
        Case {
            name: "listen-queue-overflow",
            summary: "8 clients connect at once to a server with a backlog of 1 that accepts one \
                      connection every 300 ms",
            expected: Some(("listen_queue_overflow", "server")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Server,
            setup: Setup {
                server: ServerSpec {
                    backlog: 1,
                    accept_every: MS(300),
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    workers: 8,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("a backlog of 128 and a server that accepts at once", |s| {
                s.server.backlog = 128;
                s.server.accept_every = Duration::ZERO;
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "syn-retransmit",
            summary: "the server's firewall drops the first SYN of each of 3 connections",
            expected: Some(("syn_retransmit", "network")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                client: ClientSpec {
                    connections: 3,
                    ..ClientSpec::default()
                },
                action: Action::DropFirstSyn,
                ..Setup::default()
            },
            fix: Some(("no SYN dropped", |s| s.action = Action::None)),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "connection-refused",
            summary: "the server's firewall rejects every second SYN with an RST (6 connections)",
            expected: Some(("connection_refused", "server")),
            detail: None,
            headline: Headline::Failures,
            vantage: Vantage::Client,
            setup: Setup {
                client: ClientSpec {
                    connections: 6,
                    ..ClientSpec::default()
                },
                action: Action::RejectEverySecondSyn,
                ..Setup::default()
            },
            fix: Some(("every connection accepted", |s| s.action = Action::None)),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "connection-reset",
            summary: "the server resets the connection on the third request of each (3 \
                      connections of 4 keep-alive requests)",
            expected: Some(("connection_reset", "server")),
            detail: None,
            headline: Headline::Failures,
            vantage: Vantage::Client,
            setup: Setup {
                server: ServerSpec {
                    reset_on: 3,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    connections: 3,
                    requests: 4,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("a server that answers every request", |s| {
                s.server.reset_on = 0
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "connection-reset-by-path",
            summary: "the router resets every third request in the server's name (3 connections \
                      of 4 keep-alive requests)",
            expected: Some(("connection_reset", "network")),
            detail: None,
            headline: Headline::Failures,
            vantage: Vantage::Client,
            setup: Setup {
                client: ClientSpec {
                    connections: 3,
                    requests: 4,
                    ..ClientSpec::default()
                },
                action: Action::ResetByPath,
                ..Setup::default()
            },
            fix: Some(("no reset on the path", |s| s.action = Action::None)),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
    ]
}

/// Time spent by the server or the client rather than on the network.
fn endpoint_delay_cases() -> Vec<Case> {
    vec![
        Case {
            name: "server-delay",
            summary:
                "the server thinks 300 ms before each answer (5 keep-alive requests, 35 ms RTT)",
            expected: Some(("server_delay", "server")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: Duration::from_micros(17_500),
                server: ServerSpec {
                    think: MS(300),
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    requests: 5,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("a server that answers at once", |s| {
                s.server.think = Duration::ZERO
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "server-delay-inside-response",
            summary:
                "the server flushes chunked headers at once, then computes the body for 300 ms \
                      (5 keep-alive requests, 35 ms RTT)",
            expected: Some(("server_delay", "server")),
            detail: Some(("where", "inside_response")),
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: Duration::from_micros(17_500),
                server: ServerSpec {
                    // As a Python server would: Nagle on, headers first.
                    nodelay: false,
                    chunked: true,
                    think_inside: MS(300),
                    body_bytes: 1400,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    requests: 5,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("a server that has the body ready at once", |s| {
                s.server.think_inside = Duration::ZERO
            })),
            peers: &[Peer::Builtin, Peer::Python],
            wrk_connections: 4,
        },
        Case {
            name: "client-delay",
            summary: "the client idles 250 ms after connecting before its request (5 connections)",
            expected: Some(("client_delay", "client")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Server,
            setup: Setup {
                client: ClientSpec {
                    connections: 5,
                    idle_before_request: MS(250),
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("a client that sends its request at once", |s| {
                s.client.idle_before_request = Duration::ZERO
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
    ]
}

/// Round trips across a long path, per request or per new connection.
fn round_trip_cases() -> Vec<Case> {
    vec![
        Case {
            name: "network-latency",
            summary: "5 small requests on one connection across a 100 ms RTT",
            expected: Some(("network_latency", "network")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: MS(50),
                client: ClientSpec {
                    requests: 5,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("a server next to the client (same LAN)", |s| {
                s.one_way = Duration::ZERO
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "handshake-round-trips",
            summary: "one request per connection (10 connections, one after the other) across a \
                      100 ms RTT to a server that takes 35 ms",
            expected: Some(("network_latency", "network")),
            detail: Some(("cause", "new_connections")),
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: MS(50),
                server: ServerSpec {
                    think: MS(35),
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    connections: 10,
                    requests: 1,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("keep-alive: the 10 requests on one connection", |s| {
                s.client.connections = 1;
                s.client.requests = 10;
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
    ]
}

/// Transfers held back by the sender's congestion window or send buffer.
fn sender_limit_cases() -> Vec<Case> {
    vec![
        Case {
            name: "congestion-limited",
            summary: "1 MiB on a fresh connection across a 100 ms RTT: Reno's slow start",
            expected: Some(("congestion_limited", "network")),
            detail: None,
            headline: Headline::Duration,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: MS(50),
                server_cc: Some("reno"),
                client_rmem: Some("4096 4194304 33554432"),
                server: ServerSpec {
                    body_bytes: 1 << 20,
                    ..ServerSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("initcwnd 1000 on the server's route", |s| {
                s.server_initcwnd = Some(1000)
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "send-buffer-limited",
            summary: "1 MiB from a server whose SO_SNDBUF is 16 KB, across a 35 ms RTT",
            expected: Some(("send_buffer_limited", "server")),
            detail: None,
            headline: Headline::Duration,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: Duration::from_micros(17_500),
                client_rmem: Some("4096 4194304 33554432"),
                server: ServerSpec {
                    body_bytes: 1 << 20,
                    sndbuf: Some(16 << 10),
                    ..ServerSpec::default()
                },
                ..Setup::default()
            },
            fix: Some((
                "the server's send buffer left to autotuning (no SO_SNDBUF)",
                |s| s.server.sndbuf = None,
            )),
            peers: &[Peer::Builtin, Peer::Nginx],
            wrk_connections: 4,
        },
        Case {
            name: "slow-start-after-idle",
            summary: "6 keep-alive responses of 200 KB, 1 s apart, across a 35 ms RTT (Reno, \
                      tcp_slow_start_after_idle=1 on the server)",
            expected: Some(("slow_start_after_idle", "server")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: Duration::from_micros(17_500),
                // BBR keeps its pacing rate over idle spells (Linux skips the
                // restart for congestion controls with their own `cong_control`).
                server_cc: Some("reno"),
                client_rmem: Some("4096 1048576 6291456"),
                server: ServerSpec {
                    body_bytes: 200_000,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    requests: 6,
                    pause_between: MS(1000),
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("net.ipv4.tcp_slow_start_after_idle=0 on the server", |s| {
                s.server_slow_start_after_idle = false
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
    ]
}

/// Connections slow to open: a SYN flood, a costly TLS handshake.
fn handshake_cost_cases() -> Vec<Case> {
    vec![
        Case {
            name: "syn-flood",
            summary: "20,000 SYNs from spoofed sources in 2 s to a server with \
                      tcp_syncookies=0, while 10 clients connect (one request each)",
            expected: Some(("syn_flood", "network")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Server,
            setup: Setup {
                server_syncookies: false,
                syn_flood: Some(SynFlood {
                    syns: 20_000,
                    over: MS(2000),
                    client_after: MS(500),
                }),
                client: ClientSpec {
                    workers: 10,
                    connections: 1,
                    requests: 1,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some((
                "net.ipv4.tcp_syncookies=1 on the server (Linux's default)",
                |s| s.server_syncookies = true,
            )),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "tls-handshake",
            summary: "20 HTTPS requests, one connection each, to nginx with an RSA 4096 \
                      certificate (TLS 1.2, ECDHE-RSA, no session resumption)",
            expected: Some(("tls_handshake", "server")),
            detail: Some(("cause", "key_exchange")),
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                tls: Some(TlsKey::Rsa4096),
                client: ClientSpec {
                    connections: 20,
                    requests: 1,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("an ECDSA P-256 certificate", |s| {
                s.tls = Some(TlsKey::EcdsaP256)
            })),
            peers: &[Peer::Nginx],
            wrk_connections: 1,
        },
    ]
}

/// Server delays with a particular cause: TCP_CORK, close-delimited responses.
fn server_delay_cause_cases() -> Vec<Case> {
    vec![
        Case {
            name: "cork",
            summary: "the server sets TCP_CORK once and leaves it on: the partial tail of each \
                      3 KB response waits for the cork's 200 ms ceiling (10 keep-alive requests, \
                      2 ms RTT)",
            expected: Some(("server_delay", "server")),
            detail: Some(("cause", "cork")),
            headline: Headline::Latency,
            vantage: Vantage::Server,
            setup: Setup {
                one_way: MS(1),
                server: ServerSpec {
                    cork: true,
                    body_bytes: 3000,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    requests: 10,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("TCP_CORK off and on again after each response", |s| {
                s.server.uncork_each = true
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "close-delimited",
            summary: "responses without Content-Length end when the server closes the \
                      connection, 1.5 s after the last byte (3 connections, one request each, \
                      10 ms RTT)",
            expected: Some(("server_delay", "server")),
            detail: Some(("where", "close_delimited")),
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: MS(5),
                server: ServerSpec {
                    close_delimited: true,
                    close_after: Some(MS(1500)),
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    connections: 3,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some((
                "Content-Length in the responses: the client is done at the last byte",
                |s| s.server.close_delimited = false,
            )),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
    ]
}

/// Rate-limited links: a deep queue, a policer.
fn bottleneck_cases() -> Vec<Case> {
    vec![
        Case {
            name: "bufferbloat",
            summary: "a 5 MB download (Reno) fills a 10 Mbit/s link's 125 KB queue towards the \
                      client while 10 small requests are made 200 ms apart (32 ms RTT)",
            expected: Some(("queueing_delay", "network")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: MS(16),
                // Loss-based, as CUBIC (which a namespace may not choose here:
                // tcp_allowed_congestion_control): it fills the queue until a drop.
                server_cc: Some("reno"),
                bottleneck: Some(Bottleneck {
                    rate: "10mbit",
                    limit_bytes: 125_000,
                }),
                server: ServerSpec {
                    bulk_bytes: 5_000_000,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    requests: 10,
                    pause_between: MS(200),
                    bulk_first: Some(MS(700)),
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            // fq_codel or another AQM would keep the queue short; this
            // kernel has none, so the queue itself is made short.
            fix: Some((
                "a 15 KB queue (12 ms at 10 Mbit/s), as an AQM would keep it",
                |s| {
                    if let Some(b) = &mut s.bottleneck {
                        b.limit_bytes = 15_000;
                    }
                },
            )),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "policer",
            summary: "a 3 MB download (Reno) through a token-bucket policer towards the client \
                      (iptables hashlimit: 800 full-size packets/s, 9.3 Mbit/s, burst 40 \
                      packets), 40 ms RTT: the excess is dropped, not queued",
            expected: Some(("policer", "network")),
            detail: None,
            headline: Headline::Duration,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: MS(20),
                server_cc: Some("reno"),
                policer: Some(Policer {
                    packets_per_sec: 800,
                    burst_packets: 40,
                }),
                server: ServerSpec {
                    body_bytes: 3_000_000,
                    ..ServerSpec::default()
                },
                ..Setup::default()
            },
            fix: Some((
                "the same rate shaped: a 9.3 Mbit/s TBF with a 100 KB queue instead of the policer",
                |s| {
                    s.policer = None;
                    s.bottleneck = Some(Bottleneck {
                        rate: "9300kbit",
                        limit_bytes: 100_000,
                    });
                },
            )),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
    ]
}

/// Waits for what never comes: a 100 Continue, segments too big for the path.
fn never_answered_cases() -> Vec<Case> {
    vec![
        Case {
            name: "expect-100-continue",
            summary: "curl POSTs 20 KB with 'Expect: 100-continue' to a server that never \
                      answers 100: each body waits for curl's 1 s expect timeout (5 requests, \
                      10 ms RTT)",
            expected: Some(("client_delay", "client")),
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                one_way: MS(5),
                curl_post: Some(CurlPost {
                    bytes: 20_000,
                    expect: true,
                    requests: 5,
                }),
                server: ServerSpec {
                    body_bytes: 20,
                    ..ServerSpec::default()
                },
                ..Setup::default()
            },
            fix: Some(("curl without the header (-H 'Expect:')", |s| {
                if let Some(p) = &mut s.curl_post {
                    p.expect = false;
                }
            })),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "path-mtu-blackhole-nofallback",
            summary: "30 KB responses through a router whose client-facing link has an MTU of \
                      1400 and whose ICMP 'fragmentation needed' is filtered, from a server with \
                      tcp_mtu_probing=0 (Linux's default): its full-size segments are sent again \
                      and again and never arrive (2 connections; the client gives up after 4 s)",
            expected: Some(("path_mtu_blackhole", "network")),
            detail: None,
            headline: Headline::Failures,
            vantage: Vantage::Server,
            setup: Setup {
                client_link_mtu: Some(1400),
                filter_frag_needed: true,
                server_mtu_probing: false,
                server: ServerSpec {
                    body_bytes: 30_000,
                    ..ServerSpec::default()
                },
                client: ClientSpec {
                    connections: 2,
                    timeout: Some(MS(4000)),
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: Some((
                "the router's ICMP 'fragmentation needed' let through",
                |s| s.filter_frag_needed = false,
            )),
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
    ]
}

/// Clean paths with nothing to find.
fn healthy_cases() -> Vec<Case> {
    vec![
        Case {
            name: "many-connections",
            summary: "300 connections one after the other, one request each, on a clean path: \
                      busy, and nothing to find",
            expected: None,
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Server,
            setup: Setup {
                client: ClientSpec {
                    connections: 300,
                    requests: 1,
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: None,
            peers: &[Peer::Builtin],
            wrk_connections: 4,
        },
        Case {
            name: "healthy",
            summary: "keep-alive requests with TCP_NODELAY on a clean path: nothing to find",
            expected: None,
            detail: None,
            headline: Headline::Latency,
            vantage: Vantage::Client,
            setup: Setup {
                client: ClientSpec {
                    workers: 2,
                    requests: 0,
                    duration: Some(MS(1000)),
                    ..ClientSpec::default()
                },
                ..Setup::default()
            },
            fix: None,
            peers: &[Peer::Builtin, Peer::Nginx],
            wrk_connections: 4,
        },
    ]
}

/// The case named `name`.
pub fn find(name: &str) -> Option<Case> {
    all().into_iter().find(|c| c.name == name)
}
