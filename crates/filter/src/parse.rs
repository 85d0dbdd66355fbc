//! Text to [`Expr`]: tcpdump's grammar, its precedence and its shorthand.
//!
//! As in pcap-filter(7): `not` binds tightest; `and` and `or` have the same
//! precedence and associate left to right (`a or b and c` is
//! `(a or b) and c`). A bare value after `and`, `or` or `not` takes the
//! qualifiers of the primitive before it (`port 80 or 443`,
//! `host 10.0.0.1 and not 10.0.0.2`), and a bare address with nothing before
//! it is a `host` (a `net` if it has a `/LEN`).

use std::fmt;
use std::net::IpAddr;

use crate::ast::{Cmp, Dir, Expr, Net, Prim, Proto, Transport};

/// Parentheses and `not`s nested deeper than this are refused (the parser and
/// the evaluator recurse).
const MAX_DEPTH: usize = 100;
/// Primitives in one filter at most: far more than a kernel program holds
/// (4096 instructions), and a bound on the evaluator's recursion.
const MAX_TERMS: usize = 2000;

/// Why a filter does not parse, and where (1-based column, in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub message: String,
    pub column: usize,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at column {}", self.message, self.column)
    }
}

impl std::error::Error for ParseError {}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    LParen,
    RParen,
    Bang,
    AndAnd,
    OrOr,
    /// A single `&`: a mask in a byte-offset test.
    Amp,
    /// A single `|`: mask values joined.
    Pipe,
    Word(String),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    column: usize,
}

impl Token {
    fn text(&self) -> String {
        match &self.tok {
            Tok::LParen => "'('".into(),
            Tok::RParen => "')'".into(),
            Tok::Bang => "'!'".into(),
            Tok::AndAnd => "'&&'".into(),
            Tok::OrOr => "'||'".into(),
            Tok::Amp => "'&'".into(),
            Tok::Pipe => "'|'".into(),
            Tok::Word(w) => format!("'{w}'"),
        }
    }

    fn word(&self) -> Option<&str> {
        match &self.tok {
            Tok::Word(w) => Some(w),
            _ => None,
        }
    }
}

fn lex(input: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        let single = |tok| Token { tok, column };
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                out.push(single(Tok::LParen));
                i += 1;
            }
            ')' => {
                out.push(single(Tok::RParen));
                i += 1;
            }
            '!' if chars.get(i + 1) == Some(&'=') => {
                out.push(Token {
                    tok: Tok::Word("!=".into()),
                    column,
                });
                i += 2;
            }
            '!' => {
                out.push(single(Tok::Bang));
                i += 1;
            }
            '&' | '|' => {
                if chars.get(i + 1) == Some(&c) {
                    out.push(single(if c == '&' { Tok::AndAnd } else { Tok::OrOr }));
                    i += 2;
                } else {
                    out.push(single(if c == '&' { Tok::Amp } else { Tok::Pipe }));
                    i += 1;
                }
            }
            '=' | '<' | '>' => {
                // A comparison: `=`, `==`, `<`, `<=`, `>`, `>=`.
                let start = i;
                while i < chars.len() && "=<>".contains(chars[i]) {
                    i += 1;
                }
                out.push(Token {
                    tok: Tok::Word(chars[start..i].iter().collect()),
                    column,
                });
            }
            _ => {
                let start = i;
                while i < chars.len() && !chars[i].is_whitespace() && !"()!&|=<>".contains(chars[i])
                {
                    i += 1;
                }
                out.push(Token {
                    tok: Tok::Word(chars[start..i].iter().collect()),
                    column,
                });
            }
        }
    }
    Ok(out)
}

/// What a primitive's value is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Host,
    Net,
    Port,
    PortRange,
}

impl Kind {
    fn keyword(self) -> &'static str {
        match self {
            Kind::Host => "host",
            Kind::Net => "net",
            Kind::Port => "port",
            Kind::PortRange => "portrange",
        }
    }
}

/// `ip`/`ip6` before host or net; `tcp`/`udp`/`sctp` before port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Qual {
    Ip,
    Ip6,
    Transport(Transport),
}

/// The qualifiers of the last primitive, for tcpdump's shorthand.
#[derive(Debug, Clone, Copy)]
struct Last {
    qual: Option<Qual>,
    dir: Dir,
    kind: Kind,
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    /// Column just past the input: where "the end" is.
    end: usize,
    depth: usize,
    terms: usize,
    last: Option<Last>,
}

pub(crate) fn parse(input: &str) -> Result<Expr, ParseError> {
    let toks = lex(input)?;
    if toks.is_empty() {
        return Ok(Expr::All);
    }
    let mut p = Parser {
        toks,
        pos: 0,
        end: input.chars().count() + 1,
        depth: 0,
        terms: 0,
        last: None,
    };
    let e = p.expr()?;
    if let Some(t) = p.peek() {
        let message = if t.tok == Tok::RParen {
            "unexpected ')' with no '(' before it".to_string()
        } else {
            format!("expected 'and', 'or' or the end, found {}", t.text())
        };
        return Err(p.err_at(t.column, message));
    }
    Ok(e)
}

fn proto_keyword(w: &str) -> Option<Proto> {
    Some(match w {
        "ip" => Proto::Ip,
        "ip6" => Proto::Ip6,
        "tcp" => Proto::Tcp,
        "udp" => Proto::Udp,
        "sctp" => Proto::Sctp,
        "icmp" => Proto::Icmp,
        "icmp6" => Proto::Icmp6,
        _ => return None,
    })
}

fn kind_keyword(w: &str) -> Option<Kind> {
    Some(match w {
        "host" => Kind::Host,
        "net" => Kind::Net,
        "port" => Kind::Port,
        "portrange" => Kind::PortRange,
        _ => return None,
    })
}

fn is_keyword(w: &str) -> bool {
    proto_keyword(w).is_some()
        || kind_keyword(w).is_some()
        || matches!(w, "src" | "dst" | "and" | "or" | "not")
}

const EXPECTED_PRIMITIVE: &str =
    "a primitive (host, net, port, portrange, src, dst, tcp, udp, sctp, icmp, icmp6, ip, ip6), 'not' or '('";

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.pos)
    }

    fn peek_word(&self) -> Option<&str> {
        self.peek().and_then(Token::word)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn err_at(&self, column: usize, message: String) -> ParseError {
        ParseError { message, column }
    }

    /// "found 'x'" or "found the end", and where.
    fn found(&self) -> (String, usize) {
        match self.peek() {
            Some(t) => (format!("found {}", t.text()), t.column),
            None => ("found the end".to_string(), self.end),
        }
    }

    fn expected(&self, what: &str) -> ParseError {
        let (found, column) = self.found();
        self.err_at(column, format!("expected {what}, {found}"))
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.unary()?;
        loop {
            self.no_stray_operator()?;
            let and = match self.peek().map(|t| &t.tok) {
                Some(Tok::AndAnd) => true,
                Some(Tok::OrOr) => false,
                Some(Tok::Word(w)) if w == "and" => true,
                Some(Tok::Word(w)) if w == "or" => false,
                _ => return Ok(left),
            };
            let op = self.next().map(|t| t.text()).unwrap_or_default();
            if self.peek().is_none() {
                return Err(self.expected(&format!("an expression after {op}")));
            }
            let right = self.unary()?;
            left = if and {
                Expr::And(Box::new(left), Box::new(right))
            } else {
                Expr::Or(Box::new(left), Box::new(right))
            };
        }
    }

    /// A single `&` or `|` outside a byte-offset test: a mistyped `&&`/`||`.
    fn no_stray_operator(&self) -> Result<(), ParseError> {
        match self.peek() {
            Some(t) if t.tok == Tok::Amp || t.tok == Tok::Pipe => {
                let (c, word) = if t.tok == Tok::Amp {
                    ('&', "and")
                } else {
                    ('|', "or")
                };
                Err(self.err_at(
                    t.column,
                    format!("unexpected '{c}' (write '{c}{c}' or '{word}')"),
                ))
            }
            _ => Ok(()),
        }
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        self.no_stray_operator()?;
        let Some(t) = self.peek().cloned() else {
            return Err(self.expected(EXPECTED_PRIMITIVE));
        };
        match &t.tok {
            Tok::Bang => self.not(),
            Tok::Word(w) if w == "not" => self.not(),
            Tok::LParen => {
                self.enter(t.column)?;
                self.next();
                let e = self.expr()?;
                match self.peek() {
                    Some(c) if c.tok == Tok::RParen => {
                        self.next();
                    }
                    _ => {
                        let (found, column) = self.found();
                        return Err(self.err_at(
                            column,
                            format!(
                                "expected ')' to close the '(' at column {}, {found}",
                                t.column
                            ),
                        ));
                    }
                }
                self.depth -= 1;
                Ok(e)
            }
            Tok::Word(_) => {
                self.terms += 1;
                if self.terms > MAX_TERMS {
                    return Err(self.err_at(
                        t.column,
                        format!("too many primitives (at most {MAX_TERMS})"),
                    ));
                }
                Ok(Expr::Prim(self.prim()?))
            }
            _ => Err(self.expected(EXPECTED_PRIMITIVE)),
        }
    }

    fn enter(&mut self, column: usize) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err_at(
                column,
                format!("nested too deeply (at most {MAX_DEPTH} levels of '(' and 'not')"),
            ));
        }
        Ok(())
    }

    fn not(&mut self) -> Result<Expr, ParseError> {
        let t = self.next().expect("peeked");
        self.enter(t.column)?;
        if self.peek().is_none() {
            return Err(self.expected(&format!("an expression after {}", t.text())));
        }
        let e = self.unary()?;
        self.depth -= 1;
        Ok(Expr::Not(Box::new(e)))
    }

    fn prim(&mut self) -> Result<Prim, ParseError> {
        let t = self.next().expect("peeked");
        let w = t.word().unwrap_or_default().to_string();
        if let Some((base, rest)) = w.split_once('[') {
            return self.bytes(base, rest, &t);
        }

        if let Some(p) = proto_keyword(&w) {
            let qualifies = self
                .peek_word()
                .is_some_and(|n| kind_keyword(n).is_some() || n == "src" || n == "dst");
            if !qualifies {
                return Ok(Prim::Proto(p));
            }
            let qual = match p {
                Proto::Ip => Qual::Ip,
                Proto::Ip6 => Qual::Ip6,
                Proto::Tcp => Qual::Transport(Transport::Tcp),
                Proto::Udp => Qual::Transport(Transport::Udp),
                Proto::Sctp => Qual::Transport(Transport::Sctp),
                Proto::Icmp | Proto::Icmp6 => {
                    let n = self.peek().expect("peeked").clone();
                    return Err(self.err_at(
                        n.column,
                        format!("'{w}' cannot qualify {}: only 'ip'/'ip6' qualify host and net, and 'tcp'/'udp'/'sctp' port and portrange", n.text()),
                    ));
                }
            };
            let dir = self.dir()?;
            return self.typed(Some(qual), dir, &t);
        }
        if w == "src" || w == "dst" {
            self.pos -= 1;
            let dir = self.dir()?;
            return self.typed(None, dir, &t);
        }
        if let Some(kind) = kind_keyword(&w) {
            return self.value(None, Dir::SrcOrDst, kind, &w, false);
        }
        if is_keyword(&w) {
            return Err(self.err_at(
                t.column,
                format!("expected {EXPECTED_PRIMITIVE}, found '{w}'"),
            ));
        }
        // A bare value: tcpdump's shorthand. A word that is no value of
        // any kind and is a keyword mistyped is said to be so.
        if let Some(near) = mistyped_keyword(&w) {
            return Err(self.err_at(
                t.column,
                format!("unknown word '{w}' (did you mean '{near}'?)"),
            ));
        }
        self.pos -= 1;
        if let Some(last) = self.last {
            return self.value(last.qual, last.dir, last.kind, last.kind.keyword(), true);
        }
        match classify_address(&w) {
            Some(kind) => self.value(None, Dir::SrcOrDst, kind, kind.keyword(), true),
            None => {
                let hint = if w.parse::<u32>().is_ok() {
                    format!(" (a number alone means nothing: write 'port {w}')")
                } else {
                    String::new()
                };
                Err(self.err_at(
                    t.column,
                    format!("expected {EXPECTED_PRIMITIVE}, found '{w}'{hint}"),
                ))
            }
        }
    }

    /// `src`, `dst`, `src or dst`, `src and dst` (either order), or nothing.
    fn dir(&mut self) -> Result<Dir, ParseError> {
        let first = match self.peek_word() {
            Some("src") => Dir::Src,
            Some("dst") => Dir::Dst,
            _ => return Ok(Dir::SrcOrDst),
        };
        self.next();
        let joined = self.toks.get(self.pos).map(|t| match &t.tok {
            Tok::OrOr => Some(Dir::SrcOrDst),
            Tok::AndAnd => Some(Dir::SrcAndDst),
            Tok::Word(w) if w == "or" => Some(Dir::SrcOrDst),
            Tok::Word(w) if w == "and" => Some(Dir::SrcAndDst),
            _ => None,
        });
        let other = if first == Dir::Src { "dst" } else { "src" };
        if let Some(Some(both)) = joined {
            if self.toks.get(self.pos + 1).and_then(Token::word) == Some(other) {
                self.pos += 2;
                return Ok(both);
            }
        }
        Ok(first)
    }

    /// After the qualifiers: the kind keyword and the value, or a bare address
    /// (tcpdump reads `src 10.0.0.1` as `src host 10.0.0.1`).
    fn typed(&mut self, qual: Option<Qual>, dir: Dir, first: &Token) -> Result<Prim, ParseError> {
        let after = self
            .toks
            .get(self.pos.wrapping_sub(1))
            .map(|t| t.text())
            .unwrap_or_else(|| first.text());
        match self.peek_word() {
            Some(w) if kind_keyword(w).is_some() => {
                let kind = kind_keyword(w).expect("checked");
                let word = w.to_string();
                self.next();
                self.value(qual, dir, kind, &word, false)
            }
            Some(w) if qual.is_none() && !is_keyword(w) => match classify_address(w) {
                Some(kind) => self.value(None, dir, kind, kind.keyword(), true),
                None => Err(self.expected(&format!(
                    "'host', 'net', 'port', 'portrange' or an address after {after}"
                ))),
            },
            _ => Err(self.expected(&format!(
                "'host', 'net', 'port' or 'portrange' after {after}"
            ))),
        }
    }

    /// The value of a `kind` primitive; `implied` when the keyword was not
    /// written (shorthand).
    fn value(
        &mut self,
        qual: Option<Qual>,
        dir: Dir,
        kind: Kind,
        keyword: &str,
        implied: bool,
    ) -> Result<Prim, ParseError> {
        let after = if implied {
            format!("'{keyword}' (implied)")
        } else {
            format!("'{keyword}'")
        };
        let bad = |p: &Parser, what: &str, extra: &str| {
            let (found, column) = p.found();
            p.err_at(
                column,
                format!("expected {what} after {after}, {found}{extra}"),
            )
        };
        let word = match self.peek_word() {
            Some(w) if !is_keyword(w) => w.to_string(),
            _ => {
                let what = match kind {
                    Kind::Host => "an IPv4 or IPv6 address",
                    Kind::Net => "a network like 10.0.0.0/8",
                    Kind::Port => "a port number",
                    Kind::PortRange => "a port range like 8000-8080",
                };
                return Err(bad(self, what, ""));
            }
        };
        // Qualifiers that cannot go with this kind.
        match (qual, kind) {
            (Some(Qual::Ip | Qual::Ip6), Kind::Port | Kind::PortRange)
            | (Some(Qual::Transport(_)), Kind::Host | Kind::Net) => {
                let q = match qual {
                    Some(Qual::Ip) => "ip",
                    Some(Qual::Ip6) => "ip6",
                    Some(Qual::Transport(t)) => t.name(),
                    None => "",
                };
                let (_, column) = self.found();
                return Err(self.err_at(
                    column,
                    format!("'{q}' cannot qualify '{}': only 'ip'/'ip6' qualify host and net, and 'tcp'/'udp'/'sctp' port and portrange", kind.keyword()),
                ));
            }
            _ => {}
        }
        let prim = match kind {
            Kind::Host => {
                let Ok(addr) = word.parse::<IpAddr>() else {
                    let extra = if word.contains('/') {
                        " (a network: use 'net')"
                    } else {
                        " (names are not resolved)"
                    };
                    return Err(bad(self, "an IPv4 or IPv6 address", extra));
                };
                self.check_family(qual, addr)?;
                Prim::Host(dir, addr)
            }
            Kind::Net => {
                let net = self.net(&word, &after)?;
                self.check_family(qual, net.addr())?;
                Prim::Net(dir, net)
            }
            Kind::Port => {
                let Ok(port) = word.parse::<u16>() else {
                    let extra = if word.parse::<u64>().is_ok() {
                        " (ports are 0 to 65535)"
                    } else {
                        ""
                    };
                    return Err(bad(self, "a port number", extra));
                };
                Prim::Port {
                    proto: transport(qual),
                    dir,
                    lo: port,
                    hi: port,
                }
            }
            Kind::PortRange => {
                let range = word
                    .split_once('-')
                    .and_then(|(a, b)| Some((a.parse::<u16>().ok()?, b.parse::<u16>().ok()?)));
                let Some((a, b)) = range else {
                    return Err(bad(self, "a port range like 8000-8080", ""));
                };
                // tcpdump accepts the ends in either order.
                Prim::Port {
                    proto: transport(qual),
                    dir,
                    lo: a.min(b),
                    hi: a.max(b),
                }
            }
        };
        self.next();
        self.last = Some(Last { qual, dir, kind });
        Ok(prim)
    }

    fn net(&self, word: &str, after: &str) -> Result<Net, ParseError> {
        let column = self.found().1;
        let (addr, len) = match word.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (word, None),
        };
        let Ok(addr) = addr.parse::<IpAddr>() else {
            return Err(self.err_at(
                column,
                format!("expected a network like 10.0.0.0/8 after {after}, found '{word}'"),
            ));
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match len {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(p) if p <= max => p,
                _ => {
                    return Err(self.err_at(
                        column,
                        format!("'{word}': the prefix length must be a number from 0 to {max}"),
                    ))
                }
            },
        };
        Net::new(addr, prefix).ok_or_else(|| {
            self.err_at(
                column,
                format!(
                    "'{word}' has host bits set (the network is {})",
                    Net::containing(addr, prefix)
                ),
            )
        })
    }

    fn check_family(&self, qual: Option<Qual>, addr: IpAddr) -> Result<(), ParseError> {
        let (want, name) = match qual {
            Some(Qual::Ip) => (true, "ip"),
            Some(Qual::Ip6) => (false, "ip6"),
            _ => return Ok(()),
        };
        if addr.is_ipv4() == want {
            return Ok(());
        }
        let (found, column) = self.found();
        Err(self.err_at(
            column,
            format!(
                "'{name}' needs an {} address, {found}",
                if want { "IPv4" } else { "IPv6" }
            ),
        ))
    }
}

/// The words of the language, for suggestions.
const KEYWORDS: [&str; 17] = [
    "host",
    "net",
    "port",
    "portrange",
    "src",
    "dst",
    "tcp",
    "udp",
    "sctp",
    "icmp",
    "icmp6",
    "ip",
    "ip6",
    "and",
    "or",
    "not",
    "tcpflags",
];

/// The keyword `w` is a typo of: within one edit (two for words of five
/// letters or more), and `w` itself not an address, a number or a network.
fn mistyped_keyword(w: &str) -> Option<&'static str> {
    if !w.chars().all(|c| c.is_ascii_alphanumeric()) || classify_address(w).is_some() {
        return None;
    }
    if !w.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let w = w.to_ascii_lowercase();
    let limit = if w.chars().count() >= 5 { 2 } else { 1 };
    KEYWORDS
        .iter()
        .map(|k| (edit_distance(&w, k), *k))
        .filter(|&(d, _)| d > 0 && d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, k)| k)
}

/// Edit distance counting a swap of two neighbours as one edit (optimal
/// string alignment).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// tcpdump's names for offsets and values in byte-offset tests.
fn named_value(w: &str) -> Option<u32> {
    Some(match w {
        "tcpflags" => 13,
        "tcp-fin" => 0x01,
        "tcp-syn" => 0x02,
        "tcp-rst" => 0x04,
        "tcp-push" => 0x08,
        "tcp-ack" => 0x10,
        "tcp-urg" => 0x20,
        "tcp-ece" => 0x40,
        "tcp-cwr" => 0x80,
        "icmptype" => 0,
        "icmpcode" => 1,
        "icmp-echoreply" => 0,
        "icmp-unreach" => 3,
        "icmp-sourcequench" => 4,
        "icmp-redirect" => 5,
        "icmp-echo" => 8,
        "icmp-routeradvert" => 9,
        "icmp-routersolicit" => 10,
        "icmp-timxceed" => 11,
        "icmp-paramprob" => 12,
        "icmp-tstamp" => 13,
        "icmp-tstampreply" => 14,
        "icmp-ireq" => 15,
        "icmp-ireqreply" => 16,
        "icmp-maskreq" => 17,
        "icmp-maskreply" => 18,
        _ => return None,
    })
}

/// A number (decimal or `0x` hex) or one of tcpdump's names.
fn number(w: &str) -> Option<u32> {
    if let Some(hex) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        return u32::from_str_radix(hex, 16).ok();
    }
    w.parse::<u32>().ok().or_else(|| named_value(w))
}

impl Parser {
    /// A byte-offset test after `BASE[` (the word's `rest`):
    /// `OFFSET[:SIZE]]`, then `[& MASK] OP VALUE` as the next tokens.
    fn bytes(&mut self, base: &str, rest: &str, t: &Token) -> Result<Prim, ParseError> {
        let at = |p: &Parser, message: String| p.err_at(t.column, message);
        let Some(base) = proto_keyword(base) else {
            return Err(at(
                self,
                format!(
                    "'{base}[…]': byte offsets count from ip, ip6, tcp, udp, sctp, icmp or icmp6"
                ),
            ));
        };
        let name = base.name();
        let Some(inside) = rest.strip_suffix(']') else {
            return Err(at(
                self,
                format!(
                    "expected '{name}[OFFSET]' or '{name}[OFFSET:SIZE]', found '{name}[{rest}'"
                ),
            ));
        };
        let (offset, size) = match inside.split_once(':') {
            Some((o, z)) => (o, Some(z)),
            None => (inside, None),
        };
        let offset = match number(offset).map(u16::try_from) {
            Some(Ok(o)) => o,
            _ => {
                return Err(at(
                    self,
                    format!("'{name}[{inside}]': the offset must be a number from 0 to 65535 (or tcpflags, icmptype, icmpcode)"),
                ))
            }
        };
        let size = match size.map(str::parse::<u8>) {
            None => 1,
            Some(Ok(z @ (1 | 2 | 4))) => z,
            Some(_) => {
                return Err(at(
                    self,
                    format!("'{name}[{inside}]': the size must be 1, 2 or 4 bytes"),
                ))
            }
        };
        let mut mask = None;
        if self.peek().is_some_and(|t| t.tok == Tok::Amp) {
            self.next();
            mask = Some(self.mask()?);
        }
        let op = match self.peek_word() {
            Some("=" | "==") => Cmp::Eq,
            Some("!=") => Cmp::Ne,
            Some("<") => Cmp::Lt,
            Some("<=") => Cmp::Le,
            Some(">") => Cmp::Gt,
            Some(">=") => Cmp::Ge,
            _ => {
                return Err(self.expected(&format!(
                    "'&' or a comparison (=, !=, <, <=, >, >=) after '{name}[{inside}]'"
                )))
            }
        };
        self.next();
        let value = self.value_number("a number to compare with")?;
        Ok(Prim::Bytes {
            base,
            offset,
            size,
            mask,
            op,
            value,
        })
    }

    /// A mask: a number, or `(A|B|…)`.
    fn mask(&mut self) -> Result<u32, ParseError> {
        if self.peek().is_some_and(|t| t.tok == Tok::LParen) {
            self.next();
            let mut m = self.value_number("a number or a flag name (tcp-syn…)")?;
            loop {
                match self.peek().map(|t| &t.tok) {
                    Some(Tok::Pipe) => {
                        self.next();
                        m |= self.value_number("a number or a flag name (tcp-syn…)")?;
                    }
                    Some(Tok::RParen) => {
                        self.next();
                        return Ok(m);
                    }
                    _ => return Err(self.expected("'|' or ')' in the mask")),
                }
            }
        }
        self.value_number("a mask (a number, a flag name like tcp-syn, or (A|B))")
    }

    fn value_number(&mut self, what: &str) -> Result<u32, ParseError> {
        match self.peek_word().and_then(number) {
            Some(v) => {
                self.next();
                Ok(v)
            }
            None => Err(self.expected(what)),
        }
    }
}

fn transport(q: Option<Qual>) -> Option<Transport> {
    match q {
        Some(Qual::Transport(t)) => Some(t),
        _ => None,
    }
}

/// `host` for an address, `net` for an address with a prefix length.
fn classify_address(w: &str) -> Option<Kind> {
    match w.split_once('/') {
        Some((a, _)) => a.parse::<IpAddr>().ok().map(|_| Kind::Net),
        None => w.parse::<IpAddr>().ok().map(|_| Kind::Host),
    }
}
