//! Who holds each socket of the dump, and its options read through a
//! duplicate of the holder's descriptor.
//!
//! One pass over every descriptor listed in `/proc`, on two threads when
//! there are many: read the link (`socket:[INODE]`); if the inode is a
//! socket of the dump, note the holder and, the first time the socket is
//! met, read its options right away (`pidfd_getfd`, the `getsockopt`s,
//! `close`), while the descriptor number is still fresh. For 10,000
//! sockets that is ~100,000 system calls; the threads share the work in
//! chunks through one atomic counter and a claim flag per socket, so each
//! socket's options are read once.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rustc_hash::FxHashMap;

use crate::procfs::{self, FdList, Holder};
use crate::{sys, Note, Process, ShortName, SockOptions, Socket};

/// Descriptors taken per grab from the shared counter: at most this many,
/// and small enough that the threads share even a short list.
const CHUNK: usize = 256;
/// Descriptors from which a second thread joins in.
pub const PARALLEL_FROM: usize = 2048;

/// How [`walk`] goes.
#[derive(Debug, Clone, Copy)]
pub struct Pass {
    /// Read each socket's options (through a holder's descriptor).
    pub options: bool,
    /// Descriptors from which a second thread joins in (`usize::MAX`: never).
    pub parallel_from: usize,
}

impl Pass {
    /// Holders and options, on two threads for many descriptors.
    pub const FULL: Pass = Pass {
        options: true,
        parallel_from: PARALLEL_FROM,
    };
    /// Holders only, on the calling thread.
    pub const OWNERS: Pass = Pass {
        options: false,
        parallel_from: usize::MAX,
    };
}

/// What the pass found.
#[derive(Default)]
pub struct Found {
    /// (socket index, holder), in no order.
    holders: Vec<(u32, Holder)>,
    /// (socket index, options).
    options: Vec<(u32, SockOptions)>,
    /// Processes that refused `pidfd_getfd`, and why.
    denied_pids: Vec<u32>,
    why: Option<io::Error>,
}

impl Found {
    fn merge(&mut self, other: Found) {
        self.holders.extend(other.holders);
        self.options.extend(other.options);
        for pid in other.denied_pids {
            if !self.denied_pids.contains(&pid) {
                self.denied_pids.push(pid);
            }
        }
        self.why = self.why.take().or(other.why);
    }
}

/// Matches every listed descriptor against the dump's sockets and reads
/// the options of each socket found (only through `only_pid`'s descriptors
/// when given, and when `pass.options`); a second thread joins in from
/// `pass.parallel_from` descriptors.
pub fn walk(
    proc_dir: &OwnedFd,
    list: &FdList,
    sockets: &[Socket],
    only_pid: Option<u32>,
    pass: Pass,
) -> Found {
    let mut index: FxHashMap<u32, u32> =
        FxHashMap::with_capacity_and_hasher(sockets.len(), Default::default());
    for (i, s) in sockets.iter().enumerate() {
        if s.inode != 0 {
            index.insert(s.inode, i as u32);
        }
    }
    if index.is_empty() {
        return Found::default();
    }
    let claimed: Vec<AtomicBool> = sockets.iter().map(|_| AtomicBool::new(false)).collect();
    let next = AtomicUsize::new(0);
    let chunk_len = (list.fds.len() / 64).clamp(8, CHUNK);
    let work = || {
        let mut found = Found::default();
        // The pidfd of the process whose descriptors are being read (they
        // come grouped by process).
        let mut pidfd: Option<(u32, Option<OwnedFd>)> = None;
        loop {
            let start = next.fetch_add(chunk_len, Ordering::Relaxed);
            let Some(chunk) = list.fds.get(start..(start + chunk_len).min(list.fds.len())) else {
                break;
            };
            if chunk.is_empty() {
                break;
            }
            for &h in chunk {
                let Some(inode) = procfs::socket_inode(proc_dir, h) else {
                    continue;
                };
                let Some(&i) = index.get(&inode) else {
                    continue;
                };
                found.holders.push((i, h));
                if !pass.options
                    || only_pid.is_some_and(|p| p != h.pid)
                    || found.denied_pids.contains(&h.pid)
                    || claimed[i as usize].swap(true, Ordering::Relaxed)
                {
                    continue;
                }
                if pidfd.as_ref().map(|(p, _)| *p) != Some(h.pid) {
                    pidfd = Some((h.pid, sys::pidfd_open(h.pid).ok()));
                }
                // Exited since the listing.
                let Some(Some(pfd)) = pidfd.as_ref().map(|(_, f)| f.as_ref()) else {
                    claimed[i as usize].store(false, Ordering::Relaxed);
                    continue;
                };
                match options_of(pfd, h.fd, inode, sockets[i as usize].congestion) {
                    Ok(Some(o)) => found.options.push((i, o)),
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) => {
                        // Another holder may let us in.
                        claimed[i as usize].store(false, Ordering::Relaxed);
                        found.denied_pids.push(h.pid);
                        found.why.get_or_insert(e);
                    }
                    // The number now names another file, or was closed:
                    // another holder may still have it.
                    Ok(None) | Err(_) => claimed[i as usize].store(false, Ordering::Relaxed),
                }
            }
        }
        found
    };
    if list.fds.len() < pass.parallel_from {
        return work();
    }
    std::thread::scope(|scope| {
        let helper = scope.spawn(work);
        let mut found = work();
        match helper.join() {
            Ok(theirs) => found.merge(theirs),
            Err(panic) => std::panic::resume_unwind(panic),
        }
        found
    })
}

/// Writes what [`walk`] found into the sockets and notes what could not be
/// read.
pub fn apply(sockets: &mut [Socket], mut found: Found, list: &FdList, notes: &mut Vec<Note>) {
    if list.unreadable > 0 {
        notes.push(Note {
            what: "process",
            count: list.unreadable,
            reason: format!(
                "the descriptors of {} of {} processes are readable only by their owner or root \
                 (/proc/PID/fd): their sockets show no process (\"process\": null in JSON; run as root)",
                list.unreadable, list.processes
            ),
        });
    }
    let mut commands: FxHashMap<u32, Option<ShortName>> = FxHashMap::default();
    let mut command = |pid: u32| -> Process {
        let command = *commands.entry(pid).or_insert_with(|| procfs::command(pid));
        Process { pid, command }
    };
    found.holders.sort_unstable();
    // One holder per process (the lowest descriptor number).
    found.holders.dedup_by_key(|&mut (i, h)| (i, h.pid));
    for group in found.holders.chunk_by(|a, b| a.0 == b.0) {
        let s = &mut sockets[group[0].0 as usize];
        let all: Vec<Holder> = group.iter().map(|&(_, h)| h).collect();
        let doer = if all.len() == 1 {
            all[0]
        } else {
            pick_doer(&all)
        };
        s.process = Some(command(doer.pid));
        s.fd = Some(doer.fd);
        s.also_held_by = all
            .iter()
            .filter(|h| h.pid != doer.pid)
            .map(|h| command(h.pid))
            .collect();
    }
    for (i, o) in found.options {
        sockets[i as usize].options = Some(o);
    }
    // Sockets a descriptor refers to whose owner stayed hidden (/proc/PID/fd
    // not readable): their options cannot be asked for either.
    let hidden = sockets
        .iter()
        .filter(|s| s.inode != 0 && s.process.is_none())
        .count() as u32;
    let denied = sockets
        .iter()
        .filter(|s| s.options.is_none() && s.holders().any(|p| found.denied_pids.contains(&p.pid)))
        .count() as u32;
    if denied == 0 && hidden == 0 {
        return;
    }
    let mut parts = Vec::new();
    if hidden > 0 {
        parts.push(format!(
            "{hidden} whose process is hidden (/proc/PID/fd needs root)"
        ));
    }
    if denied > 0 {
        let e = found.why.map(|e| e.to_string()).unwrap_or_default();
        parts.push(format!(
            "{denied} in {} processes where pidfd_getfd was refused ({e}: needs root or \
             CAP_SYS_PTRACE)",
            found.denied_pids.len()
        ));
    }
    notes.push(Note {
        what: "options",
        count: denied + hidden,
        reason: format!(
            "the socket options (TCP_NODELAY, TCP_CORK, SO_RCVBUF…) of {} sockets: {}; their \
             options are null, so Nagle cannot be judged there (run as root); buffer sizes are \
             still under memory",
            denied + hidden,
            parts.join(", ")
        ),
    });
}

/// Of the processes sharing a socket, the one most likely doing its I/O:
/// a child of another holder (nginx's worker rather than its master, a
/// forked server's child rather than the parent that only listened), else
/// the lowest pid.
fn pick_doer(all: &[Holder]) -> Holder {
    for h in all {
        if let Some(ppid) = procfs::parent(h.pid) {
            if all.iter().any(|o| o.pid == ppid) {
                return *h;
            }
        }
    }
    all.iter().min_by_key(|h| h.pid).copied().unwrap_or(all[0])
}

/// The options of descriptor `fd` of the process behind `pidfd`, if it
/// still is socket `inode` (`Ok(None)` when the number was reused).
fn options_of(
    pidfd: &OwnedFd,
    fd: u32,
    inode: u32,
    congestion: Option<ShortName>,
) -> io::Result<Option<SockOptions>> {
    let dup = sys::pidfd_getfd(pidfd, fd)?;
    // Descriptor numbers are reused: check it is still the socket we mean.
    let file = std::fs::File::from(dup);
    if std::os::unix::fs::MetadataExt::ino(&file.metadata()?) != u64::from(inode) {
        return Ok(None);
    }
    let dup = OwnedFd::from(file);
    let tcp = |name| sys::getsockopt_int(&dup, libc::IPPROTO_TCP, name);
    let sol = |name| sys::getsockopt_int(&dup, libc::SOL_SOCKET, name);
    Ok(Some(SockOptions {
        tcp_nodelay: tcp(libc::TCP_NODELAY)? != 0,
        tcp_cork: tcp(libc::TCP_CORK)? != 0,
        tcp_quickack: tcp(libc::TCP_QUICKACK)? != 0,
        so_rcvbuf: sol(libc::SO_RCVBUF)?.max(0) as u32,
        so_sndbuf: sol(libc::SO_SNDBUF)?.max(0) as u32,
        tcp_notsent_lowat: tcp(libc::TCP_NOTSENT_LOWAT)? as u32,
        congestion,
    }))
}
