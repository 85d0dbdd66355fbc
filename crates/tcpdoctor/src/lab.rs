//! `tcpdoctor lab`: its arguments, and the command that runs a case (or
//! lists them, remakes the fixtures, cleans up) on `tcpdoctor-lab`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use serde_json::{json, Value};
use tcpdoctor_engine::model::Finding;

use tcpdoctor_lab::cases::{self, Case, Headline, Peer, Setup};
use tcpdoctor_lab::run::{self, Phase, PhaseOptions};
use tcpdoctor_lab::topo::{Topology, Vantage};
use tcpdoctor_lab::{ext, fixtures, ns};
use tcpdoctor_units::bytes as fmt_bytes;

/// Exit status: the case reproduced as expected.
const EXIT_OK: u8 = 0;
/// Exit status: the expected finding did not come out first (or survived the fix).
const EXIT_MISMATCH: u8 = 1;
// A usage error, not being root, or a lab that could not be set up is an
// error: the binary exits 2 (`EXIT_INPUT`).

#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  tcpdoctor lab list
  sudo tcpdoctor lab run nagle-delayed-ack --compare
  sudo tcpdoctor lab fixtures /tmp/captures
  sudo tcpdoctor lab clean

Needs root (network namespaces, packet capture), iproute2 and iptables; nginx, a JDK and wrk
only for --peer nginx|jdk.")]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(clap::Subcommand)]
pub enum LabCommand {
    /// List the cases, what each reproduces, and its fix.
    List {
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Reproduce a case, capture it, diagnose it (and with --compare, show the fix working).
    #[command(after_help = RUN_HELP)]
    Run(RunArgs),
    /// Make the project's test captures again (one per fixture file) into DIR and check each.
    #[command(after_help = FIXTURES_HELP)]
    Fixtures(FixturesArgs),
    /// Remove namespaces and processes left behind by lab runs that were killed.
    Clean,
}

const RUN_HELP: &str = "\
Examples:
  sudo tcpdoctor lab run nagle-delayed-ack --compare
  sudo tcpdoctor lab run small-receive-window --compare --vantage server --write upload.pcap
  sudo tcpdoctor lab run network-latency --rtt 200 --format json | jq .before.findings[0].kind
  sudo tcpdoctor lab run nagle-delayed-ack --peer nginx --compare     # real nginx, wrk as the client

Builds client, router and server network namespaces (tdlab<PID>-c/-r/-s), emulates the
path in the router (delay line for --rtt, iptables for --loss, TBF for --rate), runs the
case's server and client, captures at the vantage point (no tcpdump needed) and diagnoses
the capture. With --compare the case runs again with its fix applied.

Exit status: 0 the case's expected finding came first (and, with --compare, is gone after
the fix; `healthy`: nothing found); 1 it did not; 2 usage error, not root, or setup failed.";

const FIXTURES_HELP: &str = "\
Examples:
  sudo tcpdoctor lab fixtures /tmp/captures
  sudo tcpdoctor lab fixtures fixtures/ upload-rcvbuf4k.server nginx-nodelay-off.server

Makes the project's test captures again (fixtures/ACCURACY.md lists them): one lab run per
file, at the vantage point the file is named after, with real nginx / JDK HttpServer and wrk
where the file was made with them (the built-in peers stand in when they are not
installed). Each capture is checked against its label (the cause reported first, or
nothing costing 5% of the time). Exit status 1 if any is not diagnosed as labelled or the
kernel dropped packets.";

/// A case's name: any text (an unknown one is reported with the list of
/// cases), with the cases' names for shell completion.
#[derive(Clone)]
pub struct CaseName;

impl clap::builder::TypedValueParser for CaseName {
    type Value = String;

    fn parse_ref(
        &self,
        _: &clap::Command,
        _: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            cases::all()
                .into_iter()
                .map(|c| clap::builder::PossibleValue::new(c.name)),
        ))
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// The case (see `tcpdoctor lab list`).
    #[arg(value_parser = CaseName, hide_possible_values = true)]
    pub case: String,
    /// Run the case again with its fix applied, and show the improvement.
    #[arg(long)]
    pub compare: bool,
    /// Round-trip time to emulate in the router: 35ms, 0.1s, or a plain number of
    /// milliseconds (default: the case's).
    #[arg(long, value_name = "TIME", value_parser = parse_ms)]
    pub rtt: Option<f64>,
    /// Share of forwarded TCP packets the router drops, in percent, both directions
    /// (SYNs and SYN-ACKs excepted: a lost handshake is the syn-retransmit case).
    #[arg(long, value_name = "PCT")]
    pub loss: Option<f64>,
    /// Rate limit on both hosts (TBF), as tc writes it: 16mbit, 1gbit.
    #[arg(long, value_name = "R")]
    pub rate: Option<String>,
    /// Where to capture (default: the case's). router: the router's client-facing
    /// interface; router-server: its server-facing one.
    #[arg(long, value_enum)]
    pub vantage: Option<Vantage>,
    /// Server software: the built-in one, or real nginx / JDK HttpServer (with wrk as
    /// the client when installed). Default: the case's first (`lab list`), the built-in
    /// one but for tls-handshake (nginx, with curl as the client).
    #[arg(long, value_enum)]
    pub peer: Option<Peer>,
    /// Write the capture (pcap); with --compare the fixed run goes to FILE with
    /// `-fixed` before the extension.
    #[arg(long, value_name = "FILE.pcap")]
    pub write: Option<PathBuf>,
    /// Write the analysis as a self-contained HTML page; with --compare the fixed run goes
    /// to FILE with `-fixed` before the extension.
    #[arg(long, value_name = "REPORT.html", conflicts_with = "diagnose")]
    pub html: Option<PathBuf>,
    /// Bytes kept of each captured frame.
    #[arg(long, default_value_t = 512, value_name = "BYTES")]
    pub snaplen: u32,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also print the full analysis report of each capture (text format).
    #[arg(long)]
    pub full: bool,
    /// Progress lines on stderr also with --format json (text prints them anyway).
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Instead of the case's own client, run `tcpdoctor diagnose` from the client
    /// namespace against the case's server: round trip, requests, load, self-capture,
    /// verdict. For the cases a server or the path causes (nagle-delayed-ack,
    /// jdk-httpserver, server-delay, network-latency, healthy).
    #[arg(long, conflicts_with_all = ["compare", "vantage", "write"])]
    pub diagnose: bool,
}

/// The cases `--diagnose` reproduces: the cause is in the server or the path,
/// so `diagnose`'s own GET requests meet it.
pub const DIAGNOSE_CASES: [&str; 5] = [
    "nagle-delayed-ack",
    "jdk-httpserver",
    "server-delay",
    "network-latency",
    "healthy",
];

#[derive(clap::Args)]
pub struct FixturesArgs {
    /// Directory to write the captures into (created if missing).
    pub dir: PathBuf,
    /// Only these fixtures (file names, or names without the extension).
    pub only: Vec<String>,
    /// Bytes kept of each captured frame.
    #[arg(long, default_value_t = 256, value_name = "BYTES")]
    pub snaplen: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Runs a `lab` subcommand; returns the exit status.
pub fn run(args: LabArgs) -> Result<u8> {
    let result = command(args);
    // Ctrl-C or SIGTERM: the handler is removing namespaces and processes
    // and exits when done; returning now would cut that short.
    while ns::interrupted() {
        std::thread::park();
    }
    result
}

fn command(args: LabArgs) -> Result<u8> {
    match args.command {
        LabCommand::List { format } => list(format),
        LabCommand::Clean => {
            need_root()?;
            let removed = ns::clean_stale();
            if removed.is_empty() {
                println!("nothing to clean");
            } else {
                println!("removed {}", removed.join(", "));
            }
            Ok(EXIT_OK)
        }
        LabCommand::Run(a) => run_command(&a),
        LabCommand::Fixtures(a) => fixtures(&a),
    }
}

/// What `lab run` was asked, for its JSON document's `input`.
fn run_input(a: &RunArgs) -> Value {
    json!({
        "case": a.case, "compare": a.compare, "rtt_ms": a.rtt, "loss_percent": a.loss,
        "rate": a.rate, "vantage": a.vantage.map(|v| v.as_str()), "peer": a.peer,
        "write": a.write.as_ref().map(|p| p.display().to_string()), "diagnose": a.diagnose,
    })
}

/// A time in milliseconds: `35ms`, `0.1s`, `200us`, or a plain number of ms.
fn parse_ms(s: &str) -> std::result::Result<f64, String> {
    let (n, unit) = crate::load::number_and_unit(s.trim())
        .ok_or_else(|| format!("{s:?} is not a time (examples: 35ms, 0.1s, 35)"))?;
    let ms = match unit {
        "" | "ms" => n,
        "s" => n * 1e3,
        "us" | "µs" => n / 1e3,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use us, ms or s)")),
    };
    if !ms.is_finite() || ms < 0.0 {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(ms)
}

fn need_root() -> Result<()> {
    if !ns::is_root() {
        bail!("the lab needs root (network namespaces, packet capture): run it with sudo");
    }
    Ok(())
}

fn list(format: Format) -> Result<u8> {
    let cases = cases::all();
    let mut out = io::stdout().lock();
    if format == Format::Json {
        let v: Vec<Value> = cases
            .iter()
            .map(|c| {
                json!({
                    "case": c.name,
                    "summary": c.summary,
                    "expected": expected_json(c),
                    "fix": c.fix.map(|f| f.0),
                    "vantage": c.vantage,
                    "rtt_ms": c.setup.one_way.as_secs_f64() * 2e3,
                    "peers": c.peers,
                })
            })
            .collect();
        let mut doc = json!({ "cases": v });
        tcpdoctor_report::stamp(&mut doc, "lab list", json!({}));
        writeln!(out, "{doc}")?;
        return Ok(EXIT_OK);
    }
    for c in &cases {
        let exp = expected_text(c);
        writeln!(out, "{:<30} {}", c.name, c.summary)?;
        writeln!(
            out,
            "{:<30} expects {exp}; fix: {}",
            "",
            c.fix.map(|f| f.0).unwrap_or("none needed")
        )?;
    }
    Ok(EXIT_OK)
}

/// The two setups of a run, after the command line's overrides.
fn setups(case: &Case, a: &RunArgs) -> Result<(Setup, Option<Setup>)> {
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

/// The result of one run of a case, before and maybe after its fix.
struct Outcome {
    before: Phase,
    after: Option<Phase>,
}

fn run_command(a: &RunArgs) -> Result<u8> {
    let Some(case) = cases::find(&a.case) else {
        let names: Vec<&str> = cases::all().iter().map(|c| c.name).collect();
        bail!("no case named {:?}; cases: {}", a.case, names.join(", "));
    };
    if !case.peers.contains(&peer_of(&case, a)) {
        bail!(
            "case {} cannot run with --peer {}; it runs with: {}",
            case.name,
            peer_of(&case, a).name(),
            case.peers
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if a.diagnose && !DIAGNOSE_CASES.contains(&case.name) {
        bail!(
            "--diagnose sends its own GET requests, so it meets only causes in the server or the path; \
             case {} needs its own client. --diagnose runs with: {}",
            case.name,
            DIAGNOSE_CASES.join(", ")
        );
    }
    need_root()?;
    let (before, after) = setups(&case, a)?;
    ns::install_signal_handler()?;
    for n in ns::clean_stale() {
        eprintln!("tcpdoctor lab: removed {n}, left by a run that was killed");
    }
    if a.diagnose {
        return diagnose_case(&case, &before, a);
    }
    let vantage = a.vantage.unwrap_or(case.vantage);
    let outcome = run_case(
        &case,
        &before,
        after.as_ref().filter(|_| a.compare),
        vantage,
        a,
    );
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            ns::cleanup_all();
            return Err(e);
        }
    };
    if let Some(path) = &a.html {
        write_html(&case, path, &outcome.before)?;
        if let Some(f) = &outcome.after {
            write_html(&case, &fixed_name(path), f)?;
        }
    }
    let ok = print(&case, &before, &outcome, a)?;
    Ok(if ok { EXIT_OK } else { EXIT_MISMATCH })
}

/// `--html`: one phase's analysis as a self-contained page (without
/// time-sequence graphs: those need a second read of a capture file, which
/// `tcpdoctor analyze --html` of the `--write` pcap draws).
fn write_html(case: &Case, path: &Path, phase: &Phase) -> Result<()> {
    let f = std::fs::File::create(path)
        .map_err(|e| anyhow::anyhow!("creating {}: {e}", path.display()))?;
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

fn run_case(
    case: &Case,
    before: &Setup,
    after: Option<&Setup>,
    vantage: Vantage,
    a: &RunArgs,
) -> Result<Outcome> {
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
    let peer = peer_of(case, a);
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

/// `lab run CASE --diagnose`: the case's path and server, measured and
/// explained by `diagnose` from the client namespace.
fn diagnose_case(case: &Case, before: &Setup, a: &RunArgs) -> Result<u8> {
    let url = format!("http://{}/", run::server_addr());
    let target = tcpdoctor_load::Target::parse(&url).map_err(|e| anyhow::anyhow!(e.to_string()))?;
    let plan = tcpdoctor_diagnose::Plan::new(target, tcpdoctor_load::RequestSpec::default());
    let needs_line = !before.one_way.is_zero() || before.loss > 0.0;
    let outcome = Topology::build(needs_line, before.one_way).and_then(|mut topo| {
        let outcome = run::diagnose_phase(&mut topo, before, peer_of(case, a), plan);
        topo.teardown();
        outcome
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            // Whatever was set up before the error goes too.
            ns::cleanup_all();
            return Err(e.into());
        }
    };
    let findings = outcome
        .analysis
        .as_ref()
        .map(|an| an.findings.as_slice())
        .unwrap_or_default();
    let ok = match case.expected {
        Some((_, role)) => findings
            .first()
            .is_some_and(|f| is_expected(case, f) && f.culprit.role == role),
        None => outcome.analysis.is_some() && findings.iter().all(|f| !notable(f)),
    };
    let mut out = io::stdout().lock();
    match a.format {
        Format::Json => {
            let mut doc = tcpdoctor_diagnose::render::to_json(&outcome)?;
            if let Value::Object(m) = &mut doc {
                m.insert("case".into(), json!(case.name));
                m.insert("expected".into(), expected_json(case));
                m.insert("reproduced".into(), json!(ok));
            }
            tcpdoctor_report::stamp(&mut doc, "lab run", run_input(a));
            writeln!(out, "{doc}")?;
        }
        Format::Text => {
            writeln!(
                out,
                "lab case {} ({}), server {} in namespace {}, diagnosed from the client namespace:\n",
                case.name,
                peer_of(case, a).name(),
                run::server_addr(),
                ns::name("s")
            )?;
            tcpdoctor_diagnose::render::text(&outcome, &mut out)?;
            let exp = expected_text(case);
            writeln!(
                out,
                "\nexpected {exp}: {}",
                if ok { "reproduced" } else { "NOT reproduced" }
            )?;
        }
    }
    Ok(if ok { EXIT_OK } else { EXIT_MISMATCH })
}

/// The server software of a run: `--peer`, or the case's first.
fn peer_of(case: &Case, a: &RunArgs) -> Peer {
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

/// Whether `f` is the case's expected finding: its kind, and the detail
/// that names the variety when the case has one (its culprit is checked apart).
fn is_expected(case: &Case, f: &Finding) -> bool {
    case.expected.is_some_and(|(kind, _)| f.kind == kind)
        && case
            .detail
            .is_none_or(|(key, value)| f.details.get(key).and_then(|v| v.as_str()) == Some(value))
}

/// `{"kind", "role"}` and, for a case that names a variety, `"details": {key: value}`.
fn expected_json(case: &Case) -> Value {
    let Some((kind, role)) = case.expected else {
        return Value::Null;
    };
    let mut v = json!({"kind": kind, "role": role});
    if let Some((key, value)) = case.detail {
        v["details"] = json!({ key: value });
    }
    v
}

/// `kind (role)`, with the variety: `kind (role, key value)`.
fn expected_text(case: &Case) -> String {
    match (case.expected, case.detail) {
        (Some((k, r)), Some((key, value))) => format!("{k} ({r}, {key} {value})"),
        (Some((k, r)), None) => format!("{k} ({r})"),
        _ => "no finding".into(),
    }
}

/// Whether the before phase shows the case's expected finding first (healthy:
/// nothing costing 5% or more).
fn expected_first(case: &Case, p: &Phase) -> bool {
    match case.expected {
        Some((_, role)) => p
            .analysis
            .findings
            .first()
            .is_some_and(|f| is_expected(case, f) && f.culprit.role == role),
        None => p.analysis.findings.iter().all(|f| !notable(f)),
    }
}

/// A finding a healthy capture may not have: one costing 5% of the time or
/// more, or failed requests (whatever time they took).
fn notable(f: &Finding) -> bool {
    f.share_of_time >= 0.05 || tcpdoctor_engine::rules::failure_name(f.kind)
}

/// Whether the expected finding is gone after the fix.
fn expected_gone(case: &Case, p: &Phase) -> bool {
    p.analysis.findings.iter().all(|f| !is_expected(case, f))
}

fn print(case: &Case, before: &Setup, o: &Outcome, a: &RunArgs) -> Result<bool> {
    let first = expected_first(case, &o.before);
    let gone = o.after.as_ref().map(|p| expected_gone(case, p));
    let ok = first && gone.unwrap_or(true);
    let mut out = io::stdout().lock();
    if a.format == Format::Json {
        let phase = |p: &Phase, fix: Option<&str>| {
            json!({
                "fix": fix,
                "rtt_ms": run::round3(p.rtt_ms),
                "metrics": p.metrics,
                "capture": p.capture,
                "delay_line_drops": p.delay_line_drops,
                "findings": p.analysis.findings,
                "minor_findings": p.analysis.minor_findings,
            })
        };
        let doc = json!({
            "case": case.name,
            "summary": case.summary,
            "expected": expected_json(case),
            "peer": peer_of(case, a),
            "network": {
                "rtt_asked_ms": before.one_way.as_secs_f64() * 2e3,
                "loss_percent": before.loss * 100.0,
                "rate": before.rate,
            },
            "before": phase(&o.before, None),
            "after": o.after.as_ref().map(|p| phase(p, case.fix.map(|f| f.0))),
            "improvement": o.after.as_ref().map(|p| {
                let (metric, b, f) = headline(case, &o.before, p);
                json!({"metric": metric, "before": b, "after": f, "ratio": ratio(b, f)})
            }),
            "prediction": o.after.as_ref().and_then(|p| prediction(case, &o.before, p)).map(|p| {
                json!({"finding": p.kind, "parts": p.parts, "predicted_p50_ms": p.predicted,
                       "measured_p50_ms": p.measured, "within_tolerance": p.within})
            }),
            "expected_first": first,
            "expected_gone_after_fix": gone,
            "reproduced": ok,
        });
        let mut doc = doc;
        tcpdoctor_report::stamp(&mut doc, "lab run", run_input(a));
        writeln!(out, "{doc}")?;
        return Ok(ok);
    }
    writeln!(out, "tcpdoctor lab: {} — {}", case.name, case.summary)?;
    let (ns_name, iface) = (&o.before.capture.namespace, o.before.capture.interface);
    writeln!(
        out,
        "network    client 10.71.1.2 ⟷ router ⟷ server 10.71.2.2:8080 · RTT asked {} ms, measured {} (TCP handshake){}{}",
        fmt_num(before.one_way.as_secs_f64() * 2e3),
        fmt_ms(o.before.rtt_ms),
        if before.loss > 0.0 { format!(" · loss {}%", fmt_num(before.loss * 100.0)) } else { String::new() },
        before.rate.as_ref().map(|r| format!(" · rate {r}")).unwrap_or_default(),
    )?;
    writeln!(
        out,
        "capture    {} vantage: {iface} in {ns_name}",
        o.before.capture.vantage.as_str()
    )?;
    phase_text(&mut out, "BEFORE", case, &o.before, a)?;
    if let Some(p) = &o.after {
        let fix = case.fix.map(|f| f.0).unwrap_or("");
        phase_text(&mut out, &format!("AFTER  ({fix})"), case, p, a)?;
        let (metric, b, f) = headline(case, &o.before, p);
        if metric == "failed_requests" {
            writeln!(out)?;
            writeln!(out, "RESULT     {b} failed requests → {f} with {fix}")?;
            return check_text(out, case, first, gone).map(|_| ok);
        }
        let unit = if metric == "duration_s" { "s" } else { "ms" };
        let label = if metric == "duration_s" {
            "took"
        } else {
            "p50"
        };
        let show = |v: f64| {
            if unit == "s" {
                format!("{v:.2} s")
            } else {
                fmt_ms(v)
            }
        };
        writeln!(out)?;
        writeln!(
            out,
            "RESULT     {label} {} → {} with {fix} ({})",
            show(b),
            show(f),
            describe_ratio(b, f)
        )?;
        if let Some(p) = prediction(case, &o.before, p) {
            writeln!(
                out,
                "PREDICTED  exchanges p50 {} after the fix, from the first capture without {} \
                 ({}); measured in the second: {} ({})",
                fmt_ms(p.predicted),
                p.parts.join(" + "),
                p.kind,
                fmt_ms(p.measured),
                if p.within {
                    "within 25% or 2 ms ✓"
                } else {
                    "off by more than 25% and 2 ms ✗"
                }
            )?;
        }
    }
    check_text(out, case, first, gone)?;
    Ok(ok)
}

fn check_text(mut out: impl Write, case: &Case, first: bool, gone: Option<bool>) -> Result<()> {
    writeln!(out)?;
    let exp = expected_text(case);
    match (case.expected, first, gone) {
        (Some(_), true, Some(true)) => writeln!(
            out,
            "check      {exp} found first, and gone after the fix ✓"
        )?,
        (Some(_), true, None) => writeln!(out, "check      {exp} found first ✓")?,
        (Some(_), true, Some(false)) => writeln!(
            out,
            "check      {exp} found first, but still found after the fix ✗"
        )?,
        (Some(_), false, _) => writeln!(out, "check      expected {exp} first: not reproduced ✗")?,
        (None, true, _) => writeln!(out, "check      healthy: nothing costing 5% of the time ✓")?,
        (None, false, _) => writeln!(
            out,
            "check      expected a healthy capture, but found something ✗"
        )?,
    }
    Ok(())
}

/// The expected finding's prediction from the run before the fix, beside
/// what the run with the fix measured (its capture's exchanges: the same
/// vantage and the same definition of an exchange).
struct Predicted {
    kind: &'static str,
    parts: Vec<&'static str>,
    predicted: f64,
    measured: f64,
    within: bool,
}

fn prediction(case: &Case, before: &Phase, after: &Phase) -> Option<Predicted> {
    let f = before
        .analysis
        .findings
        .iter()
        .find(|f| is_expected(case, f))?;
    let p = f.predicted_after_fix.as_ref()?;
    let measured = after.analysis.capture.exchange_latency_ms?.p50;
    let predicted = p.all.p50_ms;
    let off = (predicted - measured).abs();
    Some(Predicted {
        kind: f.kind,
        parts: p.parts.clone(),
        predicted,
        measured,
        within: off <= 2.0 || off <= 0.25 * measured,
    })
}

/// The headline metric of a case: (name, before, after).
fn headline(case: &Case, b: &Phase, f: &Phase) -> (&'static str, f64, f64) {
    match case.headline {
        Headline::Latency => (
            "latency_p50_ms",
            b.metrics.latency_p50_ms,
            f.metrics.latency_p50_ms,
        ),
        Headline::Duration => ("duration_s", b.metrics.duration_s, f.metrics.duration_s),
        Headline::Failures => (
            "failed_requests",
            b.metrics.errors as f64,
            f.metrics.errors as f64,
        ),
    }
}

fn ratio(b: f64, f: f64) -> Option<f64> {
    (f > 0.0).then(|| run::round3(b / f))
}

fn describe_ratio(b: f64, f: f64) -> String {
    match ratio(b, f) {
        Some(r) if r >= 1.05 => format!("{}× faster", fmt_num(r)),
        Some(r) if r <= 0.95 => format!("{}× slower", fmt_num(1.0 / r)),
        _ => "no change".into(),
    }
}

fn phase_text(
    out: &mut impl Write,
    title: &str,
    case: &Case,
    p: &Phase,
    a: &RunArgs,
) -> Result<()> {
    let m = &p.metrics;
    writeln!(out, "\n{title}")?;
    match case.headline {
        Headline::Latency => writeln!(
            out,
            "symptom    {} requests ({}) · p50 {} · p99 {} · max {} · {} req/s",
            m.requests,
            m.client,
            fmt_ms(m.latency_p50_ms),
            fmt_ms(m.latency_p99_ms),
            fmt_ms(m.latency_max_ms),
            fmt_num(m.requests_per_sec)
        )?,
        Headline::Duration => writeln!(
            out,
            "symptom    took {:.2} s · {} up, {} down · {}/s",
            m.duration_s,
            fmt_bytes(m.bytes_up),
            fmt_bytes(m.bytes_down),
            fmt_bytes(m.throughput_bytes_per_sec as u64)
        )?,
        Headline::Failures => writeln!(
            out,
            "symptom    {} of {} requests failed ({}) · p50 of the others {}",
            m.errors,
            m.errors + m.requests,
            m.client,
            fmt_ms(m.latency_p50_ms),
        )?,
    }
    if let (Some(p50), Some(max)) = (m.tls_handshake_p50_ms, m.tls_handshake_max_ms) {
        writeln!(
            out,
            "tls        handshake (curl: appconnect − connect) p50 {} · max {}",
            fmt_ms(p50),
            fmt_ms(max)
        )?;
    }
    if let Some(f) = &m.syn_flood {
        writeln!(
            out,
            "flood      {} SYNs from spoofed sources (198.18.0.0/15) in {:.2} s{}",
            f.syns_sent,
            f.seconds,
            if f.send_errors > 0 {
                format!(", {} not sent", f.send_errors)
            } else {
                String::new()
            }
        )?;
    }
    if p.metrics.errors > 0 {
        writeln!(out, "errors     {} requests failed", p.metrics.errors)?;
    }
    let c = &p.capture;
    writeln!(
        out,
        "capture    {} packets at {}, {} dropped by the kernel{}{}",
        c.packets,
        c.interface,
        c.kernel_drops,
        if c.kernel_drops > 0 {
            " — THE CAPTURE HAS HOLES"
        } else {
            ""
        },
        c.written
            .as_ref()
            .map(|w| format!(" · written to {w}"))
            .unwrap_or_default()
    )?;
    if p.delay_line_drops > 0 {
        writeln!(
            out,
            "delay line dropped {} packets (queue full)",
            p.delay_line_drops
        )?;
    }
    if a.full {
        writeln!(out)?;
        tcpdoctor_report::text(
            &p.analysis,
            &format!("{} ({})", case.name, c.interface),
            "live capture",
            tcpdoctor_report::TextOptions::default(),
            out,
        )?;
        return Ok(());
    }
    if p.analysis.findings.is_empty() {
        writeln!(out, "diagnosis  no finding")?;
    }
    for (i, f) in p.analysis.findings.iter().take(3).enumerate() {
        finding_text(out, i, f)?;
    }
    Ok(())
}

fn finding_text(out: &mut impl Write, i: usize, f: &Finding) -> Result<()> {
    let head = if i == 0 { "diagnosis " } else { "          " };
    if let Some(lost) = f.details.get("requests_lost").and_then(Value::as_u64) {
        writeln!(
            out,
            "{head} {}. {} — {} {} — {lost} request(s) failed",
            i + 1,
            f.kind,
            f.culprit.role,
            f.culprit.endpoint,
        )?;
        if i == 0 {
            wrap(out, "why", &f.explanation)?;
            wrap(out, "fix", &f.fix)?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "{head} {}. {} — {} {} — {} lost ({:.0}% of the time), {} × typically {}",
        i + 1,
        f.kind,
        f.culprit.role,
        f.culprit.endpoint,
        fmt_secs(f.total_delay_ms),
        f.share_of_time * 100.0,
        f.occurrences,
        fmt_ms(f.typical_delay_ms)
    )?;
    if i == 0 {
        wrap(out, "why", &f.explanation)?;
        wrap(out, "fix", &f.fix)?;
    }
    Ok(())
}

fn wrap(out: &mut impl Write, label: &str, text: &str) -> Result<()> {
    let indent = "               ";
    let mut line = format!("           {label} ");
    for word in text.split_whitespace() {
        if line.len() + word.len() > 100 && line.len() > indent.len() {
            writeln!(out, "{line}")?;
            line = indent.to_string();
        }
        line.push_str(word);
        line.push(' ');
    }
    writeln!(out, "{}", line.trim_end())?;
    Ok(())
}

fn fmt_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{ms:.2} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else if ms < 10_000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1} s", ms / 1e3)
    }
}

fn fmt_secs(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.2} s", ms / 1e3)
    }
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn fixtures(a: &FixturesArgs) -> Result<u8> {
    let chosen = fixtures::select(&a.only)?;
    need_root()?;
    std::fs::create_dir_all(&a.dir)?;
    ns::install_signal_handler()?;
    ns::clean_stale();
    let mut failed = Vec::new();
    for fx in &chosen {
        let Some(setup) = fixtures::setup(fx) else {
            bail!("fixture {} names no case", fx.file);
        };
        let file = fixtures::path(&a.dir, fx);
        let real = fx.peer.program().is_none_or(ext::installed);
        let peer = if real { fx.peer } else { Peer::Builtin };
        let wrk = fx.wrk.filter(|_| real && ext::installed("wrk"));
        let line = !setup.one_way.is_zero() || setup.loss > 0.0;
        // A capture of random loss or of a busy machine can show another
        // cause first; like any fixture maker, try again (3 times at most).
        let mut attempt = 0;
        let (phase, ok, got) = loop {
            attempt += 1;
            let result = (|| {
                let mut topo = Topology::build(line, setup.one_way)?;
                let opts = PhaseOptions {
                    vantage: fx.vantage,
                    snaplen: a.snaplen,
                    write: Some(file.clone()),
                    peer,
                    wrk,
                    progress: None,
                };
                let r = run::phase(&mut topo, &setup, &opts);
                topo.teardown();
                r
            })();
            let phase = match result {
                Ok(p) => p,
                Err(e) => {
                    ns::cleanup_all();
                    return Err(e.into());
                }
            };
            let first = phase.analysis.findings.first();
            let ok = match fx.expected {
                Some((k, r)) => first.is_some_and(|f| f.kind == k && f.culprit.role == r),
                None => phase.analysis.findings.iter().all(|f| !notable(f)),
            };
            let got = first
                .filter(|f| fx.expected.is_some() || notable(f))
                .map(|f| format!("{}/{}", f.kind, f.culprit.role))
                .unwrap_or_else(|| "none".into());
            if (ok && phase.capture.kernel_drops == 0) || attempt == 3 {
                break (phase, ok, got);
            }
            println!(
                "{:<34} attempt {attempt}: {got} ({} kernel drops); again",
                fx.file, phase.capture.kernel_drops
            );
        };
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
            a.dir.display(),
        );
        Ok(EXIT_OK)
    } else {
        eprintln!(
            "tcpdoctor lab: not as labelled (or with kernel drops): {}",
            failed.join(", ")
        );
        Ok(EXIT_MISMATCH)
    }
}
