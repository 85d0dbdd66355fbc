//! Which packets of a capture to analyse: `--filter`, `--from`/`--to` and
//! `--connection`.
//!
//! Packets left out are not seen by the analysis at all, as if the capture
//! had been cut with `tcpdump -r IN -w OUT EXPR` (or `editcap -A/-B`) first:
//! frame numbers then count the selected packets.

use std::net::SocketAddr;

use anyhow::{bail, Context};
use tcpdoctor_filter::Filter;
use tcpdoctor_wire::{LinkType, Timestamp};

/// A time given to `--from` / `--to`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimePoint {
    /// Seconds after the first packet of the capture.
    Relative(i64),
    /// Nanoseconds since the Unix epoch.
    Absolute(i64),
}

/// Parses `--from`/`--to`: seconds after the first packet (`2.5`), a Unix
/// time (`@1700000000.25`), or a wall-clock UTC time
/// (`2026-11-24T08:01:02.5Z`, `2026-11-24 08:01:02`, or `08:01:02` on the
/// day of the capture's first packet).
pub fn parse_time(text: &str) -> anyhow::Result<TimePoint> {
    let t = text.trim();
    if let Some(unix) = t.strip_prefix('@') {
        return Ok(TimePoint::Absolute(seconds_to_ns(unix).with_context(
            || format!("{text:?}: expected a Unix time in seconds after '@'"),
        )?));
    }
    if !t.contains(':') {
        return Ok(TimePoint::Relative(seconds_to_ns(t).with_context(|| {
            format!(
                "{text:?}: expected seconds after the first packet (2.5), a Unix time (@1700000000) \
                 or a UTC time (2026-11-24T08:01:02Z, 08:01:02)"
            )
        })?));
    }
    wall_clock(t).with_context(|| {
        format!("{text:?}: expected a UTC time such as 2026-11-24T08:01:02.5Z or 08:01:02")
    })
}

/// Decimal seconds to nanoseconds, exactly (no float rounding): `-1.5`, `1700000000.25`.
fn seconds_to_ns(s: &str) -> anyhow::Result<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty())
        || !all_digits(int)
        || !all_digits(frac)
        || frac.len() > 9
    {
        bail!("not a number of seconds");
    }
    let whole: i64 = if int.is_empty() { 0 } else { int.parse()? };
    let frac_ns: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse()?
    };
    let ns = whole
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(frac_ns))
        .ok_or_else(|| anyhow::anyhow!("out of range"))?;
    Ok(if neg { -ns } else { ns })
}

/// Marks a time of day only (no date): resolved against the capture's first packet.
const TIME_OF_DAY: i64 = i64::MIN / 2;

fn wall_clock(t: &str) -> anyhow::Result<TimePoint> {
    let t = t.strip_suffix('Z').unwrap_or(t);
    let (date, time) = match t.split_once(['T', ' ']) {
        Some((d, tm)) => (Some(d), tm),
        None => (None, t),
    };
    let mut hms = time.split(':');
    let h: i64 = hms.next().unwrap_or("").parse()?;
    let m: i64 = hms.next().unwrap_or("").parse()?;
    let s: f64 = hms.next().unwrap_or("0").parse()?;
    if hms.next().is_some()
        || !(0..24).contains(&h)
        || !(0..60).contains(&m)
        || !(0.0..61.0).contains(&s)
    {
        bail!("not a time of day");
    }
    let of_day = (h * 3600 + m * 60) * 1_000_000_000 + (s * 1e9).round() as i64;
    let Some(date) = date else {
        return Ok(TimePoint::Absolute(TIME_OF_DAY + of_day));
    };
    let mut ymd = date.split('-');
    let y: i64 = ymd.next().unwrap_or("").parse()?;
    let mo: i64 = ymd.next().unwrap_or("").parse()?;
    let d: i64 = ymd.next().unwrap_or("").parse()?;
    if ymd.next().is_some()
        || !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || !(1970..=2200).contains(&y)
    {
        bail!("not a date");
    }
    Ok(TimePoint::Absolute(
        days_from_civil(y, mo, d) * 86_400 * 1_000_000_000 + of_day,
    ))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the well-known
/// era-based conversion: 400-year eras of 146,097 days).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// One connection's packets: its two endpoints, within its lifetime.
#[derive(Debug, Clone, Copy)]
pub struct OneConnection {
    pub client: SocketAddr,
    pub server: SocketAddr,
    pub first_ns: i64,
    pub last_ns: i64,
}

/// The selection as given on the command line.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub filter: Option<(String, Filter)>,
    pub from: Option<TimePoint>,
    pub to: Option<TimePoint>,
    pub connection: Option<OneConnection>,
}

impl Selection {
    pub fn is_empty(&self) -> bool {
        self.filter.is_none()
            && self.from.is_none()
            && self.to.is_none()
            && self.connection.is_none()
    }

    /// The selection made concrete once the first packet's time is known.
    pub fn resolve(&self, first: Timestamp) -> Window {
        let at = |p: TimePoint| match p {
            TimePoint::Relative(ns) => first.nanos().saturating_add(ns),
            TimePoint::Absolute(ns) if ns < TIME_OF_DAY / 2 => {
                let of_day = ns - TIME_OF_DAY;
                let day = first.nanos().div_euclid(86_400 * 1_000_000_000);
                day * 86_400 * 1_000_000_000 + of_day
            }
            TimePoint::Absolute(ns) => ns,
        };
        Window {
            from: self.from.map(at).unwrap_or(i64::MIN),
            to: self.to.map(at).unwrap_or(i64::MAX),
        }
    }
}

/// The time window in Unix nanoseconds, both ends included.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub from: i64,
    pub to: i64,
}

/// Applies a [`Selection`] packet by packet.
pub struct Selector {
    selection: Selection,
    window: Option<Window>,
    pub read: u64,
    pub kept: u64,
    /// The first and last packet times read (Unix ns), kept or not.
    pub span_ns: Option<(i64, i64)>,
}

impl Selector {
    pub fn new(selection: Selection) -> Selector {
        Selector {
            selection,
            window: None,
            read: 0,
            kept: 0,
            span_ns: None,
        }
    }

    /// Whether the packet is analysed.
    pub fn keep(&mut self, ts: Timestamp, link: LinkType, data: &[u8]) -> bool {
        self.read += 1;
        let w = *self
            .window
            .get_or_insert_with(|| self.selection.resolve(ts));
        let t = ts.nanos();
        let span = self.span_ns.get_or_insert((t, t));
        span.0 = span.0.min(t);
        span.1 = span.1.max(t);
        if t < w.from || t > w.to {
            return false;
        }
        if let Some(c) = &self.selection.connection {
            if t < c.first_ns || t > c.last_ns || !is_between(link, data, c.client, c.server) {
                return false;
            }
        }
        if let Some((_, f)) = &self.selection.filter {
            if !f.matches(link, data) {
                return false;
            }
        }
        self.kept += 1;
        true
    }
}

/// A TCP frame between the two endpoints, either way.
fn is_between(link: LinkType, data: &[u8], a: SocketAddr, b: SocketAddr) -> bool {
    match tcpdoctor_wire::decode(link, data) {
        Ok(Ok(s)) => {
            let src = SocketAddr::new(s.src, s.src_port);
            let dst = SocketAddr::new(s.dst, s.dst_port);
            (src == a && dst == b) || (src == b && dst == a)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_in_every_form() {
        assert_eq!(
            parse_time("2.5").unwrap(),
            TimePoint::Relative(2_500_000_000)
        );
        assert_eq!(
            parse_time("@1700000000.25").unwrap(),
            TimePoint::Absolute(1_700_000_000_250_000_000)
        );
        // date -u -d 2023-11-14T22:13:20 +%s = 1700000000
        assert_eq!(
            parse_time("2023-11-14T22:13:20Z").unwrap(),
            TimePoint::Absolute(1_700_000_000_000_000_000)
        );
        assert_eq!(
            parse_time("2023-11-14 22:13:20.5").unwrap(),
            TimePoint::Absolute(1_700_000_000_500_000_000)
        );
        // A time of day lands on the first packet's (UTC) day.
        let first = Timestamp::from_nanos(1_700_000_000_000_000_000);
        let sel = Selection {
            from: Some(parse_time("22:13:21").unwrap()),
            ..Selection::default()
        };
        assert_eq!(sel.resolve(first).from, 1_700_000_001_000_000_000);
        for bad in [
            "",
            "x",
            "25:00:00",
            "2023-13-01T00:00:00",
            "@",
            "1e99",
            "12:3x",
        ] {
            assert!(parse_time(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn relative_times_count_from_the_first_packet() {
        let sel = Selection {
            from: Some(TimePoint::Relative(1_000_000_000)),
            to: Some(TimePoint::Relative(2_000_000_000)),
            ..Selection::default()
        };
        let mut s = Selector::new(sel);
        let t0 = 1_700_000_000_000_000_000;
        let at = |d: i64| Timestamp::from_nanos(t0 + d);
        assert!(!s.keep(at(0), LinkType::Ethernet, &[]));
        assert!(s.keep(at(1_000_000_000), LinkType::Ethernet, &[]));
        assert!(s.keep(at(2_000_000_000), LinkType::Ethernet, &[]));
        assert!(!s.keep(at(2_000_000_001), LinkType::Ethernet, &[]));
        assert_eq!((s.read, s.kept), (4, 2));
    }
}
