//! A limited executor's pace ([`Pace`]): at most `rate` releases in any window of one second,
//! evenly spaced when it can.
//!
//! Two rules, both checked before every release:
//!
//! * **spacing**: releases follow a grid one `gap = 1 s / rate` apart; a driver that woke late
//!   catches up on the slots it missed, at most [`CATCH_UP`] of them (so a slow step loses no
//!   capacity, and a long stall does not turn into a burst). The grid is kept as the slot of the
//!   last release, and the next slot is one `gap` after it *at the rate as it is now*: a new
//!   rate applies from the next release on (raised from 0.2/s to 100/s, the next release may go
//!   10 ms after the last one, not 5 s);
//! * **the window**: releases are remembered for `window = max(1 s, cap / rate)`, where
//!   `cap = ceil(rate)`, and one waits while `cap` of them are remembered. Releases within
//!   [`MERGE`] of each other are remembered as one group, stamped with its *last* release, and
//!   forgotten with it: a group is counted for a little longer than each of its releases needs,
//!   never shorter. So no closed window of one second holds more than `cap` releases, whatever
//!   the spacing did (with a whole `rate`: at most `rate`), and the memory is one group per
//!   driver step at most, whatever the rate.

use std::collections::VecDeque;
use std::time::Duration;

/// The longest stretch of missed slots a late driver catches up on.
pub(crate) const CATCH_UP: Duration = Duration::from_millis(100);

/// Releases this close together are remembered as one group (nanoseconds).
const MERGE: u64 = 100_000;

const SECOND: u64 = 1_000_000_000;

/// Releases remembered as one group: the first's and the last's times, and how many.
struct Group {
    first: u64,
    last: u64,
    count: u64,
}

/// When the next release may happen, in nanoseconds since the scheduler's epoch.
pub(crate) struct Pace {
    /// The grid slot of the last release (`None`: none yet); the next is one `gap` after it.
    slot: Option<u64>,
    gap: u64,
    cap: u64,
    window: u64,
    recent: VecDeque<Group>,
    /// The releases `recent` holds.
    remembered: u64,
}

impl Pace {
    pub(crate) fn new() -> Self {
        Pace {
            slot: None,
            gap: u64::MAX,
            cap: 1,
            window: u64::MAX,
            recent: VecDeque::new(),
            remembered: 0,
        }
    }

    /// The rate is now `rate` tasks per second (0: none).
    pub(crate) fn set_rate(&mut self, rate: f64) {
        let gap = (SECOND as f64 / rate).ceil();
        // Saturating: a rate of 0 (or one so small the gap overflows) never releases.
        if !(gap.is_finite() && gap < u64::MAX as f64) {
            self.gap = u64::MAX;
            return;
        }
        self.gap = (gap as u64).max(1);
        // A share a hair over a whole number (90.0 / 3.0 from a coordinator) counts as it.
        let cap = (rate - 1e-6).ceil().max(1.0);
        self.cap = cap as u64; // saturates
        let window = (cap * SECOND as f64 / rate).ceil().max(SECOND as f64);
        self.window = if window < u64::MAX as f64 {
            window as u64
        } else {
            u64::MAX
        };
    }

    /// May a task be released at `now`?
    pub(crate) fn ready(&mut self, now: u64) -> bool {
        if self.gap == u64::MAX || now < self.next() {
            return false;
        }
        while let Some(g) = self.recent.front() {
            if now.saturating_sub(g.last) <= self.window {
                break;
            }
            self.remembered -= g.count;
            self.recent.pop_front();
        }
        self.remembered < self.cap
    }

    /// The earliest time of the next release by the spacing rule.
    fn next(&self) -> u64 {
        self.slot.map_or(0, |slot| slot.saturating_add(self.gap))
    }

    /// A task was released at `now`.
    pub(crate) fn released(&mut self, now: u64) {
        let catch_up = CATCH_UP.as_nanos() as u64;
        self.slot = Some(self.next().max(now.saturating_sub(catch_up)));
        self.remembered += 1;
        match self.recent.back_mut() {
            Some(g) if now.saturating_sub(g.first) < MERGE => {
                g.last = g.last.max(now);
                g.count += 1;
            }
            _ => self.recent.push_back(Group {
                first: now,
                last: now,
                count: 1,
            }),
        }
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
    fn no_second_sees_more_than_the_rate() {
        for rate in [
            1.0,
            7.0,
            30.000_000_000_1,
            33.4,
            50.0,
            90.0,
            200.0,
            1000.0,
            5000.0,
        ] {
            for offset in [0, 300_000_000, 700_000_000, 950_000_000] {
                // Steady steps; late ones; and stalls of 300 ms every 97 steps.
                for (step, hiccup) in [
                    (1_000_000, 1_000_000),
                    (1_070_000, 15_000_000),
                    (1_000_000, 300_000_000),
                ] {
                    let worst = worst_window(rate, offset, step, hiccup);
                    let bound = (rate - 1e-6_f64).ceil() as usize;
                    assert!(worst <= bound, "{rate}/s: {worst}");
                }
            }
        }
    }

    #[test]
    fn a_slow_driver_loses_no_capacity() {
        // Steps 1.07 ms apart: the whole rate still released in a second (less what the last
        // gap holds), below the log's cap and above it.
        for rate in [1000.0, 200_000.0, 2_000_000.0] {
            let mut pace = Pace::new();
            pace.set_rate(rate);
            let (mut now, mut n) = (0u64, 0.0);
            while now < SECOND {
                while pace.ready(now) {
                    pace.released(now);
                    n += 1.0;
                }
                now += 1_070_000;
            }
            assert!(n >= rate * 0.99, "{rate}/s: {n}");
        }
    }

    #[test]
    fn a_new_rate_applies_from_the_next_release() {
        let mut pace = Pace::new();
        pace.set_rate(0.2); // one per 5 s
        let t = 10 * SECOND;
        assert!(pace.ready(t));
        pace.released(t);
        assert!(!pace.ready(t + SECOND));
        // Raised: one gap of the new rate after the last release, not the old 5 s.
        pace.set_rate(100.0);
        assert!(pace.ready(t + 10_000_000));
        pace.released(t + 10_000_000);
        // Lowered again: the window of the new rate (one per 5 s) counts what went before.
        pace.set_rate(0.2);
        assert!(!pace.ready(t + 4 * SECOND));
        assert!(pace.ready(t + 6 * SECOND));
        // Paused, then resumed: the grid of the resumed rate, not a wait for ever.
        pace.set_rate(0.0);
        assert!(!pace.ready(t + 60 * SECOND));
        pace.set_rate(100.0);
        assert!(pace.ready(t + 60 * SECOND));
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
        pace.released(u64::MAX); // saturates
        pace.set_rate(1.0);
        assert!(!pace.ready(u64::MAX)); // one second has not passed since
        pace.set_rate(f64::MAX);
        assert!(pace.ready(u64::MAX));
    }
}
