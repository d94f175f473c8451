//! A limited executor's pace ([`Pace`]): releases one task per `1 / rate` seconds, on a grid
//! that a late step catches up on by less than one slot (so a slow driver does not lose
//! capacity), never more (so no sliding window of one second sees a burst).
//!
//! Why the bound holds: release `i` happens at `r_i`, no earlier than its slot `g_i`, and its
//! slot is moved up to `r_i - slack` when the driver came later than `slack`; the next slot is
//! one `gap` after. So `r_j - r_i >= (j - i) * gap - slack`, and a window of length `w` holds
//! at most `floor((w + slack) / gap) + 1` releases. With `slack < gap` and `gap >= 1 s / rate`,
//! one second holds at most `rate + 1` (for a whole `rate`); with the floor of [`MIN_SLACK`]
//! (rates above 200 per second), at most `rate * (1 s + MIN_SLACK) / 1 s + 1`.

use std::time::Duration;

/// The least catch-up allowed, whatever the rate: a driver woken this late loses no capacity.
pub(crate) const MIN_SLACK: Duration = Duration::from_millis(5);

const SECOND: u64 = 1_000_000_000;

/// When the next release may happen, in nanoseconds since the scheduler's epoch.
pub(crate) struct Pace {
    next: u64,
    gap: u64,
    slack: u64,
}

impl Pace {
    pub(crate) fn new() -> Self {
        Pace {
            next: 0,
            gap: u64::MAX,
            slack: 0,
        }
    }

    /// The rate is now `rate` tasks per second (0: none).
    pub(crate) fn set_rate(&mut self, rate: f64) {
        let gap = (SECOND as f64 / rate).ceil();
        // Saturating: a rate of 0 (or one so small the gap overflows) never releases.
        self.gap = if gap.is_finite() && gap < u64::MAX as f64 {
            (gap as u64).max(1)
        } else {
            u64::MAX
        };
        let min = MIN_SLACK.as_nanos() as u64;
        self.slack = if self.gap >= min {
            (self.gap / 2).max(min).min(self.gap - 1)
        } else {
            min
        };
    }

    /// May a task be released at `now`?
    pub(crate) fn ready(&self, now: u64) -> bool {
        self.gap != u64::MAX && now >= self.next
    }

    /// A task was released at `now`.
    pub(crate) fn released(&mut self, now: u64) {
        self.next = self
            .next
            .max(now.saturating_sub(self.slack))
            .saturating_add(self.gap);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// Releases whenever allowed at steps `step` ns apart (with a late step every so often),
    /// and returns the most releases any window of one second saw.
    fn worst_window(rate: f64, offset: u64, step: u64, hiccup: u64) -> usize {
        let mut pace = Pace::new();
        pace.set_rate(rate);
        let mut times = Vec::new();
        let mut now = offset;
        let mut n = 0u64;
        while now < offset + 10 * SECOND {
            while pace.ready(now) {
                pace.released(now);
                times.push(now);
            }
            n += 1;
            now += if n % 97 == 0 { hiccup } else { step };
        }
        let mut worst = 0;
        let mut from = 0;
        for (to, &t) in times.iter().enumerate() {
            while t - times[from] > SECOND {
                from += 1;
            }
            worst = worst.max(to - from + 1);
        }
        worst
    }

    #[test]
    fn no_second_sees_more_than_the_rate_plus_one() {
        for rate in [1.0, 7.0, 50.0, 90.0, 200.0] {
            for offset in [0, 300_000_000, 700_000_000, 950_000_000] {
                for (step, hiccup) in [(1_000_000, 1_000_000), (1_070_000, 15_000_000)] {
                    let worst = worst_window(rate, offset, step, hiccup);
                    assert!(worst <= rate as usize + 1, "{rate}/s: {worst}");
                }
            }
        }
    }

    #[test]
    fn a_slow_driver_loses_no_capacity() {
        // Steps 1.07 ms apart: 1000 per second still released (less what the last gap holds).
        let mut pace = Pace::new();
        pace.set_rate(1000.0);
        let (mut now, mut n) = (0u64, 0);
        while now < SECOND {
            while pace.ready(now) {
                pace.released(now);
                n += 1;
            }
            now += 1_070_000;
        }
        assert!(n >= 999, "{n}");
    }

    #[test]
    fn extreme_rates() {
        let mut pace = Pace::new();
        assert!(!pace.ready(0));
        pace.set_rate(0.0);
        assert!(!pace.ready(u64::MAX));
        pace.set_rate(f64::MIN_POSITIVE);
        assert!(!pace.ready(u64::MAX));
        pace.set_rate(1e12);
        assert!(pace.ready(0));
        pace.released(u64::MAX);
        pace.set_rate(1.0);
        assert!(pace.ready(u64::MAX));
    }
}
