//! `tcpdoctor load`: HTTP load with a latency distribution: its arguments and
//! exit status (the work, and what it prints, are `tcpdoctor-load`'s).

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tcpdoctor_load::{report, Config, Live, RequestSpec, Target};

use crate::Format;

pub const HELP: &str = include_str!("../help/load.txt");

#[derive(clap::Args)]
pub struct LoadArgs {
    /// Target URL: http[s]://host[:port][/path] (IPv6: http://[::1]:8080/).
    url: String,
    /// Connections to keep open.
    #[arg(short = 'c', long, default_value_t = 10, value_name = "N")]
    connections: usize,
    /// Threads (one event loop each).
    #[arg(short = 't', long, default_value_t = 2, value_name = "N")]
    threads: usize,
    /// Duration of the run: 10s, 500ms, 2m.
    #[arg(short = 'd', long, default_value = "10s", value_parser = parse_duration, value_name = "TIME")]
    duration: Duration,
    /// Requests per second over all connections (open model, corrects coordinated omission).
    #[arg(short = 'R', long, value_name = "RPS")]
    rate: Option<f64>,
    /// Time without a response before a request counts as a timeout.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "TIME")]
    timeout: Duration,
    #[command(flatten)]
    request: RequestArgs,
    /// Accepted for wrk's command lines: the latency distribution is always printed.
    #[arg(long, hide = true)]
    latency: bool,
    /// A new connection for every request (`Connection: close`); latency then includes the handshake.
    #[arg(long)]
    no_keepalive: bool,
    /// Output format: `text` (wrk-like) or `json`.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[command(flatten)]
    tls: crate::tls::TlsArgs,
}

/// A time as its number and the unit after it (`35ms`: 35 and `ms`); `None`
/// when the number does not parse.
pub fn number_and_unit(s: &str) -> Option<(f64, &str)> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    Some((num.parse().ok()?, unit))
}

/// `10s`, `500ms`, `2m`, `1h`, `1.5s`, plain seconds, or hping3's `u100000` (microseconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Some(us) = s.strip_prefix('u') {
        if let Ok(us) = us.parse::<u64>() {
            return Ok(Duration::from_micros(us));
        }
    }
    let (n, unit) = number_and_unit(s)
        .ok_or_else(|| format!("{s:?} is not a duration (examples: 10s, 500ms, 2m)"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "us" | "µs" => n / 1e6,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is out of range"))
}

/// The request of `load` and `diagnose`: method, headers, body.
#[derive(clap::Args, Debug, Clone)]
pub struct RequestArgs {
    /// Extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Request method (curl's -X; -m is kept for old scripts).
    #[arg(short = 'X', short_alias = 'm', long, default_value = "GET")]
    pub method: String,
    /// Request body; `@FILE` reads it from a file.
    #[arg(long, value_name = "BODY")]
    pub body: Option<String>,
}

impl RequestArgs {
    /// The request to send (`--body @FILE` read now).
    pub fn spec(&self) -> anyhow::Result<RequestSpec> {
        Ok(RequestSpec {
            method: self.method.clone(),
            headers: self.headers.clone(),
            body: read_body(self.body.as_deref())?,
            close: false,
        })
    }
}

/// `--body`: the text itself, or `@FILE` for a file's bytes.
fn read_body(body: Option<&str>) -> anyhow::Result<Vec<u8>> {
    Ok(match body {
        None => Vec::new(),
        Some(b) => match b.strip_prefix('@') {
            Some(path) => {
                std::fs::read(path).map_err(|e| anyhow::anyhow!(format!("--body @{path}: {e}")))?
            }
            None => b.as_bytes().to_vec(),
        },
    })
}

pub fn run(args: &LoadArgs) -> anyhow::Result<u8> {
    let target = Target::parse(&args.url).map_err(|e| anyhow::anyhow!(e.to_string()))?;
    let config = Config {
        connections: args.connections,
        threads: args.threads,
        duration: args.duration,
        rate: args.rate,
        timeout: args.timeout,
        keepalive: !args.no_keepalive,
        tls: args.tls.options(),
        ..Config::new(target, args.request.spec()?)
    };
    // Validate before printing the banner.
    tcpdoctor_load::build_request(&config.target, &config.request)
        .map_err(|e| anyhow::anyhow!(e.to_string()))?;
    if config.connections == 0 || config.threads == 0 {
        anyhow::bail!("-c and -t must be at least 1");
    }
    if config.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        anyhow::bail!("--rate must be above 0");
    }
    if matches!(args.format, Format::Text) {
        let mut out = io::stdout().lock();
        report::banner(&mut out, &config)?;
        out.flush()?;
    }
    let live = Arc::new(Live::default());
    {
        let live = Arc::clone(&live);
        let _ = ctrlc::set_handler(move || live.stop());
    }
    let done = AtomicBool::new(false);
    let report = std::thread::scope(|s| {
        if io::stderr().is_terminal() {
            s.spawn(|| report::progress(&live, &done, config.duration));
        }
        let r = tcpdoctor_load::run(&config, &live);
        done.store(true, Ordering::Relaxed);
        r
    })
    .map_err(|e| match e {
        tcpdoctor_load::LoadError::Config(m) => anyhow::anyhow!(m),
        e => anyhow::anyhow!(e),
    })?;
    let mut out = io::stdout().lock();
    match args.format {
        Format::Text => {
            report::text(&report, &mut out)?;
        }
        Format::Json => {
            let mut doc = report::json(&report);
            tcpdoctor_report::stamp(
                &mut doc,
                "load",
                serde_json::json!({
                    "url": args.url, "connections": args.connections, "threads": args.threads,
                    "duration_s": args.duration.as_secs_f64(), "rate": args.rate,
                    "timeout_s": args.timeout.as_secs_f64(), "method": args.request.method,
                    "headers": args.request.headers, "keepalive": !args.no_keepalive,
                }),
            );
            serde_json::to_writer(&mut out, &doc)?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    if report.requests == 0 {
        if let Some(e) = &report.tls_error {
            // Nothing got through TLS (e.g. a certificate not trusted): a setup problem.
            anyhow::bail!("{}: {e}", report.url);
        }
        return Ok(1);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("u100000"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5d").is_err());
    }
}
