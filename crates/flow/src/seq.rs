//! TCP sequence numbers compare modulo 2^32 (RFC 9293 §3.4, "sequence number
//! arithmetic"): `a < b` when `b - a`, taken as a signed 32-bit number, is positive.

use std::cmp::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq(pub u32);

impl Seq {
    pub fn plus(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }

    /// Bytes from `earlier` to `self`; 0 if `earlier` is not before `self`.
    pub fn distance_from(self, earlier: Seq) -> u32 {
        let d = self.0.wrapping_sub(earlier.0) as i32;
        if d > 0 {
            d as u32
        } else {
            0
        }
    }
}

impl PartialOrd for Seq {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Seq {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.0.wrapping_sub(other.0) as i32).cmp(&0)
    }
}

#[cfg(test)]
mod tests {
    use super::Seq;

    #[test]
    fn compares_across_wraparound() {
        assert!(Seq(u32::MAX - 10) < Seq(5));
        assert!(Seq(5) > Seq(u32::MAX));
        assert_eq!(Seq(3).distance_from(Seq(u32::MAX - 1)), 5);
        assert_eq!(Seq(3).distance_from(Seq(4)), 0);
    }
}
