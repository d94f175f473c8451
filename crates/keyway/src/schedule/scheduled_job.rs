//! What the scheduler keeps for each waiting task: the [`ScheduledJob`] trait its kinds
//! implement (see `job_kinds`), and [`InlineJob`], a job of any kind type-erased in the task
//! store [`InlineBox`]: a job of up to four words (a closure capturing a few values, the
//! common case) is kept in its bucket entry itself, a larger one behind one box. Scheduling a
//! small task therefore allocates nothing: the entry is pushed by value into its bucket's
//! vector, and the job is moved out again when it is released.
//!
//! Measured (callgrind, `keyway-bench schedule`): the box per task cost 190 instructions in
//! `malloc` on the schedule path and as many again in `free` on the driver's; this is why the
//! job is not simply a `Box<dyn ScheduledJob>`. The store, its fit-or-box placement and the
//! numbered rules the `SAFETY` comments below cite are in `task::inline`.

use std::sync::Arc;

use super::executor::ExecCore;
use crate::task::{Abandon, InlineBox, LiveValue, LiveValueRef, PendingTask, VTable, VTableFor};

/// A scheduled task (type-erased in an [`InlineJob`]).
pub(crate) trait ScheduledJob: Send + Sized + 'static {
    /// True for a repeating task (it ends at shutdown instead of running again).
    const REPEATING: bool = false;
    /// True if the task may run anywhere on the pool, so that the timer thread may hand it
    /// over in a batch with others ([`run_here`](ScheduledJob::run_here) on a pool thread).
    const BATCHABLE: bool = false;
    /// False once its handle was cancelled: it will not run.
    fn is_live(&self) -> bool;
    /// Claims the task, which is to end unrun: true unless its handle was cancelled first;
    /// from then on a `cancel()` returns false, and the task must be
    /// [`abandon`](ScheduledJob::abandon)ed (see [`Unrun`]). A task with no handle is always
    /// claimed.
    fn claim(&self) -> bool;
    /// Hands the task to the pool (or its context's lane), waiting for room while a bounded
    /// pool is full. It reports its own outcome to `exec`'s counters when it runs; dropped unrun
    /// (refused by a pool shut down, handed back by its `shutdown_now`), it ends rejected,
    /// counted once, unless its handle was cancelled first (`job_kinds::Released`).
    fn dispatch(self, exec: &Arc<ExecCore>, due: u64, deadline: u64, priority: i64);
    /// Runs the task on this thread (a pool thread), as [`dispatch`](ScheduledJob::dispatch)
    /// would have had it run: times it out if it is too late, reports its outcome to `exec`.
    fn run_here(self, exec: &Arc<ExecCore>, due: u64, deadline: u64, priority: i64);
    /// Drops the task unrun, telling its handle why.
    fn abandon(self, why: Abandon);
    /// `shutdown_now`: the task to hand back, if it is one a caller can run.
    fn into_pending(self) -> Option<PendingTask>;
}

/// The operations of one [`ScheduledJob`] type.
struct JobVTable {
    repeating: bool,
    batchable: bool,
    is_live: fn(LiveValueRef<'_>) -> bool,
    claim: fn(LiveValueRef<'_>) -> bool,
    dispatch: fn(LiveValue<'_>, &Arc<ExecCore>, u64, u64, i64),
    run_here: fn(LiveValue<'_>, &Arc<ExecCore>, u64, u64, i64),
    abandon: fn(LiveValue<'_>, Abandon),
    into_pending: fn(LiveValue<'_>) -> Option<PendingTask>,
    drop: fn(LiveValue<'_>),
}

impl VTable for JobVTable {
    #[inline]
    fn drop_value(&self, slot: LiveValue<'_>) {
        (self.drop)(slot)
    }
}

impl<J: ScheduledJob> VTableFor<J> for JobVTable {
    const VTABLE: &'static JobVTable = &JobVTable {
        repeating: J::REPEATING,
        batchable: J::BATCHABLE,
        // SAFETY: rule 2 — this is `VTableFor<J>::VTABLE`, given the slot of a `J`.
        is_live: |slot| unsafe { slot.get::<J>() }.is_live(),
        // SAFETY: rule 2, as for `is_live`.
        claim: |slot| unsafe { slot.get::<J>() }.claim(),
        dispatch: |slot, exec, due, deadline, priority| {
            // SAFETY: rule 2, as for `is_live`.
            unsafe { slot.take::<J>() }.dispatch(exec, due, deadline, priority)
        },
        run_here: |slot, exec, due, deadline, priority| {
            // SAFETY: rule 2, as for `is_live`.
            unsafe { slot.take::<J>() }.run_here(exec, due, deadline, priority)
        },
        // SAFETY: rule 2, as for `is_live`.
        abandon: |slot, why| unsafe { slot.take::<J>() }.abandon(why),
        // SAFETY: rule 2, as for `is_live`.
        into_pending: |slot| unsafe { slot.take::<J>() }.into_pending(),
        // SAFETY: rule 2, as for `is_live`.
        drop: |slot| unsafe { slot.drop_value::<J>() },
    };
}

/// A job of any kind, stored inline when it fits (see the module documentation).
pub(crate) struct InlineJob(InlineBox<JobVTable>);

impl InlineJob {
    /// Stores `job`: inline if it fits, boxed otherwise.
    #[inline]
    pub(crate) fn new<J: ScheduledJob>(job: J) -> Self {
        InlineJob(InlineBox::new(job))
    }

    /// False once its handle was cancelled: it will not run.
    #[inline]
    pub(crate) fn is_live(&self) -> bool {
        (self.0.vtable().is_live)(self.0.slot_ref())
    }

    /// See [`ScheduledJob::claim`].
    #[inline]
    pub(crate) fn claim(&self) -> bool {
        (self.0.vtable().claim)(self.0.slot_ref())
    }

    /// True for a repeating task.
    #[inline]
    pub(crate) fn is_repeating(&self) -> bool {
        self.0.vtable().repeating
    }

    /// See [`ScheduledJob::dispatch`].
    #[inline]
    pub(crate) fn dispatch(self, exec: &Arc<ExecCore>, due: u64, deadline: u64, priority: i64) {
        self.0
            .consume(|vtable, slot| (vtable.dispatch)(slot, exec, due, deadline, priority))
    }

    /// True if it may be handed to the pool in a batch (see [`ScheduledJob::BATCHABLE`]).
    #[inline]
    pub(crate) fn is_batchable(&self) -> bool {
        self.0.vtable().batchable
    }

    /// See [`ScheduledJob::run_here`].
    #[inline]
    pub(crate) fn run_here(self, exec: &Arc<ExecCore>, due: u64, deadline: u64, priority: i64) {
        self.0
            .consume(|vtable, slot| (vtable.run_here)(slot, exec, due, deadline, priority))
    }

    /// See [`ScheduledJob::abandon`].
    #[inline]
    pub(crate) fn abandon(self, why: Abandon) {
        self.0.consume(|vtable, slot| (vtable.abandon)(slot, why))
    }

    /// See [`ScheduledJob::into_pending`].
    #[inline]
    pub(crate) fn into_pending(self) -> Option<PendingTask> {
        self.0.consume(|vtable, slot| (vtable.into_pending)(slot))
    }
}

/// A job that is to end unrun (rejected or timed out), as [`ExecCore`] ends it: claimed from
/// its handle first, then abandoned. Either a [`ScheduledJob`] (a released task dropped on its
/// way to the pool) or an [`InlineJob`] (one the driver holds).
pub(crate) trait Unrun: Send {
    /// See [`ScheduledJob::claim`].
    fn claim(&self) -> bool;
    /// See [`ScheduledJob::abandon`].
    fn abandon(self, why: Abandon);
}

impl<J: ScheduledJob> Unrun for J {
    fn claim(&self) -> bool {
        ScheduledJob::claim(self)
    }
    fn abandon(self, why: Abandon) {
        ScheduledJob::abandon(self, why)
    }
}

impl Unrun for InlineJob {
    fn claim(&self) -> bool {
        InlineJob::claim(self)
    }
    fn abandon(self, why: Abandon) {
        InlineJob::abandon(self, why)
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::task::WORDS;
    use std::mem::size_of;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A job that counts its drops, of `N` words.
    struct Counted<const N: usize>(Arc<AtomicUsize>, [usize; N]);

    impl<const N: usize> Drop for Counted<N> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl<const N: usize> ScheduledJob for Counted<N> {
        fn is_live(&self) -> bool {
            self.1.len() == N
        }
        fn claim(&self) -> bool {
            self.is_live()
        }
        fn dispatch(self, _: &Arc<ExecCore>, _: u64, _: u64, _: i64) {}
        fn run_here(self, _: &Arc<ExecCore>, _: u64, _: u64, _: i64) {}
        fn abandon(self, _: Abandon) {}
        fn into_pending(self) -> Option<PendingTask> {
            None
        }
    }

    #[test]
    fn small_and_large_jobs_are_dropped_exactly_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        // Inline (1 + 2 words) and boxed (1 + 8 words); dropped unconsumed, or consumed.
        let small = InlineJob::new(Counted(drops.clone(), [7; 2]));
        let large = InlineJob::new(Counted(drops.clone(), [7; 8]));
        assert!(small.is_live() && large.is_live());
        assert!(small.claim() && large.claim());
        assert!(!small.is_repeating());
        drop(small);
        drop(large);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        assert!(InlineJob::new(Counted(drops.clone(), [0; 3]))
            .into_pending()
            .is_none());
        InlineJob::new(Counted(drops.clone(), [0; 9])).abandon(Abandon::Rejected);
        assert_eq!(drops.load(Ordering::SeqCst), 4);
        assert_eq!(size_of::<InlineJob>(), (WORDS + 1) * size_of::<usize>());
    }
}
