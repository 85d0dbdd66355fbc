//! The `tcpdoctor lab` command without its command line: what `lab run`
//! was asked ([`RunOptions`]), the checks of that request and the two setups
//! it makes ([`Plan`]), the runs themselves (with the fix, with `diagnose`),
//! the fixtures, and the cleaning up. The binary parses the arguments, calls
//! these, prints with [`crate::report`] and turns the outcome into an exit
//! status.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::cases::{self, Case, Headline, Peer, Setup};
use crate::error::{bail, Error, Result};
use crate::report::{self, Format};
use crate::run::{self, Phase, PhaseOptions};
use crate::topo::{Topology, Vantage};
use crate::{ext, fixtures, ns, sys};

/// The cases `--diagnose` reproduces: the cause is in the server or the path,
/// so `diagnose`'s own GET requests meet it.
pub const DIAGNOSE_CASES: [&str; 5] = [
    "nagle-delayed-ack",
    "jdk-httpserver",
    "server-delay",
    "network-latency",
    "healthy",
];

/// What `lab run` was asked (its arguments, parsed).
pub struct RunOptions {
    pub case: String,
    pub compare: bool,
    pub rtt: Option<f64>,
    pub loss: Option<f64>,
    pub rate: Option<String>,
    pub vantage: Option<Vantage>,
    pub peer: Option<Peer>,
    pub write: Option<PathBuf>,
    pub html: Option<PathBuf>,
    pub snaplen: u32,
    pub format: Format,
    pub full: bool,
    pub verbose: bool,
    pub diagnose: bool,
}

/// A `lab run` ready to go: its case, and its setups before and after the
/// fix (the case's, with the command line's overrides).
pub struct Plan {
    pub case: Case,
    pub before: Setup,
    pub after: Option<Setup>,
    pub opts: RunOptions,
}

/// The result of one run of a case, before and maybe after its fix.
pub struct Outcome {
    pub before: Phase,
    pub after: Option<Phase>,
}

fn need_root() -> Result<()> {
    if !ns::is_root() {
        bail!("the lab needs root (network namespaces, packet capture): run it with sudo");
    }
    Ok(())
}

/// Nice value of a run: its peers, capture and wrk (which inherit it) ahead
/// of the host's ordinary work. The lab emulates one path and two endpoints;
/// on a busy host an ordinary thread is woken milliseconds late, and that
/// wait would show in the capture as the endpoints' own slowness (a client
/// or server delay the case does not have).
const LAB_NICE: i32 = -10;

/// Root checked, then the run's priority raised (see [`LAB_NICE`]); must be
/// called on the thread that starts the run, before it starts anything.
fn prepare_run() -> Result<()> {
    need_root()?;
    // Without it a run is only more exposed to a busy host.
    let _ = sys::set_nice(LAB_NICE);
    Ok(())
}

/// `lab clean`: the namespaces and processes removed.
pub fn clean() -> Result<Vec<String>> {
    need_root()?;
    Ok(ns::clean_stale())
}

impl Plan {
    /// Checks the request (the case, its peer, `--diagnose`, root, the
    /// overrides), installs the signal handler and removes what killed runs
    /// left behind.
    pub fn new(opts: RunOptions) -> Result<Plan> {
        let Some(case) = cases::find(&opts.case) else {
            let names: Vec<&str> = cases::all().iter().map(|c| c.name).collect();
            bail!("no case named {:?}; cases: {}", opts.case, names.join(", "));
        };
        let peer = peer_of(&case, &opts);
        if !case.peers.contains(&peer) {
            bail!(
                "case {} cannot run with --peer {}; it runs with: {}",
                case.name,
                peer.name(),
                case.peers
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if opts.diagnose && !DIAGNOSE_CASES.contains(&case.name) {
            bail!(
                "--diagnose sends its own GET requests, so it meets only causes in the server or the path; \
                 case {} needs its own client. --diagnose runs with: {}",
                case.name,
                DIAGNOSE_CASES.join(", ")
            );
        }
        prepare_run()?;
        let (before, after) = setups(&case, &opts)?;
        ns::install_signal_handler()?;
        for n in ns::clean_stale() {
            eprintln!("tcpdoctor lab: removed {n}, left by a run that was killed");
        }
        Ok(Plan {
            case,
            before,
            after,
            opts,
        })
    }

    /// The server software of the run: `--peer`, or the case's first.
    pub fn peer(&self) -> Peer {
        peer_of(&self.case, &self.opts)
    }

    /// What `lab run` was asked, for its JSON document's `input`.
    pub fn input(&self) -> Value {
        let a = &self.opts;
        json!({
            "case": a.case, "compare": a.compare, "rtt_ms": a.rtt, "loss_percent": a.loss,
            "rate": a.rate, "vantage": a.vantage.map(|v| v.as_str()), "peer": a.peer,
            "write": a.write.as_ref().map(|p| p.display().to_string()), "diagnose": a.diagnose,
        })
    }

    /// Runs the case (and with `--compare`, again with its fix), capturing
    /// and diagnosing each run; whatever was set up is removed, also on error.
    pub fn measure(&self) -> Result<Outcome> {
        let (case, a) = (&self.case, &self.opts);
        let after = self.after.as_ref().filter(|_| a.compare);
        let vantage = a.vantage.unwrap_or(case.vantage);
        let outcome = self.run_case(after, vantage);
        if outcome.is_err() {
            ns::cleanup_all();
        }
        outcome
    }

    fn run_case(&self, after: Option<&Setup>, vantage: Vantage) -> Result<Outcome> {
        let (case, before, a) = (&self.case, &self.before, &self.opts);
        let needs_line = |s: &Setup| !s.one_way.is_zero() || s.loss > 0.0;
        let line = needs_line(before) || after.is_some_and(needs_line);
        if a.verbose || a.format == Format::Text {
            eprintln!(
                "lab: {}: building the namespaces (client, router, server){}",
                case.name,
                if line { " and the delay line" } else { "" }
            );
        }
        let mut topo = Topology::build(line, before.one_way)?;
        let peer = self.peer();
        let wrk = (peer.with_wrk() && case.headline == Headline::Latency && ext::installed("wrk"))
            .then_some((case.wrk_connections, 2));
        let progress = a.verbose || a.format == Format::Text;
        let opts = |write: Option<PathBuf>, label: &'static str| PhaseOptions {
            vantage,
            snaplen: a.snaplen,
            write,
            peer,
            wrk,
            progress: progress.then_some(label),
        };
        let result = (|| {
            let b = run::phase(&mut topo, before, &opts(a.write.clone(), "before"))?;
            let f = match after {
                Some(s) => Some(run::phase(
                    &mut topo,
                    s,
                    &opts(a.write.as_deref().map(fixed_name), "after"),
                )?),
                None => None,
            };
            Ok(Outcome {
                before: b,
                after: f,
            })
        })();
        topo.teardown();
        result
    }

    /// `--html`: each phase's analysis as a self-contained page, the fixed
    /// run's with `-fixed` before the extension.
    pub fn write_html(&self, o: &Outcome) -> Result<()> {
        let Some(path) = &self.opts.html else {
            return Ok(());
        };
        write_html(&self.case, path, &o.before)?;
        if let Some(f) = &o.after {
            write_html(&self.case, &fixed_name(path), f)?;
        }
        Ok(())
    }

    /// `lab run CASE --diagnose`: the case's path and server, measured and
    /// explained by `diagnose` from the client namespace.
    pub fn diagnose(&self) -> Result<tcpdoctor_diagnose::Outcome> {
        let before = &self.before;
        let url = format!("http://{}/", run::server_addr());
        let target = tcpdoctor_load::Target::parse(&url).map_err(|e| Error::msg(e.to_string()))?;
        let plan = tcpdoctor_diagnose::Plan::new(target, tcpdoctor_load::RequestSpec::default());
        let needs_line = !before.one_way.is_zero() || before.loss > 0.0;
        let outcome = Topology::build(needs_line, before.one_way).and_then(|mut topo| {
            let outcome = run::diagnose_phase(&mut topo, before, self.peer(), plan);
            topo.teardown();
            outcome
        });
        if outcome.is_err() {
            // Whatever was set up before the error goes too.
            ns::cleanup_all();
        }
        outcome
    }
}

/// The two setups of a run, after the command line's overrides.
fn setups(case: &Case, a: &RunOptions) -> Result<(Setup, Option<Setup>)> {
    let mut before = case.setup.clone();
    if let Some(rtt) = a.rtt {
        if !(0.0..=10_000.0).contains(&rtt) {
            bail!("--rtt {rtt}: give 0 to 10000 ms");
        }
        before.one_way = Duration::from_secs_f64(rtt / 2e3);
    }
    if let Some(loss) = a.loss {
        if !(0.0..=100.0).contains(&loss) {
            bail!("--loss {loss}: give a percentage from 0 to 100");
        }
        before.loss = loss / 100.0;
    }
    if let Some(rate) = &a.rate {
        if rate.is_empty() || !rate.starts_with(|c: char| c.is_ascii_digit()) {
            bail!("--rate {rate:?}: give a rate as tc takes it, e.g. 16mbit");
        }
        before.rate = Some(rate.clone());
    }
    let after = case.fix.map(|(_, f)| {
        let mut s = before.clone();
        f(&mut s);
        s
    });
    Ok((before, after))
}

/// One phase's analysis as a self-contained page (without time-sequence
/// graphs: those need a second read of a capture file, which
/// `tcpdoctor analyze --html` of the `--write` pcap draws).
fn write_html(case: &Case, path: &Path, phase: &Phase) -> Result<()> {
    let f = std::fs::File::create(path)
        .map_err(|e| Error::msg(format!("creating {}: {e}", path.display())))?;
    let mut w = std::io::BufWriter::new(f);
    let source = format!("lab case {}", case.name);
    let format = format!(
        "live capture at the {} ({} packets)",
        phase.capture.vantage.as_str(),
        phase.capture.packets
    );
    tcpdoctor_report_html::render(
        &phase.analysis,
        &tcpdoctor_report_html::Extras {
            source: &source,
            format: &format,
            latency: &phase.latency_bins,
            traces: &[],
        },
        &mut w,
    )?;
    std::io::Write::flush(&mut w)?;
    Ok(())
}

fn peer_of(case: &Case, a: &RunOptions) -> Peer {
    a.peer
        .or_else(|| case.peers.first().copied())
        .unwrap_or(Peer::Builtin)
}

/// `x.pcap` → `x-fixed.pcap`.
fn fixed_name(p: &Path) -> PathBuf {
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let name = match p.extension() {
        Some(e) => format!("{stem}-fixed.{}", e.to_string_lossy()),
        None => format!("{stem}-fixed"),
    };
    p.with_file_name(name)
}

/// `lab fixtures DIR [ONLY...]`: makes the project's test captures again
/// into `dir`, one lab run per file, and checks each against its label,
/// printing a line per file. Whether every one came out as labelled and
/// without kernel drops.
pub fn fixtures(dir: &Path, only: &[String], snaplen: u32) -> Result<bool> {
    let chosen = fixtures::select(only)?;
    prepare_run()?;
    std::fs::create_dir_all(dir)?;
    ns::install_signal_handler()?;
    ns::clean_stale();
    let mut failed = Vec::new();
    for fx in &chosen {
        let Some(setup) = fixtures::setup(fx) else {
            bail!("fixture {} names no case", fx.file);
        };
        let file = fixtures::path(dir, fx);
        let real = fx.peer.program().is_none_or(ext::installed);
        let peer = if real { fx.peer } else { Peer::Builtin };
        let wrk = fx.wrk.filter(|_| real && ext::installed("wrk"));
        let line = !setup.one_way.is_zero() || setup.loss > 0.0;
        let opts = PhaseOptions {
            vantage: fx.vantage,
            snaplen,
            write: Some(file),
            peer,
            wrk,
            progress: None,
        };
        let (phase, ok, got) = fixture_attempts(fx, &setup, line, &opts)?;
        println!(
            "{:<34} {:<8} {:>6} packets, {} kernel drops · {}{} {}",
            fx.file,
            peer.name(),
            phase.capture.packets,
            phase.capture.kernel_drops,
            got,
            if real || fx.peer == Peer::Builtin {
                ""
            } else {
                " (built-in server: the real one is not installed)"
            },
            if ok { "✓" } else { "✗ NOT AS LABELLED" }
        );
        if !ok || phase.capture.kernel_drops > 0 {
            failed.push(fx.file);
        }
    }
    if failed.is_empty() {
        println!(
            "{} captures written to {}, each diagnosed as labelled",
            chosen.len(),
            dir.display(),
        );
        Ok(true)
    } else {
        eprintln!(
            "tcpdoctor lab: not as labelled (or with kernel drops): {}",
            failed.join(", ")
        );
        Ok(false)
    }
}

/// One fixture's capture: (the phase, whether it is as labelled, what came
/// first). A capture of random loss or of a busy machine can show another
/// cause first; like any fixture maker, try again (3 times at most).
fn fixture_attempts(
    fx: &fixtures::Fixture,
    setup: &Setup,
    line: bool,
    opts: &PhaseOptions,
) -> Result<(Phase, bool, String)> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = (|| {
            let mut topo = Topology::build(line, setup.one_way)?;
            let r = run::phase(&mut topo, setup, opts);
            topo.teardown();
            r
        })();
        let phase = match result {
            Ok(p) => p,
            Err(e) => {
                ns::cleanup_all();
                return Err(e);
            }
        };
        let first = phase.analysis.findings.first();
        let ok = match fx.expected {
            Some((k, r)) => first.is_some_and(|f| f.kind == k && f.culprit.role == r),
            None => phase.analysis.findings.iter().all(|f| !report::notable(f)),
        };
        let got = first
            .filter(|f| fx.expected.is_some() || report::notable(f))
            .map(|f| format!("{}/{}", f.kind, f.culprit.role))
            .unwrap_or_else(|| "none".into());
        if (ok && phase.capture.kernel_drops == 0) || attempt == 3 {
            return Ok((phase, ok, got));
        }
        println!(
            "{:<34} attempt {attempt}: {got} ({} kernel drops); again",
            fx.file, phase.capture.kernel_drops
        );
    }
}
