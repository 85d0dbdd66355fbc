//! The system calls of `top`: `perf_event_open` on tracepoints, their
//! ioctls, the mmap'd ring buffers, `poll` and the tracefs mount. Every
//! `unsafe` block of the crate is here, each around one call whose
//! arguments are checked beside it. What the rings hold is copied out as
//! bytes and parsed by the safe code of `record.rs`.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

/// `struct perf_event_attr` up to `config1` (`PERF_ATTR_SIZE_VER0`, 64
/// bytes): every field `top` sets; the kernel takes the size it is given.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_watermark: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_WATERMARK: u64 = 1 << 14;
// _IO('$', 0), _IO('$', 1), _IO('$', 5), _IOW('$', 6, char *)
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
// _IOW('$', 4, u64)
const IOC_PERIOD: libc::c_ulong = 0x4008_2404;
const IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;

/// An open tracepoint event on one CPU (every process).
pub struct Event {
    fd: OwnedFd,
}

impl Event {
    /// `perf_event_open(PERF_TYPE_TRACEPOINT, config = id)` on `cpu` for all
    /// processes (pid -1), writing one sample with `sample_type` every
    /// `period` hits (that pass its filter), disabled until
    /// [`Event::enable`]. `wakeup_bytes`: poll wakes once the ring holds
    /// that much.
    pub fn open(
        id: u32,
        cpu: u32,
        sample_type: u64,
        period: u64,
        wakeup_bytes: u32,
    ) -> io::Result<Event> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: u64::from(id),
            sample_period: period.max(1),
            sample_type,
            flags: FLAG_DISABLED | FLAG_WATERMARK,
            wakeup_watermark: wakeup_bytes,
            ..Default::default()
        };
        let cpu = libc::c_int::try_from(cpu)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "cpu out of range"))?;
        // SAFETY: attr is a valid, initialised perf_event_attr of the size it
        // declares, borrowed for the call; the other arguments are plain ints
        // (pid -1 = every process, group -1 = none, flags CLOEXEC).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1 as libc::pid_t,
                cpu,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        let fd = libc::c_int::try_from(rc)
            .ok()
            .filter(|&fd| fd >= 0)
            .ok_or_else(io::Error::last_os_error)?;
        // SAFETY: fd is a new descriptor the kernel just returned, owned by
        // nobody else; OwnedFd closes it once.
        Ok(Event {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn ioctl(&self, req: libc::c_ulong, arg: libc::c_ulong) -> io::Result<()> {
        // SAFETY: a perf ioctl on our own live descriptor; `arg` is an int, a
        // pointer to a NUL-terminated string (set_filter) or to a u64
        // (set_period) that outlives the call.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), req as _, arg) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn enable(&self) -> io::Result<()> {
        self.ioctl(IOC_ENABLE, 0)
    }

    pub fn disable(&self) -> io::Result<()> {
        self.ioctl(IOC_DISABLE, 0)
    }

    /// Sends this event's samples into `ring`'s buffer (same CPU).
    pub fn set_output(&self, ring: &Ring) -> io::Result<()> {
        self.ioctl(IOC_SET_OUTPUT, ring.event.fd.as_raw_fd() as libc::c_ulong)
    }

    /// A sample every `period` hits from now on (`PERF_EVENT_IOC_PERIOD`).
    pub fn set_period(&self, period: u64) -> io::Result<()> {
        let p: u64 = period.max(1);
        self.ioctl(IOC_PERIOD, &p as *const u64 as libc::c_ulong)
    }

    /// An ftrace filter (`sport == 80 || dport == 80`) run in the kernel.
    pub fn set_filter(&self, filter: &str) -> io::Result<()> {
        let c = CString::new(filter)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in filter"))?;
        self.ioctl(IOC_SET_FILTER, c.as_ptr() as libc::c_ulong)
    }
}

/// The mmap'd ring buffer of one event (shared, through
/// [`Event::set_output`], by every event of its CPU).
pub struct Ring {
    event: Event,
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
}

// struct perf_event_mmap_page: data_head, data_tail, data_offset, data_size.
const HEAD: usize = 1024;
const TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

impl Ring {
    /// Maps 1 + `pages` pages of `event` (`pages` a power of two).
    pub fn map(event: Event, pages: usize) -> io::Result<Ring> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| io::Error::last_os_error())?;
        if !pages.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ring pages must be a power of two",
            ));
        }
        let len = page * (1 + pages);
        // SAFETY: a new shared mapping of our own perf descriptor, placed by
        // the kernel (addr NULL); checked against MAP_FAILED below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                event.fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut ring = Ring {
            event,
            base: base.cast(),
            len,
            data_offset: page,
            data_size: page * pages,
        };
        // Kernels since 4.1 say where the data is; older ones put it at page 1.
        let off = ring.read_u64(DATA_OFFSET) as usize;
        let size = ring.read_u64(DATA_SIZE) as usize;
        if off != 0 && size != 0 && off.checked_add(size).is_some_and(|e| e <= len) {
            ring.data_offset = off;
            ring.data_size = size;
        }
        Ok(ring)
    }

    /// The event this ring belongs to (to enable it, filter it).
    pub fn event(&self) -> &Event {
        &self.event
    }

    fn read_u64(&self, at: usize) -> u64 {
        // SAFETY: `at` is a fixed offset inside the first (metadata) page of
        // our live mapping, 8-aligned; the kernel writes it concurrently, so
        // read it volatile.
        unsafe { std::ptr::read_volatile(self.base.add(at).cast::<u64>()) }
    }

    /// The ring's unread bytes, oldest first: one slice, or two when they
    /// wrap around the end of the data area; and the head to hand to
    /// [`Ring::release`] once they are read. The kernel writes nothing
    /// between the tail and the head until then.
    pub fn unread(&self) -> (&[u8], &[u8], u64) {
        let head = self.read_u64(HEAD);
        // The data up to head is visible after this (perf's smp_rmb pairing).
        fence(Ordering::Acquire);
        let tail = self.read_u64(TAIL);
        let avail = head.wrapping_sub(tail) as usize;
        if avail == 0 || avail > self.data_size {
            return (&[], &[], tail);
        }
        let start = (tail as usize) % self.data_size;
        let first = avail.min(self.data_size - start);
        // SAFETY: both slices lie inside the data area of our live mapping
        // (start + first <= data_size, avail - first < data_size); the kernel
        // does not write between tail and head until `release` moves the
        // tail, which takes `&mut self`: after the last use of the slices.
        let (a, b) = unsafe {
            let data = self.base.add(self.data_offset);
            (
                std::slice::from_raw_parts(data.add(start), first),
                std::slice::from_raw_parts(data, avail - first),
            )
        };
        (a, b, head)
    }

    /// Gives the space up to `head` (from [`Ring::unread`]) back to the kernel.
    pub fn release(&mut self, head: u64) {
        fence(Ordering::Release);
        // SAFETY: data_tail is 8-aligned in the metadata page; we are its only writer.
        unsafe { std::ptr::write_volatile(self.base.add(TAIL).cast::<u64>(), head) };
    }

    /// Waits up to `timeout_ms` for any of `rings` to reach its watermark.
    pub fn poll(rings: &[Ring], timeout_ms: i32) -> io::Result<()> {
        let mut fds: Vec<libc::pollfd> = rings
            .iter()
            .map(|r| libc::pollfd {
                fd: r.event.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds is a valid array of fds.len() pollfd for the call.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// `mount -t tracefs nodev /sys/kernel/tracing`.
pub fn mount_tracefs() -> io::Result<()> {
    // SAFETY: all strings are NUL-terminated literals; data is NULL.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Blocks of 128 KiB and more (the socket-table lookup's netlink buffer)
/// get mappings of their own, returned to the system when freed. glibc
/// otherwise raises this threshold to the largest block freed and serves the
/// next such block from the heap, whose pages it keeps: resident memory that
/// steps up the first time a lookup runs and stays for the rest of a long
/// trace. Setting it once turns that adjustment off (mallopt(3)).
#[cfg(target_env = "gnu")]
pub fn fix_mmap_threshold() {
    // SAFETY: mallopt only sets an allocator parameter; no memory is touched.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024) };
}

/// Other C libraries (musl) do not adjust the threshold.
#[cfg(not(target_env = "gnu"))]
pub fn fix_mmap_threshold() {}

/// CPU time this process has used (user + system), for the benchmark notes.
pub fn cpu_time() -> std::time::Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid rusage.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec as u64)
            + std::time::Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Set by SIGTERM once [`stop_on_sigterm`] has run.
pub static SIGTERM: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGTERM.store(true, Ordering::SeqCst);
}

/// SIGTERM ends the trace as Ctrl-C does (the report is still written).
pub fn stop_on_sigterm() {
    let handler: extern "C" fn(libc::c_int) = on_sigterm;
    // SAFETY: the handler only stores to a static atomic; signal() with a
    // valid function pointer has no other precondition.
    unsafe { libc::signal(libc::SIGTERM, handler as libc::sighandler_t) };
}
