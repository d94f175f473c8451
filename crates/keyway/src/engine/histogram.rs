//! A histogram of durations: atomic log-linear buckets written by the pool's threads, and the
//! [`Histogram`] snapshot users read.
//!
//! Bucket `i` of a value `v` (nanoseconds): values below 8 ns have a bucket each; above, each
//! power of two is split in 4 equal sub-buckets, so a bucket's upper bound is at most 25% above
//! any value in it. 256 buckets cover every `u64` of nanoseconds (584 years).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const BUCKETS: usize = 256;

/// The bucket of `ns`.
#[inline]
fn bucket(ns: u64) -> usize {
    if ns < 8 {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros() as usize; // >= 3
    let sub = ((ns >> (msb - 2)) & 3) as usize;
    // msb 3 starts at 8 (after the 8 single-value buckets): (msb - 1) * 4 + sub.
    (msb - 1) * 4 + sub
}

/// The largest value (nanoseconds) bucket `i` holds.
fn upper_bound(i: usize) -> u64 {
    if i < 8 {
        return i as u64;
    }
    let msb = i / 4 + 1;
    let sub = (i % 4) as u64;
    let base = 1u64 << msb;
    let step = 1u64 << (msb - 2);
    // The last bucket's bound is u64::MAX.
    base.checked_add((sub + 1) * step)
        .map_or(u64::MAX, |b| b - 1)
}

/// The atomic side, written by the pool's threads (one sampled task at a time).
pub(crate) struct AtomicHistogram {
    buckets: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
}

impl AtomicHistogram {
    pub(crate) fn new() -> Self {
        AtomicHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// Counts one value (saturated at `u64::MAX` nanoseconds).
    pub(crate) fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
        // Saturating: a sum past 584 years stays at the maximum.
        let _ = self
            .sum_ns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some(s.saturating_add(ns))
            });
    }

    pub(crate) fn snapshot(&self) -> Histogram {
        let buckets = self
            .buckets
            .iter()
            .enumerate()
            .filter_map(|(i, b)| {
                let n = b.load(Ordering::Relaxed);
                (n > 0).then(|| (Duration::from_nanos(upper_bound(i)), n))
            })
            .collect::<Vec<_>>();
        Histogram {
            count: buckets.iter().map(|&(_, n)| n).sum(),
            sum: Duration::from_nanos(self.sum_ns.load(Ordering::Relaxed)),
            buckets,
        }
    }
}

/// A snapshot of a histogram of durations (a pool's queue wait or run time, see
/// [`Metrics`](crate::Metrics)).
///
/// Values are counted in buckets whose upper bounds grow by at most 25% from one to the next
/// (below 8 ns, one per nanosecond), so a quantile read from it is at most 25% above the
/// true value.
///
/// ```
/// let pool = keyway::Pool::builder().metrics(true).metrics_sampling(1).build().unwrap();
/// for _ in 0..100 {
///     pool.submit(|| ()).unwrap().join().unwrap();
/// }
/// let wait = pool.metrics().queue_wait;
/// assert_eq!(wait.count(), 100); // one in 1: every task timed
/// assert!(wait.quantile(0.5).unwrap() <= wait.quantile(0.99).unwrap());
/// pool.shutdown();
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    buckets: Vec<(Duration, u64)>,
    count: u64,
    sum: Duration,
}

impl Histogram {
    /// Counts one value (saturated at `u64::MAX` nanoseconds), in the same buckets as a pool's
    /// histograms: for a histogram of one's own (keyway-redis's stream consumer keeps its
    /// append-to-handled time in one).
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut h = keyway::Histogram::default();
    /// for ms in [3, 1, 2] {
    ///     h.record(Duration::from_millis(ms));
    /// }
    /// assert_eq!(h.count(), 3);
    /// assert_eq!(h.sum(), Duration::from_millis(6));
    /// let p50 = h.quantile(0.5).unwrap();
    /// assert!(p50 >= Duration::from_millis(2) && p50 <= Duration::from_micros(2_500));
    /// ```
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let bound = Duration::from_nanos(upper_bound(bucket(ns)));
        match self.buckets.binary_search_by_key(&bound, |&(b, _)| b) {
            Ok(i) => self.buckets[i].1 = self.buckets[i].1.saturating_add(1),
            Err(i) => self.buckets.insert(i, (bound, 1)),
        }
        self.count = self.count.saturating_add(1);
        let sum = u64::try_from(self.sum.as_nanos()).unwrap_or(u64::MAX);
        self.sum = Duration::from_nanos(sum.saturating_add(ns));
    }

    /// How many values were counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The sum of the values counted.
    pub fn sum(&self) -> Duration {
        self.sum
    }

    /// The mean value, `None` if nothing was counted.
    pub fn mean(&self) -> Option<Duration> {
        let n = u32::try_from(self.count).ok().filter(|&n| n > 0);
        match n {
            Some(n) => Some(self.sum / n),
            None => (self.count > 0)
                .then(|| Duration::from_nanos((self.sum.as_nanos() / self.count as u128) as u64)),
        }
    }

    /// The upper bound of the bucket holding the `q` quantile (`q` in 0.0..=1.0; outside it
    /// is clamped), `None` if nothing was counted.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        if self.count == 0 {
            return None;
        }
        let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for &(bound, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return Some(bound);
            }
        }
        self.buckets.last().map(|&(b, _)| b)
    }

    /// The non-empty buckets, smallest first: each bucket's upper bound (inclusive) and how
    /// many values it holds. For an exporter with buckets of its own.
    pub fn buckets(&self) -> impl Iterator<Item = (Duration, u64)> + '_ {
        self.buckets.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_is_at_most_its_buckets_bound_and_within_a_quarter_of_it() {
        let mut values: Vec<u64> = (0..2000).collect();
        values.extend((0..64).map(|s| 1u64 << s));
        values.extend((1..64).map(|s| (1u64 << s) - 1));
        values.extend([u64::MAX, u64::MAX - 1, 12_345_678_901]);
        for v in values {
            let i = bucket(v);
            assert!(i < BUCKETS, "{v} -> {i}");
            let hi = upper_bound(i);
            assert!(v <= hi, "{v} above its bucket {i}'s bound {hi}");
            if i > 0 {
                assert!(v > upper_bound(i - 1), "{v} also fits bucket {}", i - 1);
            }
            assert!(hi - v <= v / 4 + 1, "{v}: bound {hi} too far");
        }
    }

    #[test]
    fn quantiles_follow_the_counts() {
        let h = AtomicHistogram::new();
        for ms in 1..=100 {
            h.record(Duration::from_millis(ms));
        }
        h.record(Duration::MAX); // saturates, no panic
        let s = h.snapshot();
        assert_eq!(s.count(), 101);
        let p50 = s.quantile(0.5).unwrap();
        assert!(
            p50 >= Duration::from_millis(50) && p50 <= Duration::from_micros(62_500),
            "{p50:?}"
        );
        assert_eq!(s.quantile(1.0), Some(Duration::from_nanos(u64::MAX)));
        assert!(s.quantile(f64::NAN).is_some());
        assert_eq!(Histogram::default().quantile(0.5), None);
        assert_eq!(Histogram::default().mean(), None);
        assert!(s.mean().is_some());
    }

    #[test]
    fn recording_into_a_snapshot_matches_the_atomic_side() {
        let atomic = AtomicHistogram::new();
        let mut plain = Histogram::default();
        for ns in [5u64, 1_000, 7, 1_000, 123_456_789, 2, u64::MAX] {
            atomic.record(Duration::from_nanos(ns));
            plain.record(Duration::from_nanos(ns));
        }
        atomic.record(Duration::MAX);
        plain.record(Duration::MAX);
        assert_eq!(plain, atomic.snapshot());
    }
}
