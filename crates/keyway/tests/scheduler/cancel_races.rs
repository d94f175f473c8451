//! A `cancel()` that meets the scheduler ending a task unrun (rejected, timed out): the task is
//! counted once, in the class its handle says. Either the cancel lands first (the handle says
//! `Cancelled`, the task is counted `cancelled`) or the scheduler's end does (the cancel returns
//! false, the handle and the counts say `Rejected` or `TimedOut`), never a mix. Each test holds
//! the scheduler at the point of the race with a latch and a gate, and cancels there.

use crate::common;

use std::hash::{Hash, Hasher};
use std::time::Duration;

use common::{finishes, fixed_pool, hold_workers, jobs_scheduler, Gate, Latch};
use keyway::{ExecutorConfig, Scheduler, TaskError, Timing};

/// A context key whose `Clone` (done when the scheduler hands its task to the context's lane)
/// tells `cloning`, waits at `gate`, then panics.
struct HeldCloneKey {
    cloning: Latch,
    gate: Gate,
}

impl Clone for HeldCloneKey {
    fn clone(&self) -> Self {
        self.cloning.count_down();
        self.gate.wait();
        panic!("HeldCloneKey cloned");
    }
}

impl PartialEq for HeldCloneKey {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for HeldCloneKey {}
impl Hash for HeldCloneKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        0u8.hash(h)
    }
}

/// A task the scheduler took as live and is handing to its context's lane, cancelled while the
/// key's `Clone` runs; the clone then panics, which drops the released task unrun. The handle
/// says `Cancelled` (its cancel returned true, before the task could start): it is counted
/// `cancelled`, not `rejected` (found by the `pool_mixed` fuzz target, where the driver took a
/// late arrival as live just before the cancel).
#[test]
fn a_task_cancelled_while_its_key_is_cloned_is_counted_cancelled() {
    finishes("cancel during a key's clone", || {
        let pool = keyway::Pool::new().unwrap();
        let s = jobs_scheduler(&pool);
        let (cloning, gate) = (Latch::new(1), Gate::new());
        let key = HeldCloneKey {
            cloning: cloning.clone(),
            gate: gate.clone(),
        };
        let h = s
            .schedule_sequential("jobs", Timing::after(Duration::ZERO), key, || 1)
            .unwrap();
        cloning.wait();
        assert!(h.cancel(), "the task has not started");
        gate.open();
        s.shutdown();
        assert!(matches!(h.join(), Err(TaskError::Cancelled)));
        let st = s.stats("jobs").unwrap();
        assert_eq!((st.cancelled, st.rejected, st.pending), (1, 0, 0), "{st:?}");
        pool.shutdown();
    });
}

/// A task released to the pool and cancelled while queued there, then handed back by the
/// pool's `shutdown_now` and dropped: counted `cancelled`, as its handle says, not `rejected`.
#[test]
fn a_released_task_cancelled_then_handed_back_by_the_pool_is_counted_cancelled() {
    finishes("cancelled task handed back by the pool", || {
        let pool = fixed_pool(1);
        let s = jobs_scheduler(&pool);
        let held = hold_workers(&pool, 1);
        let h = s.schedule("jobs", Duration::ZERO, || 1).unwrap();
        common::eventually("the task queued on the pool", || {
            pool.stats().waiting_tasks == 1
        });
        assert!(h.cancel());
        let back = common::shutdown_now_while_held(&pool, &held);
        assert_eq!(back.len(), 1);
        drop(back);
        assert!(matches!(h.join(), Err(TaskError::Cancelled)));
        s.shutdown();
        let st = s.stats("jobs").unwrap();
        assert_eq!((st.cancelled, st.rejected, st.pending), (1, 0, 0), "{st:?}");
    });
}

/// A cancel while the timed-out hook runs for the task comes too late: the task has timed
/// out. It returns false, and the handle and the counts both say `TimedOut`.
#[test]
fn a_cancel_while_the_timed_out_hook_runs_comes_too_late() {
    finishes("cancel during the timed-out hook", || {
        let pool = keyway::Pool::new().unwrap();
        let (in_hook, gate) = (Latch::new(1), Gate::new());
        let (entered, leave) = (in_hook.clone(), gate.clone());
        let s = Scheduler::builder(&pool)
            .interval(Duration::from_millis(10))
            .executor(
                "paused",
                ExecutorConfig::with_tps(0.0).timeout(Duration::from_millis(1)),
            )
            .timed_out_hook(move |_| {
                entered.count_down();
                leave.wait();
            })
            .build()
            .unwrap();
        let h = s.schedule("paused", Duration::ZERO, || 1).unwrap();
        in_hook.wait();
        let cancelled = h.cancel();
        gate.open();
        let outcome = h.join();
        s.shutdown();
        let st = s.stats("paused").unwrap();
        assert!(
            !cancelled,
            "cancelled a task whose timeout was being reported"
        );
        assert!(matches!(outcome, Err(TaskError::TimedOut)), "{outcome:?}");
        assert_eq!(
            (st.timed_out, st.cancelled, st.pending),
            (1, 0, 0),
            "{st:?}"
        );
        pool.shutdown();
    });
}

/// A repeating task cancelled while it waits for its next run is counted `cancelled` when
/// a shutdown ends it (the graceful shutdown's sweep of repetitions, or `shutdown_now`), not
/// `rejected`.
#[test]
fn a_cancelled_repetition_is_counted_cancelled_at_shutdown() {
    finishes("cancelled repetition at shutdown", || {
        let pool = keyway::Pool::new().unwrap();
        for now in [false, true] {
            let s = jobs_scheduler(&pool);
            let hour = Duration::from_secs(3600);
            let h = s
                .schedule_at_fixed_rate("jobs", Timing::after(hour), hour, || ())
                .unwrap();
            assert!(h.cancel());
            if now {
                assert!(s.shutdown_now().is_empty());
            } else {
                s.shutdown();
            }
            assert!(matches!(h.join(), Err(TaskError::Cancelled)));
            let st = s.stats("jobs").unwrap();
            assert_eq!(
                (st.cancelled, st.rejected, st.pending),
                (1, 0, 0),
                "shutdown_now: {now}, {st:?}"
            );
        }
        pool.shutdown();
    });
}

/// A repeating task cancelled while a run is under way, with the scheduler shut down before the
/// run ends: the run counts `ran`, and the next one, which the shutdown refuses, `cancelled`
/// (as the handle says), not `rejected`.
#[test]
fn a_repetition_cancelled_during_its_last_run_is_counted_cancelled() {
    finishes("repetition cancelled during its run", || {
        let pool = keyway::Pool::new().unwrap();
        let s = jobs_scheduler(&pool);
        let (running, gate) = (Latch::new(1), Gate::new());
        let (started, leave) = (running.clone(), gate.clone());
        let h = s
            .schedule_with_fixed_delay(
                "jobs",
                Timing::after(Duration::ZERO),
                Duration::from_secs(3600),
                move || {
                    started.count_down();
                    leave.wait();
                },
            )
            .unwrap();
        running.wait();
        assert!(h.cancel());
        let stopper = {
            let s = s.clone();
            std::thread::spawn(move || s.shutdown())
        };
        common::eventually("intake stops", || s.is_shutdown());
        gate.open();
        stopper.join().unwrap();
        assert!(matches!(h.join(), Err(TaskError::Cancelled)));
        let st = s.stats("jobs").unwrap();
        assert_eq!(
            (st.scheduled, st.ran, st.cancelled, st.rejected, st.pending),
            (2, 1, 1, 0, 0),
            "{st:?}"
        );
        pool.shutdown();
    });
}
