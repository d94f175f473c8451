//! An open-loop schedule and its latency record (the `latency` scenario).
//!
//! Task `i` of a run is *intended* to be submitted at `start + i × period`, whatever happened to
//! the tasks before it: the producer waits for that time when it is early and submits at once
//! when it is late, and every delay is counted from the intended time. So a system that stalls
//! its producer (or its queue) cannot hide the stall by slowing the arrivals down (coordinated
//! omission): the tasks that should have arrived during the stall show it as their delay.
//!
//! Delays are recorded in HDR histograms (nanoseconds, 3 significant digits), in a few stripes
//! picked by context so that workers running different contexts rarely share one; a context's
//! tasks run one at a time, so at 16 contexts no two tasks ever meet on a stripe. The producer
//! keeps its own lateness (from a task's intended time to its submit) in a histogram of its own
//! and hands it over once at the end ([`OpenLoop::add_late`]): it tells a system's own queueing
//! from a producer that did not get the CPU in time. A schedule made with
//! [`OpenLoop::tracking_submits`] also keeps each task's own submit time, and records each
//! start from it too (submit-to-start proper: the system's wait alone, without the producer's
//! lateness).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Histogram stripes (contexts are spread over them by index).
const STRIPES: usize = 16;
/// The largest delay recorded as itself (larger ones count as this): 100 s, in ns.
const HIGHEST_NS: u64 = 100_000_000_000;
/// Significant digits the histograms keep.
const DIGITS: u8 = 3;
/// A wait longer than this sleeps (less a margin) instead of spinning.
const SLEEP_OVER: Duration = Duration::from_micros(200);

/// No submit time recorded for this task (yet).
const NOT_SUBMITTED: u64 = u64::MAX;

/// One stripe: submit-to-start and submit-to-finish delays, and the latest finish.
#[derive(Debug)]
struct Stripe {
    start: Histogram<u64>,
    /// Delays from each task's actual submit to its start (tracked schedules only).
    from_submit: Histogram<u64>,
    finish: Histogram<u64>,
    last_finish_ns: u64,
}

/// The schedule of one open-loop run and the delays of its tasks.
#[derive(Debug)]
pub struct OpenLoop {
    period_ns: f64,
    start: OnceLock<Instant>,
    /// Taken out by [`summary`](Self::summary), so a leaked run keeps no histograms.
    stripes: Box<[Mutex<Option<Stripe>>]>,
    /// The producer's lateness, handed over by [`add_late`](Self::add_late).
    late: Mutex<Option<Histogram<u64>>>,
    /// Per task index, how late the producer submitted it (ns; [`NOT_SUBMITTED`]: not yet);
    /// empty unless made with [`tracking_submits`](Self::tracking_submits).
    submitted: Box<[AtomicU64]>,
}

/// What one open-loop run measured.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Delays from each task's intended submit time to its start (ns).
    pub start: Histogram<u64>,
    /// Delays from each task's intended submit time to its finish (ns).
    pub finish: Histogram<u64>,
    /// Delays from each task's actual submit to its start (ns): `start` less the producer's
    /// lateness. Empty unless the schedule was made with [`OpenLoop::tracking_submits`].
    pub from_submit: Histogram<u64>,
    /// Delays from each task's intended submit time to the producer's submit of it (ns): the
    /// part of `start` the producer spent late.
    pub late: Histogram<u64>,
    /// Tasks per second offered (the schedule's rate).
    pub offered: f64,
    /// Tasks per second achieved: tasks finished / time from the first intended submit to
    /// the last finish.
    pub achieved: f64,
}

impl OpenLoop {
    /// A schedule of `rate` tasks per second (at least one task per 100 s).
    pub fn new(rate: f64) -> Self {
        let rate = if rate.is_finite() {
            rate.max(0.01)
        } else {
            0.01
        };
        let stripe = || {
            let h = Self::histogram();
            Mutex::new(Some(Stripe {
                start: h.clone(),
                from_submit: h.clone(),
                finish: h,
                last_finish_ns: 0,
            }))
        };
        Self {
            period_ns: 1e9 / rate,
            start: OnceLock::new(),
            stripes: (0..STRIPES).map(|_| stripe()).collect(),
            late: Mutex::new(Some(Self::histogram())),
            submitted: Box::new([]),
        }
    }

    /// The same schedule keeping the submit time of each of its first `tasks` tasks (8 bytes a
    /// task), so that [`summary`](Self::summary) also gives each start's delay from the task's
    /// actual submit.
    pub fn tracking_submits(mut self, tasks: u64) -> Self {
        self.submitted = (0..tasks).map(|_| AtomicU64::new(NOT_SUBMITTED)).collect();
        self
    }

    /// An empty histogram of the delays' bounds.
    pub fn histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, HIGHEST_NS, DIGITS)
            .unwrap_or_else(|e| unreachable!("constant histogram bounds: {e}"))
    }

    /// Adds the producer's lateness (recorded with [`wait_turn`](Self::wait_turn)'s results).
    pub fn add_late(&self, late: &Histogram<u64>) {
        let mut mine = self.late.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mine) = mine.as_mut() {
            // Same bounds (`histogram`): adding cannot fail.
            let _ = mine.add(late);
        }
    }

    /// When task `index` is meant to be submitted (the schedule starts at the first call);
    /// `None` past the clock's range.
    fn intended(&self, index: u64) -> Option<Instant> {
        let start = *self.start.get_or_init(Instant::now);
        // `as` saturates: an index far beyond any run gives the largest offset, not a wrap.
        start.checked_add(Duration::from_nanos((index as f64 * self.period_ns) as u64))
    }

    /// The producer's wait for task `index`'s turn: returns at once when it is late (or when
    /// its turn lies past the clock's range). Returns how late it returned (ns; 0 past the
    /// clock's range).
    pub fn wait_turn(&self, index: u64) -> u64 {
        let Some(due) = self.intended(index) else {
            return 0;
        };
        loop {
            let now = Instant::now();
            if now >= due {
                let late = (now - due).as_nanos() as u64;
                if let Some(slot) = self.submitted.get(index as usize) {
                    // Read by the task, after the submit that follows (which orders it).
                    slot.store(late.min(NOT_SUBMITTED - 1), Ordering::Release);
                }
                return late;
            }
            let ahead = due - now;
            if ahead > SLEEP_OVER {
                std::thread::sleep(ahead - SLEEP_OVER / 2);
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Records task `index` of context `ctx`, which started at `started` and finished at
    /// `finished`.
    pub fn record(&self, ctx: usize, index: u64, started: Instant, finished: Instant) {
        let intended = self.intended(index).unwrap_or(finished);
        let ns = |t: Instant| t.saturating_duration_since(intended).as_nanos() as u64;
        let since_start = finished
            .saturating_duration_since(*self.start.get_or_init(Instant::now))
            .as_nanos() as u64;
        let mut stripe = self.stripes[ctx % STRIPES]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Gone only once the run was summarised, after its last task.
        let Some(s) = stripe.as_mut() else {
            return;
        };
        s.start.saturating_record(ns(started).max(1));
        let late = self
            .submitted
            .get(index as usize)
            .map_or(NOT_SUBMITTED, |slot| slot.load(Ordering::Acquire));
        if late != NOT_SUBMITTED {
            let from_submit = ns(started).saturating_sub(late);
            s.from_submit.saturating_record(from_submit.max(1));
        }
        s.finish.saturating_record(ns(finished).max(1));
        s.last_finish_ns = s.last_finish_ns.max(since_start);
    }

    /// Every stripe merged, once the run is over; the stripes are freed (a later call
    /// summarises nothing).
    pub fn summary(&self) -> Summary {
        let mut stripes = self
            .stripes
            .iter()
            .filter_map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).take());
        let (mut start, mut from_submit, mut finish, mut last) = match stripes.next() {
            Some(s) => (s.start, s.from_submit, s.finish, s.last_finish_ns),
            None => {
                let h = Histogram::new(DIGITS)
                    .unwrap_or_else(|e| unreachable!("constant histogram digits: {e}"));
                (h.clone(), h.clone(), h, 0)
            }
        };
        for s in stripes {
            // Same bounds in every stripe: adding cannot fail.
            let _ = start.add(&s.start);
            let _ = from_submit.add(&s.from_submit);
            let _ = finish.add(&s.finish);
            last = last.max(s.last_finish_ns);
        }
        let tasks = start.len() as f64;
        let late = self
            .late
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(Self::histogram);
        Summary {
            late,
            offered: 1e9 / self.period_ns,
            achieved: if last == 0 {
                0.0
            } else {
                tasks * 1e9 / last as f64
            },
            start,
            from_submit,
            finish,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_count_from_the_intended_time() {
        let ol = OpenLoop::new(1_000.0); // 1 ms apart
        let t0 = ol.intended(0).unwrap();
        // Task 10 was due at 10 ms; it started at 15 ms and finished at 16 ms.
        ol.record(
            3,
            10,
            t0 + Duration::from_millis(15),
            t0 + Duration::from_millis(16),
        );
        let s = ol.summary();
        assert_eq!(s.start.len(), 1);
        let start = s.start.max();
        assert!((4_990_000..=5_010_000).contains(&start), "{start}");
        let finish = s.finish.max();
        assert!((5_990_000..=6_010_000).contains(&finish), "{finish}");
        assert_eq!(s.offered, 1_000.0);
        // One task, finished 16 ms after the start.
        assert!((s.achieved - 62.5).abs() < 0.1, "{}", s.achieved);
    }

    /// `wait_turn` returns how late the producer came to a task; what `add_late` hands over
    /// is in the summary.
    #[test]
    fn the_producers_lateness_is_kept_apart() {
        let ol = OpenLoop::new(1_000.0); // 1 ms apart
        let t0 = ol.intended(0).unwrap();
        // Task 0 was due at the start: a late return, by the time since then.
        while Instant::now() < t0 + Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let late = ol.wait_turn(0);
        assert!(late >= 2_000_000, "{late}");
        // Task 1 is past due too (by 1 ms).
        assert!(ol.wait_turn(1) >= 1_000_000);
        let mut h = OpenLoop::histogram();
        h.record_n(late, 3).unwrap();
        ol.add_late(&h);
        let s = ol.summary();
        assert_eq!(s.late.len(), 3);
        assert!(s.late.max() >= 2_000_000);
        // Summarised once: a second summary has no lateness left.
        assert_eq!(ol.summary().late.len(), 0);
    }

    /// A tracked schedule records each start from the task's own submit as well: the
    /// producer's lateness is taken out of that delay, not out of the intended-time one.
    #[test]
    fn a_tracked_schedule_records_starts_from_the_submit() {
        let ol = OpenLoop::new(1_000.0).tracking_submits(4); // 1 ms apart
        let t0 = ol.intended(0).unwrap();
        // Task 2 is due at 2 ms; the producer comes to it 5 ms late (at 7 ms).
        while Instant::now() < t0 + Duration::from_millis(7) {
            std::hint::spin_loop();
        }
        let late = ol.wait_turn(2);
        assert!(late >= 5_000_000, "{late}");
        let submit = t0 + Duration::from_millis(2) + Duration::from_nanos(late);
        // It starts 1 ms after its submit; task 3, never submitted, is not in `from_submit`.
        ol.record(
            0,
            2,
            submit + Duration::from_millis(1),
            submit + Duration::from_millis(2),
        );
        ol.record(1, 3, t0, t0);
        let s = ol.summary();
        assert_eq!((s.start.len(), s.from_submit.len()), (2, 1));
        let from_submit = s.from_submit.max();
        assert!(
            (990_000..=1_010_000).contains(&from_submit),
            "{from_submit}"
        );
        assert!(s.start.max() >= late + 990_000);
        // An untracked schedule keeps no submit times.
        let plain = OpenLoop::new(1_000.0);
        plain.wait_turn(0);
        plain.record(0, 0, Instant::now(), Instant::now());
        assert_eq!(plain.summary().from_submit.len(), 0);
    }

    #[test]
    fn extreme_rates_and_delays_are_bounded() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-9] {
            let ol = OpenLoop::new(rate);
            assert!(ol.period_ns.is_finite() && ol.period_ns > 0.0, "{rate}");
        }
        let ol = OpenLoop::new(1e12);
        let t0 = ol.intended(0).unwrap();
        // A start before the intended time counts as no delay; a huge one saturates.
        ol.record(0, 5, t0, t0 + Duration::from_secs(1_000));
        let s = ol.summary();
        assert_eq!(s.start.len(), 1);
        assert!(s.finish.max() >= HIGHEST_NS / 2);
        // The largest index at the slowest rate: no overflow, whatever the clock's range.
        let slow = OpenLoop::new(0.0);
        let _ = slow.intended(u64::MAX);
        slow.record(1, u64::MAX, t0, t0);
        assert_eq!(slow.summary().start.len(), 1);
    }
}
