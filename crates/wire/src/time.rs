//! Capture time.

use std::fmt;

/// A capture timestamp: nanoseconds since the Unix epoch.
///
/// Time enters the engine only with packets; nothing here reads a clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub const fn from_nanos(ns: i64) -> Timestamp {
        Timestamp(ns)
    }

    pub const fn nanos(self) -> i64 {
        self.0
    }

    /// `self - earlier` in nanoseconds (negative if the capture went backwards).
    pub const fn since(self, earlier: Timestamp) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    /// `self - earlier` in milliseconds.
    pub fn ms_since(self, earlier: Timestamp) -> f64 {
        self.since(earlier) as f64 / 1e6
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0.div_euclid(1_000_000_000);
        let ns = self.0.rem_euclid(1_000_000_000);
        write!(f, "{s}.{ns:09}")
    }
}
