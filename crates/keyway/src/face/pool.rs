//! [`Pool`]: the handle users hold, its construction, plain tasks, shutdown and statistics. Its
//! other methods sit beside it by topic: `pool_lanes.rs` (context lanes), `pool_keyed.rs`
//! (multi-key tasks), `pool_futures.rs` (futures), `pool_typed.rs` (typed lanes),
//! `pool_room.rs` (waiting for room). Each is a doc and a call down.

use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::builder::PoolBuilder;
use super::users::{Attached, Users};
use crate::engine::{refused, reserved, Config, NotPlain, Registry, Stats, Work};
use crate::error::{BuildError, ShutdownTimedOut, SubmitError, TryExecuteError};
use crate::lane::PoolHandle;
use crate::task::{PendingTask, Plain, Task, TaskHandle};

/// An elastic pool of threads running plain tasks, and tasks ordered per context.
///
/// `Pool` is a cheap handle: clone it to share the pool.
///
/// # Where the methods are
///
/// Plain tasks ([`execute`](Pool::execute), [`submit`](Pool::submit),
/// [`try_execute`](Pool::try_execute)), futures ([`spawn`](Pool::spawn) and its keyed forms),
/// typed lanes ([`typed_lanes`](Pool::typed_lanes)), waiting for room
/// ([`wait_for_room`](Pool::wait_for_room)), shutdown and statistics are here. Work ordered
/// per key goes through [`contexts`](Pool::contexts): a [`Contexts<K>`](crate::Contexts) is the
/// keyed entry point, whose methods carry the rules and examples. The pool's own
/// `execute_sequential`, `submit_sequential`, `execute_coalescing`, `submit_coalescing`,
/// `execute_keyed`, `submit_keyed` and `lane` are the same lanes with the key type inferred at
/// each call, and link there.
///
/// # Dropping the last handle
///
/// When the last handle (and every [`Lane`](crate::Lane) and [`TypedLanes`](crate::TypedLanes)
/// made from it) is dropped, the pool shuts down gracefully: intake stops, and the drop *waits*
/// until every accepted task has run and the threads have exited, as [`shutdown`](Pool::shutdown)
/// does (and as the JDK's `ExecutorService.close()` does), so no accepted task is lost when
/// `main` returns right after. A [`Scheduler`](crate::Scheduler) built on the pool counts as a
/// handle you hold: whichever of them goes last waits for both, the scheduler's tasks (due or
/// not yet due) first (see "Shutting down" in the crate docs). Dropped on one of the pool's own
/// threads (the last handle was moved into one of its tasks), it cannot wait for itself: the
/// pool then shuts down in the background, every accepted task still running. To bound the wait, call
/// [`shutdown_timeout`](Pool::shutdown_timeout) before the drop.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// let ran = Arc::new(AtomicUsize::new(0));
/// let pool = keyway::Pool::new().unwrap();
/// for _ in 0..1000 {
///     let ran = ran.clone();
///     pool.execute(move || { ran.fetch_add(1, Ordering::Relaxed); }).unwrap();
/// }
/// drop(pool); // waits for the accepted tasks
/// assert_eq!(ran.load(Ordering::Relaxed), 1000);
/// ```
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
#[doc(alias = "ThreadPool")]
#[doc(alias = "Runtime")]
#[doc(alias = "ExecutorService")]
pub struct Pool {
    /// Shared by the handles the user holds (`None` for the pool's internal ones, which a
    /// scheduler keeps): the last of them shuts the pool down, schedulers first. Dropped
    /// before `handle`.
    pub(super) users: Option<Arc<Users>>,
    pub(crate) handle: Arc<PoolHandle>,
}

impl Clone for Pool {
    fn clone(&self) -> Self {
        Pool {
            handle: self.handle.clone(),
            users: self.users.clone(),
        }
    }
}

impl Pool {
    /// A pool with the default settings (see [`PoolBuilder`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new()?;
    /// assert!(pool.stats().core_threads >= 1); // one per available core
    /// pool.shutdown();
    /// # Ok::<(), keyway::BuildError>(())
    /// ```
    pub fn new() -> Result<Pool, BuildError> {
        PoolBuilder::new().build()
    }

    /// A builder to configure a pool.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(2).name("orders").build()?;
    /// assert_eq!((pool.stats().core_threads, pool.name()), (2, "orders"));
    /// pool.shutdown();
    /// # Ok::<(), keyway::BuildError>(())
    /// ```
    pub fn builder() -> PoolBuilder {
        PoolBuilder::new()
    }

    pub(crate) fn start(config: Config) -> Result<Pool, BuildError> {
        let handle = PoolHandle::start(config)?;
        let users = Arc::new(Users::new(handle.registry.clone()));
        Ok(Pool {
            handle,
            users: Some(users),
        })
    }

    /// A handle that does not count as the user's (a scheduler's own, to hand tasks over):
    /// the last user-held handle shuts the pool down whether this one lives on or not.
    pub(crate) fn internal(&self) -> Pool {
        Pool {
            handle: self.handle.clone(),
            users: None,
        }
    }

    /// Attaches `a` (a scheduler) to this pool: `shutdown`, `shutdown_now` and the drop of the
    /// last user-held handle shut it down first.
    pub(crate) fn attach(&self, a: std::sync::Weak<dyn Attached>) {
        if let Some(users) = &self.users {
            users.attach(a);
        }
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
    #[doc(alias = "spawn")]
    pub fn execute<F>(&self, f: F) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        let registry = self.registry();
        if let Err(not_plain) = registry.admit_timing() {
            return off_plain(registry, not_plain, f, |f| ((), Task::new(Plain(f))));
        }
        registry.schedule(Work::Task(Task::new(Plain(f))));
        Ok(())
    }

    /// Like [`execute`](Pool::execute), returning a [`TaskHandle`] for the result.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let handle = pool.submit(|| 2 + 2).unwrap();
    /// assert_eq!(handle.join().unwrap(), 4);
    /// ```
    #[doc(alias = "spawn")]
    #[doc(alias = "spawn_blocking")]
    pub fn submit<F, T>(&self, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let registry = self.registry();
        if let Err(not_plain) = registry.admit_timing() {
            return off_plain(registry, not_plain, f, |f| {
                let (handle, task) = TaskHandle::pair(f);
                (handle, Task::new(task))
            });
        }
        let (handle, task) = TaskHandle::pair(f);
        registry.schedule(Work::Task(Task::new(task)));
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
    #[doc(alias = "try_spawn")]
    pub fn try_execute<F>(&self, f: F) -> Result<(), TryExecuteError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        reserved::try_execute(self.registry(), f)
    }

    /// Stops intake and waits until every accepted task has run (every future completed, awaits
    /// included) and the threads have exited. The pool's [`Scheduler`](crate::Scheduler)s are
    /// shut down first, gracefully: what they hold still runs when due, and is waited for.
    ///
    /// Tasks submitted afterwards are refused with [`SubmitError::Shutdown`], task handed back.
    /// Called from a task of this pool, it stops intake and returns without waiting (a task
    /// cannot wait for itself); with a scheduler still holding tasks, the pool's intake then
    /// stops once the scheduler has handed them over, in the background. Calling it again is
    /// harmless. From async code, await [`shutdown_async`](Pool::shutdown_async) instead: it
    /// holds no thread of the runtime while it waits.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let pool = keyway::Pool::new().unwrap();
    /// let ran = Arc::new(AtomicUsize::new(0));
    /// for i in 0..100 {
    ///     let ran = ran.clone();
    ///     pool.execute_sequential(i % 3, move || { ran.fetch_add(1, Ordering::Relaxed); }).unwrap();
    /// }
    /// pool.shutdown(); // returns once all 100 have run
    /// assert_eq!(ran.load(Ordering::Relaxed), 100);
    /// assert!(pool.execute(|| ()).is_err()); // refused, closure handed back
    /// ```
    pub fn shutdown(&self) {
        let _ = self.close_and_wait(None);
    }

    fn close_and_wait(&self, deadline: Option<Instant>) -> Result<(), ShutdownTimedOut> {
        match &self.users {
            Some(users) => users.close_and_wait(deadline),
            None => self.registry().close_and_wait(deadline),
        }
    }

    /// Like [`shutdown`](Pool::shutdown), but waits at most `timeout`. `Ok(())` once every
    /// accepted task has run and the threads have exited; otherwise
    /// [`ShutdownTimedOut`], saying how many accepted tasks were not done yet: they still run,
    /// in the background (intake stays stopped; a scheduler's tasks not yet handed over still
    /// run when due, the pool's intake stopping after them). A timeout too long to represent
    /// (`Duration::MAX`) waits as `shutdown` does; `Duration::ZERO` only looks. Called from a
    /// task of this pool, it stops intake and returns at once (a task cannot wait for itself),
    /// `Err` since that task at least is not done.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// let (release, wait) = std::sync::mpsc::channel::<()>();
    /// pool.execute(move || wait.recv().unwrap()).unwrap();
    /// pool.execute(|| ()).unwrap();
    /// let err = pool.shutdown_timeout(Duration::ZERO).unwrap_err();
    /// assert!(err.pending_tasks() >= 1);
    /// release.send(()).unwrap();
    /// assert!(pool.shutdown_timeout(Duration::MAX).is_ok());
    /// ```
    pub fn shutdown_timeout(&self, timeout: Duration) -> Result<(), ShutdownTimedOut> {
        // Checked: a timeout too long to add to `now` means no deadline.
        self.close_and_wait(Instant::now().checked_add(timeout))
    }

    /// Waits until the pool is idle: no accepted task is queued or running (in any lane, for
    /// any key). Unlike [`shutdown`](Pool::shutdown) the pool stays open.
    ///
    /// It returns once the pool *was* idle at some instant: a task submitted concurrently, by
    /// another thread or by a running task, may be accepted before the call returns (and then
    /// waited for) or after (and then not). To wait for a known batch, stop submitting first.
    /// Tasks a [`Scheduler`](crate::Scheduler) holds until their time are not yet accepted.
    ///
    /// Returns true once idle; false, at once, when called from one of the pool's own threads,
    /// whose running task keeps the pool busy (a task cannot wait for itself).
    ///
    /// Idle counts tasks, not lanes: a runner lets its lane go (and, with
    /// [`idle_lanes(0)`](crate::PoolBuilder::idle_lanes), frees it) just after the lane's last
    /// task is counted finished, so right after this returns [`Stats::live_lanes`](crate::Stats)
    /// may still count a lane whose runner has not let go yet; it drops by itself within
    /// moments. Lanes kept idle stay as [`keep_idle`](crate::PoolBuilder::keep_idle) says.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let pool = keyway::Pool::new().unwrap();
    /// let ran = Arc::new(AtomicUsize::new(0));
    /// for i in 0..100 {
    ///     let ran = ran.clone();
    ///     pool.execute_sequential(i % 4, move || { ran.fetch_add(1, Ordering::Relaxed); }).unwrap();
    /// }
    /// assert!(pool.wait_idle());
    /// assert_eq!(ran.load(Ordering::Relaxed), 100);
    /// assert!(!pool.is_shutdown()); // still open
    /// pool.execute(|| ()).unwrap();
    /// ```
    pub fn wait_idle(&self) -> bool {
        self.wait_idle_until(None)
    }

    /// Like [`wait_idle`](Pool::wait_idle), giving up after `timeout`: true if the pool went
    /// idle in time. `Duration::ZERO` only looks; a timeout too long to represent
    /// (`Duration::MAX`) waits as `wait_idle` does.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::new().unwrap();
    /// let (release, wait) = std::sync::mpsc::channel::<()>();
    /// pool.execute(move || wait.recv().unwrap()).unwrap();
    /// assert!(!pool.wait_idle_timeout(Duration::ZERO)); // the task is still running
    /// release.send(()).unwrap();
    /// assert!(pool.wait_idle_timeout(Duration::MAX));
    /// ```
    pub fn wait_idle_timeout(&self, timeout: Duration) -> bool {
        self.wait_idle_until(Instant::now().checked_add(timeout))
    }

    fn wait_idle_until(&self, deadline: Option<Instant>) -> bool {
        self.registry().wait_idle_until(deadline)
    }

    /// Stops intake, lets running tasks finish, and hands back every accepted task that had not
    /// started, in lane order per context; first, every task the pool's
    /// [`Scheduler`](crate::Scheduler)s had not released (they are shut down too). Their handles (if any) learn the outcome when the
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
    ///
    /// ```
    /// use std::sync::mpsc::channel;
    /// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// let (started_tx, started) = channel();
    /// let (release, gate) = channel::<()>();
    /// pool.execute(move || { started_tx.send(()).unwrap(); gate.recv().unwrap(); }).unwrap();
    /// started.recv().unwrap(); // the only worker is busy: what follows waits
    /// let saved = pool.submit_sequential("client-1", || "saved").unwrap();
    /// let dropped = pool.submit_sequential("client-1", || "dropped").unwrap();
    /// // `shutdown_now` waits for the running task: call it on another thread, then release it.
    /// let stopper = { let pool = pool.clone(); std::thread::spawn(move || pool.shutdown_now()) };
    /// while !pool.is_shutdown() { std::thread::yield_now(); } // intake has stopped
    /// release.send(()).unwrap();
    /// let pending = stopper.join().unwrap();
    /// assert_eq!(pending.len(), 2); // neither had started; one context: in lane order
    /// let mut pending = pending.into_iter();
    /// pending.next().unwrap().run().unwrap(); // run one here, on this thread
    /// drop(pending); // drop the other: its handle says `Rejected`
    /// assert_eq!(saved.join().unwrap(), "saved");
    /// assert!(dropped.join().is_err());
    /// ```
    #[must_use = "dropping the handed-back tasks rejects them; run or keep them"]
    pub fn shutdown_now(&self) -> Vec<PendingTask> {
        match &self.users {
            Some(users) => users.shutdown_now(),
            None => self.registry().shutdown_now(),
        }
    }

    /// True once [`shutdown`](Pool::shutdown) or [`shutdown_now`](Pool::shutdown_now) was called
    /// (or the last handle dropped).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// assert!(!pool.is_shutdown());
    /// pool.shutdown();
    /// assert!(pool.is_shutdown());
    /// ```
    pub fn is_shutdown(&self) -> bool {
        self.registry().is_closed()
    }

    /// A snapshot of the pool's threads, tasks and lanes.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    /// pool.submit(|| ()).unwrap().join().unwrap();
    /// pool.shutdown();
    /// let stats = pool.stats();
    /// assert_eq!((stats.completed_tasks, stats.unfinished_tasks()), (1, 0));
    /// println!("{stats}"); // one line, for a log
    /// ```
    ///
    /// The crate docs' "Observability" section shows a backed-up lane found through `stats`.
    pub fn stats(&self) -> Stats {
        Stats::of(self.registry())
    }

    /// The hash keyway gives context `ctx`, as [`LaneDepth::context_hash`](crate::LaneDepth::context_hash),
    /// [`PanicReport::context_hash`](crate::PanicReport::context_hash) and the `context_hash`
    /// field of the pool's tracing events report it: compare to find which of your contexts
    /// that is. Stable for the pool's life, and the same for a typed lane's key of the same type
    /// ([`Pool::typed_lanes`]); it differs between pools, and between key types (`"a"` and
    /// `String::from("a")` are two contexts).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// assert_eq!(pool.context_hash(&42u64), pool.context_hash(&42u64));
    /// assert_ne!(pool.context_hash(&"a"), pool.context_hash(&String::from("a")));
    /// ```
    pub fn context_hash<K: Hash + 'static>(&self, ctx: &K) -> u64 {
        self.handle.lanes.hash(ctx)
    }

    /// The pool's name, from [`PoolBuilder::name`] (default: the
    /// [`thread_name`](PoolBuilder::thread_name) prefix, `"keyway"`).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// assert_eq!(pool.name(), "keyway");
    /// ```
    pub fn name(&self) -> &str {
        self.registry().name()
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("stats", &self.stats())
            .finish()
    }
}

/// `execute` and `submit` off their plain path, out of line so that the plain path stays as
/// it was: refused (`f` handed back), or accepted and timed (the pool's meter samples it).
#[cold]
#[inline(never)]
fn off_plain<F, T>(
    registry: &Arc<Registry>,
    not_plain: NotPlain,
    f: F,
    make: impl FnOnce(F) -> (T, Task),
) -> Result<T, SubmitError<F>> {
    match not_plain {
        NotPlain::Timed => {
            let (out, task) = make(f);
            let task = registry.timed(task).map_or_else(|task| task, Task::new);
            registry.schedule(Work::Task(task));
            Ok(out)
        }
        NotPlain::Refused(why) => Err(refused(why, f)),
    }
}
