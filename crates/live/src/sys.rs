//! The system calls of an AF_PACKET capture. Every `unsafe` block of the crate
//! is here, each around one libc call whose arguments are checked beside it.
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `ETH_P_ALL` in network byte order, as AF_PACKET wants its protocol.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A raw packet socket that receives nothing until [`bind_interface`]
/// (protocol 0), so no frame of another interface slips in before the bind.
pub fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket() takes plain integers and returns a new descriptor or -1.
    let fd =
        check(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The index of interface `name` in the calling thread's network namespace.
pub fn interface_index(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL"))?;
    // SAFETY: c is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface named {name} in this network namespace"),
        ));
    }
    Ok(index)
}

/// Binds the socket to one interface, all protocols.
pub fn bind_interface(fd: &OwnedFd, ifindex: u32) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL_BE;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: the pointer and length describe `sll`, which lives across the call.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// setsockopt with an `int` value.
pub fn set_int(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: i32) -> io::Result<()> {
    // SAFETY: the pointer and length describe `value`, which lives across the call.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Kernel counters since the previous call (reading them resets them):
/// (frames queued to the socket, frames dropped because it was full).
pub fn packet_statistics(fd: &OwnedFd) -> io::Result<(u32, u32)> {
    // SAFETY: tpacket_stats is plain old data; all-zero is a valid value.
    let mut st: libc::tpacket_stats = unsafe { zeroed() };
    let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `st`, which lives across the call;
    // the kernel writes at most `len` bytes.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    })?;
    Ok((st.tp_packets, st.tp_drops))
}

/// Waits up to `timeout_ms` for the socket to become readable.
pub fn wait_readable(fd: &OwnedFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, count 1.
    match check(unsafe { libc::poll(&mut p, 1, timeout_ms) }) {
        Ok(n) => Ok(n > 0),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}

/// One received frame: how many bytes were copied into the buffer, the
/// frame's length on the wire, and the kernel's receive timestamp (ns since
/// the Unix epoch), if it gave one.
pub struct Received {
    pub copied: usize,
    pub wire_len: usize,
    pub ts_ns: Option<i64>,
}

/// Receives one frame without blocking (None: nothing queued).
pub fn receive(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<Received>> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one SCM_TIMESTAMPNS control message (a timespec), 8-byte aligned.
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 8]>() as _;
    // SAFETY: msg points at iov (describing `buf`) and `control`, all of which
    // outlive the call; MSG_TRUNC makes the kernel return the frame's full length.
    let n = unsafe {
        libc::recvmsg(
            fd.as_raw_fd(),
            &mut msg,
            libc::MSG_TRUNC | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    let wire_len = n as usize;
    let mut ts_ns = None;
    // SAFETY: CMSG_FIRSTHDR/CMSG_NXTHDR walk the control buffer the kernel
    // filled, bounded by msg_controllen; CMSG_DATA of an SCM_TIMESTAMPNS
    // message points at a timespec, read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let t: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                ts_ns = Some(t.tv_sec * 1_000_000_000 + t.tv_nsec);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Some(Received {
        copied: wire_len.min(buf.len()),
        wire_len,
        ts_ns,
    }))
}
