//! The system calls of `sockets` that are not netlink's (the netlink socket
//! is `tcpdoctor-netlink`'s). Every `unsafe` block of the crate is here, each
//! around one libc call whose arguments are checked beside it; the bytes
//! these calls fill in are parsed by the safe, pure code of `procfs.rs`.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use tcpdoctor_netlink::sys::check;

fn check_len(rc: isize) -> io::Result<usize> {
    usize::try_from(rc).map_err(|_| io::Error::last_os_error())
}

/// Takes ownership of a descriptor a successful call just returned.
fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(fd)
        .ok()
        .filter(|&fd| fd >= 0)
        .ok_or_else(io::Error::last_os_error)?;
    // SAFETY: fd is a new descriptor returned to us by the kernel and owned by
    // nobody else; OwnedFd closes it once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens directory `path`, relative to `dir` (or absolute when `dir` is
/// `None`).
pub fn open_dir(dir: Option<BorrowedFd<'_>>, path: &CStr) -> io::Result<OwnedFd> {
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: path is NUL-terminated and outlives the call; `at` is a live
    // descriptor borrowed for the call, or AT_FDCWD.
    let fd = check(unsafe {
        libc::openat(
            at,
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    owned(fd.into())
}

/// Reads directory entries (`struct linux_dirent64` records, parsed by
/// `procfs::dirents`) into `buf`; 0 at the end of the directory.
pub fn getdents(dir: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: getdents64 writes at most buf.len() bytes into buf, which is
    // valid for writes for the call; dir is a live directory descriptor.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            dir.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    check_len(rc as isize)
}

/// The target of symbolic link `name` in directory `dir`, into `buf`
/// (cut at `buf.len()`, which is enough for `socket:[4294967295]`).
pub fn readlink_at(dir: &OwnedFd, name: &CStr, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: name is NUL-terminated and outlives the call; readlinkat writes
    // at most buf.len() bytes into buf (no NUL) and returns how many.
    let rc = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    check_len(rc)
}

/// A pidfd for process `pid` (Linux 5.3).
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: pidfd_open takes a pid and flags (0) and returns a new
    // descriptor or -1; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    owned(fd)
}

/// A duplicate, in this process, of descriptor `fd` of the process behind
/// `pidfd` (Linux 5.6). The kernel allows it when we may ptrace that process
/// (`PTRACE_MODE_ATTACH_REALCREDS`): root, CAP_SYS_PTRACE, or the same user.
pub fn pidfd_getfd(pidfd: &OwnedFd, fd: u32) -> io::Result<OwnedFd> {
    let fd = libc::c_int::try_from(fd)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "fd out of range"))?;
    // SAFETY: pidfd_getfd takes two descriptors (numbers) and flags (0) and
    // returns a new descriptor or -1; no memory is passed.
    let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    owned(dup)
}

/// `getsockopt` of an `int` option.
pub fn getsockopt_int(fd: &OwnedFd, level: libc::c_int, name: libc::c_int) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `value`, which lives across the
    // call; the kernel writes at most `len` bytes and updates `len`.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(value)
}
