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
