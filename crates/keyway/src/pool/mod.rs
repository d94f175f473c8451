//! The elastic pool every part of keyway runs on (SPEC §2, §8).
//!
//! * `registry` — what the threads share: queues, slots, counters, flags, accounting rules;
//! * `worker` — a worker thread's loop, and [`blocking`];
//! * `sleep` — parking and waking without lost wake-ups;
//! * `monitor` — finds blocked workers and adds auxiliary threads;
//! * `builder` — settings, defaults and their checks;
//! * `stats`, `counter` — what the pool reports and how it counts cheaply.

mod builder;
mod counter;
mod monitor;
mod progress;
pub(crate) mod registry;
mod reserved;
mod sleep;
mod stats;
pub(crate) mod worker;

#[cfg(test)]
mod test;

#[cfg(all(test, loom))]
mod loom_drain;

#[cfg(test)]
pub(crate) mod test_support {
    use super::Pool;

    /// Waits until every accepted task finished and every worker is parked.
    pub(crate) fn quiesce(pool: &Pool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let s = pool.stats();
            if s.queued_tasks == 0 && s.idle_threads == s.core_threads + s.auxiliary_threads {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "pool never went quiet"
            );
            std::thread::yield_now();
        }
    }
}

pub use builder::PoolBuilder;
pub use stats::{LaneDepth, Stats};
pub use worker::blocking;

use std::hash::Hash;
use std::sync::Arc;

use crossbeam_utils::sync::Parker;

use self::builder::Config;
use self::registry::{Job, Refusal, Registry};
use crate::error::{BuildError, BuildErrorKind, SubmitError, TryExecuteError};
use crate::lane::{Closures, LaneTable};
use crate::task::{PendingTask, Plain, Task, TaskHandle};

/// An elastic pool of threads running plain tasks, and tasks ordered per context.
///
/// `Pool` is a cheap handle: clone it to share the pool. When the last handle (and every
/// [`Lane`](crate::Lane) and [`TypedLanes`](crate::TypedLanes) made from it) is dropped, the pool
/// shuts down gracefully in the background: every accepted task still runs.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// let pool = keyway::Pool::new().unwrap();
/// let log = Arc::new(Mutex::new(Vec::new()));
/// for i in 0..100 {
///     let log = log.clone();
///     // Tasks of one context run one at a time, in submission order.
///     pool.execute_sequential("client-1", move || log.lock().unwrap().push(i)).unwrap();
/// }
/// pool.shutdown(); // runs everything accepted, then stops the threads
/// assert_eq!(*log.lock().unwrap(), (0..100).collect::<Vec<_>>());
/// ```
#[derive(Clone)]
pub struct Pool {
    pub(crate) handle: Arc<PoolHandle>,
}

pub(crate) struct PoolHandle {
    pub(crate) registry: Arc<Registry>,
    pub(crate) lanes: Arc<LaneTable<Closures>>,
}

impl Drop for PoolHandle {
    fn drop(&mut self) {
        self.registry.close();
    }
}

pub(crate) fn refused<T>(why: Refusal, task: T) -> SubmitError<T> {
    match why {
        Refusal::Shutdown => SubmitError::Shutdown(task),
        Refusal::Full => SubmitError::Full(task),
    }
}

impl Pool {
    /// A pool with the default settings (see [`PoolBuilder`]).
    pub fn new() -> Result<Pool, BuildError> {
        PoolBuilder::new().build()
    }

    /// A builder to configure a pool.
    pub fn builder() -> PoolBuilder {
        PoolBuilder::new()
    }

    pub(crate) fn start(config: Config) -> Result<Pool, BuildError> {
        let monitor = Parker::new();
        let registry = Arc::new(Registry::new(config, monitor.unparker().clone()));
        let lanes = LaneTable::new(Closures, registry.config.max_threads);
        registry.register_table(Arc::downgrade(&lanes) as _);
        let pool = Pool {
            handle: Arc::new(PoolHandle {
                registry: registry.clone(),
                lanes,
            }),
        };
        registry.start_core()?;
        let name = format!("{}-monitor", registry.config.thread_name);
        let watched = registry.clone();
        let monitor = std::thread::Builder::new()
            .name(name)
            .spawn(move || monitor::run(watched, monitor))
            .map_err(|e| BuildError::new(BuildErrorKind::Spawn(e)))?;
        registry.set_monitor(monitor);
        Ok(pool)
    }

    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.handle.registry
    }

    /// Runs `f` on the pool, with no ordering against other tasks.
    ///
    /// Refused (task handed back) after shutdown or when the pool's capacity is reached.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.execute(move || tx.send("hello").unwrap()).unwrap();
    /// assert_eq!(rx.recv().unwrap(), "hello");
    /// ```
    pub fn execute<F>(&self, f: F) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        let registry = self.registry();
        if let Err(why) = registry.admit() {
            return Err(refused(why, f));
        }
        registry.schedule(Job::Task(Task::new(Plain(f))));
        Ok(())
    }

    /// Like [`execute`](Pool::execute), returning a [`TaskHandle`] for the result.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let handle = pool.submit(|| 2 + 2).unwrap();
    /// assert_eq!(handle.join().unwrap(), 4);
    /// ```
    pub fn submit<F, T>(&self, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let registry = self.registry();
        if let Err(why) = registry.admit() {
            return Err(refused(why, f));
        }
        let (handle, task) = TaskHandle::pair(f);
        registry.schedule(Job::Task(Task::new(task)));
        Ok(handle)
    }

    /// Starts `f` on an idle reserved thread *now*, or hands it back at once: it never queues
    /// (Jetty's `TryExecutor`). When no reserved thread is idle, one is started (up to
    /// [`PoolBuilder::reserved_threads`]) so that a later attempt can succeed.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().reserved_threads(1).build().unwrap();
    /// let me = std::thread::current().id();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let mut task = move || tx.send(std::thread::current().id()).unwrap();
    /// // The first attempt may find no reserved thread started yet: it is handed back.
    /// while let Err(err) = pool.try_execute(task) {
    ///     task = err.into_inner();
    ///     std::thread::yield_now();
    /// }
    /// assert_ne!(rx.recv().unwrap(), me); // it ran on the reserved thread
    /// ```
    pub fn try_execute<F>(&self, f: F) -> Result<(), TryExecuteError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        let registry = self.registry();
        if registry.reserved.idle_count() == 0 && !registry.is_closed() {
            // Cheap refusal: nothing to hand to, so nothing to admit or allocate.
            reserved::start_one(registry);
            return Err(TryExecuteError::Busy(f));
        }
        match registry.admit() {
            Ok(()) => {}
            Err(Refusal::Shutdown) => return Err(TryExecuteError::Shutdown(f)),
            Err(Refusal::Full) => return Err(TryExecuteError::Busy(f)),
        }
        // The closure travels in a shared slot so that it can come back untouched if the last
        // idle seat is taken between the check and the hand-off.
        let slot = std::sync::Arc::new(parking_lot::Mutex::new(Some(f)));
        let inner = slot.clone();
        let task = Task::new(Plain(move || {
            if let Some(f) = inner.lock().take() {
                f()
            }
        }));
        match registry.reserved.hand_off(task) {
            Ok(()) => Ok(()),
            Err(task) => {
                drop(task);
                registry.unadmit();
                reserved::start_one(registry);
                match slot.lock().take() {
                    Some(f) => Err(TryExecuteError::Busy(f)),
                    None => unreachable!("an unrun task still holds its closure"),
                }
            }
        }
    }

    /// Stops intake and waits until every accepted task has run (every future completed, awaits
    /// included) and the threads have exited.
    ///
    /// Tasks submitted afterwards are refused with [`SubmitError::Shutdown`], task handed back.
    /// Called from a task of this pool, it stops intake and returns without waiting (a task
    /// cannot wait for itself). Calling it again is harmless.
    pub fn shutdown(&self) {
        let registry = self.registry();
        registry.close();
        if !self.on_own_thread() {
            registry.wait_for_exit(worker::OwnThread::None);
            for table in registry.tables() {
                table.sweep_idle();
            }
        }
    }

    /// Stops intake, lets running tasks finish, and hands back every accepted task that had not
    /// started, in lane order per context. Their handles (if any) learn the outcome when the
    /// returned tasks are run or dropped.
    ///
    /// Started futures (`spawn*`) are cancelled at their await point: dropped, their handles
    /// saying [`TaskError::Cancelled`](crate::TaskError::Cancelled). Unstarted ones are handed
    /// back; running one of those runs the future to completion on the calling thread.
    ///
    /// Blocks until the tasks already running have returned. Called from a task of this pool,
    /// it does not wait for its own thread, nor for other pool threads inside `shutdown_now`:
    /// any number of callers, inside tasks or outside, may call it at once; each returns, and
    /// each unstarted task is handed back to exactly one of them.
    pub fn shutdown_now(&self) -> Vec<PendingTask> {
        let registry = self.registry();
        registry.stop();
        let own = worker::own_thread(registry);
        let _inside = registry.enter_shutdown_now(own);
        registry.wait_for_exit(own);
        let mut pending = Vec::new();
        loop {
            let before = pending.len();
            registry.drain_queues(|job| {
                if let Job::Task(task) = job {
                    pending.push(PendingTask::new(task));
                }
            });
            for table in registry.tables() {
                table.drain(&mut pending);
            }
            // Started futures waiting for a wake-up are cancelled (dropped) now.
            registry.futures.cancel_all();
            for _ in before..pending.len() {
                registry.task_done();
            }
            // A submitter admitted just before `stop` may still be pushing its task. What may
            // stay pending is the task of each pool thread inside `shutdown_now` (this one's
            // among them). `pending` is read first: a caller that leaves in between only makes
            // the test stricter, and none can enter with a task that was not already pending.
            let pending_now = registry.pending();
            if pending_now <= registry.stopping_pool_threads() {
                break;
            }
            std::thread::yield_now();
        }
        tracing::debug!(handed_back = pending.len(), "keyway shutdown_now");
        pending
    }

    /// True once [`shutdown`](Pool::shutdown) or [`shutdown_now`](Pool::shutdown_now) was called
    /// (or the last handle dropped).
    pub fn is_shutdown(&self) -> bool {
        self.registry().is_closed()
    }

    /// A snapshot of the pool's threads, tasks and lanes.
    pub fn stats(&self) -> Stats {
        stats::snapshot(self.registry())
    }

    /// The hash keyway gives context `ctx` (as [`LaneDepth::context_hash`] reports it).
    pub fn context_hash<K: Hash + 'static>(&self, ctx: &K) -> u64 {
        self.handle.lanes.hash(ctx)
    }

    fn on_own_thread(&self) -> bool {
        worker::own_thread(self.registry()) != worker::OwnThread::None
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("stats", &self.stats())
            .finish()
    }
}
