//! The system calls of an rtnetlink dump. Every `unsafe` block of the crate is
//! here, each around one libc call whose arguments are checked beside it.
#![allow(unsafe_code)]

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A NETLINK_ROUTE socket in the calling thread's network namespace. Dumps
/// need no privilege. Unbound: the kernel assigns a port id on first send,
/// and a send without an address goes to the kernel.
pub fn route_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket() takes plain integers and returns a new descriptor or -1.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    })?;
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A receive timeout, so a kernel that never ends a dump cannot hang us.
pub fn set_receive_timeout(fd: &OwnedFd, timeout: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: the pointer and length describe `tv`, which lives across the call.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Sends one request to the kernel.
pub fn send(fd: &OwnedFd, request: &[u8]) -> io::Result<()> {
    // SAFETY: the pointer and length describe `request`, which outlives the call.
    let n = unsafe { libc::send(fd.as_raw_fd(), request.as_ptr().cast(), request.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != request.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "netlink request sent in part",
        ));
    }
    Ok(())
}

/// Receives one datagram into `buf`; its full length is returned even when
/// larger than `buf` (MSG_TRUNC), so the caller can tell it was cut.
pub fn receive(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: the pointer and length describe `buf`, which outlives the
        // call; the kernel writes at most buf.len() bytes.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
