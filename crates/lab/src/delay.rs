//! A userspace delay line for kernels without netem.
//!
//! The router namespace routes every forwarded packet into a TUN device; one
//! thread reads each packet from it and queues it with its due time, another
//! writes it back into the TUN device when due, and the kernel forwards it on.
//! The delay is the same for every packet, so a FIFO keeps their order. The
//! queue is bounded; a packet that finds it full is dropped and counted (a
//! run reports it). Both threads run at a real-time priority where the
//! kernel allows it (root does): on a host busy with other work an ordinary
//! thread is woken milliseconds late, which would add a queue of the host's
//! making to the emulated path (a policer's flat round trip would rise
//! before its drops, a short queue would look deep). Hand-written rather
//! than taken from a crate: it is a dozen lines around two blocking loops,
//! and a netem-like crate does not exist for TUN.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::error::{Context, Result};

use crate::{ns, sys};

/// Packets held at most (≈ 95 MB of full-size packets): far above what a
/// 50 ms delay holds at the rates a 2-core machine forwards.
const QUEUE_PACKETS: usize = 65_536;
/// Largest packet read from the TUN device (its MTU is 1500; no offloads).
const MAX_PACKET: usize = 65_536;
/// SCHED_FIFO priority of the delay line's threads: above every ordinary
/// thread, low among real-time ones (the kernel's own run at 50 and above).
const RT_PRIORITY: i32 = 10;

/// Counters of a running delay line.
#[derive(Debug, Default)]
pub struct DelayStats {
    pub forwarded: AtomicU64,
    pub dropped: AtomicU64,
}

/// A running delay line (stops when dropped).
pub struct DelayLine {
    stop: Arc<AtomicBool>,
    one_way_us: Arc<AtomicU64>,
    pub stats: Arc<DelayStats>,
    threads: Vec<JoinHandle<Result<()>>>,
}

impl DelayLine {
    /// Creates TUN device `dev` in namespace `ns_name` and starts holding each
    /// packet routed into it for `one_way` before re-injecting it.
    pub fn start(ns_name: &str, dev: &str, one_way: Duration) -> Result<DelayLine> {
        let dev_name = dev.to_string();
        let tun = ns::within(ns_name, move || {
            sys::open_tun(&dev_name).context("creating the delay line's TUN device")
        })?;
        let writer = tun.try_clone().context("duplicating the TUN descriptor")?;
        let stop = Arc::new(AtomicBool::new(false));
        let one_way_us = Arc::new(AtomicU64::new(one_way.as_micros() as u64));
        let stats = Arc::new(DelayStats::default());
        let (tx, rx) = sync_channel::<(Instant, Vec<u8>)>(QUEUE_PACKETS);
        let mut threads = Vec::new();
        {
            let (stop, one_way_us, stats) = (stop.clone(), one_way_us.clone(), stats.clone());
            threads.push(
                thread::Builder::new()
                    .name("delay-in".into())
                    .spawn(move || read_loop(tun, &tx, &stop, &one_way_us, &stats))?,
            );
        }
        {
            let (stop, stats) = (stop.clone(), stats.clone());
            threads.push(
                thread::Builder::new()
                    .name("delay-out".into())
                    .spawn(move || write_loop(writer, &rx, &stop, &stats))?,
            );
        }
        Ok(DelayLine {
            stop,
            one_way_us,
            stats,
            threads,
        })
    }

    /// Changes the one-way delay for packets read from now on.
    pub fn set_delay(&self, one_way: Duration) {
        self.one_way_us
            .store(one_way.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn dropped(&self) -> u64 {
        self.stats.dropped.load(Ordering::Relaxed)
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn read_loop(
    mut tun: File,
    tx: &SyncSender<(Instant, Vec<u8>)>,
    stop: &AtomicBool,
    one_way_us: &AtomicU64,
    stats: &DelayStats,
) -> Result<()> {
    // Without the privilege the delay line still works, only less steadily.
    let _ = sys::realtime_priority(RT_PRIORITY);
    let mut buf = vec![0u8; MAX_PACKET];
    while !stop.load(Ordering::Relaxed) {
        if !ns::readable(tun.as_fd()) {
            continue;
        }
        // Drain everything queued before polling again.
        loop {
            match tun.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let due =
                        Instant::now() + Duration::from_micros(one_way_us.load(Ordering::Relaxed));
                    match tx.try_send((due, buf[..n].to_vec())) {
                        Ok(()) => {}
                        Err(TrySendError::Full(_)) => {
                            stats.dropped.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(TrySendError::Disconnected(_)) => return Ok(()),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("reading from the delay line"),
            }
        }
    }
    Ok(())
}

fn write_loop(
    mut tun: File,
    rx: &Receiver<(Instant, Vec<u8>)>,
    stop: &AtomicBool,
    stats: &DelayStats,
) -> Result<()> {
    let _ = sys::realtime_priority(RT_PRIORITY);
    while !stop.load(Ordering::Relaxed) {
        let (due, pkt) = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(p) => p,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        // A TUN write takes one whole packet or fails: no partial writes.
        match tun.write(&pkt) {
            Ok(n) if n == pkt.len() => {
                stats.forwarded.fetch_add(1, Ordering::Relaxed);
            }
            // The kernel refused this one packet (e.g. no route while the
            // topology is torn down): count it as dropped and go on.
            _ => {
                stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}
