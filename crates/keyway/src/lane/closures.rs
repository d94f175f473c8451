//! Lanes of closures: `Pool::execute_sequential`, `Pool::execute_coalescing`, `Pool::lane`.

use std::any::Any;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use super::key::{drop_quietly, KeyPanicked};
use super::table::Ran;
use super::table::{LaneCore, LaneKind};
use crate::error::panic_message;
use crate::error::SubmitError;
use crate::future::{Launcher, Release};
use crate::keyed::MultiTask;
use crate::pool::registry::Registry;
use crate::pool::{refused, Pool};
use crate::task::{Abandon, ContextOf, PanicReport, PendingTask, Plain, Task, TaskHandle};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Weak;

/// The kind of the pool's own lanes: each entry is a boxed task.
pub(crate) struct Closures;

pub(crate) enum ClosureEntry {
    /// A task of this lane alone.
    One { task: Task, coalescing: bool },
    /// A multi-key task, standing in every lane of its keys (rule 6).
    Many(Arc<MultiTask>),
    /// A future of this lane alone (rule 7): it holds the lane until it is done.
    Async { fut: Launcher, coalescing: bool },
}

impl LaneKind for Closures {
    type Entry = ClosureEntry;

    fn is_coalescing(entry: &ClosureEntry) -> bool {
        matches!(
            entry,
            ClosureEntry::One {
                coalescing: true,
                ..
            } | ClosureEntry::Async {
                coalescing: true,
                ..
            }
        )
    }

    fn is_async(&self, entry: &ClosureEntry) -> bool {
        matches!(entry, ClosureEntry::Async { .. })
    }

    fn launch(
        &self,
        lane: &Arc<LaneCore<Self>>,
        key: &(dyn Any + Send + Sync),
        registry: &Arc<Registry>,
        entry: ClosureEntry,
    ) -> Ran {
        match entry {
            ClosureEntry::Async { fut, .. } => {
                fut.launch(registry, Release::Lane(lane.clone()));
                Ran::Suspended
            }
            other => Ran::Done(self.run(key, other)),
        }
    }

    fn run(&self, _key: &(dyn Any + Send + Sync), entry: ClosureEntry) -> Result<(), PanicReport> {
        match entry {
            ClosureEntry::One { task, .. } => task.run(),
            // Never taken as a chunk entry: `take_chunk` stops at barriers.
            ClosureEntry::Many(_) => Ok(()),
            // Never taken as a chunk entry either (rule 7); run here if it ever were.
            ClosureEntry::Async { fut, .. } => Task::new(fut.into_runnable(Weak::new())).run(),
        }
    }

    fn abandon(&self, entry: ClosureEntry, why: Abandon) -> Result<(), PanicReport> {
        match entry {
            ClosureEntry::One { task, .. } => task.abandon_reporting(why),
            ClosureEntry::Many(_) => Ok(()),
            ClosureEntry::Async { fut, .. } => catch_unwind(AssertUnwindSafe(|| fut.abandon(why)))
                .map_err(|p| PanicReport::new(panic_message(&*p).to_owned())),
        }
    }

    fn pending(lane: &Arc<LaneCore<Self>>, entry: ClosureEntry) -> Option<PendingTask> {
        match entry {
            ClosureEntry::One { task, .. } => {
                let context = lane.clone() as Arc<dyn ContextOf>;
                Some(PendingTask::in_contexts(task, smallvec::smallvec![context]))
            }
            ClosureEntry::Many(multi) => {
                let task = multi.take_task()?;
                Some(PendingTask::in_contexts(task, multi.contexts()))
            }
            // Handed back unstarted: run, it blocks on the future (no lane to hold any more).
            ClosureEntry::Async { fut, .. } => {
                let context = lane.clone() as Arc<dyn ContextOf>;
                let task = Task::new(fut.into_runnable(Weak::new()));
                Some(PendingTask::in_contexts(task, smallvec::smallvec![context]))
            }
        }
    }

    fn barrier(entry: &ClosureEntry) -> Option<&Arc<MultiTask>> {
        match entry {
            ClosureEntry::Many(multi) => Some(multi),
            ClosureEntry::One { .. } | ClosureEntry::Async { .. } => None,
        }
    }
}

/// Builds a task's lane entry, once (see [`admit_then`]).
pub(crate) type MakeEntry<'a, T> = &'a mut dyn FnMut() -> (T, ClosureEntry);

/// Admits a task, then lets `place` find its lane(s) and queue it, or hands it back refused.
///
/// `place` calls the maker it is given once it has found the lanes (under their shard locks) and
/// queues the entry. When a key's `Hash`, `Eq` or `Drop` panics first, `place` answers
/// `KeyPanicked` without calling it: the admission is taken back and the task handed back.
pub(crate) fn admit_then<F, T, W>(
    pool: &Pool,
    f: F,
    coalescing: bool,
    wrap: W,
    place: impl FnOnce(MakeEntry<'_, T>) -> Result<T, KeyPanicked>,
) -> Result<T, SubmitError<F>>
where
    W: FnOnce(F) -> (T, Task),
{
    let wrap = move |f| {
        let (out, task) = wrap(f);
        (out, ClosureEntry::One { task, coalescing })
    };
    admit_entry_then(pool, f, wrap, place)
}

/// [`admit_then`] for any kind of entry (`wrap` makes the entry itself: a future's, say).
pub(crate) fn admit_entry_then<F, T, W>(
    pool: &Pool,
    f: F,
    wrap: W,
    place: impl FnOnce(MakeEntry<'_, T>) -> Result<T, KeyPanicked>,
) -> Result<T, SubmitError<F>>
where
    W: FnOnce(F) -> (T, ClosureEntry),
{
    let registry = pool.registry();
    if let Err(why) = registry.admit() {
        // `place` owns the task's keys. A key whose `Drop` panics must not unwind through this
        // return: the refused task in the return value would leak with it (a panic while a
        // local is dropped does not drop the value being returned).
        drop_quietly(place);
        return Err(refused(why, f));
    }
    let mut parts = Some((f, wrap));
    let mut make = || match parts.take() {
        Some((f, wrap)) => wrap(f),
        None => unreachable!("a task's entry is made once"),
    };
    match place(&mut make) {
        Ok(out) => Ok(out),
        Err(KeyPanicked) => {
            registry.unadmit();
            match parts {
                Some((f, _)) => Err(SubmitError::KeyPanicked(f)),
                None => unreachable!("a key panicked after the entry was queued"),
            }
        }
    }
}

pub(crate) fn plain<F: FnOnce() + Send + 'static>(f: F) -> ((), Task) {
    ((), Task::new(Plain(f)))
}

pub(crate) fn with_handle<F, T>(f: F) -> (TaskHandle<T>, Task)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (handle, task) = TaskHandle::pair(f);
    (handle, Task::new(task))
}

/// Context lanes on the pool.
impl Pool {
    fn lane_submit<K, F, T>(
        &self,
        ctx: K,
        f: F,
        coalescing: bool,
        wrap: impl FnOnce(F) -> (T, Task),
    ) -> Result<T, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        let handle = &self.handle;
        admit_then(self, f, coalescing, wrap, |make| {
            handle.lanes.submit(&handle.registry, ctx, make)
        })
    }

    /// Runs `f` in the lane of `ctx`: tasks with an equal `ctx` never run concurrently and run
    /// in submission order; different contexts run in parallel.
    ///
    /// "Submission order" is happens-before order: a task submitted after another submission
    /// for the same context has returned (on any thread) runs after it.
    ///
    /// # A context's type is part of its identity
    ///
    /// Contexts are equal when they have the same type *and* compare equal: `"a"` and
    /// `String::from("a")` are different contexts, and so are `1u32` and `1u64` — their tasks
    /// run in different lanes, in parallel, with no warning. Fix the key type once with
    /// [`Pool::contexts`], which takes `K` only:
    /// `let accounts = pool.contexts::<u64>(); accounts.execute_sequential(7, f)`.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = keyway::Pool::new().unwrap();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// for i in 0..10 {
    ///     let seen = seen.clone();
    ///     pool.execute_sequential(("user", 42), move || seen.lock().unwrap().push(i)).unwrap();
    /// }
    /// pool.shutdown();
    /// assert_eq!(*seen.lock().unwrap(), (0..10).collect::<Vec<_>>());
    /// ```
    pub fn execute_sequential<K, F>(&self, ctx: K, f: F) -> Result<(), SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() + Send + 'static,
    {
        self.lane_submit(ctx, f, false, plain)
    }

    /// Like [`execute_sequential`](Pool::execute_sequential), returning a [`TaskHandle`].
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let balance = std::sync::Arc::new(std::sync::Mutex::new(100));
    /// let b = balance.clone();
    /// let withdrawn = pool.submit_sequential("acct-1", move || { *b.lock().unwrap() -= 30; 30 }).unwrap();
    /// let b = balance.clone();
    /// let after = pool.submit_sequential("acct-1", move || *b.lock().unwrap()).unwrap();
    /// assert_eq!(withdrawn.join().unwrap(), 30);
    /// assert_eq!(after.join().unwrap(), 70); // ran after the withdrawal
    /// ```
    pub fn submit_sequential<K, F, T>(&self, ctx: K, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.lane_submit(ctx, f, false, with_handle)
    }

    /// Runs `f` in the lane of `ctx` (same lane and order as its sequential tasks), except that
    /// when the lane's last pending task is a coalescing task that has not started, `f`
    /// replaces it. The newest coalescing task always runs: the last update is never lost.
    ///
    /// A context's type is part of its identity (`"a"` and `String::from("a")` are different
    /// contexts): see [`execute_sequential`](Pool::execute_sequential) and [`Pool::contexts`].
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// pool.execute_sequential("EURUSD", move || { rx.recv().unwrap(); }).unwrap(); // busy
    /// let shown = Arc::new(Mutex::new(Vec::new()));
    /// for price in [1.10, 1.11, 1.12] {
    ///     let shown = shown.clone();
    ///     pool.execute_coalescing("EURUSD", move || shown.lock().unwrap().push(price)).unwrap();
    /// }
    /// tx.send(()).unwrap();
    /// pool.shutdown();
    /// assert_eq!(*shown.lock().unwrap(), vec![1.12]); // only the latest price was shown
    /// ```
    pub fn execute_coalescing<K, F>(&self, ctx: K, f: F) -> Result<(), SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() + Send + 'static,
    {
        self.lane_submit(ctx, f, true, plain)
    }

    /// Like [`execute_coalescing`](Pool::execute_coalescing), returning a [`TaskHandle`]; a
    /// replaced task's handle says [`TaskError::Coalesced`](crate::TaskError::Coalesced).
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// let (started_tx, started) = std::sync::mpsc::channel();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// pool.execute_sequential("EURUSD", move || { started_tx.send(()).unwrap(); gate.recv().unwrap(); }).unwrap();
    /// started.recv().unwrap(); // the lane is busy: the next two wait
    /// let old = pool.submit_coalescing("EURUSD", || 1.10).unwrap();
    /// let new = pool.submit_coalescing("EURUSD", || 1.11).unwrap();
    /// release.send(()).unwrap();
    /// assert!(matches!(old.join(), Err(keyway::TaskError::Coalesced)));
    /// assert_eq!(new.join().unwrap(), 1.11);
    /// ```
    pub fn submit_coalescing<K, F, T>(&self, ctx: K, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.lane_submit(ctx, f, true, with_handle)
    }

    /// A handle on the lane of `ctx`, for a caller that submits to one context often: it skips
    /// the context look-up on each submission. The lane stays allocated while a handle exists.
    ///
    /// A context's type is part of its identity (`"a"` and `String::from("a")` are different
    /// contexts): see [`execute_sequential`](Pool::execute_sequential) and [`Pool::contexts`].
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lane = pool.lane("orders");
    /// let first = lane.submit(|| 1).unwrap();
    /// let second = pool.submit_sequential("orders", || 2).unwrap(); // same lane, same order
    /// assert_eq!((first.join().unwrap(), second.join().unwrap()), (1, 2));
    /// ```
    ///
    /// # Panics
    ///
    /// If `ctx`'s `Hash`, `Eq` or `Drop` panics (the pool itself is left intact).
    pub fn lane<K>(&self, ctx: K) -> Lane<K>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        match self.handle.lanes.pin(ctx) {
            Ok(core) => Lane {
                core,
                pool: self.clone(),
                _key: PhantomData,
            },
            Err(KeyPanicked) => panic!("the context key's Hash, Eq or Drop panicked"),
        }
    }

    /// A handle that completes once every task submitted to `ctx` before this call has run (or
    /// was cancelled, coalesced away or panicked); tasks submitted after are not waited for.
    /// The pool keeps running: this waits for one context, not for the pool.
    ///
    /// The flush is a no-op task in the context's lane, so it is refused like a task (after
    /// shutdown, or when the pool is full), a later coalescing task does not replace one
    /// submitted before the flush, and after [`shutdown_now`](Pool::shutdown_now) the handle
    /// says [`TaskError::Rejected`](crate::TaskError::Rejected) once the handed-back flush is
    /// dropped. A context's type is part of its identity: `flush("a")` does not wait for tasks
    /// of `String::from("a")`.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// let pool = keyway::Pool::new().unwrap();
    /// let done = Arc::new(AtomicU32::new(0));
    /// for _ in 0..100 {
    ///     let done = done.clone();
    ///     pool.execute_sequential("uploads", move || { done.fetch_add(1, Ordering::SeqCst); }).unwrap();
    /// }
    /// pool.flush("uploads").unwrap().join().unwrap();
    /// assert_eq!(done.load(Ordering::SeqCst), 100); // and the pool is still running
    /// ```
    pub fn flush<K>(&self, ctx: K) -> Result<TaskHandle<()>, SubmitError<()>>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        self.submit_sequential(ctx, || ())
            .map_err(|e| e.map_task(drop))
    }
}

/// A handle on one context's lane (from [`Pool::lane`]): the same lane as
/// `pool.execute_sequential(ctx, …)`, without looking the context up on each submission.
///
/// ```
/// let pool = keyway::Pool::new().unwrap();
/// let lane = pool.lane(7u64);
/// assert_eq!(*lane.context(), 7);
/// let handles: Vec<_> = (0..10).map(|i| lane.submit(move || i).unwrap()).collect();
/// let out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
/// assert_eq!(out, (0..10).collect::<Vec<_>>());
/// ```
pub struct Lane<K> {
    pool: Pool,
    core: Arc<LaneCore<Closures>>,
    _key: PhantomData<fn() -> K>,
}

impl<K: 'static> Lane<K> {
    fn push<F, T>(
        &self,
        f: F,
        coalescing: bool,
        wrap: impl FnOnce(F) -> (T, Task),
    ) -> Result<T, SubmitError<F>> {
        self.push_entry(f, move |f| {
            let (out, task) = wrap(f);
            (out, ClosureEntry::One { task, coalescing })
        })
    }

    /// Queues the entry `wrap` makes (a closure's or a future's) in this lane.
    pub(crate) fn push_entry<F, T>(
        &self,
        f: F,
        wrap: impl FnOnce(F) -> (T, ClosureEntry),
    ) -> Result<T, SubmitError<F>> {
        let handle = &self.pool.handle;
        admit_entry_then(&self.pool, f, wrap, |make| {
            let (out, entry) = make();
            self.core
                .push_pinned(&handle.lanes, &handle.registry, entry);
            Ok(out)
        })
    }

    /// Runs `f` in this lane, after every task submitted to it before.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lane = pool.lane("log");
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// for i in 0..5 {
    ///     let tx = tx.clone();
    ///     lane.execute(move || tx.send(i).unwrap()).unwrap();
    /// }
    /// assert_eq!(rx.iter().take(5).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    /// ```
    pub fn execute<F>(&self, f: F) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.push(f, false, plain)
    }

    /// Like [`execute`](Lane::execute), returning a [`TaskHandle`].
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lane = pool.lane("orders");
    /// assert_eq!(lane.submit(|| 6 * 7).unwrap().join().unwrap(), 42);
    /// ```
    pub fn submit<F, T>(&self, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.push(f, false, with_handle)
    }

    /// A coalescing task in this lane (see [`Pool::execute_coalescing`]).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// let lane = pool.lane("gauge");
    /// let (started_tx, started) = std::sync::mpsc::channel();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// lane.execute(move || { started_tx.send(()).unwrap(); gate.recv().unwrap(); }).unwrap();
    /// started.recv().unwrap();
    /// let shown = Arc::new(Mutex::new(Vec::new()));
    /// for v in 1..=3 {
    ///     let shown = shown.clone();
    ///     lane.execute_coalescing(move || shown.lock().unwrap().push(v)).unwrap();
    /// }
    /// release.send(()).unwrap();
    /// drop(lane);
    /// pool.shutdown();
    /// assert_eq!(*shown.lock().unwrap(), [3]); // only the latest reading
    /// ```
    pub fn execute_coalescing<F>(&self, f: F) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.push(f, true, plain)
    }

    /// A coalescing task in this lane, with a [`TaskHandle`].
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lane = pool.lane("gauge");
    /// let latest = lane.submit_coalescing(|| 99).unwrap();
    /// assert_eq!(latest.join().unwrap(), 99); // nothing newer replaced it
    /// ```
    pub fn submit_coalescing<F, T>(&self, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.push(f, true, with_handle)
    }

    /// A handle that completes once every task submitted to this lane before has run (see
    /// [`Pool::flush`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lane = pool.lane(42u64);
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// for i in 0..10 {
    ///     let tx = tx.clone();
    ///     lane.execute(move || tx.send(i).unwrap()).unwrap();
    /// }
    /// lane.flush().unwrap().join().unwrap();
    /// assert_eq!(rx.try_iter().count(), 10);
    /// ```
    pub fn flush(&self) -> Result<TaskHandle<()>, SubmitError<()>> {
        self.submit(|| ()).map_err(|e| e.map_task(drop))
    }

    /// The lane's context.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// assert_eq!(pool.lane(("user", 42)).context(), &("user", 42));
    /// ```
    pub fn context(&self) -> &K {
        match self.core.key::<K>() {
            Some(k) => k,
            None => unreachable!("a Lane<K> is only made for a lane keyed by K"),
        }
    }
}

impl<K> Clone for Lane<K> {
    fn clone(&self) -> Self {
        Lane {
            pool: self.pool.clone(),
            core: self.core.repin(),
            _key: PhantomData,
        }
    }
}

impl<K> Drop for Lane<K> {
    fn drop(&mut self) {
        self.core.unpin(&self.pool.handle.lanes);
    }
}

impl<K: std::fmt::Debug + 'static> std::fmt::Debug for Lane<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Lane").field(&self.core.key::<K>()).finish()
    }
}
