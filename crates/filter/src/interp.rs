//! A classic BPF interpreter and Linux's static checks, for the tests: the
//! compiled programs are run here against frames and compared with the
//! userspace evaluator.
//!
//! Semantics as Linux's `bpf_check_classic` and the BSD `bpf_filter`: a
//! load past the end of the packet ends the program with 0; division by 0
//! ends it with 0.

use crate::bpf::{self, Insn};

/// Runs `prog` on `pkt`; returns what the program returns.
pub(crate) fn run(prog: &[Insn], pkt: &[u8]) -> u32 {
    let (mut a, mut x) = (0u32, 0u32);
    let mut mem = [0u32; bpf::MEMWORDS as usize];
    let mut pc = 0usize;
    let load = |at: u64, size: usize| -> Option<u32> {
        let at = usize::try_from(at).ok()?;
        let b = pkt.get(at..at.checked_add(size)?)?;
        Some(b.iter().fold(0u32, |v, &x| (v << 8) | u32::from(x)))
    };
    loop {
        let Some(&i) = prog.get(pc) else {
            panic!("ran off the end of the program at {pc}");
        };
        pc += 1;
        let k = i.k;
        let size = match i.code & 0x18 {
            bpf::H => 2,
            bpf::B => 1,
            _ => 4,
        };
        match i.code & 0x07 {
            bpf::LD => {
                a = match i.code & 0xe0 {
                    bpf::IMM => k,
                    bpf::LEN => pkt.len() as u32,
                    bpf::MEM => mem[k as usize],
                    bpf::ABS => match load(u64::from(k), size) {
                        Some(v) => v,
                        None => return 0,
                    },
                    bpf::IND => match load(u64::from(x) + u64::from(k), size) {
                        Some(v) => v,
                        None => return 0,
                    },
                    _ => panic!("bad load {:#x}", i.code),
                }
            }
            bpf::LDX => {
                x = match i.code & 0xe0 {
                    bpf::IMM => k,
                    bpf::LEN => pkt.len() as u32,
                    bpf::MEM => mem[k as usize],
                    bpf::MSH => match load(u64::from(k), 1) {
                        Some(v) => 4 * (v & 0xf),
                        None => return 0,
                    },
                    _ => panic!("bad ldx {:#x}", i.code),
                }
            }
            bpf::ST => mem[k as usize] = a,
            bpf::STX => mem[k as usize] = x,
            bpf::ALU => {
                let v = if i.code & bpf::X != 0 { x } else { k };
                a = match i.code & 0xf0 {
                    bpf::ADD => a.wrapping_add(v),
                    bpf::SUB => a.wrapping_sub(v),
                    bpf::MUL => a.wrapping_mul(v),
                    bpf::DIV => match a.checked_div(v) {
                        Some(q) => q,
                        None => return 0,
                    },
                    bpf::MOD => match a.checked_rem(v) {
                        Some(q) => q,
                        None => return 0,
                    },
                    bpf::OR => a | v,
                    bpf::AND => a & v,
                    bpf::XOR => a ^ v,
                    bpf::LSH => a.checked_shl(v).unwrap_or(0),
                    bpf::RSH => a.checked_shr(v).unwrap_or(0),
                    bpf::NEG => a.wrapping_neg(),
                    _ => panic!("bad alu {:#x}", i.code),
                }
            }
            bpf::JMP => {
                let v = if i.code & bpf::X != 0 { x } else { k };
                let taken = match i.code & 0xf0 {
                    bpf::JA => {
                        pc += k as usize;
                        continue;
                    }
                    bpf::JEQ => a == v,
                    bpf::JGT => a > v,
                    bpf::JGE => a >= v,
                    bpf::JSET => a & v != 0,
                    _ => panic!("bad jump {:#x}", i.code),
                };
                pc += usize::from(if taken { i.jt } else { i.jf });
            }
            bpf::RET => return if i.code & 0x18 == bpf::A { a } else { k },
            _ => {
                if i.code & 0xf8 == bpf::TXA {
                    a = x;
                } else {
                    x = a;
                }
            }
        }
    }
}

/// Linux's checks before it accepts a program (net/core/filter.c,
/// `bpf_check_classic` and `check_load_and_stores`): a known length, known
/// opcodes, jumps inside the program, constant division by non-zero, scratch
/// cells in range and written before they are read on every path, a `ret`
/// at the end.
pub(crate) fn check(prog: &[Insn]) -> Result<(), String> {
    if prog.is_empty() || prog.len() > bpf::MAX_INSNS {
        return Err(format!("length {}", prog.len()));
    }
    let n = prog.len();
    // Cells written on every path, exactly as check_load_and_stores: one
    // pass in order (jumps only go forward); a jump passes what is known to
    // its targets, and what follows a jump knows only what its jumpers knew.
    let mut masks = vec![u16::MAX; n];
    let mut valid: u16 = 0;
    for (pc, i) in prog.iter().enumerate() {
        valid &= masks[pc];
        let code = i.code;
        let cell = |k: u32| {
            if k < bpf::MEMWORDS {
                Ok(1u16 << k)
            } else {
                Err(format!("{pc}: cell {k}"))
            }
        };
        match code & 0x07 {
            bpf::LD | bpf::LDX => match code & 0xe0 {
                bpf::MEM => {
                    if valid & cell(i.k)? == 0 {
                        return Err(format!("{pc}: M[{}] read before written", i.k));
                    }
                }
                bpf::MSH if code != bpf::LDX | bpf::B | bpf::MSH => {
                    return Err(format!("{pc}: bad msh {code:#x}"))
                }
                bpf::IMM | bpf::LEN | bpf::ABS | bpf::IND | bpf::MSH => {}
                _ => return Err(format!("{pc}: bad load {code:#x}")),
            },
            bpf::ST | bpf::STX => valid |= cell(i.k)?,
            bpf::ALU => {
                let op = code & 0xf0;
                if op > bpf::XOR {
                    return Err(format!("{pc}: bad alu {code:#x}"));
                }
                if (op == bpf::DIV || op == bpf::MOD) && code & bpf::X == 0 && i.k == 0 {
                    return Err(format!("{pc}: division by 0"));
                }
            }
            bpf::JMP => {
                let targets: Vec<usize> = if code & 0xf0 == bpf::JA {
                    vec![pc + 1 + i.k as usize]
                } else if code & 0xf0 <= bpf::JSET {
                    vec![pc + 1 + usize::from(i.jt), pc + 1 + usize::from(i.jf)]
                } else {
                    return Err(format!("{pc}: bad jump {code:#x}"));
                };
                for t in targets {
                    if t >= n {
                        return Err(format!("{pc}: jump to {t} past the end"));
                    }
                    masks[t] &= valid;
                }
                valid = u16::MAX;
            }
            bpf::RET => {}
            _ => {
                if code & 0xf8 != bpf::TAX && code & 0xf8 != bpf::TXA {
                    return Err(format!("{pc}: bad misc {code:#x}"));
                }
            }
        }
    }
    if prog[n - 1].code & 0x07 != bpf::RET {
        return Err("does not end with ret".into());
    }
    Ok(())
}
