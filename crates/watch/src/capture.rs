//! The watch loop on a live interface: frames from the kernel's capture ring
//! into a [`Watcher`], an [`Interval`] every interval, the full analysis at
//! the end.
//!
//! One thread does everything: the engine costs well under a microsecond a
//! frame, and the kernel's ring absorbs bursts while an interval is
//! reported. The clock is looked at every 64 frames and whenever the ring is
//! empty (not once per frame), so a busy interface cannot hold an interval
//! back.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tcpdoctor_capture::write::PcapWriter;
use tcpdoctor_engine::model::{Analysis, LatencyBin};
use tcpdoctor_live::{Capture, Filter};

use crate::{Interval, KernelCounters, Metrics, Watcher};

/// The longest the watch keeps reading, once it is over, what the kernel
/// had already captured.
const DRAIN: Duration = Duration::from_millis(200);

/// What to watch, and for how long.
#[derive(Debug, Clone)]
pub struct Config {
    /// An interface of this network namespace, or `any` for all of them.
    pub interface: String,
    /// A tcpdump-like filter run by the kernel (`port 8080 and host 10.0.0.2`).
    pub filter: Option<String>,
    /// Bytes kept of each frame: headers and the start of an HTTP message
    /// are all the engine reads.
    pub snaplen: u32,
    /// Stop after this long; `None` runs until [`Session::run`]'s stop flag.
    pub duration: Option<Duration>,
    pub interval: Duration,
    /// Also write every captured frame to this pcap file.
    pub write: Option<PathBuf>,
}

/// How a watch ended.
pub struct Outcome {
    pub analysis: Analysis,
    /// The exchange-latency distribution, for charts.
    pub latency_bins: Vec<LatencyBin>,
    pub interface: String,
    /// Frames analysed, and the kernel's counters at the end.
    pub frames: u64,
    pub kernel: KernelCounters,
    pub elapsed: Duration,
    /// Why the capture ended before it was asked to (the interface went
    /// down or was deleted): the analysis covers what came before.
    pub ended_early: Option<String>,
    /// Why `--write` stopped before the end (a full disk); the watch went on.
    pub write_failed: Option<String>,
}

fn write_failed(config: &Config, e: &io::Error) -> String {
    let path = config.write.as_deref().unwrap_or(std::path::Path::new("?"));
    format!(
        "--write {}: {e}: the file keeps the frames written before (its last one may be cut); \
         the watch went on without it",
        path.display()
    )
}

/// Whether a capture error means the interface went away (down, deleted):
/// the end of the capture, not a failure of the watch.
pub fn interface_gone(e: &io::Error) -> bool {
    // ENETDOWN; ENXIO and ENODEV once the device is gone.
    e.kind() == io::ErrorKind::NetworkDown || matches!(e.raw_os_error(), Some(6 | 19 | 100))
}

/// An open capture, ready to run.
pub struct Session {
    config: Config,
    capture: Capture,
    writer: Option<PcapWriter<BufWriter<File>>>,
    /// Why `--write` stopped (a full disk): the file keeps what came before.
    write_failed: Option<String>,
    watcher: Watcher,
}

impl Session {
    /// Opens the capture (and the pcap file): every error of the
    /// configuration shows here, before anything runs.
    pub fn open(config: Config, metrics: Option<Metrics>) -> io::Result<Session> {
        let filter = match &config.filter {
            Some(text) => Some(Filter::parse(text).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("filter: {e}"))
            })?),
            None => None,
        };
        let capture = Capture::open(&config.interface, config.snaplen, filter.as_ref())?;
        let writer = match &config.write {
            Some(path) => {
                let f = File::create(path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                Some(PcapWriter::new(
                    BufWriter::new(f),
                    capture.link_type(),
                    capture.snaplen(),
                )?)
            }
            None => None,
        };
        Ok(Session {
            config,
            capture,
            writer,
            write_failed: None,
            watcher: Watcher::new(metrics),
        })
    }

    /// The link type of the frames (Ethernet on one interface, raw IP on `any`).
    pub fn link_type(&self) -> tcpdoctor_wire::LinkType {
        self.capture.link_type()
    }

    /// Runs until `stop` is set or the configured duration has passed,
    /// calling `on_interval` at the end of every interval.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        on_interval: impl FnMut(&Interval) -> io::Result<()>,
    ) -> io::Result<Outcome> {
        let start = Instant::now();
        let ended_early = self.watch(start, stop, on_interval)?;
        if ended_early.is_none() {
            self.drain()?;
        }
        self.finish(start, ended_early)
    }

    /// Captures and ticks the intervals until `stop` is set, the duration
    /// has passed or the interface went away (what is returned then says so).
    fn watch(
        &mut self,
        start: Instant,
        stop: &AtomicBool,
        mut on_interval: impl FnMut(&Interval) -> io::Result<()>,
    ) -> io::Result<Option<String>> {
        let link = self.capture.link_type();
        let interval = self.config.interval.max(Duration::from_millis(10));
        let mut next_tick = start + interval;
        let end = self.config.duration.map(|d| start + d);
        let mut since_clock = 0u32;
        // How long to wait for a frame: zero while frames keep coming (no
        // clock read per frame), until the next tick once the ring is empty.
        let mut wait = Duration::ZERO;
        loop {
            let next = match self.capture.next_frame(wait) {
                Ok(next) => next,
                Err(e) if interface_gone(&e) => {
                    return Ok(Some(format!(
                        "the interface {} went down or away {:.1} s into the watch ({e}): \
                         the capture ended there, the report covers what came before",
                        self.capture.interface(),
                        start.elapsed().as_secs_f64()
                    )));
                }
                Err(e) => return Err(e),
            };
            match next {
                Some(f) => {
                    wait = Duration::ZERO;
                    if let Some(w) = self.writer.as_mut() {
                        if let Err(e) = w.write_packet(f.ts, f.data, f.orig_len) {
                            self.writer = None;
                            self.write_failed = Some(write_failed(&self.config, &e));
                        }
                    }
                    self.watcher.push(f.ts, link, f.data, f.orig_len);
                    since_clock += 1;
                    if since_clock < 64 {
                        continue;
                    }
                }
                None if wait.is_zero() => {
                    wait = next_tick
                        .saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(100));
                    if !wait.is_zero() {
                        continue;
                    }
                }
                None => wait = Duration::ZERO,
            }
            since_clock = 0;
            let now = Instant::now();
            if now >= next_tick {
                let kernel = self.kernel()?;
                let t_s = now.duration_since(start).as_secs_f64();
                let iv = self.watcher.tick(t_s, kernel);
                on_interval(&iv)?;
                next_tick += interval;
                if next_tick <= now {
                    // Fell behind (a slow terminal, a stopped process):
                    // skip the missed ticks rather than firing them in a burst.
                    next_tick = now + interval;
                }
            }
            if stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e) {
                return Ok(None);
            }
        }
    }

    /// Reads what the kernel captured before the end but has not handed
    /// over yet (a quiet link's last ring block), for a bounded time.
    fn drain(&mut self) -> io::Result<()> {
        let link = self.capture.link_type();
        let drain_end = Instant::now() + DRAIN;
        while Instant::now() < drain_end {
            let f = match self.capture.next_frame(self.capture.delivery_delay()) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) if interface_gone(&e) => break,
                Err(e) => return Err(e),
            };
            if let Some(w) = self.writer.as_mut() {
                if let Err(e) = w.write_packet(f.ts, f.data, f.orig_len) {
                    self.writer = None;
                    self.write_failed = Some(write_failed(&self.config, &e));
                }
            }
            self.watcher.push(f.ts, link, f.data, f.orig_len);
        }
        Ok(())
    }

    /// Closes the pcap file, adds the warnings and makes the outcome of a
    /// watch begun at `start`.
    fn finish(mut self, start: Instant, ended_early: Option<String>) -> io::Result<Outcome> {
        // The counters of a socket whose interface is gone may not be read.
        let kernel = match self.kernel() {
            Err(e) if ended_early.is_some() && interface_gone(&e) => KernelCounters::default(),
            k => k?,
        };
        if let Some(w) = self.writer.take() {
            if let Err(e) = w.into_inner().flush() {
                self.write_failed = Some(write_failed(&self.config, &e));
            }
        }
        if let Some(why) = &self.write_failed {
            self.watcher.warn(why.clone());
        }
        if let Some(why) = &ended_early {
            self.watcher.warn(why.clone());
        }
        if kernel.dropped > 0 {
            self.watcher.warn(format!(
                "the kernel dropped {} of {} frames on {} while capturing: the analysis has holes",
                kernel.dropped,
                kernel.received,
                self.capture.interface()
            ));
        }
        let frames = self.watcher.frames();
        let (analysis, latency_bins) = self.watcher.finish_with_distribution();
        Ok(Outcome {
            analysis,
            latency_bins,
            interface: self.config.interface,
            frames,
            kernel,
            elapsed: start.elapsed(),
            ended_early,
            write_failed: self.write_failed,
        })
    }

    fn kernel(&mut self) -> io::Result<KernelCounters> {
        let s = self.capture.stats()?;
        Ok(KernelCounters {
            received: s.received,
            dropped: s.dropped,
        })
    }
}
