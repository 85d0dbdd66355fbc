//! A tcpdump-like packet filter: parsed once, run in userspace on captured
//! frames ([`Filter::matches`]) or compiled to a classic BPF program that the
//! kernel runs on a capture socket ([`Filter::compile`]). Sans-IO: no
//! sockets, no files, no name lookups.
//!
//! ```
//! use tcpdoctor_filter::{Filter, LinkType};
//! let f = Filter::parse("tcp port 8080 and host 10.0.0.2")?;
//! let program = f.compile(LinkType::Ethernet)?; // for SO_ATTACH_FILTER
//! assert!(program.len() < 200);
//! let err = Filter::parse("port eighty").unwrap_err();
//! assert_eq!(err.to_string(), "expected a port number after 'port', found 'eighty' at column 6");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The language (a subset of pcap-filter(7))
//!
//! | primitive | true for |
//! |---|---|
//! | `host A`, `src host A`, `dst host A` | IPv4 or IPv6 packets from/to A (by A's family) |
//! | `net N/LEN`, `src net …`, `dst net …` | addresses in the network (IPv4 or IPv6; no host bits may be set) |
//! | `port N`, `src port N`, `dst port N` | TCP, UDP or SCTP packets with that port |
//! | `portrange LO-HI` (and `src`/`dst`) | a port in LO..=HI |
//! | `tcp`, `udp`, `sctp`, `icmp`, `icmp6` | that transport (`icmp` is IPv4's, `icmp6` IPv6's) |
//! | `ip`, `ip6` | IPv4, IPv6 |
//! | `PROTO[OFF]`, `PROTO[OFF:SIZE]` `[& MASK]` `OP VALUE` | the 1, 2 or 4 bytes at OFF in the `ip`, `ip6`, `tcp`, `udp`, `sctp`, `icmp` or `icmp6` header compare so (`=`, `==`, `!=`, `<`, `<=`, `>`, `>=`) |
//!
//! In byte-offset tests numbers are decimal or `0x` hex, a mask may be
//! `(A|B|…)`, and tcpdump's names stand for numbers: `tcpflags` (13),
//! `tcp-fin`, `tcp-syn`, `tcp-rst`, `tcp-push`, `tcp-ack`, `tcp-urg`,
//! `tcp-ece`, `tcp-cwr`; `icmptype` (0), `icmpcode` (1), `icmp-echoreply`,
//! `icmp-unreach`, `icmp-echo`, `icmp-timxceed`…: `tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn`
//! is a SYN without ACK.
//!
//! Qualifiers: `tcp port 80`, `udp dst portrange 5000-6000`, `ip6 net
//! 2001:db8::/32`, `src or dst host A` (the default), `src and dst net N`;
//! `src A` is `src host A`. Operators: `not`/`!`, `and`/`&&`, `or`/`||`,
//! parentheses. As in tcpdump, `not` binds tightest and `and` and `or` have
//! **equal** precedence, left to right: `a or b and c` is `(a or b) and c`.
//! tcpdump's shorthand: a bare value repeats the previous primitive's
//! qualifiers (`port 80 or 443`, `host A and not B`); a bare address at the
//! start is a host. The empty filter matches everything.
//!
//! # Where it differs from tcpdump
//!
//! - Host names, port names (`http`) and `net 10` are not resolved: write
//!   numbers. No `ether`, `arp`, `vlan`, `len` or `proto N` primitives;
//!   byte-offset tests take one `PROTO[…]` with an optional mask, not
//!   arithmetic. `tcp[…]`, `udp[…]`… on IPv6 read the header right after
//!   the fixed one (as ports are); tcpdump's apply to IPv4 only.
//!   `host`/`net` match IP only (tcpdump's also match ARP's addresses).
//! - Up to two VLAN tags (802.1Q, 802.1ad) are looked through on Ethernet:
//!   `port 80` matches tagged frames too (tcpdump needs `vlan and port 80`).
//!   Linux usually strips the tag before a capture socket's filter sees it.
//! - A test on a field the frame does not hold (a truncated capture) is
//!   false; tcpdump's programs reject the whole packet instead, even under
//!   `not`.
//! - IPv6 extension headers are not walked: ports are read only when TCP,
//!   UDP or SCTP follows the fixed header (as tcpdump); `tcp`, `udp`… also
//!   look through one fragment header (as tcpdump). IPv4 ports are read past
//!   IP options, and only in the first fragment (as tcpdump).
#![forbid(unsafe_code)]

mod ast;
pub mod bpf;
mod compile;
mod eval;
mod parse;

#[cfg(test)]
mod interp;
#[cfg(test)]
mod tests;

pub use ast::{Cmp, Dir, Expr, Net, Prim, Proto, Transport};
pub use bpf::Insn;
pub use compile::{CompileError, SNAP};
pub use parse::ParseError;
pub use tcpdoctor_wire::LinkType;

use std::fmt;

/// A parsed filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    expr: Expr,
}

impl Filter {
    /// Parses tcpdump-like filter text; the error says what was expected and
    /// at which column.
    pub fn parse(text: &str) -> Result<Filter, ParseError> {
        parse::parse(text).map(|expr| Filter { expr })
    }

    /// The filter of an expression built in code.
    pub fn from_expr(expr: Expr) -> Filter {
        Filter { expr }
    }

    pub fn expr(&self) -> &Expr {
        &self.expr
    }

    /// Whether the filter keeps this frame (`frame` starts with the link
    /// layer header of `link`). Any link type tcpdoctor reads is understood;
    /// frames of an unknown one never match (unless the filter is empty).
    pub fn matches(&self, link: LinkType, frame: &[u8]) -> bool {
        eval::matches(&self.expr, link, frame)
    }

    /// A classic BPF program for frames of `link`, returning [`SNAP`] for a
    /// frame that matches and 0 for one that does not: what Linux's
    /// `SO_ATTACH_FILTER` takes (patch the non-zero returns to keep fewer
    /// bytes). It agrees with [`Filter::matches`] on every frame.
    ///
    /// Supported: Ethernet, raw IP, Linux cooked (SLL, SLL2), BSD loopback.
    pub fn compile(&self, link: LinkType) -> Result<Vec<Insn>, CompileError> {
        compile::compile(&self.expr, link)
    }
}

/// The canonical text, which parses back to the same filter.
impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.expr.fmt(f)
    }
}

impl std::str::FromStr for Filter {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Filter, ParseError> {
        Filter::parse(s)
    }
}
