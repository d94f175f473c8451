//! A thread's progress as the monitor sees it: `run_seq`, odd while the thread is inside a task,
//! and the `stuck` flag the monitor sets when it stays in one task too long.
//!
//! Protocol:
//! * the thread, at each task start and end, bumps `run_seq` (Release); after the end it clears
//!   `stuck` if it sees it set; a job that goes on to what would otherwise have been another
//!   task (a future resumed in place) counts as an end and a start (`task_continued`);
//! * the monitor, each period: if `run_seq` moved since its last look, the thread made progress:
//!   it clears a `stuck` flag it had set (rule S); if not, and the thread is inside a task for
//!   long enough, it sets `stuck`, then reads `run_seq` again and takes the flag back if the task
//!   ended meanwhile.
//!
//! The thread's "store `run_seq`, load `stuck`" and the monitor's "store `stuck`, load `run_seq`"
//! are a store-buffering pair: without `SeqCst` on all four accesses both loads may miss the
//! other side's store, and `stuck` stays set after the task ended (the pool then counts a thread
//! that is free as blocked, and adds auxiliary threads it does not need). `SeqCst` there would
//! put a full fence on every task's path; rule S instead bounds the stale flag to one monitor
//! period at no cost to the thread: only the monitor sets `stuck`, so it may take it back once
//! `run_seq` shows the thread moved on. The loom model `loom_progress` checks both sides.

use crate::loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// `run_seq` and `stuck` of one thread position.
pub(crate) struct Progress {
    run_seq: AtomicU64,
    stuck: AtomicBool,
}

/// What the monitor concluded about one thread this period.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The thread made progress since the last look (or is idle): not stuck.
    Moving,
    /// Still in the same task, not yet for long enough (or already marked).
    Waiting,
    /// Newly marked stuck: move the work queued behind it.
    Stuck,
}

impl Progress {
    pub(crate) fn new() -> Self {
        Progress {
            run_seq: AtomicU64::new(0),
            stuck: AtomicBool::new(false),
        }
    }

    /// The thread starts a task.
    #[inline]
    pub(crate) fn task_started(&self) {
        let seq = self.run_seq.load(Ordering::Relaxed);
        self.run_seq.store(seq + 1, Ordering::Release); // odd: inside a task
    }

    /// The thread finished the task it started.
    #[inline]
    pub(crate) fn task_finished(&self) {
        self.moved(1); // even: between tasks
    }

    /// The thread, still inside one job, goes on to another piece of work that would otherwise
    /// have been a task of its own (a self-woken future resumed in place): progress, as if a
    /// task ended and the next began.
    #[inline]
    pub(crate) fn task_continued(&self) {
        self.moved(2); // still odd
    }

    /// `run_seq` moves on by `by` (only this thread writes it); a `stuck` flag is cleared.
    #[inline]
    fn moved(&self, by: u64) {
        let seq = self.run_seq.load(Ordering::Relaxed);
        self.run_seq.store(seq + by, Ordering::Release);
        if self.stuck.load(Ordering::Relaxed) {
            self.stuck.store(false, Ordering::Release);
        }
    }

    /// The thread left its position: nothing about it is stuck.
    pub(crate) fn reset(&self) {
        self.stuck.store(false, Ordering::Release);
    }

    /// The thread's `run_seq` now (odd while inside a task).
    pub(crate) fn seq(&self) -> u64 {
        self.run_seq.load(Ordering::Acquire)
    }

    /// Whether the thread is inside a task now (for `Stats::running_tasks`; a snapshot).
    pub(crate) fn in_task(&self) -> bool {
        self.run_seq.load(Ordering::Acquire) % 2 == 1
    }

    pub(crate) fn is_stuck(&self) -> bool {
        self.stuck.load(Ordering::Acquire)
    }

    /// The monitor's look at this thread. `last` is the `run_seq` it saw the previous time (it
    /// is updated); `long_enough` says whether `run_seq` has not moved for `blocked_after` (the
    /// caller keeps the clock); `blocking` whether the thread is inside `keyway::blocking`.
    pub(crate) fn observe(&self, last: &mut u64, long_enough: bool, blocking: bool) -> Seen {
        let seq = self.run_seq.load(Ordering::Acquire);
        if seq != *last {
            *last = seq;
            // Rule S: the thread moved on; a flag we set and it missed is stale.
            if self.stuck.load(Ordering::Acquire) {
                self.stuck.store(false, Ordering::Release);
            }
            return Seen::Moving;
        }
        let in_task = seq % 2 == 1;
        if !in_task || !long_enough || blocking || self.stuck.load(Ordering::Acquire) {
            return Seen::Waiting;
        }
        self.stuck.store(true, Ordering::Release);
        if self.run_seq.load(Ordering::Acquire) != seq {
            // It finished meanwhile (and may have cleared the flag before we set it).
            self.stuck.store(false, Ordering::Release);
            return Seen::Moving;
        }
        Seen::Stuck
    }
}

#[cfg(all(test, loom))]
mod loom_progress {
    //! The stuck flag under loom: after a task ends and the monitor looks once more, the flag is
    //! clear, whatever the interleaving and whichever stale values the loads return.

    use super::{Progress, Seen};
    use crate::loom::sync::atomic::Ordering;
    use crate::loom::sync::Arc;
    use crate::loom::thread;

    #[test]
    fn loom_stuck_flag_never_outlives_the_task() {
        loom::model(|| {
            let p = Arc::new(Progress::new());
            // The thread is inside a task the monitor already saw (`last` = 1) long enough.
            p.task_started();
            let worker = {
                let p = p.clone();
                thread::spawn(move || p.task_finished())
            };
            let mut last = 1;
            let first = p.observe(&mut last, true, false);
            worker.join().unwrap();
            // The next period.
            let second = p.observe(&mut last, true, false);
            assert!(
                !p.stuck.load(Ordering::Acquire),
                "stuck outlived its task: {first:?}, then {second:?}"
            );
        });
    }

    #[test]
    fn loom_a_thread_in_one_task_is_marked_stuck_once() {
        loom::model(|| {
            let p = Arc::new(Progress::new());
            p.task_started();
            let monitor = {
                let p = p.clone();
                thread::spawn(move || {
                    let mut last = 1;
                    let a = p.observe(&mut last, true, false);
                    let b = p.observe(&mut last, true, false);
                    (a, b)
                })
            };
            let (a, b) = monitor.join().unwrap();
            assert_eq!((a, b), (Seen::Stuck, Seen::Waiting));
            assert!(p.is_stuck());
        });
    }
}
