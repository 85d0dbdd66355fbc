//! `tcpdoctor`: the command line. The work lives in the library crates; this
//! file defines the interface, reads input and maps outcomes to exit codes.
#![forbid(unsafe_code)]

use std::io::{self, BufWriter, Write};

mod diagnose;
mod lab;
mod load;
mod probe;
mod sockets;
mod sysctl;
mod tls;
mod top;
mod watch;
use std::process::ExitCode;
use tcpdoctor_input::analyze::{self, Notes, Pass, PassOptions};
use tcpdoctor_input::{merge, select, Input};
/// SIGINT/SIGTERM: the report over what was read, then 128 + the signal.
pub(crate) use tcpdoctor_live::signal as interrupt;

use clap::{Parser, Subcommand, ValueEnum};
use tcpdoctor_report::TextOptions;

/// `tcpdoctor --version`: the crate's version and the commit it was built
/// from ("unknown" outside a git checkout; see build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TCPDOCTOR_COMMIT"),
    ")"
);

/// Exit status: analysed (findings or not, unless --fail-on-finding).
pub(crate) const EXIT_OK: u8 = 0;
/// Exit status: analysed, --fail-on-finding given, and a finding was reported.
pub(crate) const EXIT_FINDING: u8 = 1;
/// Exit status: usage error, or the input could not be read as a capture.
pub(crate) const EXIT_INPUT: u8 = 2;

#[derive(Parser)]
#[command(
    name = "tcpdoctor",
    version = VERSION,
    about = "Says why a TCP request is slow: names the mechanism that cost the time, the endpoint \
             responsible, the packets that prove it, and the fix.",
    after_help = "Start with:\n  \
                  tcpdoctor analyze capture.pcap                       explain a capture\n  \
                  tcpdump -i any -w - port 8080 | tcpdoctor analyze -  explain live traffic\n  \
                  sudo tcpdoctor diagnose http://10.0.0.2:8080/        measure a server, capture, explain\n  \
                  sudo tcpdoctor lab run nagle-delayed-ack --compare   watch a cause and its fix\n\n\
                  Exit status: 0 done; 1 a finding was reported and --fail-on-finding was given (or a\n\
                  lab case did not reproduce, or no request got a response); 2 usage error, unreadable\n\
                  input or missing privileges. `tcpdoctor help COMMAND` says more for each."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Analyse a pcap or pcapng capture and explain where the time went.
    #[command(after_help = ANALYZE_HELP)]
    Analyze(AnalyzeArgs),
    /// Measure a URL, capture our own traffic and say why requests are slow.
    #[command(after_help = diagnose::HELP)]
    Diagnose(diagnose::DiagnoseArgs),
    /// Reproduce a slow-TCP case in network namespaces, diagnose it, show the fix (root).
    Lab(lab::LabArgs),
    /// HTTP load with a latency distribution (wrk-like; --rate for an open model).
    #[command(after_help = load::HELP)]
    Load(load::LoadArgs),
    /// TCP SYN ping: round trip to a port, SYN to SYN-ACK/RST (hping3 -S-like).
    #[command(after_help = probe::PING_HELP)]
    Ping(probe::PingArgs),
    /// TCP traceroute on one fixed flow: every router to a port, with round trips.
    #[command(after_help = probe::TRACE_HELP)]
    Trace(probe::TraceArgs),
    /// Live TCP sockets: tcp_info, the owning process and its socket options, flagged.
    #[command(after_help = sockets::HELP)]
    Sockets(sockets::SocketsArgs),
    /// Kernel settings that bound TCP latency and windows, with what each does.
    #[command(after_help = sysctl::HELP)]
    Sysctl(sysctl::SysctlArgs),
    /// Live capture analysed as it happens: findings every interval, the full report at the end.
    #[command(after_help = watch::HELP)]
    Watch(watch::WatchArgs),
    /// The kernel's own view per process from TCP tracepoints: bytes, RTT, windows, loss, resets.
    #[command(after_help = top::HELP)]
    Top(top::TopArgs),
    /// Shell completions for bash, zsh or fish, on standard output.
    #[command(after_help = COMPLETIONS_HELP)]
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
    /// The manual pages (roff): one per command, on standard output or into a directory.
    #[command(after_help = MAN_HELP)]
    Man {
        /// The command whose page to print (`analyze`, `lab run`); none: tcpdoctor(1).
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
        /// Write every page into DIR as tcpdoctor.1, tcpdoctor-analyze.1, …
        #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
        dir: Option<std::path::PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

const COMPLETIONS_HELP: &str = include_str!("../help/completions.txt");

const MAN_HELP: &str = include_str!("../help/man.txt");

const ANALYZE_HELP: &str = include_str!("../help/analyze.txt");

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// Capture file(s) (pcap or pcapng, plain, gzip or zstd), directories of them, or `-` for
    /// standard input. Several are merged by time, as mergecap does. With --parquet, each
    /// file (directories are searched recursively for what `analyze DIR` reads: captures
    /// plain or compressed, told by their names or first bytes; quoted globs expand) is
    /// analysed as a capture of its own.
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    files: Vec<String>,
    /// Analyse only the packets this tcpdump-like filter keeps (host, net, port,
    /// portrange, tcp/udp/ip/ip6; and, or, not, parentheses), e.g. `port 8080 and host
    /// 10.0.0.2`. The same language as `watch --filter`.
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    /// Analyse from this time on: seconds after the first packet (`2.5`), a Unix time
    /// (`@1700000000`) or a UTC time (`2026-11-24T08:01:02Z`, `08:01:02`).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    from: Option<String>,
    /// Analyse up to this time (included); the same forms as --from.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    to: Option<String>,
    /// The full report of one connection: its id in the report of the whole capture
    /// (the `id` column, JSON `connections[].id`). Reads the file twice.
    #[arg(long, value_name = "ID")]
    connection: Option<u64>,
    /// Output format: `text` for people, `json` for machines (schema in docs/json.md).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Connections shown in the text report (most time lost first).
    #[arg(long, default_value_t = 10, value_name = "N")]
    connections: usize,
    /// Connections kept for the JSON `connections` list (bounds memory on huge captures).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    max_connections: usize,
    /// Connections tracked at once, at most: bounds memory on SYN floods and scans (about 200 B
    /// per half-open connection, 4.5 KB per one with data). Beyond it the idlest are closed early
    /// (half-open ones first), summarised and counted in a warning.
    #[arg(long, default_value_t = tcpdoctor_engine::DEFAULT_MAX_OPEN as u64, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    max_open_connections: u64,
    /// Exit with status 1 when any finding is reported (for scripts and CI).
    #[arg(long)]
    fail_on_finding: bool,
    /// Also write a self-contained HTML report (verdict, latency budget and
    /// distribution, a ladder per finding, time-sequence graphs, connections).
    /// Time-sequence graphs need a file (a second pass reads it); from
    /// standard input the rest is drawn.
    #[arg(long, value_name = "REPORT.html")]
    html: Option<String>,
    /// Also write the capture as pcapng with a comment on each evidence frame
    /// (Wireshark: `frame.comment`); frames and timestamps unchanged. Needs a
    /// file, not standard input (the file is read a second time).
    #[arg(long, value_name = "OUT.pcapng")]
    annotate: Option<String>,
    /// Write the analyses as Parquet tables into DIR: connections.parquet,
    /// exchanges.parquet (budget parts as columns), findings.parquet
    /// (evidence as a list) and files.parquet (one row per capture, with its
    /// status). Every connection and exchange gets a row. A capture that
    /// cannot be read is reported and skipped; the sweep goes on.
    #[arg(long, value_name = "DIR")]
    parquet: Option<std::path::PathBuf>,
    /// The `host` column of the Parquet tables (default: the name of each
    /// capture's directory).
    #[arg(long, value_name = "NAME", requires = "parquet")]
    host: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Analyze(args) => analyze(&args),
        Command::Lab(args) => lab::run(args),
        Command::Load(args) => load::run(&args),
        Command::Ping(args) => probe::ping(&args),
        Command::Trace(args) => probe::trace(&args),
        Command::Diagnose(args) => diagnose::run(&args),
        Command::Sockets(args) => sockets::run(&args),
        Command::Sysctl(args) => sysctl::run(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Top(args) => top::run(&args),
        Command::Completions { shell } => completions(shell),
        Command::Man { command, dir } => {
            use clap::CommandFactory;
            tcpdoctor_man::run(&Cli::command(), &command, dir.as_deref())
                .map(|()| EXIT_OK)
                .map_err(anyhow::Error::from)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // A closed pipe (`| head`) is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<io::Error>()
                    .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::from(EXIT_OK);
            }
            eprintln!("tcpdoctor: {e:#}");
            if let Some(sig) = interrupt::signal() {
                // Stopped by a signal before there was anything to report.
                return ExitCode::from(interrupt::status(sig));
            }
            ExitCode::from(EXIT_INPUT)
        }
    }
}

fn completions(shell: Shell) -> anyhow::Result<u8> {
    use clap::CommandFactory;
    use tcpdoctor_completions::Shell as S;
    let shell = match shell {
        Shell::Bash => S::Bash,
        Shell::Zsh => S::Zsh,
        Shell::Fish => S::Fish,
    };
    let cases: Vec<&str> = tcpdoctor_lab::cases::all().iter().map(|c| c.name).collect();
    let script = tcpdoctor_completions::script(shell, &mut Cli::command(), &cases);
    let mut out = io::stdout().lock();
    out.write_all(script.as_bytes())?;
    out.flush()?;
    Ok(EXIT_OK)
}

fn analyze(args: &AnalyzeArgs) -> anyhow::Result<u8> {
    if let Some(dir) = &args.parquet {
        if args.html.is_some() || args.annotate.is_some() {
            anyhow::bail!("--parquet does not combine with --html or --annotate");
        }
        return sweep(args, dir);
    }
    let Inputs {
        paths,
        skipped,
        name,
        stdin,
        many,
    } = inputs(args)?;
    if args.annotate.is_some() && (stdin || many) {
        anyhow::bail!(
            "--annotate needs one capture file (it is read a second time and written out \
             frame for frame), not standard input or several files"
        );
    }
    if args.connection.is_some() && stdin {
        anyhow::bail!(
            "--connection needs a capture file (it is read twice: to find the connection, \
             then to analyse it), not standard input"
        );
    }
    let mut selection = selection(args)?;
    if stdin {
        // `tcpdump -w - | tcpdoctor analyze -` then Ctrl-C (or a SIGTERM to
        // tcpdoctor alone, the producer still writing): reading stops, what
        // was read is analysed and reported as partial. A second signal
        // quits at once.
        interrupt::install(
            "tcpdoctor: interrupted; analysing what was read (Ctrl-C again to quit)\n",
        );
    }
    if let Some(id) = args.connection {
        // First pass: which endpoints and when; the second analyses only those packets.
        let first = analyze_pass(args, &paths, &name, selection.clone(), usize::MAX)?;
        selection.connection = Some(first.connection(id, !selection.is_empty())?);
    }
    let mut pass = analyze_pass(args, &paths, &name, selection.clone(), args.max_connections)?;
    if let Some(id) = args.connection {
        pass.renumber(id);
    }
    let selected = !selection.is_empty();
    let mut written = Ok(());
    if (args.html.is_some() || args.annotate.is_some()) && !(selected && args.annotate.is_some()) {
        // The second pass numbers frames as the file does: with a selection
        // or a merge it would not match, so the time-sequence graphs are left out.
        let reread = (!stdin && !many && !selected).then_some(paths[0].as_str());
        // An output that cannot be written (a full disk) fails the command
        // after the report: the analysis is not lost with it.
        written = tcpdoctor_report_html::pass::write(
            &pass.analysis,
            &pass.bins,
            reread,
            &name,
            &pass.format,
            &tcpdoctor_report_html::pass::Outputs {
                html: args.html.as_deref(),
                annotate: args.annotate.as_deref(),
            },
        );
    } else if args.annotate.is_some() {
        anyhow::bail!(
            "--annotate writes every frame of the capture: it does not combine with a selection"
        );
    }
    let name = name.as_str();
    let notes = Notes {
        skipped: &skipped,
        selected,
        filter: args.filter.as_deref(),
        from: args.from.as_deref(),
        to: args.to.as_deref(),
        connection: args.connection,
        interrupted: interrupt::signal()
            .filter(|_| interrupt::input_cut())
            .map(interrupt::name),
    };
    print_report(args, &pass, name, &notes)?;
    written?;
    if let Some(sig) = interrupt::signal().filter(|_| interrupt::input_cut()) {
        // The report is partial: the input went on past the signal.
        return Ok(interrupt::status(sig));
    }
    if args.fail_on_finding && !pass.analysis.findings.is_empty() {
        return Ok(EXIT_FINDING);
    }
    Ok(EXIT_OK)
}

/// The captures `analyze` reads: standard input, or the files and
/// directories given expanded (what is not a capture is skipped, and said
/// so); and the name the report gives them.
struct Inputs {
    paths: Vec<String>,
    skipped: Vec<String>,
    name: String,
    stdin: bool,
    many: bool,
}

fn inputs(args: &AnalyzeArgs) -> anyhow::Result<Inputs> {
    let stdin = args.files.iter().any(|f| f == "-");
    if stdin && args.files.len() > 1 {
        anyhow::bail!("`-` (standard input) cannot be merged with other inputs; give files only");
    }
    let (paths, skipped) = if stdin {
        (args.files.clone(), Vec::new())
    } else {
        let e = merge::expand(&args.files)?;
        (e.paths, e.skipped)
    };
    if !skipped.is_empty() {
        eprintln!(
            "tcpdoctor: skipped {} file{} that {} not a capture: {}",
            skipped.len(),
            if skipped.len() == 1 { "" } else { "s" },
            if skipped.len() == 1 { "is" } else { "are" },
            skipped.join(", ")
        );
    }
    let many = paths.len() > 1;
    let name = if stdin {
        "<stdin>".to_string()
    } else if many {
        format!("{} and {} more", paths[0], paths.len() - 1)
    } else {
        paths[0].clone()
    };
    Ok(Inputs {
        paths,
        skipped,
        name,
        stdin,
        many,
    })
}

/// `--filter`, `--from` and `--to` parsed (`--connection` is found later).
fn selection(args: &AnalyzeArgs) -> anyhow::Result<select::Selection> {
    Ok(select::Selection {
        filter: match &args.filter {
            Some(text) => Some((
                text.clone(),
                tcpdoctor_filter::Filter::parse(text)
                    .map_err(|e| anyhow::anyhow!("--filter {text:?}: {e}"))?,
            )),
            None => None,
        },
        from: args.from.as_deref().map(select::parse_time).transpose()?,
        to: args.to.as_deref().map(select::parse_time).transpose()?,
        connection: None,
    })
}

/// The report on standard output, as JSON or text, with the notes a
/// merge and a selection add.
fn print_report(args: &AnalyzeArgs, pass: &Pass, name: &str, notes: &Notes) -> anyhow::Result<()> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match args.format {
        Format::Json => {
            // The analysis document, what a merge and a selection add, and
            // what every command's document carries (schema, version, input).
            let extra = pass.json_extras(notes)?;
            tcpdoctor_report::json_stamped_with(
                &pass.analysis,
                "analyze",
                serde_json::json!({"file": args.files.first(), "files": args.files,
                                   "capture_format": pass.format,
                                   "max_open_connections": args.max_open_connections}),
                extra,
                &mut out,
            )?;
        }
        Format::Text => {
            use std::io::IsTerminal;
            let tty = io::stdout().is_terminal();
            let width = width(tty).clamp(60, 200);
            tcpdoctor_report::text_styled(
                &pass.analysis,
                name,
                &pass.format,
                TextOptions {
                    connections: args.connections,
                    width,
                },
                tcpdoctor_report::Style::from_env(tty, |k| std::env::var(k).ok()),
                &mut out,
            )?;
            pass.text_notes(notes, &mut out)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `analyze FILE… --parquet DIR`: every capture into the tables
/// ([`tcpdoctor_table::sweep`]), the summary, and the exit status.
fn sweep(args: &AnalyzeArgs, dir: &std::path::Path) -> anyhow::Result<u8> {
    use tcpdoctor_table::sweep;
    let opts = sweep::Options {
        host: args.host.clone(),
        max_connections: args.max_connections,
        max_open_connections: args.max_open_connections,
    };
    let s = sweep::sweep(&args.files, dir, &opts, |name| open_input(name, name))?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match args.format {
        Format::Json => writeln!(out, "{}", s.json())?,
        Format::Text => s.text(&mut out)?,
    }
    out.flush()?;
    let (n, failed) = (s.files, s.failed);
    if failed == n {
        eprintln!("tcpdoctor: no capture could be read; the tables are empty");
        return Ok(EXIT_INPUT);
    }
    if failed > 0 {
        eprintln!(
            "tcpdoctor: {failed} of {n} captures could not be read; the tables hold the other {}",
            n - failed
        );
        return Ok(EXIT_INPUT);
    }
    if args.fail_on_finding && s.findings > 0 {
        return Ok(EXIT_FINDING);
    }
    Ok(EXIT_OK)
}

/// The text reports' width: COLUMNS first; on a terminal, its width; else 100.
pub(crate) fn width(tty: bool) -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .or_else(|| {
            tty.then(terminal_size::terminal_size)
                .flatten()
                .map(|(w, _)| usize::from(w.0))
        })
        .unwrap_or(100)
}

/// Opens one capture: a file, or standard input for `-` (whose reading ends
/// early on SIGINT/SIGTERM: the report covers what was read).
pub(crate) fn open_input(path: &str, name: &str) -> anyhow::Result<Input> {
    if path == "-" {
        Input::read(Box::new(interrupt::Stdin::default()), name)
    } else {
        Input::open(path, name)
    }
}

/// One read of the input(s) through the engine ([`tcpdoctor_input::analyze::pass`]).
fn analyze_pass(
    args: &AnalyzeArgs,
    paths: &[String],
    name: &str,
    selection: select::Selection,
    max_connections: usize,
) -> anyhow::Result<Pass> {
    let input = if paths.len() > 1 {
        Input::open_many(paths)?
    } else {
        open_input(&paths[0], name)?
    };
    let opts = PassOptions {
        max_connections,
        max_open_connections: args.max_open_connections,
        from: args.from.as_deref(),
        to: args.to.as_deref(),
    };
    analyze::pass(input, name, selection, &opts, || {
        interrupt::input_cut()
            .then(interrupt::signal)
            .flatten()
            .map(interrupt::name)
    })
}
