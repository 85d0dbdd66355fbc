//! Which process holds which socket: every `/proc/PID/fd/N` whose link reads
//! `socket:[INODE]`. Done in two steps so that the expensive one runs in
//! parallel: [`list`] reads every process's descriptor numbers with
//! `getdents64` into one reused buffer (cheap, and done while the netlink
//! dump runs), then [`socket_inode`] reads each link with `readlinkat` into a
//! stack buffer, from several threads. Nothing is allocated per descriptor
//! but its 8-byte entry in the list. The record parsers are pure functions
//! over bytes.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use crate::sys;

/// One holder of a socket: a process and its descriptor number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Holder {
    pub pid: u32,
    pub fd: u32,
}

/// Every descriptor of every process we may look at.
#[derive(Debug, Default)]
pub struct FdList {
    /// (pid, fd), grouped by process.
    pub fds: Vec<Holder>,
    /// Processes whose descriptors we may not list (not ours, no root).
    pub unreadable: u32,
    /// Processes seen.
    pub processes: u32,
}

/// `/proc`, the directory every later lookup is relative to.
pub fn open_proc() -> io::Result<OwnedFd> {
    sys::open_dir(None, c"/proc")
}

/// Lists the descriptors of every process (links only: `DT_LNK`).
pub fn list(proc_dir: &OwnedFd) -> io::Result<FdList> {
    let mut out = FdList::default();
    let mut proc_buf = vec![0u8; 32 * 1024];
    let mut fd_buf = vec![0u8; 64 * 1024];
    let mut path = [0u8; 32];
    loop {
        let n = sys::getdents(proc_dir, &mut proc_buf)?;
        if n == 0 {
            break;
        }
        for (_, name) in dirents(&proc_buf[..n]) {
            let Some(pid) = number(name.to_bytes()) else {
                continue;
            };
            out.processes += 1;
            let Some(fd_path) = path_of(&mut path, format_args!("{pid}/fd")) else {
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
                    if let Some(fd) = number(name.to_bytes()) {
                        out.fds.push(Holder { pid, fd });
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The inode of the socket that descriptor `h.fd` of process `h.pid` is, or
/// `None` when it is not a socket (or is gone).
pub fn socket_inode(proc_dir: &OwnedFd, h: Holder) -> Option<u32> {
    let mut path = [0u8; 32];
    let mut link = [0u8; 40];
    let path = path_of(&mut path, format_args!("{}/fd/{}", h.pid, h.fd))?;
    let len = sys::readlink_at(proc_dir, path, &mut link).ok()?;
    parse_socket_link(&link[..len])
}

/// `args` NUL-terminated in `buf`.
fn path_of<'a>(buf: &'a mut [u8; 32], args: std::fmt::Arguments<'_>) -> Option<&'a CStr> {
    use std::io::Write;
    let mut w = &mut buf[..];
    w.write_fmt(args).ok()?;
    w.write_all(b"\0").ok()?;
    let used = 32 - w.len();
    CStr::from_bytes_with_nul(&buf[..used]).ok()
}

const DT_UNKNOWN: u8 = 0;
const DT_LNK: u8 = 10;

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
pub fn parse_socket_link(link: &[u8]) -> Option<u32> {
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
