//! The system calls the lab makes without a safe wrapper: creating a TUN
//! device (`TUNSETIFF` on `/dev/net/tun`), TCP_CORK (which nix does not
//! wrap), and the priorities of the lab's threads.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;

/// `_IOW('T', 202, int)`
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// Creates TUN device `name` (layer 3, no packet-information header) in the
/// calling thread's network namespace; the device lives while the file is open.
pub fn open_tun(name: &str) -> io::Result<File> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}"),
        ));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(|e| io::Error::new(e.kind(), format!("/dev/net/tun: {e}")))?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one ifreq, which `req` is, and it
    // lives across the call; the descriptor is open.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF, &mut req as *mut libc::ifreq) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("creating TUN device {name}: {e}"),
        ));
    }
    Ok(file)
}

/// Sets or clears TCP_CORK on a TCP socket (tcp(7)): while set, partial
/// segments are held (for 200 ms at most); clearing it sends them.
pub fn set_cork(fd: impl AsFd, on: bool) -> io::Result<()> {
    let v: libc::c_int = on.into();
    // SAFETY: the option value is one c_int that lives across the call, and
    // its size is passed with it; the descriptor is borrowed, so open.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs the calling thread under SCHED_FIFO at `priority` (sched(7)): it
/// then runs as soon as it is ready, ahead of every ordinary thread on the
/// machine, so a busy host does not add its scheduling delay to the path the
/// thread emulates. The kernel's real-time throttling (95% of each second by
/// default) keeps the machine usable should the thread spin.
pub fn realtime_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param that lives across the call; pid
    // 0 is the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Lowers the calling thread's nice value to `nice` (setpriority(2); on
/// Linux it applies to the one thread). Threads it creates afterwards and
/// processes it starts inherit it.
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: plain integer arguments; who 0 is the calling thread.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
