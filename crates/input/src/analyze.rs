//! One read of the input(s) through the engine, as `analyze` does it: the
//! link types checked, the engine fed through a [`Selection`], what stopped
//! the reading (an interruption, a truncated or corrupt capture) and what the
//! selection and the merge noticed turned into the report's warnings.

use std::io::{self, Write};

use tcpdoctor_capture::ErrorKind;
use tcpdoctor_engine::model::{Analysis, LatencyBin};
use tcpdoctor_engine::{Engine, FlowConfig, Options};

use crate::{Input, Merger, OneConnection, Selection};

/// What one read of the input(s) gave.
pub struct Pass {
    pub analysis: Analysis,
    pub bins: Vec<LatencyBin>,
    /// The capture's format, as the report names it.
    pub format: String,
    /// Several inputs: the merge, for its report.
    pub merger: Option<Merger>,
    /// With a selection: packets read, packets kept.
    pub counts: Option<(u64, u64)>,
}

/// What a report of a pass says besides the analysis: the files skipped,
/// the selection as given, and the signal that cut the input short.
pub struct Notes<'a> {
    /// Files given that are not captures.
    pub skipped: &'a [String],
    /// Packets were selected (a filter, a time window or one connection).
    pub selected: bool,
    pub filter: Option<&'a str>,
    pub from: Option<&'a str>,
    pub to: Option<&'a str>,
    pub connection: Option<u64>,
    /// The signal that stopped reading before the input's end, named.
    pub interrupted: Option<String>,
}

impl Pass {
    /// The analysis of one connection, found by its number `id` in the
    /// whole capture, keeps that number (in the list and in the evidence).
    pub fn renumber(&mut self, id: u64) {
        let analysis = &mut self.analysis;
        for c in &mut analysis.connections {
            c.id = id;
        }
        for f in analysis
            .findings
            .iter_mut()
            .chain(analysis.minor_findings.iter_mut())
        {
            for e in &mut f.evidence {
                e.connection = id;
            }
        }
    }

    /// Where connection `id` of this (first) pass is, for a second pass that
    /// reads only its packets: its endpoints and its time, a millisecond
    /// either side. `selected`: this pass read a selection (for the error
    /// when there is no such connection).
    pub fn connection(&self, id: u64, selected: bool) -> anyhow::Result<OneConnection> {
        let first = &self.analysis;
        let Some(c) = first.connections.iter().find(|c| c.id == id) else {
            anyhow::bail!(
                "--connection {id}: no such connection ({} in the capture{})",
                first.capture.connections,
                if selected { " as selected" } else { "" }
            );
        };
        let start = first.capture.start_unix * 1e9 + c.start_ms * 1e6;
        // A millisecond either side covers the float rounding of the times.
        Ok(OneConnection {
            client: c.client,
            server: c.server,
            first_ns: (start - 1e6) as i64,
            last_ns: (start + c.duration_ms * 1e6 + 1e6) as i64,
        })
    }

    /// The JSON document's members beside the analysis: `inputs` (a merge),
    /// `skipped_files`, `interrupted` and `selection`.
    pub fn json_extras(
        &self,
        notes: &Notes<'_>,
    ) -> serde_json::Result<Vec<(&'static str, serde_json::Value)>> {
        let analysis = &self.analysis;
        let mut extra = Vec::new();
        if let Some(m) = &self.merger {
            extra.push(("inputs", serde_json::to_value(m.report(analysis))?));
        }
        if !notes.skipped.is_empty() {
            extra.push(("skipped_files", serde_json::json!(notes.skipped)));
        }
        if let Some(sig) = &notes.interrupted {
            extra.push((
                "interrupted",
                serde_json::json!({"signal": sig, "partial": true,
                                   "packets_read": analysis.capture.packets}),
            ));
        }
        if notes.selected {
            let counts = self.counts;
            extra.push((
                "selection",
                serde_json::json!({
                    "filter": notes.filter,
                    "from": notes.from,
                    "to": notes.to,
                    "connection": notes.connection,
                    "packets_read": counts.map(|c| c.0),
                    "packets_selected": counts.map(|c| c.1),
                }),
            ));
        }
        Ok(extra)
    }

    /// What the text report says after the analysis: the merge's `INPUTS`,
    /// the files `SKIPPED`, the `SELECTION` and how many packets it kept.
    pub fn text_notes(&self, notes: &Notes<'_>, out: &mut impl Write) -> io::Result<()> {
        if let Some(m) = &self.merger {
            m.report(&self.analysis).text(&mut *out)?;
        }
        let skipped = notes.skipped;
        if !skipped.is_empty() {
            writeln!(
                out,
                "\nSKIPPED  {} file{} not a capture: {}",
                skipped.len(),
                if skipped.len() == 1 { "" } else { "s" },
                skipped.join(", ")
            )?;
        }
        if let Some((read, kept)) = self.counts {
            let mut what = Vec::new();
            if let Some(f) = notes.filter {
                what.push(format!("filter '{f}'"));
            }
            if let Some(t) = notes.from {
                what.push(format!("from {t}"));
            }
            if let Some(t) = notes.to {
                what.push(format!("to {t}"));
            }
            if let Some(id) = notes.connection {
                what.push(format!("connection {id}"));
            }
            writeln!(
                out,
                "\nSELECTION  {}: {kept} of {read} packets analysed (frame numbers count these)",
                what.join(", ")
            )?;
        }
        Ok(())
    }
}

/// How a pass analyses.
pub struct PassOptions<'a> {
    /// Connections kept for the JSON `connections` list.
    pub max_connections: usize,
    /// Connections tracked at once, at most.
    pub max_open_connections: u64,
    /// The time window as given (`--from`, `--to`), for a selection that kept nothing.
    pub from: Option<&'a str>,
    pub to: Option<&'a str>,
}

/// Reads `input` (named `name` in messages) through an engine. `cut` tells,
/// once reading has ended, whether a signal stopped it before the input's
/// end, and names the signal: the report then says it is partial. A capture
/// of an unsupported link type, an I/O error, or one that breaks before its
/// first packet without a selection, is an error; a capture that breaks
/// later is analysed up to the break, with a warning.
pub fn pass(
    input: Input,
    name: &str,
    selection: Selection,
    opts: &PassOptions<'_>,
    cut: impl FnOnce() -> Option<String>,
) -> anyhow::Result<Pass> {
    for link in input.link_types() {
        if !link.is_supported() {
            anyhow::bail!(
                "{name}: link type {} is not supported (supported: Ethernet, Linux cooked SLL/SLL2, raw IPv4/IPv6, BSD loopback)",
                link.to_raw()
            );
        }
    }
    let format = input.format();
    let selected = !selection.is_empty();
    let mut engine = Engine::new(Options {
        max_connections: opts.max_connections,
        flow: FlowConfig {
            max_open: usize::try_from(opts.max_open_connections).unwrap_or(usize::MAX),
            ..FlowConfig::default()
        },
        ..Options::default()
    });
    let mut fed = input.feed(&mut engine, selection);
    let cut = cut();
    if let Some(sig) = &cut {
        engine.warn(format!(
            "{name}: interrupted by {} after {} packets: a partial report of what was read \
             (the input went on)",
            sig,
            engine.frames()
        ));
    }
    if let Some(e) = fed.stopped.take().filter(|_| cut.is_none()) {
        if e.kind == ErrorKind::Io
            || (engine.frames() == 0 && e.kind != ErrorKind::Truncated && !selected)
        {
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
    // The time window as given, for a selection that kept nothing.
    let window = (opts.from.is_some() || opts.to.is_some()).then(|| {
        [("from", &opts.from), ("to", &opts.to)]
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
            .collect::<Vec<_>>()
            .join(" ")
    });
    for w in fed.warnings(window.as_deref()) {
        engine.warn(w);
    }
    let (analysis, bins) = engine.finish_with_distribution();
    Ok(Pass {
        analysis,
        bins,
        format,
        merger: fed.merger,
        counts: fed.selected,
    })
}
