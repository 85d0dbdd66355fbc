//! How the text report meets a terminal: colour for the finding headlines
//! on a TTY (never with `NO_COLOR` set, or `TERM=dumb`), ASCII where the
//! locale is not UTF-8, and control characters from packets shown escaped.

use std::io::{self, Write};

use tcpdoctor_engine::model::Analysis;

use crate::TextOptions;

/// Terminal treatment of the text report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// ANSI bold red for finding headlines.
    pub color: bool,
    /// Only ASCII characters (`·` becomes `-`, `—` `--`, `µ` `u`…).
    pub ascii: bool,
}

impl Style {
    /// From the environment: colour on a TTY unless `NO_COLOR` is set
    /// (https://no-color.org) or `TERM=dumb`; ASCII when the first of
    /// `LC_ALL`, `LC_CTYPE`, `LANG` that is set names no UTF-8 charset (an
    /// unset locale keeps UTF-8).
    pub fn from_env(is_tty: bool, var: impl Fn(&str) -> Option<String>) -> Style {
        let set = |k: &str| var(k).filter(|v| !v.is_empty());
        let color = is_tty && set("NO_COLOR").is_none() && set("TERM").as_deref() != Some("dumb");
        let ascii = ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .find_map(|k| set(k))
            .is_some_and(|l| {
                let l = l.to_ascii_lowercase();
                !(l.contains("utf-8") || l.contains("utf8"))
            });
        Style { color, ascii }
    }
}

/// [`crate::text`] with a [`Style`]. With the default style the output is
/// `text`'s, except that control characters (terminal escapes from packets)
/// are shown as `\xNN`.
pub fn text_styled(
    a: &Analysis,
    source: &str,
    format: &str,
    opts: TextOptions,
    style: Style,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(16 * 1024);
    crate::text(a, source, format, opts, &mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    for line in text.lines() {
        let mut l = escape_controls(line);
        if style.ascii {
            l = to_ascii(&l);
        }
        if style.color && is_headline(&l) {
            writeln!(out, "\x1b[1;31m{l}\x1b[0m")?;
        } else {
            writeln!(out, "{l}")?;
        }
    }
    Ok(())
}

/// `1. nagle_delayed_ack — …`: a finding's first line.
fn is_headline(l: &str) -> bool {
    let digits = l.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && l[digits..].starts_with(". ")
}

fn escape_controls(l: &str) -> String {
    let mut o = String::with_capacity(l.len());
    for c in l.chars() {
        if c.is_control() {
            o.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            o.push(c);
        }
    }
    o
}

fn to_ascii(l: &str) -> String {
    let mut o = String::with_capacity(l.len());
    for c in l.chars() {
        match c {
            c if c.is_ascii() => o.push(c),
            '·' => o.push('-'),
            '—' | '–' => o.push_str("--"),
            'µ' | 'μ' => o.push('u'),
            '…' => o.push_str("..."),
            '×' => o.push('x'),
            '→' => o.push_str("->"),
            '←' => o.push_str("<-"),
            '≤' => o.push_str("<="),
            '≥' => o.push_str(">="),
            '±' => o.push_str("+/-"),
            '§' => o.push('S'),
            '‘' | '’' => o.push('\''),
            '“' | '”' => o.push('"'),
            _ => o.push('?'),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|v| v.0 == k).map(|v| v.1.to_string())
    }

    #[test]
    fn colour_only_on_a_tty_without_no_color() {
        assert!(Style::from_env(true, env(&[])).color);
        assert!(!Style::from_env(false, env(&[])).color);
        assert!(!Style::from_env(true, env(&[("NO_COLOR", "1")])).color);
        assert!(Style::from_env(true, env(&[("NO_COLOR", "")])).color);
        assert!(!Style::from_env(true, env(&[("TERM", "dumb")])).color);
    }

    #[test]
    fn ascii_when_the_locale_is_not_utf8() {
        assert!(!Style::from_env(false, env(&[])).ascii);
        assert!(!Style::from_env(false, env(&[("LANG", "en_US.UTF-8")])).ascii);
        assert!(Style::from_env(false, env(&[("LC_ALL", "C"), ("LANG", "en_US.UTF-8")])).ascii);
        assert!(!Style::from_env(false, env(&[("LC_CTYPE", "C.utf8"), ("LANG", "C")])).ascii);
        assert!(Style::from_env(false, env(&[("LANG", "POSIX")])).ascii);
    }

    #[test]
    fn lines_transformed() {
        assert_eq!(to_ascii("a · b — 3 µs…"), "a - b -- 3 us...");
        assert_eq!(escape_controls("x\x1b[31my"), "x\\x1b[31my");
        assert!(is_headline("12. nagle_delayed_ack — server"));
        assert!(!is_headline("   12 occurrences"));
    }
}
