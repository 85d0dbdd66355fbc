//! The system calls of a netlink dump. Every `unsafe` block of the crate is
//! here, each around one libc call whose arguments are checked beside it.
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// A libc call's return code, or the error it left in `errno` when negative.
pub fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A netlink socket of `protocol` (`NETLINK_ROUTE`, `NETLINK_SOCK_DIAG`) in
/// the calling thread's network namespace. Dumps need no privilege. Unbound:
/// the kernel assigns a port id on first send.
pub fn socket(protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket() takes plain integers and returns a new descriptor or -1.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            protocol,
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

/// Sends one request to the kernel (port id 0).
pub fn send_to_kernel(fd: &OwnedFd, request: &[u8]) -> io::Result<()> {
    // SAFETY: sockaddr_nl is plain old data; all-zero is a valid value.
    let mut kernel: libc::sockaddr_nl = unsafe { zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: the pointer and length describe `request`, and the address
    // pointer and length describe `kernel`; both live across the call.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    let sent = usize::try_from(sent).map_err(|_| io::Error::last_os_error())?;
    if sent != request.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "netlink request sent in part",
        ));
    }
    Ok(())
}

/// Receives one datagram of a reply into `buf` and returns its length. A
/// datagram larger than `buf` is an error (MSG_TRUNC makes the kernel return
/// its real length), never a silently cut message.
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
        match usize::try_from(n) {
            Ok(n) if n > buf.len() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a netlink reply of {n} bytes did not fit in {} bytes",
                        buf.len()
                    ),
                ))
            }
            Ok(n) => return Ok(n),
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}
