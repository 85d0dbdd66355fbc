//! `tcpdoctor`: the command line. The work lives in the library crates; this
//! file defines the interface, reads input and maps outcomes to exit codes.

use std::io::{self, BufWriter, Write};

mod diagnose;
mod html;
mod input;
mod load;
mod probe;
mod sockets;
mod sysctl;
mod target;
mod watch;
use input::Input;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use tcpdoctor_capture::ErrorKind;
use tcpdoctor_diagnose::{Engine, Options};
use tcpdoctor_report::TextOptions;

/// Exit status: analysed (findings or not, unless --fail-on-finding).
pub(crate) const EXIT_OK: u8 = 0;
/// Exit status: analysed, --fail-on-finding given, and a finding was reported.
pub(crate) const EXIT_FINDING: u8 = 1;
/// Exit status: usage error, or the input could not be read as a capture.
const EXIT_INPUT: u8 = 2;

#[derive(Parser)]
#[command(
    name = "tcpdoctor",
    version,
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
    Lab(tcpdoctor_lab::LabArgs),
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
}

const ANALYZE_HELP: &str = "\
Examples:
  tcpdoctor analyze examples/nginx-nagle.pcap
  tcpdoctor analyze --format json upload.pcapng | jq '.findings[0]'
  tcpdump -i any -w - port 8080 | tcpdoctor analyze -

Input: pcap (µs or ns, either byte order) and pcapng (several interfaces), on Ethernet
(VLAN, QinQ), Linux cooked SLL/SLL2 (tcpdump -i any), raw IP and BSD loopback; IPv4 and
IPv6. Captures taken at the client, the server or in between all work; snaplen-truncated
and TSO/GRO captures are fine.

What it reports (largest cost first; causes under 1% of the time are listed as minor):
  nagle_delayed_ack        a small segment held the rest of a message until the peer's delayed ACK
  receive_window_limited   bytes in flight pinned at the receiver's advertised window
  zero_window              the receiver closed its window; the sender stopped and probed
  retransmission_timeout   loss recovered only by the retransmission timer (incl. backoff)
  packet_loss              loss recovered by fast retransmit / SACK (incl. before the capture point)
  syn_retransmit           connection setup waited for a SYN or SYN-ACK retry (1 s, 3 s…)
  server_delay             request complete, response late: the server thinking
  client_delay             the client idle after the handshake before its request
  network_latency          the round trip itself is most of the time
  congestion_limited       flights of a transfer waiting on the congestion window (slow start, regrowth)

Exit status: 0 analysed (a truncated or partly corrupt capture is analysed up to where it
breaks, with a warning); 1 --fail-on-finding was given and a finding was reported;
2 usage error or unreadable input.";

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// Capture file (pcap or pcapng), or `-` for standard input.
    file: String,
    /// Output format: `text` for people, `json` for machines (schema in the README).
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
    #[arg(long, default_value_t = tcpdoctor_diagnose::DEFAULT_MAX_OPEN as u64, value_name = "N",
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
        Command::Lab(args) => tcpdoctor_lab::main(args),
        Command::Load(args) => load::run(&args),
        Command::Ping(args) => probe::ping(&args),
        Command::Trace(args) => probe::trace(&args),
        Command::Diagnose(args) => diagnose::run(&args),
        Command::Sockets(args) => sockets::run(&args),
        Command::Sysctl(args) => sysctl::run(&args),
        Command::Watch(args) => watch::run(&args),
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
            ExitCode::from(EXIT_INPUT)
        }
    }
}

fn analyze(args: &AnalyzeArgs) -> anyhow::Result<u8> {
    let name = if args.file == "-" {
        "<stdin>"
    } else {
        args.file.as_str()
    };
    if args.annotate.is_some() && args.file == "-" {
        anyhow::bail!(
            "--annotate needs a capture file (it is read a second time), not standard input"
        );
    }
    let input = Input::open(&args.file, name)?;
    if args.file == "-" {
        // `tcpdump -w - | tcpdoctor analyze -` then Ctrl-C: the interrupt reaches
        // both; tcpdump stops and closes the pipe, and what was captured is
        // analysed. A second Ctrl-C quits at once.
        let interrupted = std::sync::atomic::AtomicBool::new(false);
        let _ = ctrlc::set_handler(move || {
            if interrupted.swap(true, std::sync::atomic::Ordering::SeqCst) {
                std::process::exit(130);
            }
            eprintln!("tcpdoctor: interrupted; analysing what was read (Ctrl-C again to quit)");
        });
    }
    let (format, link) = (input.format(), input.link_type());
    if let Some(link) = link {
        if !link.is_supported() {
            anyhow::bail!(
                "{name}: link type {} is not supported (supported: Ethernet, Linux cooked SLL/SLL2, raw IPv4/IPv6, BSD loopback)",
                link.to_raw()
            );
        }
    }
    let format = format.to_string();
    let mut engine = Engine::new(Options {
        max_connections: args.max_connections,
        flow: tcpdoctor_diagnose::FlowConfig {
            max_open: usize::try_from(args.max_open_connections).unwrap_or(usize::MAX),
            ..tcpdoctor_diagnose::FlowConfig::default()
        },
        ..Options::default()
    });
    let stopped = input.feed(&mut engine);
    if let Some(e) = stopped {
        if e.kind == ErrorKind::Io || (engine.frames() == 0 && e.kind != ErrorKind::Truncated) {
            anyhow::bail!("{name}: {e}");
        }
        let what = match e.kind {
            ErrorKind::Truncated => "the capture is truncated",
            _ => "the capture is corrupt",
        };
        engine.warn(format!(
            "{name}: {what} at byte {} ({}); the {} packets before it were analysed",
            e.offset,
            e.detail,
            engine.frames()
        ));
    }
    let (analysis, bins) = engine.finish_with_distribution();
    if args.html.is_some() || args.annotate.is_some() {
        html::write(
            &analysis,
            &bins,
            (args.file != "-").then_some(args.file.as_str()),
            name,
            &format,
            &html::Outputs {
                html: args.html.as_deref(),
                annotate: args.annotate.as_deref(),
            },
        )?;
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match args.format {
        Format::Json => tcpdoctor_report::json_stamped(
            &analysis,
            "analyze",
            serde_json::json!({"file": args.file, "capture_format": format,
                               "max_open_connections": args.max_open_connections}),
            &mut out,
        )?,
        Format::Text => {
            use std::io::IsTerminal;
            let tty = io::stdout().is_terminal();
            // COLUMNS first; on a terminal, its width; else 100.
            let width = std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.parse::<usize>().ok())
                .or_else(|| {
                    tty.then(terminal_size::terminal_size)
                        .flatten()
                        .map(|(w, _)| usize::from(w.0))
                })
                .unwrap_or(100)
                .clamp(60, 200);
            tcpdoctor_report::text_styled(
                &analysis,
                name,
                &format,
                TextOptions {
                    connections: args.connections,
                    width,
                },
                tcpdoctor_report::Style::from_env(tty, |k| std::env::var(k).ok()),
                &mut out,
            )?
        }
    }
    out.flush()?;
    if args.fail_on_finding && !analysis.findings.is_empty() {
        return Ok(EXIT_FINDING);
    }
    Ok(EXIT_OK)
}
