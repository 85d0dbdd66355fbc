//! Which process holds which socket: every `/proc/PID/fd/N` whose link reads
//! `socket:[INODE]`, matched against the inodes of the dump. Directories are
//! read with `getdents64` into one reused buffer and links with `readlinkat`
//! into a stack buffer, so the scan allocates nothing per descriptor (it is
//! the part of `sockets` that grows with every descriptor of the machine).
//! The record parsers are pure functions over bytes.

use std::ffi::CStr;
use std::io;
use std::os::fd::AsFd;

use rustc_hash::FxHashMap;

use crate::sys;

/// One holder of a socket: a process and its descriptor number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub fd: u32,
}

/// What the scan found.
#[derive(Debug, Default)]
pub struct Holders {
    /// Per socket (index into the dump): the first holder found.
    pub first: Vec<Option<Holder>>,
    /// Further holders, as (socket index, holder): a socket shared across
    /// `fork()` (nginx master and worker for a listener) or passed over a
    /// Unix socket.
    pub more: Vec<(usize, Holder)>,
    /// Processes whose descriptors we may not list (not ours, no root).
    pub unreadable: u32,
    /// Processes seen.
    pub processes: u32,
}

/// Scans `/proc` for descriptors of the sockets in `index` (inode → socket
/// index; `count` sockets).
pub fn scan(index: &FxHashMap<u32, usize>, count: usize) -> io::Result<Holders> {
    let mut out = Holders {
        first: vec![None; count],
        ..Holders::default()
    };
    let proc_dir = sys::open_dir(None, c"/proc")?;
    let mut proc_buf = vec![0u8; 32 * 1024];
    let mut fd_buf = vec![0u8; 64 * 1024];
    let mut path = [0u8; 32];
    let mut link = [0u8; 40];
    loop {
        let n = sys::getdents(&proc_dir, &mut proc_buf)?;
        if n == 0 {
            break;
        }
        for (_, name) in dirents(&proc_buf[..n]) {
            let Some(pid) = number(name.to_bytes()) else {
                continue;
            };
            out.processes += 1;
            let Some(fd_path) = fd_dir_path(pid, &mut path) else {
                continue;
            };
            let fd_dir = match sys::open_dir(Some(proc_dir.as_fd()), fd_path) {
                Ok(d) => d,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
                    out.unreadable += 1;
                    continue;
                }
                // Exited since the listing (ENOENT), or a zombie: nothing held.
                Err(_) => continue,
            };
            // An error (the process exited) ends its listing like the end does.
            while let Ok(m @ 1..) = sys::getdents(&fd_dir, &mut fd_buf) {
                for (kind, name) in dirents(&fd_buf[..m]) {
                    if kind != DT_LNK && kind != DT_UNKNOWN {
                        continue;
                    }
                    let Some(fd) = number(name.to_bytes()) else {
                        continue;
                    };
                    let Ok(len) = sys::readlink_at(&fd_dir, name, &mut link) else {
                        continue;
                    };
                    let Some(inode) = socket_inode(&link[..len]) else {
                        continue;
                    };
                    if let Some(&i) = index.get(&inode) {
                        let h = Holder { pid, fd };
                        match out.first[i] {
                            None => out.first[i] = Some(h),
                            // Several descriptors of one process: one is enough.
                            Some(f) if f.pid == pid => {}
                            Some(_) => out.more.push((i, h)),
                        }
                    }
                }
            }
        }
    }
    // A process holding one socket under several descriptors counts once.
    out.more.sort_unstable_by_key(|&(i, h)| (i, h.pid, h.fd));
    out.more.dedup_by_key(|&mut (i, h)| (i, h.pid));
    Ok(out)
}

const DT_UNKNOWN: u8 = 0;
const DT_LNK: u8 = 10;

/// `PID/fd` NUL-terminated in `buf`, relative to `/proc`.
fn fd_dir_path(pid: u32, buf: &mut [u8; 32]) -> Option<&CStr> {
    use std::io::Write;
    let mut w = &mut buf[..];
    write!(w, "{pid}/fd\0").ok()?;
    let used = 32 - w.len();
    CStr::from_bytes_with_nul(&buf[..used]).ok()
}

/// The records of a `getdents64` buffer (`struct linux_dirent64`: `d_ino`
/// u64, `d_off` i64, `d_reclen` u16, `d_type` u8, `d_name` NUL-terminated),
/// as (d_type, name). Stops at the first record that does not fit.
pub fn dirents(buf: &[u8]) -> impl Iterator<Item = (u8, &CStr)> {
    let mut rest = buf;
    std::iter::from_fn(move || loop {
        let reclen = u16::from_ne_bytes([*rest.get(16)?, *rest.get(17)?]) as usize;
        if reclen < 20 || reclen > rest.len() {
            return None;
        }
        let (rec, tail) = rest.split_at(reclen);
        rest = tail;
        if let Ok(name) = CStr::from_bytes_until_nul(&rec[19..]) {
            return Some((rec[18], name));
        }
    })
}

/// A decimal number without sign or leading junk (`1234`), as pids and
/// descriptor numbers are named in `/proc`.
pub fn number(b: &[u8]) -> Option<u32> {
    if b.is_empty() || b.len() > 10 {
        return None;
    }
    let mut n: u32 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u32::from(c - b'0'))?;
    }
    Some(n)
}

/// The inode of a `socket:[12345]` link target.
pub fn socket_inode(link: &[u8]) -> Option<u32> {
    number(link.strip_prefix(b"socket:[")?.strip_suffix(b"]")?)
}

/// The command name of a process (`/proc/PID/comm`, at most 15 bytes).
pub fn command(pid: u32) -> Option<crate::netlink::ShortName> {
    let b = std::fs::read(format!("/proc/{pid}/comm")).ok()?;
    let b = b.strip_suffix(b"\n").unwrap_or(&b);
    crate::netlink::ShortName::parse(b)
}

/// The parent of a process (`/proc/PID/stat`, the field after the command,
/// which may itself contain spaces and parentheses).
pub fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ppid(&stat)
}

/// The 4th field of `/proc/PID/stat`: `pid (comm) state ppid …`.
pub fn parse_stat_ppid(stat: &[u8]) -> Option<u32> {
    let close = stat.iter().rposition(|&c| c == b')')?;
    let mut fields = stat
        .get(close + 1..)?
        .split(|&c| c == b' ')
        .filter(|f| !f.is_empty());
    let _state = fields.next()?;
    number(fields.next()?)
}
