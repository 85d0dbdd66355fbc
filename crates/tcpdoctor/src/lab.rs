//! `tcpdoctor lab`: its arguments and exit status; listing the cases,
//! running one, remaking the fixtures and cleaning up are `tcpdoctor-lab`'s
//! (`command`, and `report` for what a run prints).

use std::io;
use std::path::PathBuf;

use anyhow::Result;

use tcpdoctor_lab::cases::{self, Peer};
use tcpdoctor_lab::command::{self, Plan, RunOptions};
use tcpdoctor_lab::ns;
use tcpdoctor_lab::report::{self, Format};
use tcpdoctor_lab::topo::Vantage;

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

const RUN_HELP: &str = include_str!("../help/lab-run.txt");

const FIXTURES_HELP: &str = include_str!("../help/lab-fixtures.txt");

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

impl RunArgs {
    fn options(self) -> RunOptions {
        RunOptions {
            case: self.case,
            compare: self.compare,
            rtt: self.rtt,
            loss: self.loss,
            rate: self.rate,
            vantage: self.vantage,
            peer: self.peer,
            write: self.write,
            html: self.html,
            snaplen: self.snaplen,
            format: self.format,
            full: self.full,
            verbose: self.verbose,
            diagnose: self.diagnose,
        }
    }
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
    let ok = match args.command {
        LabCommand::List { format } => {
            report::list(&mut io::stdout().lock(), format)?;
            true
        }
        LabCommand::Clean => {
            let removed = command::clean()?;
            if removed.is_empty() {
                println!("nothing to clean");
            } else {
                println!("removed {}", removed.join(", "));
            }
            true
        }
        LabCommand::Run(a) => {
            let plan = Plan::new(a.options())?;
            if plan.opts.diagnose {
                let outcome = plan.diagnose()?;
                report::diagnosis(&mut io::stdout().lock(), &plan, &outcome)?
            } else {
                let outcome = plan.measure()?;
                plan.write_html(&outcome)?;
                report::outcome(&mut io::stdout().lock(), &plan, &outcome)?
            }
        }
        LabCommand::Fixtures(a) => command::fixtures(&a.dir, &a.only, a.snaplen)?,
    };
    Ok(if ok { EXIT_OK } else { EXIT_MISMATCH })
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
