//! SIGINT and SIGTERM for the commands that end with a report (`analyze -`,
//! `watch`): the first one asks for the report over what was read so far, a
//! second one quits at once (status 128 + the signal, as a shell reports a
//! process killed by it).
//!
//! The handler only stores the signal number and writes one line to stderr
//! (both async-signal-safe); the reading loops look at [`signal`].
//! [`Stdin`] is standard input that gives up waiting once a signal came: a
//! producer that keeps the pipe open (`cat big | tcpdoctor analyze -` sent a
//! SIGTERM, a FIFO whose writer is idle) does not hold the report back.

#![allow(unsafe_code)]

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The first signal received (0: none yet).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Set on the first signal: the stop flag of a loop (`watch`).
pub static STOP: AtomicBool = AtomicBool::new(false);
/// Set by [`Stdin`] when it ended the input because of a signal.
static CUT: AtomicBool = AtomicBool::new(false);
/// The line the handler writes on the first signal.
static MESSAGE: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

extern "C" fn on_signal(sig: libc::c_int) {
    if SIGNAL
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(128 + sig) };
    }
    STOP.store(true, Ordering::SeqCst);
    if let Some(m) = MESSAGE.get() {
        // SAFETY: write(2) is async-signal-safe; the bytes are 'static.
        unsafe {
            libc::write(2, m.as_ptr().cast(), m.len());
        }
    }
}

/// Installs the handler for SIGINT and SIGTERM; `message` (a whole line) is
/// written to stderr on the first signal.
pub fn install(message: &'static str) {
    let _ = MESSAGE.set(message);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a plain C handler that touches only atomics and write(2);
        // no SA_RESTART, so a blocked poll() returns EINTR and its loop looks
        // at the flag.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal received, if any.
pub fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The exit status for a command stopped by `sig`: 128 + its number (130 for
/// SIGINT, 143 for SIGTERM).
pub fn status(sig: i32) -> u8 {
    u8::try_from(128 + sig).unwrap_or(255)
}

/// `SIGINT`, `SIGTERM`.
pub fn name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        s => format!("signal {s}"),
    }
}

/// Whether [`Stdin`] ended the input early because of a signal.
pub fn input_cut() -> bool {
    CUT.load(Ordering::SeqCst)
}

/// After a signal, what the producer still sends is read for up to this
/// long (`tcpdump -w -` flushes its last packets when the same Ctrl-C stops it).
pub const GRACE: Duration = Duration::from_millis(1000);
/// ... and the input ends once it has been idle this long.
pub const IDLE: Duration = Duration::from_millis(200);

/// Standard input read in the ordinary way until a signal comes; then what
/// is still arriving is read for [`GRACE`] at most, and the input ends (EOF)
/// once idle for [`IDLE`] or at the end of the grace, even if the producer
/// is still writing. Ending it so is a cut ([`input_cut`]); the producer
/// closing the pipe first is an ordinary end.
/// It reads file descriptor 0 itself (no buffer of its own: poll() then
/// tells the whole truth about what is waiting).
#[derive(Default)]
pub struct Stdin {
    /// When this reader first saw the signal.
    since: Option<Instant>,
}

impl Stdin {
    fn cut(&self) -> io::Result<usize> {
        CUT.store(true, Ordering::SeqCst);
        Ok(0)
    }
}

impl Read for Stdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fd = io::stdin().as_raw_fd();
        loop {
            let timeout = match (signal(), self.since) {
                (None, _) => Duration::from_millis(100),
                (Some(_), None) => {
                    self.since = Some(Instant::now());
                    IDLE
                }
                (Some(_), Some(t)) => match GRACE.checked_sub(t.elapsed()) {
                    Some(left) if !left.is_zero() => left.min(IDLE),
                    _ => return self.cut(),
                },
            };
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as libc::c_int) };
            if n > 0 {
                break;
            }
            if n == 0 && self.since.is_some() {
                // Idle since the signal: the producer has nothing more.
                return self.cut();
            }
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    // Not pollable (a file on some systems): read as usual.
                    break;
                }
            }
        }
        loop {
            // SAFETY: reads into the caller's buffer, at most its length.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_shell_convention() {
        assert_eq!(status(libc::SIGINT), 130);
        assert_eq!(status(libc::SIGTERM), 143);
        assert_eq!(name(libc::SIGTERM), "SIGTERM");
    }
}
