//! Where a future's poll or wake-up runs: on a worker of its own pool, or elsewhere.
//!
//! A future's task holds its pool weakly (a stopped pool drops it). On a worker of that pool the
//! worker already holds the registry, so [`with_pool`] lends the worker's instead of upgrading
//! the weak reference (two read-modify-writes of a shared count per poll and per wake-up), and
//! a message finished there is counted in the worker's own slot (see "Finishing on a worker" in
//! the pool's accounting).

use std::future::Future;
use std::sync::{Arc, Weak};

use crate::engine::{worker, PollTask, Registry, Work, WorkerCtx};
use crate::task::drop_quietly;

/// The pool a future runs on, as seen from the running thread.
pub(crate) struct OnPool<'a> {
    pub(crate) registry: &'a Arc<Registry>,
    /// This thread's worker, if it is one of the pool's.
    worker: Option<&'a WorkerCtx>,
}

impl OnPool<'_> {
    /// Whether a future that woke itself during its poll on this thread may be polled again at
    /// once (`future::probe`): on a worker of the pool, within its continuation streak, and not
    /// while the pool is stopping (its next poll is where `shutdown_now` cancels it).
    #[inline]
    pub(crate) fn may_resume(&self) -> bool {
        !self.registry.is_stopping() && self.worker.is_some_and(WorkerCtx::take_turn_in_place)
    }

    /// One accepted task finished on this thread.
    pub(crate) fn count_finished(&self) {
        self.registry.count_finished(1, self.worker);
    }
}

/// Calls `f` with the pool `weak` points to, or `None` if it is gone.
#[inline]
pub(crate) fn with_pool<R>(weak: &Weak<Registry>, f: impl FnOnce(Option<OnPool<'_>>) -> R) -> R {
    worker::with_current(|cx| match cx {
        Some(cx) if std::ptr::eq(Arc::as_ptr(&cx.registry), weak.as_ptr()) => f(Some(OnPool {
            registry: &cx.registry,
            worker: Some(cx),
        })),
        _ => match weak.upgrade() {
            Some(registry) => f(Some(OnPool {
                registry: &registry,
                worker: None,
            })),
            None => f(None),
        },
    })
}

/// Makes `fut` a task of the pool of `registry` (detached: it runs until done or cancelled) and
/// returns its first poll. The pool is the task's metadata, so the schedule function is a plain
/// function: `async-task` then wakes and schedules without taking a reference on the task for
/// the schedule call (it does so for a schedule closure with captures: two read-modify-writes
/// per wake-up).
pub(crate) fn spawn_on<F>(registry: &Arc<Registry>, fut: F) -> PollTask
where
    F: Future<Output = ()> + Send + 'static,
{
    let (runnable, task) = async_task::Builder::new()
        .metadata(Arc::downgrade(registry))
        .spawn(move |_| fut, schedule_poll);
    task.detach();
    runnable
}

/// A future task's schedule function: its woken `runnable` is queued on its pool as a poll job
/// (run next on this worker when it can), or dropped, cancelling the future at its await point,
/// once the pool is stopping or gone.
fn schedule_poll(runnable: PollTask) {
    let unrun = worker::with_current(|cx| match cx {
        // On a worker of its pool: the worker holds the registry.
        Some(cx) if std::ptr::eq(Arc::as_ptr(&cx.registry), runnable.metadata().as_ptr()) => {
            schedule_or_give_back(&cx.registry, runnable)
        }
        _ => match runnable.metadata().upgrade() {
            Some(registry) => schedule_or_give_back(&registry, runnable),
            None => Some(runnable),
        },
    });
    if let Some(runnable) = unrun {
        drop_quietly(runnable);
    }
}

/// Queues `runnable` on `registry` unless the pool is stopping; else gives it back (to drop).
fn schedule_or_give_back(registry: &Arc<Registry>, runnable: PollTask) -> Option<PollTask> {
    if registry.is_stopping() {
        return Some(runnable);
    }
    registry.schedule_next(Work::Poll(runnable));
    None
}
