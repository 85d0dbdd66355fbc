//! `top`'s own tracefs instance (`instances/tcpdoctor-top-PID`): a ring
//! buffer of ftrace's, apart from the system's and anyone else's, for the
//! tracepoints read through ftrace rather than perf. Its clock is perf's
//! (`trace_clock` `perf`), so its events merge with perf's samples by time;
//! full, it drops its oldest unread events and the next page read says how
//! many, counted as perf's lost samples are. The instance is removed when
//! `top` ends; one left by a `top` that was killed is removed by the next
//! (its process is gone).
//!
//! Why: on some machines a tracepoint that fires in a CPU's idle task (a
//! retransmission timer, a segment's softirq while the CPU idles) reaches
//! ftrace's ring and never a perf event (seen on a 2-vCPU virtual machine,
//! kernel 6.18, for every event of CPU 1's idle task); and a BPF program on a
//! tracepoint that returns 0 hides the event from perf readers only.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

const PREFIX: &str = "tcpdoctor-top-";

/// An instance made by this process, and its per-CPU pipes once started.
pub struct Instance {
    dir: PathBuf,
    pipes: Vec<File>,
}

impl Instance {
    /// Makes `instances/tcpdoctor-top-PID` under `root` (tracefs) with
    /// `kb_per_cpu` KiB of ring per CPU, stopped; removes instances of
    /// earlier `top`s whose process is gone.
    pub fn create(root: &Path, kb_per_cpu: usize) -> io::Result<Instance> {
        let base = root.join("instances");
        remove_stale(&base);
        let dir = base.join(format!("{PREFIX}{}", std::process::id()));
        fs::create_dir(&dir)?;
        let inst = Instance {
            dir,
            pipes: Vec::new(),
        };
        // From here on, Drop removes it.
        inst.set("tracing_on", "0")?;
        inst.set("trace_clock", "perf")?;
        // One page per read of trace_pipe_raw (kernels with sub-buffers):
        // their default, set only where it is not. Some kernels refuse the
        // write (EPERM) even of the size the instance already has, which
        // would leave `top` without its instance for nothing.
        let subbuf = inst.dir.join("buffer_subbuf_size_kb");
        if subbuf.exists() && fs::read_to_string(&subbuf)?.trim() != "4" {
            inst.set("buffer_subbuf_size_kb", "4")?;
        }
        inst.set("buffer_size_kb", &kb_per_cpu.max(4).to_string())?;
        // Full, the ring drops its oldest unread events, and the next page
        // read says how many (without overwrite, drops would not be told).
        inst.set("options/overwrite", "1")?;
        Ok(inst)
    }

    /// The instance's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn set(&self, file: &str, value: &str) -> io::Result<()> {
        let path = self.dir.join(file);
        let mut f = OpenOptions::new().write(true).open(&path)?;
        f.write_all(value.as_bytes())
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    }

    /// Sets the ftrace filter of `system/event` in this instance.
    pub fn filter(&self, system: &str, event: &str, filter: &str) -> io::Result<()> {
        self.set(&format!("events/{system}/{event}/filter"), filter)
    }

    /// Enables `system/event` in this instance.
    pub fn enable(&self, system: &str, event: &str) -> io::Result<()> {
        self.set(&format!("events/{system}/{event}/enable"), "1")
    }

    /// Opens `per_cpu/cpuN/trace_pipe_raw` of each of `cpus` (non-blocking,
    /// in that order) and starts tracing.
    pub fn start(&mut self, cpus: &[u32]) -> io::Result<()> {
        for cpu in cpus {
            let path = self.dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let f = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            self.pipes.push(f);
        }
        self.set("tracing_on", "1")
    }

    /// Stops tracing (what the ring holds can still be read).
    pub fn stop(&self) {
        let _ = self.set("tracing_on", "0");
    }

    /// The pipes opened by [`Instance::start`].
    pub fn cpus(&self) -> usize {
        self.pipes.len()
    }

    /// Reads the next page of pipe `i` into `page` ([`crate::ftrace::PAGE`]
    /// bytes); `Ok(0)` when none is ready.
    pub fn read(&mut self, i: usize, page: &mut [u8]) -> io::Result<usize> {
        let Some(f) = self.pipes.get_mut(i) else {
            return Ok(0);
        };
        match f.read(page) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            r => r,
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // An instance with a file open cannot be removed: the pipes go first.
        self.pipes.clear();
        self.stop();
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Removes `tcpdoctor-top-PID` instances whose process no longer runs.
fn remove_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir(e.path());
        }
    }
}
