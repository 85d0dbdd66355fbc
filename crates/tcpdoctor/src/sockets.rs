//! `tcpdoctor sockets`: the live TCP sockets of this network namespace, who
//! holds them, their options, flagged (the work is in `tcpdoctor-sockets`).

use std::io::{self, BufWriter, Write};

use tcpdoctor_sockets::text::{self, TextOptions};
use tcpdoctor_sockets::{Query, State};

use crate::{Format, EXIT_FINDING, EXIT_OK};

pub const HELP: &str = include_str!("../help/sockets.txt");

#[derive(clap::Args)]
pub struct SocketsArgs {
    /// Only sockets with this local or remote port.
    #[arg(long, value_name = "PORT")]
    port: Option<u16>,
    /// Only sockets held by this process.
    #[arg(long, value_name = "PID")]
    pid: Option<u32>,
    /// Only sockets in this state (repeatable): listen, established, syn-sent, syn-recv,
    /// fin-wait-1, fin-wait-2, time-wait, closed, close-wait, last-ack, closing; or
    /// `connected` (all but listen and closed), `all`.
    #[arg(long, value_name = "STATE", value_parser = StateParser)]
    state: Vec<u32>,
    /// Output format: `text` for people, `json` for machines (schema below).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Sockets listed per group in the text view, worst first.
    #[arg(long, default_value_t = 3, value_name = "N")]
    worst: usize,
    /// Exit with status 1 when any socket is flagged (for scripts).
    #[arg(long)]
    fail_on_flag: bool,
}

/// `--state`: [`parse_states`], with the names for shell completion.
#[derive(Clone)]
struct StateParser;

impl clap::builder::TypedValueParser for StateParser {
    type Value = u32;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<u32, clap::Error> {
        let v = value.to_string_lossy();
        parse_states(&v).map_err(|why| {
            let arg = arg
                .map(|a| a.to_string())
                .unwrap_or_else(|| "--state".into());
            clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                format!("invalid value '{v}' for '{arg}': {why}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            State::ALL
                .iter()
                .map(|s| s.name())
                .chain(["connected", "all"])
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

/// A `--state` value as `idiag_states` bits.
fn parse_states(v: &str) -> Result<u32, String> {
    match v.to_ascii_lowercase().as_str() {
        "all" => return Ok(u32::MAX),
        "connected" => {
            return Ok(State::ALL
                .into_iter()
                .filter(|s| !matches!(s, State::Listen | State::Closed))
                .fold(0, |m, s| m | s.mask()))
        }
        _ => {}
    }
    State::parse(v).map(State::mask).ok_or_else(|| {
        let names: Vec<&str> = State::ALL.iter().map(|s| s.name()).collect();
        format!(
            "unknown TCP state {v:?}: expected one of {}, connected, all",
            names.join(", ")
        )
    })
}

pub fn run(args: &SocketsArgs) -> anyhow::Result<u8> {
    if let Some(pid) = args.pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            anyhow::bail!("--pid {pid}: no such process");
        }
    }
    let query = Query {
        states: if args.state.is_empty() {
            u32::MAX
        } else {
            args.state.iter().fold(0, |m, s| m | s)
        },
        port: args.port,
        pid: args.pid,
        owners_only: false,
    };
    let snap = tcpdoctor_sockets::snapshot(&query)
        .map_err(|e| anyhow::anyhow!("reading sockets over netlink (sock_diag): {e}"))?;
    let mut out = BufWriter::with_capacity(256 * 1024, io::stdout().lock());
    match args.format {
        Format::Json => {
            let mut doc = serde_json::to_value(&snap)?;
            tcpdoctor_report::stamp(
                &mut doc,
                "sockets",
                serde_json::json!({"port": args.port, "pid": args.pid}),
            );
            serde_json::to_writer(&mut out, &doc)?;
            writeln!(out)?;
        }
        Format::Text => {
            use std::io::IsTerminal;
            let width = crate::width(io::stdout().is_terminal()).clamp(40, 400);
            text::render(
                &snap,
                TextOptions {
                    worst: args.worst,
                    width,
                },
                &mut out,
            )?
        }
    }
    out.flush()?;
    let flagged = snap.sockets.iter().any(|s| !s.flags.is_empty());
    Ok(if args.fail_on_flag && flagged {
        EXIT_FINDING
    } else {
        EXIT_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_as_ss_names_them() {
        assert_eq!(parse_states("established"), Ok(1 << 1));
        assert_eq!(parse_states("LISTEN"), Ok(1 << 10));
        assert_eq!(parse_states("listening"), Ok(1 << 10));
        assert_eq!(parse_states("syn-recv"), Ok((1 << 3) | (1 << 12)));
        assert_eq!(parse_states("time-wait"), Ok(1 << 6));
        assert_eq!(parse_states("all"), Ok(u32::MAX));
        let connected = parse_states("connected").expect("a group");
        assert_eq!(connected & (1 << 10), 0);
        assert_ne!(connected & (1 << 1), 0);
        let err = parse_states("bogus").expect_err("refused");
        assert!(
            err.contains("bogus") && err.contains("established"),
            "{err}"
        );
    }
}
