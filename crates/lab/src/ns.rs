//! Network namespaces, the processes started in them, and their cleanup.
//!
//! Every namespace is named `tdlab<PID>-<role>`, the PID being this
//! process's: several runs (and other tools) coexist, and a namespace whose
//! PID is dead was left by a killed run and may be removed. Everything created
//! is registered here first, so that a normal end, an error, Ctrl-C or
//! SIGTERM all remove it.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::error::{bail, Context, Error, Result};
use nix::sched::{setns, CloneFlags};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Name prefix of every namespace the lab creates.
pub const PREFIX: &str = "tdlab";
const NETNS_DIR: &str = "/run/netns";

struct Registry {
    namespaces: Vec<String>,
    children: Vec<u32>,
    dirs: Vec<PathBuf>,
    terminating: bool,
    signalled: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    namespaces: Vec::new(),
    children: Vec::new(),
    dirs: Vec::new(),
    terminating: false,
    signalled: false,
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // A thread that panicked while holding the lock leaves the list intact.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// On Ctrl-C, SIGTERM or SIGHUP: stop the processes started, delete the
/// namespaces (their interfaces, routes, qdiscs and iptables rules go with
/// them), then exit with status 130. On a panic too: the release binary
/// aborts on one (no unwinding, so no `Drop` runs), and its hook removes
/// them first ([`cleanup_on_panic`]).
pub fn install_signal_handler() -> Result<()> {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        cleanup_on_panic();
    }));
    ctrlc::set_handler(|| {
        registry().signalled = true;
        eprintln!("tcpdoctor lab: interrupted; removing namespaces and processes");
        cleanup_all();
        std::process::exit(130);
    })
    .context("installing the signal handler")
}

/// Whether a signal started the cleanup: the handler exits the process when
/// it is done, and nothing else may end it first.
pub fn interrupted() -> bool {
    registry().signalled
}

/// Stops every registered process and deletes every registered namespace.
/// Nothing can be registered afterwards.
pub fn cleanup_all() {
    let (children, namespaces, dirs) = {
        let mut r = registry();
        r.terminating = true;
        (
            std::mem::take(&mut r.children),
            std::mem::take(&mut r.namespaces),
            std::mem::take(&mut r.dirs),
        )
    };
    stop_pids(&children);
    for ns in namespaces.iter().rev() {
        delete_namespace(ns);
    }
    for d in dirs {
        let _ = fs::remove_dir_all(d);
    }
}

/// [`cleanup_all`] from the panic hook, on a thread of its own, waited for
/// at most [`PANIC_CLEANUP`]: a panic inside the registry's own bookkeeping
/// holds its lock (not re-entrant), and the process then ends without the
/// cleanup rather than hang.
fn cleanup_on_panic() {
    let (done, wait) = std::sync::mpsc::channel();
    let spawned = thread::Builder::new().spawn(move || {
        cleanup_all();
        let _ = done.send(());
    });
    if spawned.is_ok() {
        let _ = wait.recv_timeout(PANIC_CLEANUP);
    }
}

/// How long a panic waits for the namespaces to go before the process ends.
const PANIC_CLEANUP: Duration = Duration::from_secs(10);

/// SIGTERM, up to 2 s of grace, then SIGKILL.
fn stop_pids(pids: &[u32]) {
    for &pid in pids {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && pids.iter().any(|&p| alive(p)) {
        thread::sleep(Duration::from_millis(20));
    }
    for &pid in pids {
        if alive(pid) {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
}

/// A process that exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn delete_namespace(ns: &str) {
    // Processes still inside (a server we started) would keep it alive.
    stop_pids(&pids_in(ns));
    let _ = Command::new("ip")
        .args(["netns", "del", ns])
        .stderr(Stdio::null())
        .status();
}

/// PIDs of processes in namespace `ns` (`ip netns pids`).
fn pids_in(ns: &str) -> Vec<u32> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .stderr(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .filter(|&p| p != std::process::id())
                .collect()
        })
        .unwrap_or_default()
}

/// The namespace name for `role` in this run.
pub fn name(role: &str) -> String {
    format!("{PREFIX}{}-{role}", std::process::id())
}

/// Creates namespace `ns` (registered for cleanup) with its loopback up.
pub fn create(ns: &str) -> Result<()> {
    {
        let mut r = registry();
        if r.terminating {
            bail!("interrupted");
        }
        r.namespaces.push(ns.to_string());
    }
    run("ip", &["netns", "add", ns])?;
    run("ip", &["-n", ns, "link", "set", "lo", "up"])
}

/// Deletes namespace `ns` now (and forgets it).
pub fn remove(ns: &str) {
    registry().namespaces.retain(|n| n != ns);
    delete_namespace(ns);
}

/// Moves the calling thread into namespace `ns`. Sockets, TUN devices and
/// packet captures it creates afterwards belong to that namespace, and so
/// do the processes it starts.
pub fn enter(ns: &str) -> Result<()> {
    let f = File::open(format!("{NETNS_DIR}/{ns}"))
        .with_context(|| format!("namespace {ns} does not exist"))?;
    setns(&f, CloneFlags::CLONE_NEWNET).with_context(|| format!("entering namespace {ns}"))
}

/// Runs `f` on a new thread inside namespace `ns`.
pub fn spawn_in<T, F>(ns: &str, what: &str, f: F) -> Result<JoinHandle<Result<T>>>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    let ns = ns.to_string();
    thread::Builder::new()
        .name(what.to_string())
        .spawn(move || {
            enter(&ns)?;
            f()
        })
        .with_context(|| format!("starting thread {what}"))
}

/// Runs `f` inside namespace `ns` and waits for it.
pub fn within<T, F>(ns: &str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    join(spawn_in(ns, "lab-ns", f)?)
}

/// Joins a thread, turning a panic into an error.
pub fn join<T>(h: JoinHandle<Result<T>>) -> Result<T> {
    h.join().map_err(|_| Error::msg("a lab thread panicked"))?
}

/// Sets sysctl `key` (dotted) to `value` inside namespace `ns`.
pub fn sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let value = value.to_string();
    let key = key.to_string();
    within(ns, move || {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .with_context(|| format!("sysctl {key}"))?;
        f.write_all(value.as_bytes())
            .with_context(|| format!("sysctl {key}={value}"))
    })
}

/// Runs a setup command (`ip`, `iptables`, `tc`), failing with its stderr.
pub fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {program} (is it installed?)"))?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Starts `cmd` from a thread inside namespace `ns`, registered for cleanup.
pub fn spawn_process(ns: &str, mut cmd: Command) -> Result<Child> {
    let child = within(ns, move || {
        let mut r = registry();
        if r.terminating {
            bail!("interrupted");
        }
        let child = cmd.spawn().context("starting a peer process")?;
        r.children.push(child.id());
        Ok(child)
    })?;
    Ok(child)
}

/// Stops a process started with [`spawn_process`] (SIGTERM, then SIGKILL).
pub fn stop_process(child: &mut Child) {
    let pid = child.id();
    registry().children.retain(|&p| p != pid);
    stop_pids(&[pid]);
    let _ = child.wait();
}

/// Waits (at most `timeout`, then kills it) for a process started with
/// [`spawn_process`] with piped output, and returns that output.
pub fn wait_output(mut child: Child, timeout: Duration) -> Result<std::process::Output> {
    let pid = child.id();
    let deadline = Instant::now() + timeout;
    // Output is small (a report), so the pipes cannot fill up meanwhile.
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output()?;
    registry().children.retain(|&p| p != pid);
    Ok(out)
}

/// A scratch directory of this run, `<tmp>/tdlab<PID>-<what>`, created
/// empty and registered for removal.
pub fn work_dir(what: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("{PREFIX}{}-{what}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    registry().dirs.push(dir.clone());
    Ok(dir)
}

/// Whether `fd` has something to read within 50 ms: a loop that polls this
/// between checks of its stop flag stops within 50 ms of being asked to.
pub fn readable(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::from(50u16)).unwrap_or(0) > 0
}

/// Removes a directory made by [`work_dir`].
pub fn remove_dir(dir: &Path) {
    registry().dirs.retain(|d| d != dir);
    let _ = fs::remove_dir_all(dir);
}

/// Whether the calling process runs as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Removes namespaces (and the processes in them) left by lab runs that no
/// longer exist; returns their names. Namespaces of live runs are kept.
pub fn clean_stale() -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(dir) = fs::read_dir(NETNS_DIR) else {
        return removed;
    };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    for ns in names {
        let Some(pid) = owner(&ns) else { continue };
        let made = fs::metadata(format!("{NETNS_DIR}/{ns}")).ok();
        if pid == std::process::id() || lab_process(pid, made.as_ref()) {
            continue;
        }
        delete_namespace(&ns);
        removed.push(ns);
    }
    // Scratch directories (nginx and JDK files) of those runs.
    if let Ok(dir) = fs::read_dir(std::env::temp_dir()) {
        for e in dir.filter_map(|e| e.ok()) {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let Some(pid) = owner(&name) else { continue };
            let made = e.metadata().ok();
            if pid != std::process::id() && !lab_process(pid, made.as_ref()) && e.path().is_dir() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
    removed
}

/// The PID in a lab namespace name `tdlab<PID>-<role>`.
fn owner(ns: &str) -> Option<u32> {
    let rest = ns.strip_prefix(PREFIX)?;
    let (pid, role) = rest.split_once('-')?;
    if role.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// A live process that made what is named after it (`made`: its metadata):
/// a tcpdoctor, or a process that started before it was made (PIDs get
/// reused; a lab run from a binary of another name is still alive).
fn lab_process(pid: u32, made: Option<&fs::Metadata>) -> bool {
    if !alive(pid) {
        return false;
    }
    let named = fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| c.trim_end().starts_with("tcpdoctor"));
    let made = made.and_then(|m| m.created().or_else(|_| m.modified()).ok());
    named || made.is_some_and(|t| started_before(pid, t))
}

/// Whether process `pid` started before `t` (within the 1 s of the boot
/// time's resolution).
fn started_before(pid: u32, t: std::time::SystemTime) -> bool {
    let (Ok(stat), Ok(boot)) = (
        fs::read_to_string(format!("/proc/{pid}/stat")),
        fs::read_to_string("/proc/stat"),
    ) else {
        return false;
    };
    let Some(start) = start_secs(&stat, &boot) else {
        return false;
    };
    t.duration_since(std::time::UNIX_EPOCH)
        .is_ok_and(|made| start <= made.as_secs_f64() + 1.0)
}

/// A process's start, in seconds since the epoch, from its `/proc/PID/stat`
/// (field 22: clock ticks after boot, at USER_HZ = 100) and `/proc/stat`'s
/// `btime`.
fn start_secs(stat: &str, proc_stat: &str) -> Option<f64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // Fields after the command: state is field 3, start time field 22.
    let ticks: f64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let boot: f64 = proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(boot + ticks / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_start_is_read_from_proc() {
        let stat =
            "4242 (tcp doctor) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 2 0 12345 0 0";
        let proc_stat = "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
        assert_eq!(start_secs(stat, proc_stat), Some(1_700_000_123.45));
        assert_eq!(start_secs("garbage", proc_stat), None);
        assert_eq!(start_secs(stat, "cpu 1\n"), None);
        // This process started before now, and not before the epoch.
        let me = std::process::id();
        assert!(started_before(me, std::time::SystemTime::now()));
        assert!(!started_before(me, std::time::UNIX_EPOCH));
    }

    #[test]
    fn owner_parses_only_lab_names() {
        assert_eq!(owner("tdlab123-c"), Some(123));
        assert_eq!(owner("tdlab123-"), None);
        assert_eq!(owner("tdlabx-c"), None);
        assert_eq!(owner("tdfx-c"), None);
        assert_eq!(owner("tdlab-c"), None);
    }
}
