//! A fixed-size log-linear histogram of durations (nanoseconds), ±0.4% resolution.
//!
//! 128 sub-buckets per power of two, so percentiles are within 0.8% of the
//! exact value; 40 powers cover 1 µs to about 12 days. Memory is fixed
//! whatever the capture length: the counts of the few buckets used so far
//! (up to [`SPARSE`], allocated on the first value), then all of them (20 KiB).
//! A finding kept per endpoint of a port scan or of thousands of servers
//! costs bytes, not kilobytes.

const SUB: usize = 128;
const SUB_BITS: u32 = 7;
const POWERS: usize = 40;
/// Distinct buckets counted sparsely before the counts go dense.
const SPARSE: usize = 24;

/// Bucket counts: `(bucket, count)` sorted by bucket while few are used,
/// then one count per bucket.
#[derive(Clone)]
enum Counts {
    Sparse(Vec<(u16, u32)>),
    Dense(Vec<u32>),
}

impl Counts {
    /// Adds `n` to bucket `i`.
    /// Dense counts (soon every busy histogram's) inline, sparse ones in a call.
    #[inline]
    fn add(&mut self, i: usize, n: u32) {
        match self {
            Counts::Dense(c) => c[i] = c[i].saturating_add(n),
            Counts::Sparse(_) => self.add_sparse(i, n),
        }
    }

    #[inline(never)]
    fn add_sparse(&mut self, i: usize, n: u32) {
        match self {
            Counts::Dense(c) => c[i] = c[i].saturating_add(n),
            Counts::Sparse(list) => match list.binary_search_by_key(&(i as u16), |e| e.0) {
                Ok(k) => list[k].1 = list[k].1.saturating_add(n),
                Err(_) if list.len() == SPARSE => self.densify().add(i, n),
                Err(k) => list.insert(k, (i as u16, n)),
            },
        }
    }

    #[cold]
    fn densify(&mut self) -> &mut Counts {
        if let Counts::Sparse(list) = self {
            let mut dense = vec![0u32; SUB * POWERS];
            for &(i, c) in list.iter() {
                dense[usize::from(i)] = c;
            }
            *self = Counts::Dense(dense);
        }
        self
    }

    /// The non-empty buckets in order, with their counts.
    fn used(&self) -> Box<dyn Iterator<Item = (usize, u32)> + '_> {
        match self {
            Counts::Sparse(list) => Box::new(list.iter().map(|&(i, c)| (usize::from(i), c))),
            Counts::Dense(c) => Box::new(c.iter().copied().enumerate().filter(|e| e.1 > 0)),
        }
    }
}

#[derive(Clone)]
pub struct Histogram {
    counts: Counts,
    total: u64,
    sum_ns: i128,
    max_ns: i64,
    min_ns: i64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Counts::Sparse(Vec::new()),
            total: 0,
            sum_ns: 0,
            max_ns: 0,
            min_ns: i64::MAX,
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Histogram(n={})", self.total)
    }
}

fn index(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let p = 63 - us.leading_zeros(); // >= 6
    let shift = p - SUB_BITS;
    let mant = (us >> shift) as usize - SUB; // 0..64
    ((p - SUB_BITS + 1) as usize * SUB + mant).min(SUB * POWERS - 1)
}

/// The midpoint of a bucket, in microseconds.
fn value(i: usize) -> f64 {
    if i < SUB {
        return i as f64 + 0.5;
    }
    let p = (i / SUB) as u32 - 1 + SUB_BITS;
    let mant = (i % SUB) as u64 + SUB as u64;
    let lo = mant << (p - SUB_BITS);
    let width = 1u64 << (p - SUB_BITS);
    lo as f64 + width as f64 / 2.0
}

/// The lowest value of bucket `i` (of [`Histogram::BUCKETS`]; `BUCKETS` gives
/// the top of the last), in microseconds.
pub fn bucket_low_us(i: usize) -> f64 {
    if i < SUB {
        return i as f64;
    }
    let p = (i / SUB) as u32 - 1 + SUB_BITS;
    let mant = (i % SUB) as u64 + SUB as u64;
    (mant << (p - SUB_BITS)) as f64
}

impl Histogram {
    pub fn record(&mut self, ns: i64) {
        self.record_in(Self::bucket(ns), ns);
    }

    /// [`Histogram::record`] of a value whose bucket is known ([`Histogram::bucket`]).
    #[inline]
    pub fn record_in(&mut self, i: usize, ns: i64) {
        let ns = ns.max(0);
        self.counts.add(i, 1);
        self.total += 1;
        self.sum_ns += i128::from(ns);
        self.max_ns = self.max_ns.max(ns);
        self.min_ns = self.min_ns.min(ns);
    }

    /// Adds another histogram's values.
    pub fn merge(&mut self, other: &Histogram) {
        for (i, c) in other.counts.used() {
            self.counts.add(i, c);
        }
        self.total += other.total;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.min_ns = self.min_ns.min(other.min_ns);
    }

    /// The bucket a value falls in (for data kept per bucket alongside).
    pub fn bucket(ns: i64) -> usize {
        index((ns.max(0) / 1000) as u64)
    }

    pub const BUCKETS: usize = SUB * POWERS;

    /// The bucket holding quantile `q`.
    pub fn quantile_bucket(&self, q: f64) -> Option<usize> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, c) in self.counts.used() {
            seen += u64::from(c);
            if seen >= rank {
                return Some(i);
            }
        }
        None
    }

    /// How many values fell in bucket `i`.
    pub fn bucket_count(&self, i: usize) -> u64 {
        match &self.counts {
            Counts::Dense(c) => c.get(i).map_or(0, |&c| u64::from(c)),
            Counts::Sparse(list) => list
                .binary_search_by_key(&(i as u16), |e| e.0)
                .map_or(0, |k| u64::from(list[k].1)),
        }
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn sum_ns(&self) -> i128 {
        self.sum_ns
    }

    pub fn max_ns(&self) -> i64 {
        self.max_ns
    }

    pub fn mean_ns(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.total as f64
        }
    }

    /// The value at quantile `q` of this histogram with the values of
    /// `minus` taken out and those of `plus` put in (`minus` must be a part of
    /// this one), in milliseconds: the same values, some of them changed.
    pub fn quantile_replacing(&self, minus: &Histogram, plus: &Histogram, q: f64) -> f64 {
        let total = (self.total + plus.total).saturating_sub(minus.total);
        if total == 0 {
            return 0.0;
        }
        let rank = ((q.min(1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        let mut last = 0;
        for i in 0..Self::BUCKETS {
            let c =
                (self.bucket_count(i) + plus.bucket_count(i)).saturating_sub(minus.bucket_count(i));
            if c == 0 {
                continue;
            }
            last = i;
            seen += c;
            if seen >= rank {
                break;
            }
        }
        let top = self.max_ns.max(plus.max_ns) as f64 / 1e6;
        (value(last) / 1e3).min(top)
    }

    /// The value at quantile `q` (0..=1), in milliseconds; exact at the extremes.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        if q >= 1.0 {
            return self.max_ns as f64 / 1e6;
        }
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, c) in self.counts.used() {
            seen += u64::from(c);
            if seen >= rank {
                let v = value(i) / 1e3;
                return v.clamp(self.min_ns as f64 / 1e6, self.max_ns as f64 / 1e6);
            }
        }
        self.max_ns as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::Histogram;

    #[test]
    fn sparse_and_dense_counts_answer_alike() {
        // The same values into one histogram as they come (sparse, then
        // dense past the first buckets) and into one made dense first.
        let values: Vec<i64> = (0..5000i64)
            .map(|i| (i * 7919 % 4001) * 37_000 + i)
            .collect();
        for n in [1, 5, 23, 24, 25, 300, 5000] {
            let mut a = Histogram::default();
            let mut b = Histogram::default();
            b.counts.densify();
            for &v in &values[..n] {
                a.record(v);
                b.record(v);
            }
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 1.0] {
                assert_eq!(a.quantile_ms(q), b.quantile_ms(q), "n {n} q {q}");
                assert_eq!(a.quantile_bucket(q), b.quantile_bucket(q), "n {n} q {q}");
            }
            for i in 0..Histogram::BUCKETS {
                assert_eq!(a.bucket_count(i), b.bucket_count(i));
            }
            let (mut m1, mut m2) = (a.clone(), b.clone());
            m1.merge(&b);
            m2.merge(&a);
            assert_eq!(m1.quantile_ms(0.5), m2.quantile_ms(0.5));
            assert_eq!(m1.count(), 2 * n as u64);
        }
    }

    #[test]
    fn percentiles_within_two_percent() {
        let mut h = Histogram::default();
        for i in 1..=1000i64 {
            h.record(i * 100_000); // 0.1 ms .. 100 ms
        }
        let p50 = h.quantile_ms(0.5);
        assert!((p50 - 50.0).abs() / 50.0 < 0.008, "{p50}");
        let p99 = h.quantile_ms(0.99);
        assert!((p99 - 99.0).abs() / 99.0 < 0.008, "{p99}");
        assert_eq!(h.quantile_ms(1.0), 100.0);
        assert_eq!(h.count(), 1000);
    }

    #[test]
    fn quantiles_with_values_replaced() {
        // 100 exchanges of 44 ms, 90 of which lose 43 ms with a fix.
        let (mut all, mut before, mut after) = Default::default();
        let (all, before, after): (&mut Histogram, &mut Histogram, &mut Histogram) =
            (&mut all, &mut before, &mut after);
        for i in 0..100 {
            all.record(44_000_000);
            if i < 90 {
                before.record(44_000_000);
                after.record(1_000_000);
            }
        }
        let p50 = all.quantile_replacing(before, after, 0.5);
        assert!((p50 - 1.0).abs() < 0.01, "{p50}");
        let p99 = all.quantile_replacing(before, after, 0.99);
        assert!((p99 - 44.0).abs() < 0.4, "{p99}");
        // Nothing replaced: the histogram's own quantiles.
        let none = Histogram::default();
        assert!((all.quantile_replacing(&none, &none, 0.5) - all.quantile_ms(0.5)).abs() < 0.4);
    }

    #[test]
    fn tiny_and_huge_values() {
        let mut h = Histogram::default();
        h.record(0);
        h.record(-5);
        h.record(i64::MAX / 2);
        assert_eq!(h.count(), 3);
        assert!(h.quantile_ms(0.1) <= 0.001);
    }
}
