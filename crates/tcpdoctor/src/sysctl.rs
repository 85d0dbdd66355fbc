//! `tcpdoctor sysctl`: the kernel settings that bound TCP latency and windows
//! in this network namespace (the work is in `tcpdoctor-sysctl`).

use std::io::{self, BufWriter, IsTerminal, Write};

use tcpdoctor_sysctl::text::TextOptions;

use crate::{Format, EXIT_OK};

pub const HELP: &str = include_str!("../help/sysctl.txt");

#[derive(clap::Args)]
pub struct SysctlArgs {
    /// Output format: `text` for people, `json` for machines.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Text: also the assessment of values that are fine (window sizes, timeouts).
    #[arg(short, long)]
    verbose: bool,
    /// Exit with status 1 when any value is judged WARN (for scripts and CI).
    #[arg(long)]
    fail_on_warn: bool,
}

pub fn run(args: &SysctlArgs) -> anyhow::Result<u8> {
    let report = tcpdoctor_sysctl::read();
    for e in &report.errors {
        eprintln!("tcpdoctor: could not read {e}");
    }
    let stdout = io::stdout();
    let color = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut out = BufWriter::new(stdout.lock());
    match args.format {
        Format::Json => {
            let mut doc = serde_json::to_value(&report)?;
            tcpdoctor_report::stamp(&mut doc, "sysctl", serde_json::json!({}));
            serde_json::to_writer(&mut out, &doc)?;
            out.write_all(b"\n")?;
        }
        Format::Text => {
            let width = std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.parse::<usize>().ok())
                .unwrap_or(100)
                .clamp(60, 200);
            let text = tcpdoctor_sysctl::text::render(
                &report,
                TextOptions {
                    width,
                    color,
                    verbose: args.verbose,
                },
            );
            out.write_all(text.as_bytes())?;
        }
    }
    out.flush()?;
    if args.fail_on_warn && report.summary.warn > 0 {
        return Ok(crate::EXIT_FINDING);
    }
    Ok(EXIT_OK)
}
