//! A limited executor's releases spread over its interval ([`Spread`]): the tasks held for
//! release go evenly over what is left of the interval, not in one burst.
//!
//! The releases follow a grid: from an origin to the interval's end, `n` slots evenly apart, slot
//! `i` at `origin + i × (end − origin) / n`; a release may go once its slot has come. The grid
//! is laid:
//!
//! * at the interval's start, over the whole interval, one slot per task admitted then (so `n`
//!   tasks go at its start and every `interval / n` after, as a runner firing every
//!   `interval / n` would);
//! * when tasks arrive for the interval already running, over what is left of it: from the last
//!   release (its slot 0, already used), one slot per task now held and one for that release; or,
//!   if none was held before they came (or none released yet in the interval), from their
//!   arrival, so that the first goes at once.
//!
//! An interval admitted in full (as many tasks as its quota) has no grid: the pace's `1 / rate`
//! spacing is then the even spread. A driver that woke late releases every slot it missed at
//! once: the grid is fixed in time, so a slow step loses no capacity. The pace
//! ([`Pace`](super::pace::Pace)) is checked as well: it keeps releases at least `1 / rate` apart
//! and within the one-second window, whatever the grid says.

/// The grid of one interval (times in nanoseconds since the scheduler's epoch).
pub(crate) struct Spread {
    origin: u64,
    end: u64,
    /// Slots on the grid.
    n: u64,
    /// Slots used.
    done: u64,
    /// When the last release of this interval went.
    last: Option<u64>,
    /// The interval was admitted in full: released at the pace alone.
    off: bool,
}

impl Spread {
    pub(crate) fn new() -> Self {
        Spread {
            origin: 0,
            end: 0,
            n: 0,
            done: 0,
            last: None,
            off: false,
        }
    }

    /// An interval from `start` to `end` begins, with `held` tasks admitted; `full`: as many
    /// as its quota, so that the pace alone spaces them (`1 / rate` apart is then already even
    /// over the interval, and a grid as rigid as this one, checked on top of the pace's window,
    /// was measured to lose about 3% of a full interval's releases on a loaded machine).
    pub(crate) fn start(&mut self, start: u64, end: u64, held: usize, full: bool) {
        *self = Spread {
            origin: start,
            end,
            n: count(held),
            done: 0,
            last: None,
            off: full,
        };
    }

    /// Tasks arrived at `now` for the interval already running: `before` were held for release
    /// before them, `held` are now.
    pub(crate) fn arrived(&mut self, now: u64, before: usize, held: usize) {
        if self.off {
            return;
        }
        match self.last {
            Some(last) if before > 0 => {
                self.origin = last;
                self.n = count(held).saturating_add(1);
                self.done = 1;
            }
            _ => {
                self.origin = now;
                self.n = count(held);
                self.done = 0;
            }
        }
    }

    /// May a task be released at `now`? (Always, once the grid's slots are used up: more held
    /// than it was laid for cannot happen, but should not stall a task.)
    pub(crate) fn allows(&self, now: u64) -> bool {
        if self.off || self.done >= self.n {
            return true;
        }
        let span = u128::from(self.end.saturating_sub(self.origin));
        // At most `span`: no overflow back into u64.
        let offset = (span * u128::from(self.done) / u128::from(self.n)) as u64;
        now >= self.origin.saturating_add(offset)
    }

    /// A task was released at `at`.
    pub(crate) fn released(&mut self, at: u64) {
        self.done = self.done.saturating_add(1);
        self.last = Some(at);
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod test {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Releases whatever the grid allows at each step, steps `step` ns apart from `from`; returns
    /// the release times (ms) of `held` tasks admitted at the start of an interval of
    /// `interval` ms.
    fn run(interval: u64, held: usize, step: u64) -> Vec<u64> {
        let mut s = Spread::new();
        s.start(0, interval * MS, held, false);
        let (mut now, mut left, mut times) = (0, held, Vec::new());
        while left > 0 && now < interval * MS {
            while left > 0 && s.allows(now) {
                s.released(now);
                times.push(now / MS);
                left -= 1;
            }
            now += step;
        }
        times
    }

    #[test]
    fn admitted_tasks_go_evenly_over_the_interval() {
        assert_eq!(run(400, 4, MS), vec![0, 100, 200, 300]);
        assert_eq!(run(1000, 1, MS), vec![0]);
        assert_eq!(run(1000, 0, MS), Vec::<u64>::new());
    }

    #[test]
    fn a_late_driver_loses_no_slot() {
        // 100 slots 1 ms apart, steps 1.07 ms apart: all 100 go within the interval.
        assert_eq!(run(100, 100, 1_070_000).len(), 100);
        // A step 30 ms late releases the slots it missed at once.
        let mut s = Spread::new();
        s.start(0, 100 * MS, 10, false);
        let mut n = 0;
        while s.allows(30 * MS) {
            s.released(30 * MS);
            n += 1;
        }
        assert_eq!(n, 4); // slots at 0, 10, 20 and 30 ms
    }

    #[test]
    fn late_arrivals_go_over_what_is_left() {
        let mut s = Spread::new();
        s.start(0, 400 * MS, 0, false);
        // Three arrive at 100 with nothing held: the first at once, then every 100 ms.
        s.arrived(100 * MS, 0, 3);
        assert!(s.allows(100 * MS));
        s.released(100 * MS);
        assert!(!s.allows(199 * MS));
        assert!(s.allows(200 * MS));
        s.released(200 * MS);
        // One more arrives at 250 while one is held: the two left share what is left after
        // the last release (200 ms over three parts).
        s.arrived(250 * MS, 1, 2);
        assert!(!s.allows(266 * MS));
        assert!(s.allows(267 * MS));
        s.released(267 * MS);
        assert!(s.allows(334 * MS));
        s.released(334 * MS);
        // Nothing held: the next arrival goes at once, however recent the last release.
        s.arrived(335 * MS, 0, 1);
        assert!(s.allows(335 * MS));
    }

    #[test]
    fn extremes() {
        let mut s = Spread::new();
        assert!(s.allows(0)); // no grid: nothing to hold back
        s.start(0, u64::MAX, usize::MAX, false);
        assert!(s.allows(0));
        s.released(0);
        assert!(!s.allows(0));
        assert!(s.allows(1)); // u64::MAX slots over u64::MAX ns: one per ns
        s.start(u64::MAX - 10, u64::MAX, 2, false);
        assert!(s.allows(u64::MAX - 10));
        s.released(u64::MAX - 10);
        assert!(!s.allows(u64::MAX - 6));
        assert!(s.allows(u64::MAX - 5));
        // An interval that ends before its origin (a late driver): every slot has come.
        s.start(10, 5, 3, false);
        s.released(10);
        assert!(s.allows(10));
        // A full interval: the pace alone.
        s.start(0, 100 * MS, 10, true);
        s.released(0);
        assert!(s.allows(0));
        s.arrived(1, 9, 10);
        assert!(s.allows(1));
    }
}
