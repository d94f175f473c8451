//! Monotonic time cut into intervals: nanoseconds since the scheduler started, and interval
//! numbers. Only `Instant` is used, so a wall-clock jump changes nothing.
//!
//! The crate's own tests may give a scheduler a [`ManualTime`] instead: its `now` is what the
//! test set, so that a test can say exactly when each release happened without measuring
//! wall-clock time.

use std::time::{Duration, Instant};

#[cfg(test)]
pub(crate) use manual::ManualTime;

/// "Never due": a delay that overflowed.
pub(crate) const NEVER: u64 = u64::MAX;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    epoch: Instant,
    interval: u64,
    /// Tests: the time comes from here instead of `Instant::now()`.
    #[cfg(test)]
    manual: Option<&'static ManualTime>,
}

impl Clock {
    /// `interval` is checked by the builder: between 10 ms and one day.
    pub(crate) fn new(interval: Duration) -> Self {
        Clock {
            epoch: Instant::now(),
            interval: interval.as_nanos() as u64,
            #[cfg(test)]
            manual: None,
        }
    }

    /// Tests: a clock whose time is `manual`'s.
    #[cfg(test)]
    pub(crate) fn manual(interval: Duration, manual: &'static ManualTime) -> Self {
        Clock {
            manual: Some(manual),
            ..Clock::new(interval)
        }
    }

    /// The scheduler's thread finished one step (tests count them, to know that it has seen
    /// the time they set).
    #[inline]
    pub(crate) fn stepped(&self) {
        #[cfg(test)]
        if let Some(m) = self.manual {
            m.stepped();
        }
    }

    pub(crate) fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// Nanoseconds from the epoch to `t` (0 before the epoch).
    #[inline]
    pub(crate) fn at(&self, t: Instant) -> u64 {
        // Seconds and nanoseconds apart: no 128-bit arithmetic on the schedule path.
        let d = t.saturating_duration_since(self.epoch);
        d.as_secs()
            .checked_mul(1_000_000_000)
            .and_then(|n| n.checked_add(u64::from(d.subsec_nanos())))
            .unwrap_or(NEVER)
    }

    #[inline]
    pub(crate) fn now(&self) -> u64 {
        #[cfg(test)]
        if let Some(m) = self.manual {
            return m.now();
        }
        self.at(Instant::now())
    }

    /// Nanoseconds of `now + delay`, or [`NEVER`] on overflow.
    #[inline]
    pub(crate) fn after(&self, now: u64, delay: Duration) -> u64 {
        u64::try_from(delay.as_nanos())
            .ok()
            .and_then(|d| now.checked_add(d))
            .unwrap_or(NEVER)
    }

    /// The interval holding time `t`.
    #[inline]
    pub(crate) fn interval_of(&self, t: u64) -> u64 {
        t / self.interval
    }

    /// Where interval `k` starts, in nanoseconds ([`NEVER`] on overflow).
    pub(crate) fn start_of(&self, k: u64) -> u64 {
        k.checked_mul(self.interval).unwrap_or(NEVER)
    }

    /// The instant of time `t` (`None` for [`NEVER`] or on overflow).
    pub(crate) fn instant(&self, t: u64) -> Option<Instant> {
        if t == NEVER {
            return None;
        }
        self.epoch.checked_add(Duration::from_nanos(t))
    }
}

#[cfg(test)]
mod manual {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use parking_lot::{Condvar, Mutex};

    /// A time that moves only when a test moves it (nanoseconds since the scheduler's epoch),
    /// and the count of the scheduler thread's steps, so that the test can wait until the
    /// thread has seen the time it set.
    #[derive(Debug, Default)]
    pub(crate) struct ManualTime {
        now: AtomicU64,
        steps: Mutex<u64>,
        stepped: Condvar,
    }

    impl ManualTime {
        /// A new one, for the rest of the test process (a clock is `Copy`).
        pub(crate) fn leak() -> &'static ManualTime {
            Box::leak(Box::default())
        }

        pub(crate) fn now(&self) -> u64 {
            self.now.load(Ordering::SeqCst)
        }

        pub(crate) fn set(&self, t: u64) {
            self.now.store(t, Ordering::SeqCst);
        }

        /// The scheduler's thread finished a step.
        pub(crate) fn stepped(&self) {
            *self.steps.lock() += 1;
            self.stepped.notify_all();
        }

        /// Waits until the scheduler's thread has finished `n` more steps, calling `wake` (to
        /// unpark it) until it has. Two steps after a [`set`](ManualTime::set): the second
        /// began after it, so it saw the new time.
        pub(crate) fn wait_steps(&self, n: u64, wake: impl Fn()) {
            let mut steps = self.steps.lock();
            let target = *steps + n;
            while *steps < target {
                wake();
                self.stepped.wait_for(&mut steps, Duration::from_millis(1));
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn extremes_saturate_to_never() {
        let c = Clock::new(Duration::from_millis(10));
        assert_eq!(c.after(5, Duration::MAX), NEVER);
        assert_eq!(c.after(u64::MAX - 1, Duration::from_nanos(2)), NEVER);
        assert_eq!(c.after(5, Duration::ZERO), 5);
        assert_eq!(c.start_of(u64::MAX), NEVER);
        assert_eq!(c.instant(NEVER), None);
        assert_eq!(c.interval_of(25_000_000), 2);
        assert_eq!(
            c.at(c.epoch - Duration::from_secs(1).min(c.epoch.elapsed())),
            0
        );
    }
}
