//! Where a future's poll or wake-up runs: on a worker of its own pool, or elsewhere.
//!
//! A future's task holds its pool weakly (a stopped pool drops it). On a worker of that pool the
//! worker already holds the registry, so [`with_pool`] lends the worker's instead of upgrading
//! the weak reference (two read-modify-writes of a shared count per poll and per wake-up), and
//! a message finished there is counted in the worker's own slot (see "Finishing on a worker" in
//! the pool's accounting).

use std::sync::{Arc, Weak};

use crate::lane::drop_quietly;
use crate::pool::registry::{Job, Registry};
use crate::pool::worker::{self, WorkerCtx};

/// The pool a future runs on, as seen from the running thread.
pub(crate) struct OnPool<'a> {
    pub(crate) registry: &'a Arc<Registry>,
    /// This thread's worker, if it is one of the pool's.
    worker: Option<&'a WorkerCtx>,
}

impl OnPool<'_> {
    /// One accepted task finished on this thread.
    pub(crate) fn task_done(&self) {
        match self.worker {
            Some(cx) => cx.tasks_done(1),
            None => self.registry.task_done(),
        }
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

/// A future task's schedule function: its woken `runnable` is queued on the pool as a poll job
/// (run next on this worker when it can), or dropped, cancelling the future at its await point,
/// once the pool is stopping or gone.
pub(crate) fn schedule_poll(weak: &Weak<Registry>, runnable: async_task::Runnable) {
    let unrun = with_pool(weak, |pool| match pool {
        Some(pool) if !pool.registry.is_stopping() => {
            pool.registry.schedule_next(Job::Poll(runnable));
            None
        }
        _ => Some(runnable),
    });
    if let Some(runnable) = unrun {
        drop_quietly(runnable);
    }
}
