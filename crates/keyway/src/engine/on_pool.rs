//! The pool as the running thread sees it ([`OnPool`]): its registry, and its worker when the
//! thread is one of the pool's. Whatever runs a piece of a task — a lane's turn, a future's
//! poll, the end of a future — asks it the three questions such code has: is the pool stopping
//! (`shutdown_now`: hand back, do not start), how to count a finish (on a worker of the pool, a
//! plain store in the worker's own slot; see "Finishing on a worker" in `accounting.rs`), and
//! whether a self-woken future may be polled again in place.
//!
//! A future's task holds its pool weakly (a stopped pool drops it). On a worker of that pool the
//! worker already holds the registry, so [`with_pool`] lends the worker's instead of upgrading
//! the weak reference (two read-modify-writes of a shared count per poll and per wake-up).

use std::sync::{Arc, Weak};

use super::registry::Registry;
use super::work::{PollTask, Work};
use super::worker::{self, WorkerCtx};

/// The pool a piece of work runs on, as seen from the running thread.
#[derive(Clone, Copy)]
pub(crate) struct OnPool<'a> {
    pub(crate) registry: &'a Arc<Registry>,
    /// This thread's worker, if it is one of the pool's.
    pub(crate) worker: Option<&'a WorkerCtx>,
}

impl<'a> OnPool<'a> {
    /// The pool of `worker`, on that worker's thread.
    #[inline]
    pub(crate) fn worker(worker: &'a WorkerCtx) -> Self {
        OnPool {
            registry: &worker.registry,
            worker: Some(worker),
        }
    }

    /// Shutdown step 2 (engine README): `shutdown_now` began. Work not started is handed back
    /// (or dropped, for a future's poll); nothing new starts.
    #[inline]
    pub(crate) fn stopping(&self) -> bool {
        self.registry.is_stopping()
    }

    /// `n` accepted tasks finished on this thread (the one place the layers above count).
    #[inline]
    pub(crate) fn finished(&self, n: usize) {
        self.registry.count_finished(n, self.worker);
    }

    /// How many entries a lane runs in one turn before it yields its thread (fairness).
    #[inline]
    pub(crate) fn lane_budget(&self) -> usize {
        self.registry.config.lane_batch
    }

    /// Whether a future that woke itself during its poll on this thread may be polled again at
    /// once (`future::probe`): on a worker of the pool, within its continuation streak, and not
    /// while the pool is stopping (its next poll is where `shutdown_now` cancels it).
    #[inline]
    pub(crate) fn may_resume(&self) -> bool {
        !self.stopping() && self.worker.is_some_and(WorkerCtx::take_turn_in_place)
    }

    /// Whether a future handed to this thread may start on the pool: yes unless the pool is
    /// stopping, and on one of its workers even then (a worker that took the job just as
    /// `shutdown_now` began starts it, and it is cancelled at its first await: blocking on it
    /// there would keep `shutdown_now` waiting for this worker, and the future for a wake-up).
    #[inline]
    pub(crate) fn may_start_future(&self) -> bool {
        !self.stopping() || self.worker.is_some()
    }

    /// Queues a woken future's poll (run next on this worker when it can), or gives it back (to
    /// drop, cancelling the future at its await point) once the pool is stopping.
    fn schedule_poll(&self, runnable: PollTask) -> Option<PollTask> {
        if self.stopping() {
            return Some(runnable);
        }
        self.schedule_next(Work::Poll(runnable));
        None
    }

    /// Queues `job` to run next on this thread's pool: a woken future's poll, or a lane its
    /// future resumed. On a worker of the pool, `job` runs right after the current one when the
    /// worker's continuation slot is free (no queue, no wake-up), else it goes on the worker's
    /// deque and an idle worker is woken. Any other thread (a future woken from outside the
    /// pool, as by a reply from another thread) queues it on the injector. The `OnPool` already
    /// knows which thread it is on, so nothing looks at the thread's locals again.
    #[inline]
    pub(crate) fn schedule_next(&self, job: Work) {
        match self.worker {
            Some(worker) => {
                if let Err(job) = worker.try_next(job) {
                    worker.schedule(job);
                }
            }
            None => self.registry.inject(job),
        }
    }
}

/// A future's wake-up: its `runnable` is queued on its pool (the task's metadata), or given
/// back to drop, cancelling the future at its await point, once the pool is stopping or gone.
pub(crate) fn schedule_woken(runnable: PollTask) -> Option<PollTask> {
    worker::with_current(|cx| match cx {
        // On a worker of its pool: the worker holds the registry (no upgrade).
        Some(cx) if std::ptr::eq(Arc::as_ptr(&cx.registry), runnable.metadata().as_ptr()) => {
            OnPool::worker(cx).schedule_poll(runnable)
        }
        _ => match runnable.metadata().upgrade() {
            Some(registry) => OnPool {
                registry: &registry,
                worker: None,
            }
            .schedule_poll(runnable),
            None => Some(runnable),
        },
    })
}

/// Calls `f` with the pool `weak` points to, or `None` if it is gone.
#[inline]
pub(crate) fn with_pool<R>(weak: &Weak<Registry>, f: impl FnOnce(Option<OnPool<'_>>) -> R) -> R {
    worker::with_current(|cx| match cx {
        Some(cx) if std::ptr::eq(Arc::as_ptr(&cx.registry), weak.as_ptr()) => {
            f(Some(OnPool::worker(cx)))
        }
        _ => match weak.upgrade() {
            Some(registry) => f(Some(OnPool {
                registry: &registry,
                worker: None,
            })),
            None => f(None),
        },
    })
}

/// Calls `f` with `registry` as this thread sees it (with its worker if this is one of the
/// pool's workers).
#[inline]
pub(crate) fn on_pool<R>(registry: &Arc<Registry>, f: impl FnOnce(OnPool<'_>) -> R) -> R {
    worker::with_current(|cx| match cx {
        Some(cx) if std::ptr::eq(Arc::as_ptr(&cx.registry), Arc::as_ptr(registry)) => {
            f(OnPool::worker(cx))
        }
        _ => f(OnPool {
            registry,
            worker: None,
        }),
    })
}
