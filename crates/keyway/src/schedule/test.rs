//! The scheduler on a manual clock: when each task is released, exactly, in the scheduler's own
//! time. The time moves only when a test moves it, one step at a time, and each step waits
//! until the scheduler's thread has seen it and the pool has run what it released, so that a
//! task's recorded time is the time of its release, whatever the load on the machine.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::clock::ManualTime;
use super::{ExecutorConfig, Scheduler, Timing};
use crate::face::Pool;

const MS: u64 = 1_000_000;

/// A pool and a scheduler on it whose time is `time`.
struct Manual {
    time: &'static ManualTime,
    scheduler: Scheduler,
    pool: Pool,
    /// The times (ms) at which recorded tasks ran, by name.
    log: Arc<Mutex<Vec<(&'static str, u64)>>>,
}

/// A failed test must not hang in the drop, which waits for every task held (and the time no
/// longer moves): what is held is handed back and dropped.
impl Drop for Manual {
    fn drop(&mut self) {
        drop(self.scheduler.shutdown_now());
    }
}

impl Manual {
    fn new(interval_ms: u64, executor: &str, config: ExecutorConfig) -> Self {
        let time = ManualTime::leak();
        let pool = Pool::builder().core_threads(2).build().unwrap();
        let scheduler = Scheduler::builder(&pool)
            .interval(Duration::from_millis(interval_ms))
            .executor(executor, config)
            .manual_time(time)
            .build()
            .unwrap();
        let m = Manual {
            time,
            scheduler,
            pool,
            log: Arc::default(),
        };
        m.settle();
        m
    }

    /// Now, in milliseconds.
    fn now_ms(&self) -> u64 {
        self.time.now() / MS
    }

    /// Waits until the scheduler's thread has stepped at the time set and the pool has run
    /// what it released.
    fn settle(&self) {
        self.time.wait_steps(2, || self.scheduler.wake_driver());
        assert!(self.pool.wait_idle());
    }

    /// Moves the time to `to_ms`, `step_ms` at a time, settling after each.
    fn advance_to(&self, to_ms: u64, step_ms: u64) {
        while self.now_ms() < to_ms {
            self.time.set((self.now_ms() + step_ms).min(to_ms) * MS);
            self.settle();
        }
    }

    /// Moves the time on, `step_ms` at a time, until `name` has run (at most `limit_ms`);
    /// returns when it ran.
    fn run_until(&self, name: &str, limit_ms: u64, step_ms: u64) -> Option<u64> {
        let until = self.now_ms() + limit_ms;
        loop {
            if let Some(t) = self.ran(name) {
                return Some(t);
            }
            if self.now_ms() >= until {
                return None;
            }
            self.advance_to(self.now_ms() + step_ms, step_ms);
        }
    }

    /// A task that records, as `name`, the time it ran at.
    fn task(&self, name: &'static str) -> impl FnOnce() + Send + 'static {
        let (log, time) = (self.log.clone(), self.time);
        move || log.lock().unwrap().push((name, time.now() / MS))
    }

    fn ran(&self, name: &str) -> Option<u64> {
        let log = self.log.lock().unwrap();
        log.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
    }

    fn times(&self) -> Vec<u64> {
        self.log.lock().unwrap().iter().map(|&(_, t)| t).collect()
    }
}

/// Four tasks due together in one interval of 400 ms, on an executor limited to 100 per second:
/// released spread evenly over the interval (one every 400 / 4 ms), not in one burst.
#[test]
fn tasks_due_together_are_spread_over_their_interval() {
    let m = Manual::new(400, "x", ExecutorConfig::with_tps(100.0));
    for _ in 0..4 {
        let task = m.task("spread");
        m.scheduler
            .execute_with("x", Timing::after(Duration::from_millis(400)), task)
            .unwrap();
    }
    m.advance_to(800, 1);
    assert_eq!(m.times(), vec![400, 500, 600, 700]);
    m.scheduler.shutdown();
}

/// Tasks arriving for the interval already running are spread over what is left of it; one
/// that finds nothing held goes at once.
#[test]
fn late_arrivals_are_spread_over_what_is_left_of_the_interval() {
    let m = Manual::new(400, "x", ExecutorConfig::with_tps(100.0));
    m.advance_to(100, 10);
    for _ in 0..3 {
        let task = m.task("late");
        m.scheduler
            .execute_with("x", Timing::after(Duration::ZERO), task)
            .unwrap();
    }
    m.advance_to(399, 1);
    // At once (at 100, or at 101 if the scheduler's thread saw them only then), then spread
    // over the 300 ms left: 100 ms apart.
    let times = m.times();
    assert!(matches!(times[..], [100 | 101, _, _]), "{times:?}");
    assert_eq!((times[1] - times[0], times[2] - times[1]), (100, 100));
    let alone = m.task("alone");
    m.scheduler
        .execute_with("x", Timing::after(Duration::ZERO), alone)
        .unwrap();
    let at = m.run_until("alone", 5, 1);
    assert!(at.is_some_and(|t| t <= 400), "{at:?}"); // at 399, or the next step
    m.scheduler.shutdown();
}

/// The spreading keeps the limit's spacing: 15 tasks due together in an interval of 400 ms at
/// 50 per second (a quota of 20) go every 400 / 15 ms, never closer than 1 / 50 s.
#[test]
fn spreading_keeps_the_limit() {
    let m = Manual::new(400, "x", ExecutorConfig::with_tps(50.0));
    for _ in 0..15 {
        let task = m.task("t");
        m.scheduler
            .execute_with("x", Timing::after(Duration::from_millis(400)), task)
            .unwrap();
    }
    m.advance_to(800, 1);
    let times = m.times();
    // Slot i at 400 + i × 400 / 15 ms, released at the first step (1 ms) at or after it.
    let expected: Vec<u64> = (0..15u64).map(|i| 400 + (i * 400).div_ceil(15)).collect();
    assert_eq!(times, expected);
    assert!(times.windows(2).all(|w| w[1] - w[0] >= 20), "{times:?}");
    m.scheduler.shutdown();
}

/// A limit raised by `set_tps` applies from the next interval: raised from 0.2 per second (one
/// every 5 s) to 100 per second, the next task goes at the next interval's start, not 5 s
/// after the last.
#[test]
fn a_raised_limit_applies_from_the_next_interval() {
    let m = Manual::new(100, "slow", ExecutorConfig::with_tps(0.2));
    let first = m.task("first");
    m.scheduler
        .execute_with("slow", Timing::after(Duration::ZERO), first)
        .unwrap();
    let Some(first) = m.run_until("first", 6_000, 10) else {
        panic!("at 0.2 per second, the first task runs within 5 s");
    };
    m.scheduler.set_tps("slow", 100.0).unwrap();
    let second = m.task("second");
    m.scheduler
        .execute_with("slow", Timing::after(Duration::ZERO), second)
        .unwrap();
    let second = m.run_until("second", 1_000, 1);
    assert!(
        second.is_some_and(|t| t - first <= 100),
        "ran at {first} ms, then {second:?} ms"
    );
    m.scheduler.shutdown();
}
