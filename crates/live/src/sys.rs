//! The system calls of an AF_PACKET capture with a TPACKET_V3 ring. Every
//! `unsafe` block of the crate is here, each around one libc call (or one
//! access to the ring the kernel shares with us) whose arguments are checked
//! beside it.
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// `ETH_P_ALL` in network byte order, as AF_PACKET wants its protocol.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

// From <linux/if_packet.h>.
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
/// `tpacket_block_desc.hdr.bh1.block_status`: after `version` and
/// `offset_to_priv` (two u32).
const BLOCK_STATUS_OFFSET: usize = 8;

/// `struct tpacket_req3`.
#[repr(C)]
struct TpacketReq3 {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
    tp_retire_blk_tov: u32,
    tp_sizeof_priv: u32,
    tp_feature_req_word: u32,
}

/// `struct tpacket_stats_v3`.
#[repr(C)]
#[derive(Default)]
struct TpacketStatsV3 {
    tp_packets: u32,
    tp_drops: u32,
    tp_freeze_q_cnt: u32,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A packet socket that receives nothing until [`bind_interface`]
/// (protocol 0), so that no frame arrives before the filter is attached.
/// `cooked`: SOCK_DGRAM, frames start at the network header.
pub fn packet_socket(cooked: bool) -> io::Result<OwnedFd> {
    let kind = if cooked {
        libc::SOCK_DGRAM
    } else {
        libc::SOCK_RAW
    };
    // SAFETY: socket() takes plain integers and returns a new descriptor or -1.
    let fd = check(unsafe { libc::socket(libc::AF_PACKET, kind | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn c_name(name: &str) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL"))
}

fn no_such_interface(name: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("no interface named {name} in this network namespace"),
    )
}

/// The index of interface `name` in the calling thread's network namespace.
pub fn interface_index(name: &str) -> io::Result<u32> {
    let c = c_name(name)?;
    // SAFETY: c is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(no_such_interface(name));
    }
    Ok(index)
}

/// The ARPHRD_ type of interface `name` (1 Ethernet, 772 loopback, 65534
/// none for tun…), from SIOCGIFHWADDR on a throw-away UDP socket of the
/// calling thread's network namespace (no privileges needed).
pub fn hardware_type(name: &str) -> io::Result<u16> {
    let c = c_name(name)?;
    let bytes = c.as_bytes_with_nul();
    if bytes.len() > libc::IFNAMSIZ {
        return Err(no_such_interface(name));
    }
    // SAFETY: socket() takes plain integers and returns a new descriptor or -1.
    let fd =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data (a name and a union of plain data);
    // all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    // SAFETY: SIOCGIFHWADDR reads the NUL-terminated name and writes a
    // sockaddr into `req`, which lives across the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR as _, &mut req) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::ENODEV) {
            no_such_interface(name)
        } else {
            e
        });
    }
    // SAFETY: SIOCGIFHWADDR filled the union's ifru_hwaddr member.
    Ok(unsafe { req.ifr_ifru.ifru_hwaddr.sa_family })
}

/// setsockopt with an `int` value.
pub fn set_int(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: i32) -> io::Result<()> {
    set(fd, level, name, &value)
}

fn set<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: the pointer and length describe `*value`, which lives across
    // the call; the kernel only reads it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Asks for the TPACKET_V3 ring layout (before the ring is set up).
pub fn use_tpacket_v3(fd: &OwnedFd) -> io::Result<()> {
    set_int(fd, libc::SOL_PACKET, PACKET_VERSION, TPACKET_V3)
}

/// Attaches a classic BPF program (SO_ATTACH_FILTER). The kernel checks it
/// and copies it; `prog` need not outlive the call.
pub fn attach_filter(fd: &OwnedFd, prog: &[libc::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(prog.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "filter program too long"))?;
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr().cast_mut(),
    };
    // SO_ATTACH_FILTER reads `len` instructions from `filter` (it never
    // writes through the pointer), all within `prog`.
    set(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
}

/// Binds the socket to one interface (0: all of them), all protocols.
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

/// Kernel counters since the previous call (reading them resets them):
/// frames that passed the filter (dropped ones included), frames dropped
/// because the ring was full, and how many times the ring froze full.
pub fn packet_statistics(fd: &OwnedFd) -> io::Result<(u32, u32, u32)> {
    let mut st = TpacketStatsV3::default();
    let mut len = size_of::<TpacketStatsV3>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `st`, which lives across the
    // call; the kernel writes at most `len` bytes.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            (&mut st as *mut TpacketStatsV3).cast(),
            &mut len,
        )
    })?;
    Ok((st.tp_packets, st.tp_drops, st.tp_freeze_q_cnt))
}

/// What [`wait`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The ring may have a block for us, or an error is pending (see [`take_error`]).
    Ready,
    TimedOut,
    /// A signal arrived (Ctrl-C): the caller may want to look at its flags.
    Interrupted,
}

/// Waits up to `timeout_ms` for the ring to have a block for us.
pub fn wait(fd: &OwnedFd, timeout_ms: i32) -> io::Result<Wait> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN | libc::POLLERR,
        revents: 0,
    };
    // SAFETY: one valid pollfd, count 1.
    match check(unsafe { libc::poll(&mut p, 1, timeout_ms) }) {
        Ok(0) => Ok(Wait::TimedOut),
        Ok(_) => Ok(Wait::Ready),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(Wait::Interrupted),
        Err(e) => Err(e),
    }
}

/// The socket's pending error (SO_ERROR, which reading clears), such as
/// ENETDOWN when the interface went away.
pub fn take_error(fd: &OwnedFd) -> io::Result<Option<io::Error>> {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `err`, which lives across the call.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
}

/// The receive ring, mapped: `blocks` blocks of `block_size` bytes, each
/// owned either by the kernel (filling it) or by us (reading it), as its
/// status word says.
pub struct Ring {
    base: NonNull<u8>,
    block_size: usize,
    blocks: usize,
}

// SAFETY: the mapping belongs to this value alone (nothing else holds its
// address), so moving it to another thread moves the only access to it.
unsafe impl Send for Ring {}

impl Ring {
    /// Sets up PACKET_RX_RING on `fd` (after [`use_tpacket_v3`]) and maps it.
    /// `retire_ms`: the kernel hands a block over after this long even when
    /// it is not full, so that a quiet link still delivers.
    pub fn new(fd: &OwnedFd, block_size: u32, blocks: u32, retire_ms: u32) -> io::Result<Ring> {
        // The frame size only has to divide the block (V3 packs frames of
        // any length); 2048 is what the kernel documentation uses.
        let frame_size = 2048;
        let req = TpacketReq3 {
            tp_block_size: block_size,
            tp_block_nr: blocks,
            tp_frame_size: frame_size,
            tp_frame_nr: block_size / frame_size * blocks,
            tp_retire_blk_tov: retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        set(fd, libc::SOL_PACKET, PACKET_RX_RING, &req)?;
        let len = block_size as usize * blocks as usize;
        // SAFETY: maps `len` bytes of the socket's ring, which the kernel
        // just allocated with exactly that size; a new mapping aliases no
        // Rust object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        Ok(Ring {
            base,
            block_size: block_size as usize,
            blocks: blocks as usize,
        })
    }

    pub fn blocks(&self) -> usize {
        self.blocks
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.blocks);
        // SAFETY: block i starts at base + i * block_size, inside the
        // mapping (i < blocks), page-aligned, so its status word at offset 8
        // is 4-byte aligned and stays mapped as long as `self`. Both sides
        // access it atomically: the kernel stores it with a barrier before
        // (smp_wmb, then the store; prb_close_block), we load and store it
        // as an AtomicU32.
        unsafe {
            AtomicU32::from_ptr(
                self.base
                    .as_ptr()
                    .add(i * self.block_size + BLOCK_STATUS_OFFSET)
                    .cast::<u32>(),
            )
        }
    }

    /// Block `i`'s bytes, if the kernel has handed it to us.
    pub fn user_block(&self, i: usize) -> Option<&[u8]> {
        // Acquire pairs with the kernel's barrier before it set the status:
        // what it wrote into the block is visible once we see TP_STATUS_USER.
        if self.status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: the block lies inside the mapping (see `status`). While its
        // status says TP_STATUS_USER the kernel does not write to it (it
        // drops frames rather than touch a block user space holds), and it
        // only gets it back through `release`, which takes `&mut self`: no
        // slice handed out here can still be alive then.
        Some(unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(i * self.block_size), self.block_size)
        })
    }

    /// Hands block `i` back to the kernel.
    pub fn release(&mut self, i: usize) {
        // Release: our reads of the block happen before the kernel may
        // refill it.
        self.status(i).store(TP_STATUS_KERNEL, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no slice of it
        // can outlive `self` (they borrow it).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.block_size * self.blocks);
        }
    }
}
