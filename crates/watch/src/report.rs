//! What `tcpdoctor watch` prints: the note it starts with, each interval (a
//! JSON line, or the view, redrawn in place on a terminal) and the full
//! report at the end, text or JSON.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::time::Duration;

use tcpdoctor_report::TextOptions;

use crate::capture::Outcome;
use crate::{view, Interval};

/// How the watch prints.
pub struct Printer {
    /// JSON documents with this `input` member; `None`: text.
    pub json: Option<serde_json::Value>,
    /// Standard output is a terminal: each interval redraws the screen.
    pub tty: bool,
    /// What is watched: the interface, and its filter.
    pub source: String,
}

/// What is watched: `eth0`, `eth0 (port 80)`.
pub fn source(interface: &str, filter: Option<&str>) -> String {
    let mut source = interface.to_string();
    if let Some(f) = filter {
        source.push_str(&format!(" ({f})"));
    }
    source
}

/// The line on standard error as the watch starts: what is watched, where
/// the metrics are served, for how long.
pub fn note(source: &str, served: Option<SocketAddr>, duration: Option<Duration>) -> String {
    let mut note = format!("tcpdoctor: watching {source}");
    if let Some(addr) = served {
        note.push_str(&format!("; metrics at http://{addr}/metrics"));
    }
    match duration {
        Some(d) => note.push_str(&format!(" for {:.0} s", d.as_secs_f64())),
        None => note.push_str("; Ctrl-C for the full report"),
    }
    note
}

/// How the HTML report names the capture: its length, frames and drops.
pub fn html_kind(outcome: &Outcome) -> String {
    format!(
        "live capture, {:.1} s, {} frames, {} dropped by the kernel",
        outcome.elapsed.as_secs_f64(),
        outcome.frames,
        outcome.kernel.dropped
    )
}

impl Printer {
    /// One interval: a JSON line, or the view (after clearing a terminal).
    pub fn interval(&self, out: &mut impl Write, iv: &Interval) -> io::Result<()> {
        match &self.json {
            Some(input) => {
                let mut doc = serde_json::to_value(iv)?;
                tcpdoctor_report::stamp(&mut doc, "watch", input.clone());
                serde_json::to_writer(&mut *out, &doc)?;
                out.write_all(b"\n")?;
            }
            None => {
                if self.tty {
                    // Redraw in place: home, clear.
                    out.write_all(b"\x1b[H\x1b[2J")?;
                }
                out.write_all(view::render(iv, &self.source).as_bytes())?;
                if !self.tty {
                    out.write_all(b"\n")?;
                }
            }
        }
        out.flush()
    }

    /// The full report of the capture: the analysis document, or the text
    /// report (10 connections, `COLUMNS` wide or 100).
    pub fn report(&self, out: &mut impl Write, outcome: &Outcome) -> io::Result<()> {
        let analysis = &outcome.analysis;
        match &self.json {
            Some(input) => tcpdoctor_report::json_stamped(analysis, "watch", input.clone(), out),
            None => {
                if self.tty {
                    out.write_all(b"\x1b[H\x1b[2J")?;
                }
                let width = std::env::var("COLUMNS")
                    .ok()
                    .and_then(|c| c.parse::<usize>().ok())
                    .unwrap_or(100)
                    .clamp(60, 200);
                let name = format!("live capture on {}", self.source);
                let kind = format!(
                    "{:.1} s live, {} frames, {} dropped by the kernel",
                    outcome.elapsed.as_secs_f64(),
                    outcome.frames,
                    outcome.kernel.dropped
                );
                tcpdoctor_report::text(
                    analysis,
                    &name,
                    &kind,
                    TextOptions {
                        connections: 10,
                        width,
                    },
                    out,
                )
            }
        }
    }
}
