//! `tcpdoctor man`: one manual page per command (`tcpdoctor(1)`,
//! `tcpdoctor-analyze(1)`, `tcpdoctor-lab-run(1)`…), from the same
//! definitions as `--help`.
//!
//! Each page has NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXIT STATUS,
//! EXAMPLES and SEE ALSO. The help text after the options is split into
//! those: its `Examples:` block becomes EXAMPLES, its `Exit status:` text
//! EXIT STATUS, the rest DESCRIPTION, a block with a heading (`Flags, …:`)
//! its own subsection. Indented lines (examples, flag tables, schemas) are
//! kept as written (no-fill), prose is filled. Characters outside ASCII are
//! written as groff's `\[uXXXX]`, so `groff -man -ww` has nothing to warn
//! about.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use clap::Command;

/// A command's pages: its own and its subcommands', with their names
/// (`tcpdoctor-lab-run`).
pub fn pages(root: &Command) -> Vec<(String, String)> {
    // Built, the arguments know how many values they take and their
    // possible values.
    let mut root = root.clone();
    root.build();
    let mut out = Vec::new();
    walk(&root, &root, &[], &mut out);
    out
}

/// `cmd`'s page and its subcommands', under `root` (built).
fn walk(root: &Command, cmd: &Command, path: &[String], out: &mut Vec<(String, String)>) {
    let mut names: Vec<String> = path.to_vec();
    if !path.is_empty() || cmd.get_name() != "tcpdoctor" {
        names.push(cmd.get_name().to_string());
    }
    let name = page_name(&names);
    out.push((name, page(root, cmd, &names)));
    for sub in visible(cmd) {
        walk(root, sub, &names, out);
    }
}

fn visible(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
}

/// `tcpdoctor`, `tcpdoctor-analyze`, `tcpdoctor-lab-run`.
fn page_name(path: &[String]) -> String {
    std::iter::once("tcpdoctor".to_string())
        .chain(path.iter().cloned())
        .collect::<Vec<_>>()
        .join("-")
}

/// Writes the page of the command named by `path` (empty: `tcpdoctor`) on
/// standard output, or with `dir`, every page into it as NAME.1. A path that
/// names no page is an error that lists the pages.
pub fn run(root: &Command, path: &[String], dir: Option<&Path>) -> io::Result<()> {
    let all = pages(root);
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)?;
        for (name, text) in &all {
            std::fs::write(dir.join(format!("{name}.1")), text)?;
        }
        eprintln!(
            "tcpdoctor: {} manual pages written to {}",
            all.len(),
            dir.display()
        );
        return Ok(());
    }
    let want = page_name(path);
    let Some((_, text)) = all.iter().find(|(n, _)| *n == want) else {
        let names: Vec<&str> = all
            .iter()
            .map(|(n, _)| n.strip_prefix("tcpdoctor-").unwrap_or(n))
            .collect();
        return Err(io::Error::other(format!(
            "no manual page for '{}': pages are {}",
            path.join(" "),
            names.join(", ")
        )));
    };
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The help text after the options, split by where it goes.
#[derive(Default)]
struct Parts {
    description: Vec<Block>,
    exit_status: Vec<String>,
    examples: Vec<String>,
}

struct Block {
    heading: Option<String>,
    lines: Vec<String>,
}

fn split_help(text: &str) -> Parts {
    let mut parts = Parts::default();
    for raw in text.split("\n\n") {
        let mut lines: Vec<String> = raw.lines().map(str::to_string).collect();
        if lines.iter().all(|l| l.trim().is_empty()) {
            continue;
        }
        let first = lines[0].clone();
        let headed = !first.starts_with(' ') && first.trim_end().ends_with(':');
        if headed
            && ["Examples:", "Install:", "Start with:"]
                .iter()
                .any(|h| first.starts_with(h))
        {
            parts.examples.extend(lines.drain(1..));
            continue;
        }
        // "Exit status: …" starts a block or ends one ("Needs root. Exit status: …").
        let joined = lines.join("\n");
        if let Some(at) = joined.find("Exit status:") {
            let (before, after) = joined.split_at(at);
            let after = after["Exit status:".len()..].trim();
            if !before.trim().is_empty() {
                parts.description.push(Block {
                    heading: None,
                    lines: before.trim_end().lines().map(str::to_string).collect(),
                });
            }
            parts
                .exit_status
                .push(after.split_whitespace().collect::<Vec<_>>().join(" "));
            continue;
        }
        if headed && lines.len() > 1 {
            let heading = first.trim_end().trim_end_matches(':').to_string();
            parts.description.push(Block {
                heading: Some(heading),
                lines: lines.drain(1..).collect(),
            });
        } else {
            parts.description.push(Block {
                heading: None,
                lines,
            });
        }
    }
    parts
}

fn page(root: &Command, cmd: &Command, path: &[String]) -> String {
    let name = page_name(path);
    let spaced = std::iter::once("tcpdoctor".to_string())
        .chain(path.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
    let help = cmd
        .get_after_help()
        .map(|h| h.to_string())
        .unwrap_or_default();
    let mut parts = split_help(&help);
    if parts.examples.is_empty() && !path.is_empty() {
        parts.examples = parent_examples(root, path);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        ".TH {} 1 \"\" \"tcpdoctor {}\" \"tcpdoctor manual\"",
        name.to_uppercase(),
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(
        s,
        ".SH NAME\n{} \\- {}",
        escape(&name),
        escape(&lower_first(&about))
    );
    s.push_str(&synopsis(cmd, &spaced));
    s.push_str(".SH DESCRIPTION\n");
    let long = cmd
        .get_long_about()
        .map(|a| a.to_string())
        .unwrap_or_else(|| about.clone());
    let _ = writeln!(s, "{}", paragraph(&long));
    for b in &parts.description {
        if let Some(h) = &b.heading {
            let _ = writeln!(s, ".SS \"{}\"", escape(h).replace('"', "\\(dq"));
        } else {
            s.push_str(".PP\n");
        }
        s.push_str(&lines_block(&b.lines));
    }
    let subs: Vec<&Command> = visible(cmd).collect();
    if !subs.is_empty() {
        s.push_str(".SH COMMANDS\n");
        for sub in &subs {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let mut p = path.to_vec();
            p.push(sub.get_name().to_string());
            let stop = if about.ends_with('.') { "" } else { "." };
            let _ = writeln!(
                s,
                ".TP\n\\fB{}\\fR\n{}{stop}\nSee \\fB\\%{}\\fR(1).",
                escape(&format!("{spaced} {}", sub.get_name())),
                escape(&about),
                escape(&page_name(&p))
            );
        }
    }
    s.push_str(&options(cmd));
    s.push_str(".SH \"EXIT STATUS\"\n");
    if parts.exit_status.is_empty() {
        s.push_str("0 done; 2 usage error.\n");
    } else {
        for e in &parts.exit_status {
            let _ = writeln!(s, "{}", paragraph(e));
        }
    }
    s.push_str(".SH EXAMPLES\n");
    if parts.examples.is_empty() {
        let _ = writeln!(
            s,
            ".nf\n.RS 2\n{}\n.RE\n.fi",
            escape(&format!("{spaced} --help"))
        );
    } else {
        s.push_str(&preformatted(&parts.examples));
    }
    s.push_str(".SH \"SEE ALSO\"\n");
    let _ = writeln!(s, "{}", see_also(cmd, path));
    s
}

/// `Reproduce a case…` as a NAME line: `reproduce a case…` (an acronym
/// such as `TCP` is left as it is).
fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match (c.next(), s.chars().nth(1)) {
        (Some(f), Some(n)) if f.is_ascii_uppercase() && !n.is_ascii_uppercase() => {
            f.to_ascii_lowercase().to_string() + c.as_str()
        }
        _ => s.to_string(),
    }
}

/// The parent's examples that run this command (`tcpdoctor lab list`);
/// `root` is built.
fn parent_examples(root: &Command, path: &[String]) -> Vec<String> {
    let mut cmd = root;
    for p in &path[..path.len() - 1] {
        match cmd.find_subcommand(p) {
            Some(c) => cmd = c,
            None => return Vec::new(),
        }
    }
    let spaced = format!("tcpdoctor {}", path.join(" "));
    let help = cmd
        .get_after_help()
        .map(|h| h.to_string())
        .unwrap_or_default();
    split_help(&help)
        .examples
        .into_iter()
        .filter(|l| l.contains(&format!("{spaced} ")) || l.trim_end().ends_with(spaced.as_str()))
        .collect()
}

fn see_also(cmd: &Command, path: &[String]) -> String {
    let mut refs: Vec<String> = Vec::new();
    if !path.is_empty() {
        refs.push("tcpdoctor".into());
        if path.len() > 1 {
            refs.push(page_name(&path[..path.len() - 1]));
        }
    }
    for sub in visible(cmd) {
        let mut p = path.to_vec();
        p.push(sub.get_name().to_string());
        refs.push(page_name(&p));
    }
    let external: &[&str] = match path.first().map(String::as_str) {
        None => &["tcpdump(1)", "tshark(1)", "ss(8)"],
        Some("analyze" | "watch") => &["tcpdump(1)", "tshark(1)", "pcap-filter(7)"],
        Some("diagnose" | "load") => &["wrk(1)", "curl(1)"],
        Some("ping") => &["hping3(8)"],
        Some("trace") => &["traceroute(8)", "mtr(8)"],
        Some("sockets") => &["ss(8)", "tcp(7)"],
        Some("sysctl") => &["sysctl(8)", "ip-route(8)", "tc(8)", "tcp(7)"],
        Some("lab") => &["ip-netns(8)", "tc-netem(8)"],
        _ => &[],
    };
    let mut items: Vec<String> = refs
        .iter()
        .map(|r| format!("\\fB\\%{}\\fR(1)", escape(r)))
        .collect();
    items.extend(external.iter().map(|e| {
        let (n, sec) = e.split_once('(').unwrap_or((e, "1)"));
        format!("\\fB{}\\fR({}", escape(n), sec)
    }));
    items.join(",\n")
}

/// `tcpdoctor analyze [OPTIONS] FILE…`, from the arguments.
fn synopsis(cmd: &Command, spaced: &str) -> String {
    let mut s = String::from(".SH SYNOPSIS\n");
    let mut words = vec![format!("\\fB{}\\fR", escape(spaced))];
    if cmd
        .get_arguments()
        .any(|a| !a.is_positional() && !a.is_hide_set())
    {
        words.push("[\\fIOPTIONS\\fR]".into());
    }
    for a in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let name = a
            .get_value_names()
            .and_then(|v| v.first().map(|n| n.to_string()))
            .unwrap_or_else(|| a.get_id().to_string().to_uppercase());
        let many = a.get_num_args().is_some_and(|n| n.max_values() > 1);
        let word = format!("\\fI{}\\fR{}", escape(&name), if many { "..." } else { "" });
        words.push(if a.is_required_set() {
            word
        } else {
            format!("[{word}]")
        });
    }
    if cmd.has_subcommands() {
        words.push("\\fICOMMAND\\fR".into());
    }
    let _ = writeln!(s, "{}", words.join(" "));
    s
}

fn options(cmd: &Command) -> String {
    let args: Vec<&clap::Arg> = cmd.get_arguments().filter(|a| !a.is_hide_set()).collect();
    if args.is_empty() {
        return String::new();
    }
    let mut s = String::from(".SH OPTIONS\n");
    for a in args {
        let value = a
            .get_value_names()
            .and_then(|v| v.first().map(|n| n.to_string()))
            .unwrap_or_else(|| a.get_id().to_string().to_uppercase());
        let takes = a.get_num_args().is_some_and(|n| n.takes_values()) && !a.is_positional();
        let mut forms = Vec::new();
        if let Some(c) = a.get_short() {
            forms.push(format!("\\fB\\-{}\\fR", escape(&c.to_string())));
        }
        if let Some(l) = a.get_long() {
            forms.push(format!("\\fB\\-\\-{}\\fR", escape(l)));
        }
        if a.is_positional() {
            forms.push(format!("\\fI{}\\fR", escape(&value)));
        }
        let mut head = forms.join(", ");
        if takes {
            let _ = write!(head, " \\fI{}\\fR", escape(&value));
        }
        let help = a
            .get_long_help()
            .or_else(|| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let mut extra = Vec::new();
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() && takes {
            extra.push(format!("Default: {}.", defaults.join(", ")));
        }
        if !a.is_hide_possible_values_set() && takes {
            let values: Vec<String> = a
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect();
            // Unless the help already names them.
            if !values.is_empty() && values.len() <= 16 && !help.contains(values[0].as_str()) {
                extra.push(format!("One of: {}.", values.join(", ")));
            }
        }
        let text = [help, extra.join(" ")]
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(s, ".TP\n{head}\n{}", paragraph(&text));
    }
    s
}

/// A block's lines: prose filled; indented lines (tables, schemas,
/// examples) and lines with words too long to fill (JSON) as written.
fn lines_block(lines: &[String]) -> String {
    let indented = lines.iter().any(|l| l.starts_with(' '));
    let code = lines
        .iter()
        .flat_map(|l| l.split_whitespace())
        .any(|w| w.chars().count() > 40);
    if indented || code {
        preformatted(lines)
    } else {
        format!("{}\n", paragraph(&lines.join(" ")))
    }
}

fn preformatted(lines: &[String]) -> String {
    let mut s = String::from(".nf\n.RS 2\n");
    for l in lines {
        let _ = writeln!(s, "{}", line_safe(&escape(l.trim_end())));
    }
    s.push_str(".RE\n.fi\n");
    s
}

/// Filled text: one input line per sentence-ish chunk, each safe.
fn paragraph(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = String::new();
    let mut line = String::new();
    for w in words {
        if !line.is_empty() && line.len() + 1 + w.len() > 78 {
            let _ = writeln!(out, "{}", line_safe(&line));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&escape(w));
    }
    if !line.is_empty() {
        let _ = write!(out, "{}", line_safe(&line));
    }
    out
}

/// A line that does not start a roff request.
fn line_safe(l: &str) -> String {
    if l.starts_with(['.', '\'']) {
        format!("\\&{l}")
    } else {
        l.to_string()
    }
}

/// Text for roff: backslashes as `\e`, hyphens as `\-` (options stay
/// searchable and copyable), characters outside ASCII as `\[uXXXX]`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            c if c.is_ascii() => out.push(c),
            c => {
                let _ = write!(out, "\\[u{:04X}]", c as u32);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_splits_into_examples_exit_status_and_description() {
        let p = split_help(
            "Examples:\n  tcpdoctor x a\n  tcpdoctor x b\n\nWhat it reads:\n  one   thing\n  two   things\n\nSome prose\nacross lines.\n\nNeeds root. Exit status: 0 done;\n2 usage error.",
        );
        assert_eq!(p.examples, ["  tcpdoctor x a", "  tcpdoctor x b"]);
        assert_eq!(p.exit_status, ["0 done; 2 usage error."]);
        assert_eq!(p.description.len(), 3);
        assert_eq!(p.description[0].heading.as_deref(), Some("What it reads"));
        assert!(p.description[1].heading.is_none());
        assert_eq!(p.description[2].lines, ["Needs root."]);
    }

    #[test]
    fn escapes_leave_nothing_groff_reads_as_a_request() {
        assert_eq!(escape("a\\b-c —"), "a\\eb\\-c \\[u2014]");
        assert_eq!(line_safe(".x"), "\\&.x");
        assert_eq!(lower_first("Reproduce it"), "reproduce it");
        assert_eq!(lower_first("TCP SYN ping"), "TCP SYN ping");
    }
}
