//! The report for people: grouped, one `name = value` line per setting with
//! its meaning, and under each suspicious value the reason and the fix.

use std::fmt::Write as _;

use crate::settings::Group;
use crate::{Finding, Report, Severity};

#[derive(Debug, Clone, Copy)]
pub struct TextOptions {
    /// Wrap long lines at this many columns.
    pub width: usize,
    /// ANSI colour for WARN and note tags.
    pub color: bool,
    /// Also the assessment of values that are fine (window sizes, timeouts).
    pub verbose: bool,
}

impl Default for TextOptions {
    fn default() -> TextOptions {
        TextOptions {
            width: 100,
            color: false,
            verbose: false,
        }
    }
}

/// Column where a setting's meaning starts.
const MEANING_COLUMN: usize = 48;

pub fn render(r: &Report, o: TextOptions) -> String {
    let mut out = String::new();
    let mut ns = r.namespace.clone();
    if let Some(n) = &r.namespace_name {
        ns.push_str(&format!(" (ip netns {n})"));
    }
    match r.initial_namespace {
        Some(true) => ns.push_str(", the host's"),
        Some(false) => ns.push_str(", not the host's"),
        None => {}
    }
    let kernel = r
        .kernel
        .as_deref()
        .map(|k| format!(", Linux {k}"))
        .unwrap_or_default();
    let _ = writeln!(out, "tcpdoctor sysctl: network namespace {ns}{kernel}");
    let _ = writeln!(
        out,
        "summary    {} warn, {} note{}",
        r.summary.warn,
        r.summary.note,
        if r.summary.warn + r.summary.note > 0 {
            "; each says why, and the fix"
        } else {
            ""
        }
    );
    for e in &r.errors {
        let _ = writeln!(out, "error      {e}");
    }

    for g in Group::ALL {
        let _ = writeln!(out, "\n{}", g.label().to_uppercase());
        for s in r.settings.iter().filter(|s| s.group == g) {
            let value = s.value.as_deref().unwrap_or("(absent)");
            let head = format!("  {} = {value}", s.name);
            line_with_meaning(&mut out, &head, s.meaning, o.width);
            let show = s.severity != Severity::Ok || o.verbose || s.value.is_none();
            if let (true, Some(j)) = (show, &s.judgement) {
                tagged(&mut out, s.severity, j, o);
            }
            if let Some(f) = &s.fix {
                fix(&mut out, f, o);
            }
        }
    }

    let _ = writeln!(
        out,
        "\nPER-ROUTE   metrics set on routes (all tables but local); unset means initcwnd 10, rto_min 200 ms"
    );
    if r.routes.is_empty() {
        let _ = writeln!(out, "  (no routes)");
    }
    for rt in &r.routes {
        let fam = if rt.family == "inet6" { "-6 " } else { "" };
        let _ = writeln!(out, "  {fam}{}", rt.spec);
        findings(&mut out, &rt.findings, o);
    }

    let _ = writeln!(
        out,
        "\nPER-INTERFACE QDISC   a shaper's queue is delay by design"
    );
    if r.qdiscs.is_empty() {
        let _ = writeln!(out, "  (no qdiscs)");
    }
    for q in &r.qdiscs {
        let mut head = format!("  {:<10} {}", q.dev, q.kind);
        if q.parent != "root" {
            head.push_str(&format!(" ({} {})", q.parent, q.handle));
        }
        if let Some(t) = q.tbf {
            head.push_str(&format!(
                " rate {} burst {} limit {} (≈ {} ms)",
                crate::units::rate(t.rate_bits_per_s as f64),
                crate::units::bytes(t.burst_bytes),
                crate::units::bytes(u64::from(t.limit_bytes)),
                crate::units::short(t.latency_ms)
            ));
        }
        line_with_meaning(&mut out, &head, q.meaning, o.width);
        findings(&mut out, &q.findings, o);
    }
    out
}

fn findings(out: &mut String, fs: &[Finding], o: TextOptions) {
    for f in fs {
        tagged(out, f.severity, &f.judgement, o);
        if let Some(x) = &f.fix {
            fix(out, x, o);
        }
    }
}

/// `head` then the meaning at MEANING_COLUMN, or on the next line when it
/// would not fit.
fn line_with_meaning(out: &mut String, head: &str, meaning: &str, width: usize) {
    if meaning.is_empty() {
        let _ = writeln!(out, "{head}");
        return;
    }
    let used = head.chars().count();
    if used + 2 <= MEANING_COLUMN {
        let pad = MEANING_COLUMN - used;
        wrap_into(
            out,
            &format!("{head}{}", " ".repeat(pad)),
            meaning,
            MEANING_COLUMN,
            width,
        );
    } else {
        let _ = writeln!(out, "{head}");
        wrap_into(
            out,
            &" ".repeat(MEANING_COLUMN),
            meaning,
            MEANING_COLUMN,
            width,
        );
    }
}

fn tagged(out: &mut String, sev: Severity, text: &str, o: TextOptions) {
    let label = format!("{:<5}", sev.label());
    let tag = match (o.color, sev) {
        (true, Severity::Warn) => format!("\x1b[1;31m{label}\x1b[0m"),
        (true, Severity::Note) => format!("\x1b[33m{label}\x1b[0m"),
        _ => label,
    };
    wrap_into(out, &format!("    {tag} "), text, 10, o.width);
}

fn fix(out: &mut String, command: &str, o: TextOptions) {
    let tag = if o.color {
        "\x1b[1mfix\x1b[0m  ".to_string()
    } else {
        "fix  ".to_string()
    };
    // Commands are not wrapped: they must stay copyable.
    let _ = writeln!(out, "    {tag} {command}");
}

/// Writes `prefix` then `text` wrapped at `width`, continuation lines
/// indented by `indent` columns.
fn wrap_into(out: &mut String, prefix: &str, text: &str, indent: usize, width: usize) {
    let room = width.saturating_sub(indent).max(30);
    let mut line = String::new();
    let mut first = true;
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > room {
            emit(out, prefix, indent, first, &line);
            first = false;
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    emit(out, prefix, indent, first, &line);
}

fn emit(out: &mut String, prefix: &str, indent: usize, first: bool, line: &str) {
    if first {
        let _ = writeln!(out, "{prefix}{line}");
    } else {
        let _ = writeln!(out, "{}{line}", " ".repeat(indent));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Snapshot;
    use crate::{build, Namespace, Observed};

    #[test]
    fn warnings_carry_reason_and_fix() {
        let mut snapshot =
            Snapshot::from_pairs([("net.ipv4.tcp_sack", "0"), ("net.core.somaxconn", "4096")]);
        snapshot.namespace = Namespace {
            id: "net:[4026532177]".into(),
            name: Some("web".into()),
            initial: Some(false),
        };
        let r = build(&Observed {
            snapshot,
            release: Some("6.18.44".into()),
            ..Observed::default()
        });
        let t = render(&r, TextOptions::default());
        assert!(t.starts_with(
            "tcpdoctor sysctl: network namespace net:[4026532177] (ip netns web), not the host's, Linux 6.18.44\n"
        ));
        assert!(t.contains("\n  net.ipv4.tcp_sack = 0 "));
        assert!(t.contains("\n    WARN  SACK is off"));
        assert!(t.contains("\n    fix   ip netns exec web sysctl -w net.ipv4.tcp_sack=1\n"));
        // A fine value: its line, no judgement unless verbose.
        assert!(t.contains("\n  net.core.somaxconn = 4096 "));
        assert!(!t.contains("listen() backlogs up to 4096"));
        let v = render(
            &r,
            TextOptions {
                verbose: true,
                ..TextOptions::default()
            },
        );
        assert!(v.contains("listen() backlogs up to 4096"));
        for l in t.lines().filter(|l| !l.contains(" fix ")) {
            assert!(l.chars().count() <= 100, "too long: {l}");
        }
        for g in [
            "BUFFERS & WINDOWS",
            "LOSS RECOVERY & TIMERS",
            "QUEUES & BACKLOG",
            "CONGESTION",
            "PER-ROUTE",
            "PER-INTERFACE QDISC",
        ] {
            assert!(t.contains(g), "{g}");
        }
    }

    #[test]
    fn wrapping_keeps_words_whole() {
        let mut s = String::new();
        wrap_into(&mut s, "> ", "aaa bbb ccc ddd", 2, 39);
        assert_eq!(s, "> aaa bbb ccc ddd\n");
        let mut s = String::new();
        let long = "word ".repeat(20);
        wrap_into(&mut s, "> ", &long, 2, 32);
        assert!(s.lines().count() > 2);
        assert!(s.lines().skip(1).all(|l| l.starts_with("  w")));
    }
}
