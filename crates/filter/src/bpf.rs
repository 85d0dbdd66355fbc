//! Classic BPF (the `struct sock_filter` of Linux's `SO_ATTACH_FILTER`, and
//! of BSD's bpf(4)): the instruction and its opcodes.

use std::fmt;

/// One instruction, laid out as `struct sock_filter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Insn {
    pub code: u16,
    /// Conditional jumps: how many instructions to skip when true / false.
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl Insn {
    pub const fn new(code: u16, k: u32) -> Insn {
        Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }
}

// Instruction classes.
pub const LD: u16 = 0x00;
pub const LDX: u16 = 0x01;
pub const ST: u16 = 0x02;
pub const STX: u16 = 0x03;
pub const ALU: u16 = 0x04;
pub const JMP: u16 = 0x05;
pub const RET: u16 = 0x06;
pub const MISC: u16 = 0x07;
// Load sizes.
pub const W: u16 = 0x00;
pub const H: u16 = 0x08;
pub const B: u16 = 0x10;
// Load modes.
pub const IMM: u16 = 0x00;
pub const ABS: u16 = 0x20;
pub const IND: u16 = 0x40;
pub const MEM: u16 = 0x60;
pub const LEN: u16 = 0x80;
/// `ldxb 4*([k]&0xf)`: the IPv4 header length.
pub const MSH: u16 = 0xa0;
// ALU operations.
pub const ADD: u16 = 0x00;
pub const SUB: u16 = 0x10;
pub const MUL: u16 = 0x20;
pub const DIV: u16 = 0x30;
pub const OR: u16 = 0x40;
pub const AND: u16 = 0x50;
pub const LSH: u16 = 0x60;
pub const RSH: u16 = 0x70;
pub const NEG: u16 = 0x80;
pub const MOD: u16 = 0x90;
pub const XOR: u16 = 0xa0;
// Jumps.
pub const JA: u16 = 0x00;
pub const JEQ: u16 = 0x10;
pub const JGT: u16 = 0x20;
pub const JGE: u16 = 0x30;
pub const JSET: u16 = 0x40;
// Operand source: the constant k, or the X register.
pub const K: u16 = 0x00;
pub const X: u16 = 0x08;
/// `ret a` (with [`RET`]).
pub const A: u16 = 0x10;
// MISC operations.
pub const TAX: u16 = 0x00;
pub const TXA: u16 = 0x80;

/// Scratch memory cells (`M[0]`..`M[15]`).
pub const MEMWORDS: u32 = 16;
/// The most instructions Linux accepts in one program (BPF_MAXINSNS).
pub const MAX_INSNS: usize = 4096;

/// tcpdump's `-d` notation, for reading a program.
impl fmt::Display for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = self.k;
        let class = self.code & 0x07;
        let size = match self.code & 0x18 {
            H => "h",
            B => "b",
            _ => "",
        };
        match class {
            LD | LDX => {
                let op = if class == LD { "ld" } else { "ldx" };
                match self.code & 0xe0 {
                    IMM => write!(f, "{op} #{k:#x}"),
                    ABS => write!(f, "{op}{size} [{k}]"),
                    IND => write!(f, "{op}{size} [x + {k}]"),
                    MEM => write!(f, "{op} M[{k}]"),
                    LEN => write!(f, "{op} #pktlen"),
                    MSH => write!(f, "ldxb 4*([{k}]&0xf)"),
                    _ => write!(f, "unknown {:#06x}", self.code),
                }
            }
            ST => write!(f, "st M[{k}]"),
            STX => write!(f, "stx M[{k}]"),
            ALU => {
                let op = match self.code & 0xf0 {
                    ADD => "add",
                    SUB => "sub",
                    MUL => "mul",
                    DIV => "div",
                    OR => "or",
                    AND => "and",
                    LSH => "lsh",
                    RSH => "rsh",
                    NEG => return f.write_str("neg"),
                    MOD => "mod",
                    XOR => "xor",
                    _ => "alu?",
                };
                if self.code & X != 0 {
                    write!(f, "{op} x")
                } else {
                    write!(f, "{op} #{k:#x}")
                }
            }
            JMP => {
                let op = match self.code & 0xf0 {
                    JA => return write!(f, "ja +{k}"),
                    JEQ => "jeq",
                    JGT => "jgt",
                    JGE => "jge",
                    JSET => "jset",
                    _ => "j?",
                };
                let operand = if self.code & X != 0 {
                    "x".to_string()
                } else {
                    format!("#{k:#x}")
                };
                write!(f, "{op} {operand} jt +{} jf +{}", self.jt, self.jf)
            }
            RET => {
                if self.code & 0x18 == A {
                    f.write_str("ret a")
                } else {
                    write!(f, "ret #{k}")
                }
            }
            _ => {
                if self.code & 0xf8 == TXA {
                    f.write_str("txa")
                } else {
                    f.write_str("tax")
                }
            }
        }
    }
}
