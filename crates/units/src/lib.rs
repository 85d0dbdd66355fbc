//! Sizes, rates and durations as a person reads them, the same in every
//! command: a socket buffer `sysctl` reports prints as `sockets`, `analyze`,
//! `top`, `load`, the lab and the HTML report print it.
//!
//! Sizes are binary (1 KB = 1024 bytes), as the kernel's buffer sizes and
//! nginx's `k`/`m` suffixes are; rates are decimal bits per second, as links
//! are sold; at most three significant digits. Numbers in JSON documents are
//! rounded by [`round3`] (milliseconds to the microsecond).
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::fmt::Write as _;

/// `65535` → "64 KB", `6291456` → "6 MB", `87380` → "85.3 KB", `900` → "900 B".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", short(v), UNITS[unit])
}

/// A size given as a float (a mean, a rate's bytes): as [`bytes`], rounded.
pub fn bytes_f64(n: f64) -> String {
    bytes(if n.is_finite() && n > 0.0 {
        n.round() as u64
    } else {
        0
    })
}

/// Bits per second: "6.6 Mbit/s", "13 Gbit/s", "655 kbit/s".
pub fn rate(bits_per_s: f64) -> String {
    let (v, unit) = if bits_per_s >= 1e9 {
        (bits_per_s / 1e9, "Gbit/s")
    } else if bits_per_s >= 1e6 {
        (bits_per_s / 1e6, "Mbit/s")
    } else if bits_per_s >= 1e3 {
        (bits_per_s / 1e3, "kbit/s")
    } else {
        (bits_per_s, "bit/s")
    };
    format!("{} {unit}", short(v))
}

/// Seconds: "200 ms", "1.5 s", "15 min 25 s", "2 h".
pub fn duration(seconds: f64) -> String {
    if seconds < 1.0 {
        return format!("{} ms", short(seconds * 1000.0));
    }
    if seconds < 120.0 {
        return format!("{} s", short(seconds));
    }
    let total = seconds.round() as u64;
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    match (h, m, s) {
        (0, m, 0) => format!("{m} min"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, 0, _) => format!("{h} h"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

/// Three significant digits at most, no trailing zeros: 6.5536 → "6.55",
/// 52.4 → "52.4", 524.3 → "524", 4.0 → "4".
pub fn short(v: f64) -> String {
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Rounded to 3 decimals: milliseconds to the microsecond, as every report prints them.
pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// HTML-escapes `s` (the HTML reports of `analyze` and `top`); control characters (terminal escapes) are shown as
/// `\xNN` text instead of passed through.
pub fn esc(s: &str) -> Cow<'_, str> {
    if !s
        .chars()
        .any(|c| matches!(c, '&' | '<' | '>' | '"' | '\'') || (c.is_control() && c != '\n'))
    {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if c.is_control() && c != '\n' => {
                let _ = write!(o, "\\x{:02x}", c as u32);
            }
            c => o.push(c),
        }
    }
    Cow::Owned(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_terminal_escapes() {
        assert_eq!(
            esc("<script>alert(1)</script>"),
            "&lt;script&gt;alert(1)&lt;/script&gt;"
        );
        assert_eq!(esc("a\x1b[31m\"'&"), "a\\x1b[31m&quot;&#39;&amp;");
        assert!(matches!(esc("plain 10.0.0.1:80"), Cow::Borrowed(_)));
    }

    #[test]
    fn sizes() {
        assert_eq!(bytes(900), "900 B");
        assert_eq!(bytes(65535), "64 KB");
        assert_eq!(bytes(87380), "85.3 KB");
        assert_eq!(bytes(6_291_456), "6 MB");
        assert_eq!(bytes(212_992), "208 KB");
        assert_eq!(bytes(1 << 30), "1 GB");
        assert_eq!(bytes_f64(87_379.6), "85.3 KB");
        assert_eq!(bytes_f64(f64::NAN), "0 B");
    }

    #[test]
    fn rates() {
        assert_eq!(rate(65535.0 * 8.0 / 0.010), "52.4 Mbit/s");
        assert_eq!(rate(8192.0 * 8.0 / 0.1), "655 kbit/s");
        assert_eq!(rate(16.0e9), "16 Gbit/s");
        assert_eq!(rate(12.0), "12 bit/s");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(0.2), "200 ms");
        assert_eq!(duration(1.5), "1.5 s");
        assert_eq!(duration(127.0), "2 min 7 s");
        assert_eq!(duration(924.6), "15 min 25 s");
        assert_eq!(duration(7200.0), "2 h");
        assert_eq!(duration(600.0), "10 min");
    }
}
