//! [`Expr`] to a classic BPF program for one link type.
//!
//! The program has two parts. A fixed prologue finds the IP header (through
//! up to two VLAN tags on Ethernet), checks what was captured, and leaves
//! its findings in scratch memory — the same [`View`](crate::eval::View)
//! the userspace evaluator computes:
//!
//! | cell | holds |
//! |---|---|
//! | `M[0]` | 4 or 6 by the link layer, else 0 (`ip`, `ip6`) |
//! | `M[1]` | 4 or 6 when the fixed IP header was captured, else 0 |
//! | `M[2]` | offset of the IP header |
//! | `M[3]` | transport protocol, 256 if unknown |
//! | `M[4]` | offset of the transport header when its ports were captured and are this packet's, else 0 |
//!
//! The body then tests the expression with short jumps on those cells and
//! on loads the prologue has checked the length for, so no load ever runs
//! past the packet (a test on a missing field is false, not a rejection of
//! the whole packet as in tcpdump's programs). Every cell is stored on
//! every path before it is read, as Linux's checker requires.
//!
//! IPv4 transport headers are located with the `ldxb 4*([k]&0xf)` idiom,
//! so IP options are skipped; ports are read only when the fragment offset
//! is 0, as tcpdump. IPv6 extension headers are not walked (as tcpdump),
//! except that `tcp`, `udp`… look through one fragment header for the
//! protocol, as tcpdump's do.
//!
//! Jumps are laid out by a small assembler: a conditional jump's offsets are
//! 8 bits, so one that must reach further goes through an unconditional
//! `ja` (32-bit offset) placed right after it.

use std::fmt;
use std::net::IpAddr;

use tcpdoctor_wire::LinkType;

use crate::ast::{Cmp, Dir, Expr, Net, Prim, Proto, Transport};
use crate::bpf::{self, Insn};
use crate::eval::{
    AF_INET, AF_INET6, ETHERTYPE_IPV4, ETHERTYPE_IPV6, IPV6_FRAGMENT, MAX_VLAN_TAGS, VLAN_TPIDS,
};

/// What a program returns for a packet that matches: the whole packet
/// (tcpdump's default snapshot length). 0 means "drop".
pub const SNAP: u32 = 0x40000;

const M_FAMILY: u32 = 0;
const M_HEADER: u32 = 1;
const M_L3: u32 = 2;
const M_PROTO: u32 = 3;
const M_L4: u32 = 4;
const NO_PROTO: u32 = 256;

/// Why a filter cannot become a kernel program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileError {
    /// Only link types with a fixed-size header before IP are supported.
    UnsupportedLink(LinkType),
    /// Longer than the kernel accepts.
    TooLong { instructions: usize },
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::UnsupportedLink(l) => {
                write!(f, "cannot compile a filter for link type {}", l.name())
            }
            CompileError::TooLong { instructions } => write!(
                f,
                "the filter is too long for the kernel: {instructions} BPF instructions, at most {}",
                bpf::MAX_INSNS
            ),
        }
    }
}

impl std::error::Error for CompileError {}

pub(crate) fn compile(e: &Expr, link: LinkType) -> Result<Vec<Insn>, CompileError> {
    let mut a = Asm::default();
    if *e != Expr::All {
        prologue(&mut a, link)?;
        let (t, f) = (a.label(), a.label());
        body(&mut a, e, t, f);
        a.bind(t);
        a.op(Insn::new(bpf::RET | bpf::K, SNAP));
        a.bind(f);
        a.op(Insn::new(bpf::RET | bpf::K, 0));
    } else {
        a.op(Insn::new(bpf::RET | bpf::K, SNAP));
    }
    let prog = a.assemble();
    if prog.len() > bpf::MAX_INSNS {
        return Err(CompileError::TooLong {
            instructions: prog.len(),
        });
    }
    Ok(prog)
}

// ---------------------------------------------------------------------------
// The assembler: instructions with symbolic forward jumps.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Label(usize);

#[derive(Debug, Clone, Copy)]
enum Op {
    Plain(Insn),
    /// A conditional jump (JEQ, JGT, JGE, JSET with K or X).
    Cond {
        code: u16,
        k: u32,
        t: Label,
        f: Label,
    },
    Ja(Label),
}

#[derive(Default)]
struct Asm {
    ops: Vec<Op>,
    /// The op index each label is bound to.
    labels: Vec<Option<usize>>,
}

impl Asm {
    fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    fn bind(&mut self, l: Label) {
        self.labels[l.0] = Some(self.ops.len());
    }

    fn op(&mut self, i: Insn) {
        self.ops.push(Op::Plain(i));
    }

    fn ld_mem(&mut self, cell: u32) {
        self.op(Insn::new(bpf::LD | bpf::MEM, cell));
    }

    fn st(&mut self, cell: u32) {
        self.op(Insn::new(bpf::ST, cell));
    }

    fn ld_imm(&mut self, k: u32) {
        self.op(Insn::new(bpf::LD | bpf::IMM, k));
    }

    fn ld_len(&mut self) {
        self.op(Insn::new(bpf::LD | bpf::W | bpf::LEN, 0));
    }

    fn jump(&mut self, op: u16, k: u32, t: Label, f: Label) {
        self.ops.push(Op::Cond {
            code: bpf::JMP | op | bpf::K,
            k,
            t,
            f,
        });
    }

    fn jump_x(&mut self, op: u16, t: Label, f: Label) {
        self.ops.push(Op::Cond {
            code: bpf::JMP | op | bpf::X,
            k: 0,
            t,
            f,
        });
    }

    fn ja(&mut self, l: Label) {
        self.ops.push(Op::Ja(l));
    }

    /// Lays the program out. A conditional jump whose target is more than
    /// 255 instructions ahead jumps instead to a `ja` inserted right after
    /// it; inserting moves later code, so this repeats until nothing changes
    /// (each jump gets at most its two `ja`s, so it ends).
    fn assemble(&self) -> Vec<Insn> {
        let n = self.ops.len();
        let mut far_t = vec![false; n];
        let mut far_f = vec![false; n];
        loop {
            let pos = self.positions(&far_t, &far_f);
            let at = |l: Label| pos[self.labels[l.0].expect("every label is bound")];
            let mut changed = false;
            for (i, op) in self.ops.iter().enumerate() {
                if let Op::Cond { t, f, .. } = *op {
                    let next = pos[i] + 1;
                    if !far_t[i] && at(t) - next > 255 {
                        far_t[i] = true;
                        changed = true;
                    }
                    if !far_f[i] && at(f) - next > 255 {
                        far_f[i] = true;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let pos = self.positions(&far_t, &far_f);
        let at = |l: Label| pos[self.labels[l.0].expect("every label is bound")];
        let mut out = Vec::with_capacity(pos[n]);
        for (i, op) in self.ops.iter().enumerate() {
            match *op {
                Op::Plain(insn) => out.push(insn),
                Op::Ja(l) => {
                    let k = at(l) - (pos[i] + 1);
                    out.push(Insn::new(bpf::JMP | bpf::JA, k as u32));
                }
                Op::Cond { code, k, t, f } => {
                    let next = pos[i] + 1;
                    let stubs = usize::from(far_t[i]) + usize::from(far_f[i]);
                    let jt = if far_t[i] { 0 } else { at(t) - next };
                    let jf = if far_f[i] {
                        usize::from(far_t[i])
                    } else {
                        at(f) - next
                    };
                    out.push(Insn {
                        code,
                        jt: jt as u8,
                        jf: jf as u8,
                        k,
                    });
                    if far_t[i] {
                        out.push(Insn::new(bpf::JMP | bpf::JA, (at(t) - (next + 1)) as u32));
                    }
                    if far_f[i] {
                        out.push(Insn::new(
                            bpf::JMP | bpf::JA,
                            (at(f) - (next + stubs)) as u32,
                        ));
                    }
                }
            }
        }
        out
    }

    /// The final position of every op (and, at index n, the program's
    /// length), given which jumps need a `ja`.
    fn positions(&self, far_t: &[bool], far_f: &[bool]) -> Vec<usize> {
        let mut pos = Vec::with_capacity(self.ops.len() + 1);
        let mut p = 0;
        for i in 0..self.ops.len() {
            pos.push(p);
            p += 1 + usize::from(far_t[i]) + usize::from(far_f[i]);
        }
        pos.push(p);
        pos
    }
}

// ---------------------------------------------------------------------------
// The prologue.

fn prologue(a: &mut Asm, link: LinkType) -> Result<(), CompileError> {
    let done = a.label();
    // Every cell gets a value first: Linux refuses a program that may read
    // a cell never written.
    a.ld_imm(0);
    for cell in [M_FAMILY, M_HEADER, M_L3, M_L4] {
        a.st(cell);
    }
    a.ld_imm(NO_PROTO);
    a.st(M_PROTO);

    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    match link {
        LinkType::Ethernet => {
            // Unrolled over the VLAN tags, so that every offset is a
            // constant (and the IPv4 header length can come from `msh`).
            a.len_at_least(14, done);
            a.op(Insn::new(bpf::LD | bpf::H | bpf::ABS, 12));
            let mut at = 14;
            for tag in 0..=MAX_VLAN_TAGS {
                let (l4, l6) = (a.label(), a.label());
                v4.push((l4, at));
                v6.push((l6, at));
                let n = a_next(a);
                a.jump(bpf::JEQ, ETHERTYPE_IPV4.into(), l4, n);
                if tag == MAX_VLAN_TAGS {
                    // One tag too many: not looked through.
                    a.jump(bpf::JEQ, ETHERTYPE_IPV6.into(), l6, done);
                    break;
                }
                let n = a_next(a);
                a.jump(bpf::JEQ, ETHERTYPE_IPV6.into(), l6, n);
                let tagged = a.label();
                for (i, tpid) in VLAN_TPIDS.into_iter().enumerate() {
                    let no = if i + 1 == VLAN_TPIDS.len() {
                        done
                    } else {
                        a_next(a)
                    };
                    a.jump(bpf::JEQ, tpid.into(), tagged, no);
                }
                // The tag's 4 bytes, then the inner ethertype.
                a.bind(tagged);
                a.len_at_least(at + 4, done);
                a.op(Insn::new(bpf::LD | bpf::H | bpf::ABS, (at + 2) as u32));
                at += 4;
            }
        }
        LinkType::LinuxSll | LinkType::LinuxSll2 => {
            let (proto_at, l3) = if link == LinkType::LinuxSll {
                (14, 16)
            } else {
                (0, 20)
            };
            let (l4, l6) = (a.label(), a.label());
            v4.push((l4, l3));
            v6.push((l6, l3));
            a.len_at_least(l3, done);
            a.op(Insn::new(bpf::LD | bpf::H | bpf::ABS, proto_at));
            let n = a_next(a);
            a.jump(bpf::JEQ, ETHERTYPE_IPV4.into(), l4, n);
            a.jump(bpf::JEQ, ETHERTYPE_IPV6.into(), l6, done);
        }
        LinkType::RawIp => {
            let (l4, l6) = (a.label(), a.label());
            v4.push((l4, 0));
            v6.push((l6, 0));
            a.len_at_least(1, done);
            a.op(Insn::new(bpf::LD | bpf::B | bpf::ABS, 0));
            a.op(Insn::new(bpf::ALU | bpf::RSH | bpf::K, 4));
            let n = a_next(a);
            a.jump(bpf::JEQ, 4, l4, n);
            a.jump(bpf::JEQ, 6, l6, done);
        }
        LinkType::Ipv4 | LinkType::Ipv6 => {
            let l = a.label();
            if link == LinkType::Ipv4 {
                v4.push((l, 0));
            } else {
                v6.push((l, 0));
            }
            a.ja(l);
        }
        LinkType::Null | LinkType::Loop => {
            let (l4, l6) = (a.label(), a.label());
            v4.push((l4, 4));
            v6.push((l6, 4));
            a.len_at_least(4, done);
            a.op(Insn::new(bpf::LD | bpf::W | bpf::ABS, 0));
            let mut families: Vec<(u32, Label)> = vec![(AF_INET, l4)];
            families.extend(AF_INET6.iter().map(|&f| (f, l6)));
            if link == LinkType::Null {
                // Written in the capturing host's byte order: both.
                let swapped: Vec<_> = families.iter().map(|&(f, l)| (f.swap_bytes(), l)).collect();
                families.extend(swapped);
            }
            for (family, l) in families {
                let n = a_next(a);
                a.jump(bpf::JEQ, family, l, n);
            }
            a.ja(done);
        }
        LinkType::Unknown(_) => return Err(CompileError::UnsupportedLink(link)),
    }
    for (l, at) in v4 {
        a.bind(l);
        ipv4(a, at as u32, done);
    }
    for (l, at) in v6 {
        a.bind(l);
        ipv6(a, at as u32, done);
    }
    a.bind(done);
    Ok(())
}

/// A label for the instruction about to be emitted after the next one: used
/// as the "fall through" target of the jump emitted next.
fn a_next(a: &mut Asm) -> Label {
    // Bound when the op after the jump is emitted: reserve it and bind lazily.
    let l = a.label();
    a.labels[l.0] = Some(a.ops.len() + 1);
    l
}

impl Asm {
    /// Continue if the packet is at least `n` bytes long, else go to `short`.
    fn len_at_least(&mut self, n: usize, short: Label) {
        self.ld_len();
        let next = a_next(self);
        self.jump(bpf::JGE, n as u32, next, short);
    }
}

/// What both IP versions record first: the version (`M_FAMILY`) and where
/// the header starts (`M_L3`); then, when the fixed header (`fixed` bytes)
/// was captured, the version again in `M_HEADER`. A shorter packet ends here.
fn ip_start(a: &mut Asm, version: u32, l3: u32, fixed: usize, done: Label) {
    a.ld_imm(version);
    a.st(M_FAMILY);
    a.ld_imm(l3);
    a.st(M_L3);
    a.len_at_least(l3 as usize + fixed, done);
    a.ld_imm(version);
    a.st(M_HEADER);
}

fn ipv4(a: &mut Asm, l3: u32, done: Label) {
    ip_start(a, 4, l3, 20, done);
    a.op(Insn::new(bpf::LD | bpf::B | bpf::ABS, l3 + 9));
    a.st(M_PROTO);
    // Ports only in the first fragment.
    a.op(Insn::new(bpf::LD | bpf::H | bpf::ABS, l3 + 6));
    let next = a_next(a);
    a.jump(bpf::JSET, 0x1FFF, done, next);
    // X = the header length in bytes, options included.
    a.op(Insn::new(bpf::LDX | bpf::B | bpf::MSH, l3));
    a.op(Insn::new(bpf::MISC | bpf::TXA, 0));
    let next = a_next(a);
    a.jump(bpf::JGE, 20, next, done);
    // X = l4 + 4: the ports must have been captured.
    a.op(Insn::new(bpf::ALU | bpf::ADD | bpf::K, l3 + 4));
    a.op(Insn::new(bpf::MISC | bpf::TAX, 0));
    a.ld_len();
    let next = a_next(a);
    a.jump_x(bpf::JGE, next, done);
    a.op(Insn::new(bpf::MISC | bpf::TXA, 0));
    a.op(Insn::new(bpf::ALU | bpf::SUB | bpf::K, 4));
    a.st(M_L4);
    a.ja(done);
}

fn ipv6(a: &mut Asm, l3: u32, done: Label) {
    ip_start(a, 6, l3, 40, done);
    a.op(Insn::new(bpf::LD | bpf::B | bpf::ABS, l3 + 6));
    let fragment = a.label();
    let next = a_next(a);
    a.jump(bpf::JEQ, IPV6_FRAGMENT.into(), fragment, next);
    a.st(M_PROTO);
    a.len_at_least(l3 as usize + 44, done);
    a.ld_imm(l3 + 40);
    a.st(M_L4);
    a.ja(done);
    // The protocol after one fragment header; no ports.
    a.bind(fragment);
    a.len_at_least(l3 as usize + 41, done);
    a.op(Insn::new(bpf::LD | bpf::B | bpf::ABS, l3 + 40));
    a.st(M_PROTO);
    a.ja(done);
}

// ---------------------------------------------------------------------------
// The body: go to `t` if `e` holds, else to `f`.

fn body(a: &mut Asm, e: &Expr, t: Label, f: Label) {
    match e {
        Expr::All => a.ja(t),
        Expr::Not(x) => body(a, x, f, t),
        Expr::And(x, y) => {
            let mid = a.label();
            body(a, x, mid, f);
            a.bind(mid);
            body(a, y, t, f);
        }
        Expr::Or(x, y) => {
            let mid = a.label();
            body(a, x, t, mid);
            a.bind(mid);
            body(a, y, t, f);
        }
        Expr::Prim(p) => prim(a, p, t, f),
    }
}

fn prim(a: &mut Asm, p: &Prim, t: Label, f: Label) {
    match *p {
        Prim::Proto(proto) => {
            let (cell, value, then) = match proto {
                Proto::Ip => (M_FAMILY, 4, None),
                Proto::Ip6 => (M_FAMILY, 6, None),
                Proto::Tcp => (M_PROTO, 6, None),
                Proto::Udp => (M_PROTO, 17, None),
                Proto::Sctp => (M_PROTO, 132, None),
                Proto::Icmp => (M_HEADER, 4, Some(1)),
                Proto::Icmp6 => (M_HEADER, 6, Some(58)),
            };
            a.ld_mem(cell);
            match then {
                None => a.jump(bpf::JEQ, value, t, f),
                Some(proto) => {
                    let n = a_next(a);
                    a.jump(bpf::JEQ, value, n, f);
                    a.ld_mem(M_PROTO);
                    a.jump(bpf::JEQ, proto, t, f);
                }
            }
        }
        Prim::Host(dir, addr) => {
            let full = if addr.is_ipv4() { 32 } else { 128 };
            address(a, dir, &Net::containing(addr, full), t, f);
        }
        Prim::Net(dir, net) => address(a, dir, &net, t, f),
        Prim::Port { proto, dir, lo, hi } => port(a, proto, dir, (lo, hi), t, f),
        Prim::Bytes {
            base,
            offset,
            size,
            mask,
            op,
            value,
        } => bytes(a, base, (offset, size), mask, (op, value), t, f),
    }
}

/// `[tcp|udp|sctp] [src|dst] port[range] LO[-HI]`: the transport's port(s)
/// in `lo..=hi`.
fn port(a: &mut Asm, proto: Option<Transport>, dir: Dir, (lo, hi): (u16, u16), t: Label, f: Label) {
    a.ld_mem(M_PROTO);
    let ok = a.label();
    match proto {
        Some(tr) => a.jump(bpf::JEQ, tr.number().into(), ok, f),
        None => {
            let n = a_next(a);
            a.jump(bpf::JEQ, 6, ok, n);
            let n = a_next(a);
            a.jump(bpf::JEQ, 17, ok, n);
            a.jump(bpf::JEQ, 132, ok, f);
        }
    }
    a.bind(ok);
    a.ld_mem(M_L4);
    let n = a_next(a);
    a.jump(bpf::JEQ, 0, f, n);
    a.op(Insn::new(bpf::MISC | bpf::TAX, 0));
    let test = |a: &mut Asm, at: u32, yes: Label, no: Label| {
        a.op(Insn::new(bpf::LD | bpf::H | bpf::IND, at));
        if lo == hi {
            a.jump(bpf::JEQ, lo.into(), yes, no);
        } else {
            let n = a_next(a);
            a.jump(bpf::JGE, lo.into(), n, no);
            a.jump(bpf::JGT, hi.into(), no, yes);
        }
    };
    sides(a, dir, t, f, |a, side, yes, no| {
        test(a, if side { 0 } else { 2 }, yes, no)
    });
}

/// `PROTO[OFFSET:SIZE] & MASK OP VALUE`, tcpdump's byte-offset test.
fn bytes(
    a: &mut Asm,
    base: Proto,
    (offset, size): (u16, u8),
    mask: Option<u32>,
    (op, value): (Cmp, u32),
    t: Label,
    f: Label,
) {
    // The header: IP's (M_L3) once its fixed part was captured, or
    // the transport's (M_L4, 0 when not there) of that protocol.
    let (header, proto) = match base {
        Proto::Ip => (Some(4), None),
        Proto::Ip6 => (Some(6), None),
        Proto::Tcp => (None, Some(6)),
        Proto::Udp => (None, Some(17)),
        Proto::Sctp => (None, Some(132)),
        Proto::Icmp => (Some(4), Some(1)),
        Proto::Icmp6 => (Some(6), Some(58)),
    };
    if let Some(h) = header {
        a.ld_mem(M_HEADER);
        let n = a_next(a);
        a.jump(bpf::JEQ, h, n, f);
    }
    let cell = match proto {
        None => M_L3,
        Some(p) => {
            a.ld_mem(M_PROTO);
            let n = a_next(a);
            a.jump(bpf::JEQ, p, n, f);
            a.ld_mem(M_L4);
            let n = a_next(a);
            a.jump(bpf::JEQ, 0, f, n);
            M_L4
        }
    };
    // The bytes must have been captured: start + offset + size <= len.
    a.ld_mem(cell);
    a.op(Insn::new(
        bpf::ALU | bpf::ADD | bpf::K,
        u32::from(offset) + u32::from(size),
    ));
    a.op(Insn::new(bpf::MISC | bpf::TAX, 0));
    a.ld_len();
    let n = a_next(a);
    a.jump_x(bpf::JGE, n, f);
    a.op(Insn::new(bpf::LDX | bpf::MEM, cell));
    let width = match size {
        1 => bpf::B,
        2 => bpf::H,
        _ => bpf::W,
    };
    a.op(Insn::new(bpf::LD | width | bpf::IND, offset.into()));
    if let Some(m) = mask {
        a.op(Insn::new(bpf::ALU | bpf::AND | bpf::K, m));
    }
    match op {
        Cmp::Eq => a.jump(bpf::JEQ, value, t, f),
        Cmp::Ne => a.jump(bpf::JEQ, value, f, t),
        Cmp::Gt => a.jump(bpf::JGT, value, t, f),
        Cmp::Ge => a.jump(bpf::JGE, value, t, f),
        Cmp::Lt => a.jump(bpf::JGE, value, f, t),
        Cmp::Le => a.jump(bpf::JGT, value, f, t),
    }
}

/// Tests the source (`side` true) and/or destination per `dir`.
fn sides(
    a: &mut Asm,
    dir: Dir,
    t: Label,
    f: Label,
    mut test: impl FnMut(&mut Asm, bool, Label, Label),
) {
    match dir {
        Dir::Src => test(a, true, t, f),
        Dir::Dst => test(a, false, t, f),
        Dir::SrcOrDst => {
            let other = a.label();
            test(a, true, t, other);
            a.bind(other);
            test(a, false, t, f);
        }
        Dir::SrcAndDst => {
            let other = a.label();
            test(a, true, other, f);
            a.bind(other);
            test(a, false, t, f);
        }
    }
}

fn address(a: &mut Asm, dir: Dir, net: &Net, t: Label, f: Label) {
    let (family, src, dst) = match net.addr() {
        IpAddr::V4(_) => (4, 12, 16),
        IpAddr::V6(_) => (6, 8, 24),
    };
    a.ld_mem(M_HEADER);
    let n = a_next(a);
    a.jump(bpf::JEQ, family, n, f);
    a.op(Insn::new(bpf::LDX | bpf::MEM, M_L3));
    let words: Vec<(usize, u32, u32)> = net
        .words()
        .into_iter()
        .enumerate()
        .filter(|&(_, (_, mask))| mask != 0)
        .map(|(i, (w, mask))| (i, w, mask))
        .collect();
    sides(a, dir, t, f, |a, side, yes, no| {
        let base = if side { src } else { dst };
        if words.is_empty() {
            // A /0 network: every address of the family.
            a.ja(yes);
            return;
        }
        for (j, &(i, w, mask)) in words.iter().enumerate() {
            a.op(Insn::new(
                bpf::LD | bpf::W | bpf::IND,
                (base + 4 * i) as u32,
            ));
            if mask != u32::MAX {
                a.op(Insn::new(bpf::ALU | bpf::AND | bpf::K, mask));
            }
            let hit = if j + 1 == words.len() { yes } else { a_next(a) };
            a.jump(bpf::JEQ, w & mask, hit, no);
        }
    });
}
