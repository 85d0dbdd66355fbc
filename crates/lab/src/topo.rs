//! The lab's network: client ⟷ router ⟷ server, three namespaces joined by
//! veth pairs created inside them (nothing appears in the root namespace).
//!
//! ```text
//!  client ns                 router ns                    server ns
//!  eth0 10.71.1.2 ── ethc 10.71.1.1 │ eths 10.71.2.1 ── eth0 10.71.2.2
//!                            (tdlabdly: TUN delay line)
//! ```
//!
//! With a delay line, the router routes every forwarded packet into the TUN
//! device (policy rules on `ethc` and `eths`); the delay line re-injects it
//! after the one-way delay. Loss is `iptables -m statistic` in the router's
//! FORWARD chain, after the delay line (where TSO super-segments have been cut
//! into MTU-sized packets, so each drop is one packet), sparing SYNs and
//! SYN-ACKs. Rate is a TBF qdisc on
//! both hosts' `eth0`. The router blackholes 198.18.0.0/15, the SYN flood's
//! spoofed sources.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use crate::error::Result;

use crate::cases::{Bottleneck, Policer};
use crate::delay::DelayLine;
use crate::ns;

pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 71, 1, 2);
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 71, 2, 2);
/// The port every server of the lab listens on.
pub const PORT: u16 = 8080;
pub const DELAY_DEV: &str = "tdlabdly";
const DELAY_TABLE: &str = "100";

/// The server's address.
pub fn server_addr() -> SocketAddrV4 {
    SocketAddrV4::new(SERVER_IP, PORT)
}

/// Where a capture is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Vantage {
    /// The client's interface.
    Client,
    /// The server's interface.
    Server,
    /// The router's client-facing interface (sees the whole path's delay).
    Router,
    /// The router's server-facing interface.
    RouterServer,
}

impl Vantage {
    pub fn as_str(self) -> &'static str {
        match self {
            Vantage::Client => "client",
            Vantage::Server => "server",
            Vantage::Router => "router",
            Vantage::RouterServer => "router-server",
        }
    }
}

pub struct Topology {
    pub client: String,
    pub router: String,
    pub server: String,
    pub delay: Option<DelayLine>,
    loss_rules: Vec<Vec<String>>,
    policer_rule: Option<Vec<String>>,
}

impl Topology {
    /// Builds the three namespaces. `delay_line`: route forwarded traffic
    /// through a TUN delay line holding each packet `one_way`.
    pub fn build(delay_line: bool, one_way: Duration) -> Result<Topology> {
        let mut t = Topology {
            client: ns::name("c"),
            router: ns::name("r"),
            server: ns::name("s"),
            delay: None,
            loss_rules: Vec::new(),
            policer_rule: None,
        };
        let (c, r, s) = (t.client.clone(), t.router.clone(), t.server.clone());
        for n in [&c, &r, &s] {
            ns::create(n)?;
        }
        for n in [&c, &r, &s] {
            ns::sysctl(n, "net.ipv4.conf.all.rp_filter", "0")?;
            ns::sysctl(n, "net.ipv4.conf.default.rp_filter", "0")?;
        }
        ns::sysctl(&r, "net.ipv4.ip_forward", "1")?;
        ip(&[
            "-n", &c, "link", "add", "eth0", "type", "veth", "peer", "name", "ethc", "netns", &r,
        ])?;
        ip(&[
            "-n", &s, "link", "add", "eth0", "type", "veth", "peer", "name", "eths", "netns", &r,
        ])?;
        ip(&["-n", &c, "addr", "add", "10.71.1.2/24", "dev", "eth0"])?;
        ip(&["-n", &r, "addr", "add", "10.71.1.1/24", "dev", "ethc"])?;
        ip(&["-n", &r, "addr", "add", "10.71.2.1/24", "dev", "eths"])?;
        ip(&["-n", &s, "addr", "add", "10.71.2.2/24", "dev", "eth0"])?;
        for (n, dev) in [(&c, "eth0"), (&r, "ethc"), (&r, "eths"), (&s, "eth0")] {
            ip(&["-n", n, "link", "set", dev, "up"])?;
        }
        ip(&["-n", &c, "route", "add", "default", "via", "10.71.1.1"])?;
        ip(&["-n", &s, "route", "add", "default", "via", "10.71.2.1"])?;
        // The syn-flood case's spoofed sources: the router discards what
        // goes to them without a word. An ICMP "unreachable" back to the
        // server would free the half-open connection its SYN made.
        let (net, len) = crate::flood::SPOOFED_NET;
        let spoofed = format!("{net}/{len}");
        ip(&["-n", &r, "route", "add", "blackhole", &spoofed])?;
        if delay_line {
            let line = DelayLine::start(&r, DELAY_DEV, one_way)?;
            t.delay = Some(line);
            ns::sysctl(&r, &format!("net.ipv4.conf.{DELAY_DEV}.rp_filter"), "0")?;
            ip(&[
                "-n",
                &r,
                "link",
                "set",
                DELAY_DEV,
                "txqueuelen",
                "10000",
                "up",
            ])?;
            ip(&[
                "-n",
                &r,
                "route",
                "add",
                "default",
                "dev",
                DELAY_DEV,
                "table",
                DELAY_TABLE,
            ])?;
            for dev in ["ethc", "eths"] {
                ip(&["-n", &r, "rule", "add", "iif", dev, "lookup", DELAY_TABLE])?;
            }
        }
        Ok(t)
    }

    /// Changes the delay line's one-way delay (the topology must have one).
    pub fn set_one_way(&self, one_way: Duration) {
        if let Some(d) = &self.delay {
            d.set_delay(one_way);
        }
    }

    /// The namespace and interface of a vantage point.
    pub fn interface(&self, v: Vantage) -> (&str, &'static str) {
        match v {
            Vantage::Client => (&self.client, "eth0"),
            Vantage::Server => (&self.server, "eth0"),
            Vantage::Router => (&self.router, "ethc"),
            Vantage::RouterServer => (&self.router, "eths"),
        }
    }

    /// Drops each forwarded TCP packet (but SYNs and SYN-ACKs) with probability
    /// `p`, in both directions.
    pub fn set_loss(&mut self, p: f64) -> Result<()> {
        self.clear_loss()?;
        if p <= 0.0 {
            return Ok(());
        }
        let prob = format!("{:.4}", p.min(1.0));
        for out in ["ethc", "eths"] {
            // SYNs and SYN-ACKs pass: a lost handshake packet costs a 1 s
            // retry (a case of its own, syn-retransmit) and would hide the
            // loss of data this is about.
            let mut rule: Vec<String> = [
                "FORWARD",
                "-o",
                out,
                "-p",
                "tcp",
                "--tcp-flags",
                "SYN",
                "NONE",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            if self.delay.is_some() {
                rule.extend(["-i".to_string(), DELAY_DEV.to_string()]);
            }
            rule.extend(
                [
                    "-m",
                    "statistic",
                    "--mode",
                    "random",
                    "--probability",
                    &prob,
                    "-j",
                    "DROP",
                ]
                .iter()
                .map(|s| s.to_string()),
            );
            self.iptables("-A", &rule)?;
            self.loss_rules.push(rule);
        }
        Ok(())
    }

    /// Drops the first data packet forwarded towards `to`, once: the
    /// `statistic` match's nth mode counts only the packets the matches
    /// before it let through (those with a payload), and takes the first of
    /// every million. Cleared with the loss.
    pub fn lose_first_message(&mut self, to: Towards) -> Result<()> {
        let port = PORT.to_string();
        let (dev, port_match) = match to {
            Towards::Server => ("eths", "--dport"),
            Towards::Client => ("ethc", "--sport"),
        };
        let rule: Vec<String> = [
            "FORWARD",
            "-o",
            dev,
            "-p",
            "tcp",
            port_match,
            &port,
            "--tcp-flags",
            "SYN",
            "NONE",
            "-m",
            "length",
            "--length",
            "53:65535",
            "-m",
            "statistic",
            "--mode",
            "nth",
            "--every",
            "1000000",
            "--packet",
            "0",
            "-j",
            "DROP",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        self.iptables("-A", &rule)?;
        self.loss_rules.push(rule);
        Ok(())
    }

    pub fn clear_loss(&mut self) -> Result<()> {
        for rule in std::mem::take(&mut self.loss_rules) {
            self.iptables("-D", &rule)?;
        }
        Ok(())
    }

    /// `iptables -w OP RULE…` in the router.
    pub fn iptables(&self, op: &str, rule: &[String]) -> Result<()> {
        let mut args: Vec<&str> = vec!["netns", "exec", &self.router, "iptables", "-w", op];
        args.extend(rule.iter().map(|s| s.as_str()));
        ns::run("ip", &args)
    }

    /// `iptables -w OP RULE…` in namespace `n`.
    pub fn iptables_in(n: &str, op: &str, rule: &[&str]) -> Result<()> {
        let mut args: Vec<&str> = vec!["netns", "exec", n, "iptables", "-w", op];
        args.extend(rule);
        ns::run("ip", &args)
    }

    /// Limits both hosts' sending rate with a TBF qdisc (`rate` as tc takes
    /// it: `16mbit`, `1gbit`…); `None` removes it.
    pub fn set_rate(&self, rate: Option<&str>) -> Result<()> {
        for n in [&self.client, &self.server] {
            let _ = ns::run("tc", &["-n", n, "qdisc", "del", "dev", "eth0", "root"]);
            if let Some(rate) = rate {
                ns::run(
                    "tc",
                    &[
                        "-n", n, "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate,
                        "burst", "16kb", "limit", "100000",
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// The router's client-facing link (`ethc`) as a bottleneck: a TBF at
    /// `b.rate` with a FIFO of `b.limit_bytes`; `None` removes it.
    pub fn set_bottleneck(&self, b: Option<Bottleneck>) -> Result<()> {
        let r = self.router.as_str();
        let _ = ns::run("tc", &["-n", r, "qdisc", "del", "dev", "ethc", "root"]);
        let Some(b) = b else {
            return Ok(());
        };
        let limit = b.limit_bytes.to_string();
        ns::run(
            "tc",
            &[
                "-n", r, "qdisc", "add", "dev", "ethc", "root", "tbf", "rate", b.rate, "burst",
                "16kb", "limit", &limit,
            ],
        )
    }

    /// A token-bucket policer on the router's client-facing link (`ethc`):
    /// forwarded TCP packets beyond the rate and burst are dropped; `None`
    /// removes it.
    pub fn set_policer(&mut self, p: Option<Policer>) -> Result<()> {
        if let Some(rule) = self.policer_rule.take() {
            self.iptables("-D", &rule)?;
        }
        let Some(p) = p else {
            return Ok(());
        };
        let mut rule: Vec<String> = vec!["FORWARD".into(), "-o".into(), "ethc".into()];
        if self.delay.is_some() {
            rule.extend(["-i".to_string(), DELAY_DEV.to_string()]);
        }
        let rate = format!("{}/sec", p.packets_per_sec);
        let burst = p.burst_packets.to_string();
        rule.extend(
            [
                "-p",
                "tcp",
                "-m",
                "hashlimit",
                "--hashlimit-name",
                "tdlabpolicer",
                "--hashlimit-above",
                &rate,
                "--hashlimit-burst",
                &burst,
                "-j",
                "DROP",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        self.iptables("-A", &rule)?;
        self.policer_rule = Some(rule);
        Ok(())
    }

    /// Deletes the namespaces (their interfaces, rules and qdiscs go with them).
    /// Dropping the topology does the same, so a failure or a panic between
    /// build and teardown leaves no namespace behind either.
    pub fn teardown(self) {
        drop(self);
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // The delay line's threads stop before its router namespace goes.
        self.delay = None;
        for n in [&self.client, &self.router, &self.server] {
            ns::remove(n);
        }
    }
}

fn ip(args: &[&str]) -> Result<()> {
    ns::run("ip", args)
}

/// Which end a packet travels towards across the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Towards {
    Server,
    Client,
}
