//! The scheduler's timer thread ([`TimerThread`]): it starts each interval of every executor,
//! releases admitted tasks through the interval, and exits once the scheduler is shut down and
//! holds nothing.
//!
//! It runs no task itself (tasks run on the pool); the user code it touches — hooks, the
//! coordinator, drops of cancelled or expired tasks — is contained, so a panic there cannot
//! stop it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::sync::Parker;
use parking_lot::Mutex;

use super::coordinator::Coordinator;
use super::executor::Shared;
use super::interval::Intervals;
use crate::task::PendingTask;

/// How often the driver wakes while it releases tasks through an interval.
const STEP: Duration = Duration::from_millis(1);

pub(crate) struct TimerThread {
    pub(crate) shared: Arc<Shared>,
    pub(crate) executors: Vec<Intervals>,
    pub(crate) coordinator: Arc<dyn Coordinator>,
    pub(crate) parker: Parker,
    /// Where `shutdown_now` finds what was handed back.
    pub(crate) handed_back: Arc<Mutex<Vec<PendingTask>>>,
    /// Keeps the scheduler attached to its pool until this thread exits.
    pub(crate) _life: Arc<super::lifeline::Lifeline>,
}

impl TimerThread {
    pub(crate) fn run(mut self) {
        let clock = self.shared.clock;
        let mut current: Option<u64> = None;
        loop {
            let now = clock.now();
            let k = clock.interval_of(now);
            let stepped = catch_unwind(AssertUnwindSafe(|| {
                if current != Some(k) {
                    current = Some(k);
                    for e in &mut self.executors {
                        e.start(k, &clock, &*self.coordinator);
                    }
                }
                for e in &mut self.executors {
                    e.step(now, &clock);
                }
            }));
            if stepped.is_err() {
                tracing::error!("keyway scheduler: a step failed; going on");
            }
            if self.shared.closed.load(Ordering::SeqCst) {
                // Every step while closed: a repetition running on the pool may still have
                // put its next run back just before intake stopped.
                // A graceful shutdown ends what could never run; `shutdown_now` (below)
                // hands it back instead.
                let stopping = self.shared.stop_now.load(Ordering::SeqCst);
                for e in &mut self.executors {
                    e.end_repeating();
                    if !stopping {
                        e.end_never_due();
                    }
                }
                if !stopping && self.shared.pauses_end.load(Ordering::SeqCst) {
                    for e in &mut self.executors {
                        e.end_if_paused_for_good();
                    }
                }
            }
            if self.shared.stop_now.load(Ordering::SeqCst) {
                let mut back = Vec::new();
                for e in &mut self.executors {
                    e.hand_back(&mut back);
                }
                if self.shared.drop_handed_back.load(Ordering::SeqCst) {
                    for task in back {
                        if catch_unwind(AssertUnwindSafe(move || drop(task))).is_err() {
                            tracing::error!("keyway scheduler: a dropped task panicked");
                        }
                    }
                } else {
                    self.handed_back.lock().extend(back);
                }
            }
            if self.shared.closed.load(Ordering::SeqCst) && self.idle() {
                break;
            }
            let next_boundary = clock.start_of(k.saturating_add(1));
            let mut wait = Duration::from_nanos(next_boundary.saturating_sub(clock.now()));
            if self.shared.closed.load(Ordering::SeqCst)
                || self.executors.iter().any(Intervals::releasing)
            {
                wait = wait.min(STEP);
            }
            clock.stepped();
            self.parker.park_timeout(wait);
        }
        for e in &mut self.executors {
            e.finish();
            let name = e.exec.name.clone();
            let coordinator = &self.coordinator;
            e.exec.contain(|| coordinator.leave(&name));
        }
        let (lock, cv) = &self.shared.exited;
        *lock.lock() = true;
        cv.notify_all();
        tracing::debug!("keyway scheduler: driver exited");
    }

    /// Nothing held: no executor has a task the driver has not released or ended.
    fn idle(&self) -> bool {
        self.executors
            .iter()
            .all(|e| !e.holds_tasks() && e.exec.stats.held() == 0)
    }
}
