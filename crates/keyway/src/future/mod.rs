//! Futures on the pool and on context lanes: `spawn`, `spawn_sequential`, `spawn_coalescing`,
//! `spawn_keyed`, and [`Lane::spawn`].
//!
//! A future of a context holds that context until it completes, awaits included: the next task
//! of the context starts only after it, while other contexts go on. It is polled on the pool's
//! workers with a real waker (an `async-task` task whose wake-up queues one poll job; a wake during
//! its own poll, a yield, resumes it in place within the worker's streak: `probe`); while it
//! waits, no thread is held and its lane stays scheduled without a job (rule 7 of the lane
//! protocol). It may await timers and I/O of any runtime (tokio's through a runtime handle).
//!
//! * `driver` — the wrapper that polls a future, contains its panics, obeys `cancel` and, once,
//!   releases its context(s) and counts its task finished;
//! * `launch` — a submitted future before it starts (lane entry, multi-key body, plain job);
//! * `live` — the pool's waiting futures, cancelled by `shutdown_now`;
//! * `on_pool` — a poll or wake-up on a worker of the future's own pool, or elsewhere;
//! * `yield_now` — a future's way to let other work run (public);
//! * `probe` — polls a future, resuming it in place when it woke itself (a yield) and telling
//!   that from a real wait;
//! * `block` — a minimal `block_on`, for futures run by the caller after `shutdown_now`.

mod block;
mod driver;
mod launch;
mod live;
mod on_pool;
mod probe;
mod yield_now;

pub(crate) use driver::{run_here, Release};
pub(crate) use launch::Launcher;
pub(crate) use live::Live;
pub(crate) use on_pool::{spawn_on, with_pool, OnPool, PollTask};
pub(crate) use probe::poll_resuming;
pub use yield_now::{yield_now, YieldNow};

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use crate::error::SubmitError;
use crate::lane::{admit_entry_then, ClosureEntry, Lane};
use crate::pool::registry::Job;
use crate::pool::{refused, Pool};
use crate::task::{Task, TaskHandle};

/// A future's handle and lane entry.
fn entry<F>(fut: F, coalescing: bool) -> (TaskHandle<F::Output>, ClosureEntry)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (handle, completer) = TaskHandle::for_future();
    let fut = Launcher::new(fut, Some(completer));
    (handle, ClosureEntry::Async { fut, coalescing })
}

/// Futures on the pool.
impl Pool {
    /// Runs `fut` on the pool, with no ordering against other tasks; returns its
    /// [`TaskHandle`] (a future too, and cancellable while the future waits).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let handle = pool.spawn(async { 6 * 7 }).unwrap();
    /// assert_eq!(futures::executor::block_on(handle).unwrap(), 42);
    /// ```
    pub fn spawn<F>(&self, fut: F) -> Result<TaskHandle<F::Output>, SubmitError<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let registry = self.registry();
        if let Err(why) = registry.admit() {
            return Err(refused(why, fut));
        }
        let (handle, completer) = TaskHandle::for_future();
        let task = Launcher::new(fut, Some(completer)).into_runnable(Arc::downgrade(registry));
        registry.schedule(Job::Task(Task::new(task)));
        Ok(handle)
    }

    /// Runs `fut` in the lane of `ctx`: it starts after every task of `ctx` submitted before it
    /// has finished, and the next one starts only once `fut` has completed — its awaits
    /// included. Other contexts run meanwhile; a waiting future holds no thread.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = keyway::Pool::new().unwrap();
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let mut last = None;
    /// for i in 0..5 {
    ///     let log = log.clone();
    ///     last = Some(pool.spawn_sequential("account-1", async move {
    ///         let (tx, rx) = futures::channel::oneshot::channel();
    ///         std::thread::spawn(move || tx.send(()).unwrap());
    ///         rx.await.unwrap(); // awaits something another thread completes
    ///         log.lock().unwrap().push(i);
    ///     }).unwrap());
    /// }
    /// last.unwrap().join().unwrap();
    /// assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    /// ```
    pub fn spawn_sequential<K, F>(
        &self,
        ctx: K,
        fut: F,
    ) -> Result<TaskHandle<F::Output>, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_in_lane(ctx, fut, false)
    }

    /// Like [`spawn_sequential`](Pool::spawn_sequential), except that when the lane's last
    /// pending task is a coalescing one that has not started, `fut` replaces it (its handle
    /// then says [`TaskError::Coalesced`](crate::TaskError::Coalesced)). A started future is
    /// never replaced.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// let busy = pool.spawn_sequential("EURUSD", async move { rx.recv().unwrap() }).unwrap();
    /// let old = pool.spawn_coalescing("EURUSD", async { 1.10 }).unwrap();
    /// let new = pool.spawn_coalescing("EURUSD", async { 1.12 }).unwrap();
    /// tx.send(()).unwrap();
    /// assert!(matches!(old.join(), Err(keyway::TaskError::Coalesced)));
    /// assert_eq!(new.join().unwrap(), 1.12);
    /// # busy.join().unwrap();
    /// ```
    pub fn spawn_coalescing<K, F>(
        &self,
        ctx: K,
        fut: F,
    ) -> Result<TaskHandle<F::Output>, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_in_lane(ctx, fut, true)
    }

    /// Runs `fut` holding every key in `keys` until it completes, awaits included: two tasks
    /// sharing a key never overlap and run in submission order; disjoint ones run in parallel
    /// (the rules of [`execute_keyed`](Pool::execute_keyed)).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let moved = pool.spawn_keyed(["acct-1", "acct-2"], async {
    ///     let (tx, rx) = futures::channel::oneshot::channel();
    ///     std::thread::spawn(move || tx.send(10).unwrap());
    ///     rx.await.unwrap()
    /// }).unwrap();
    /// assert_eq!(moved.join().unwrap(), 10);
    /// ```
    pub fn spawn_keyed<K, F>(
        &self,
        keys: impl IntoIterator<Item = K>,
        fut: F,
    ) -> Result<TaskHandle<F::Output>, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.keyed_submit_entry(keys, fut, |fut| entry(fut, false))
    }

    fn spawn_in_lane<K, F>(
        &self,
        ctx: K,
        fut: F,
        coalescing: bool,
    ) -> Result<TaskHandle<F::Output>, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = &self.handle;
        admit_entry_then(
            self,
            fut,
            |fut| entry(fut, coalescing),
            |make| handle.lanes.submit(&handle.registry, ctx, make),
        )
    }
}

/// Futures in one context's lane.
impl<K: 'static> Lane<K> {
    /// Runs `fut` in this lane (see [`Pool::spawn_sequential`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lane = pool.lane("orders");
    /// let first = lane.spawn(async { 1 }).unwrap();
    /// let second = lane.submit(|| 2).unwrap(); // after the future completed
    /// assert_eq!((first.join().unwrap(), second.join().unwrap()), (1, 2));
    /// ```
    pub fn spawn<F>(&self, fut: F) -> Result<TaskHandle<F::Output>, SubmitError<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.push_entry(fut, |fut| entry(fut, false))
    }

    /// A coalescing future in this lane (see [`Pool::spawn_coalescing`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lane = pool.lane("EURUSD");
    /// let price = lane.spawn_coalescing(async { 1.12 }).unwrap();
    /// assert_eq!(price.join().unwrap(), 1.12);
    /// ```
    pub fn spawn_coalescing<F>(&self, fut: F) -> Result<TaskHandle<F::Output>, SubmitError<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.push_entry(fut, |fut| entry(fut, true))
    }
}
