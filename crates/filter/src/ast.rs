//! The parsed form of a filter, and its canonical text.

use std::fmt;
use std::net::IpAddr;

/// A filter expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// The empty filter: every packet (as tcpdump with no expression).
    All,
    Prim(Prim),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

/// One test on a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prim {
    /// `ip`, `ip6`, `tcp`, `udp`, `sctp`, `icmp`, `icmp6`.
    Proto(Proto),
    /// `[src|dst] host ADDR`.
    Host(Dir, IpAddr),
    /// `[src|dst] net ADDR/LEN`.
    Net(Dir, Net),
    /// `[tcp|udp|sctp] [src|dst] port N` (`lo == hi`) or `portrange LO-HI`.
    Port {
        proto: Option<Transport>,
        dir: Dir,
        lo: u16,
        hi: u16,
    },
    /// tcpdump's byte-offset test: `PROTO[OFFSET:SIZE] & MASK OP VALUE`,
    /// the `SIZE` bytes (1, 2 or 4, big-endian) at `OFFSET` from the start
    /// of the `base` header (`tcp[tcpflags] & tcp-syn != 0`).
    Bytes {
        base: Proto,
        offset: u16,
        size: u8,
        mask: Option<u32>,
        op: Cmp,
        value: u32,
    },
}

/// A comparison of a byte-offset test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "=",
            Cmp::Ne => "!=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }

    /// Whether `a OP b` holds (unsigned, as BPF compares).
    pub fn holds(self, a: u32, b: u32) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }
}

/// Which end of a packet an address or port test looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    Src,
    Dst,
    /// Either end: the default, also written `src or dst`.
    SrcOrDst,
    /// Both ends: `src and dst`.
    SrcAndDst,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proto {
    /// IPv4 (by ethertype, or version nibble on raw IP).
    Ip,
    Ip6,
    Tcp,
    Udp,
    Sctp,
    /// ICMP for IPv4 only, as tcpdump.
    Icmp,
    Icmp6,
}

/// The transports that have ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Tcp,
    Udp,
    Sctp,
}

impl Transport {
    /// The IP protocol number (IANA).
    pub fn number(self) -> u8 {
        match self {
            Transport::Tcp => 6,
            Transport::Udp => 17,
            Transport::Sctp => 132,
        }
    }
}

/// An IP network: an address whose bits past `prefix` are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    /// `None` if the prefix is longer than the address or host bits are set.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Net> {
        let net = Net { addr, prefix };
        (prefix <= net.max_prefix() && net.masked() == addr).then_some(net)
    }

    /// The network of `addr` with `prefix` bits (host bits cleared).
    pub fn containing(addr: IpAddr, prefix: u8) -> Net {
        let mut net = Net {
            addr,
            prefix: prefix.min(if addr.is_ipv4() { 32 } else { 128 }),
        };
        net.addr = net.masked();
        net
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    fn max_prefix(&self) -> u8 {
        if self.addr.is_ipv4() {
            32
        } else {
            128
        }
    }

    fn masked(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => {
                let m = mask32(self.prefix);
                IpAddr::V4((u32::from(a) & m).into())
            }
            IpAddr::V6(a) => {
                let m = if self.prefix == 0 {
                    0
                } else {
                    u128::MAX << (128 - u32::from(self.prefix.min(128)))
                };
                IpAddr::V6((u128::from(a) & m).into())
            }
        }
    }

    /// The address as big-endian 32-bit words, with the mask of each word:
    /// what a packet's address is compared with.
    pub(crate) fn words(&self) -> Vec<(u32, u32)> {
        let octets: Vec<u8> = match self.addr {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        octets
            .chunks(4)
            .enumerate()
            .map(|(i, c)| {
                let bits = u32::from(self.prefix).saturating_sub(32 * i as u32).min(32);
                let w = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
                (w, mask32(bits as u8))
            })
            .collect()
    }
}

/// A 32-bit mask of `bits` leading ones.
pub(crate) fn mask32(bits: u8) -> u32 {
    match bits {
        0 => 0,
        b if b >= 32 => u32::MAX,
        b => u32::MAX << (32 - u32::from(b)),
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dir::Src => "src ",
            Dir::Dst => "dst ",
            Dir::SrcOrDst => "",
            Dir::SrcAndDst => "src and dst ",
        })
    }
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::Ip => "ip",
            Proto::Ip6 => "ip6",
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Sctp => "sctp",
            Proto::Icmp => "icmp",
            Proto::Icmp6 => "icmp6",
        }
    }
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
            Transport::Sctp => "sctp",
        }
    }
}

impl fmt::Display for Prim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prim::Proto(p) => f.write_str(p.name()),
            Prim::Host(d, a) => write!(f, "{d}host {a}"),
            Prim::Net(d, n) => write!(f, "{d}net {n}"),
            Prim::Port { proto, dir, lo, hi } => {
                if let Some(t) = proto {
                    write!(f, "{} ", t.name())?;
                }
                if lo == hi {
                    write!(f, "{dir}port {lo}")
                } else {
                    write!(f, "{dir}portrange {lo}-{hi}")
                }
            }
            Prim::Bytes {
                base,
                offset,
                size,
                mask,
                op,
                value,
            } => {
                write!(f, "{}[{offset}", base.name())?;
                if *size != 1 {
                    write!(f, ":{size}")?;
                }
                f.write_str("]")?;
                if let Some(m) = mask {
                    write!(f, " & {m}")?;
                }
                write!(f, " {} {value}", op.symbol())
            }
        }
    }
}

/// The canonical text, which parses back to the same expression. `and` and
/// `or` have equal precedence and group left to right, so only an operand on
/// the right of one, or under `not`, needs parentheses: the text nests no
/// deeper than any text that parses to the same expression.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::All => Ok(()),
            Expr::Prim(p) => write!(f, "{p}"),
            Expr::Not(e) => write!(f, "not {}", Grouped(e)),
            Expr::And(a, b) => write!(f, "{a} and {}", Grouped(b)),
            Expr::Or(a, b) => write!(f, "{a} or {}", Grouped(b)),
        }
    }
}

/// An expression in parentheses if it is an `and` or an `or`.
struct Grouped<'a>(&'a Expr);

impl fmt::Display for Grouped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Expr::And(..) | Expr::Or(..) => write!(f, "({})", self.0),
            e => write!(f, "{e}"),
        }
    }
}
