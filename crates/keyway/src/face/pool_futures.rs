//! [`Pool`]'s futures: plain, in a context's lane, and holding several keys.

use std::future::Future;
use std::hash::Hash;

use super::pool::Pool;
use crate::error::SubmitError;
use crate::future::{self, Runtime, Unsent};
use crate::lane::{closures, keyed, spawn};
use crate::task::TaskHandle;

/// Futures on the pool.
impl Pool {
    /// Runs `fut` on the pool, with no ordering against other tasks; returns its
    /// [`TaskHandle`] (a future too, and cancellable while the future waits). No result wanted:
    /// [`execute_async`](Pool::execute_async).
    ///
    /// With keyway's `tokio` feature, a future spawned (by any `spawn*` or `execute_async*`)
    /// from inside a tokio runtime is polled inside that runtime, so it may await the runtime's
    /// timers and sockets directly (see [`actors`](crate::actors), "Under tokio").
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
        future::spawn(self.registry(), fut)
    }

    /// Runs `fut` on the pool, with no ordering against other tasks, and no handle: the
    /// fire-and-forget form of [`spawn`](Pool::spawn) (as [`execute`](Pool::execute) is of
    /// [`submit`](Pool::submit)), which allocates no [`TaskHandle`]. A panic of the future goes
    /// to the [panic hook](crate::PoolBuilder::panic_hook) (and is logged through `tracing`).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = futures::channel::oneshot::channel();
    /// pool.execute_async(async move { tx.send(6 * 7).unwrap() }).unwrap();
    /// assert_eq!(futures::executor::block_on(rx).unwrap(), 42);
    /// ```
    #[doc(alias = "spawn_detached")]
    pub fn execute_async<F>(&self, fut: F) -> Result<(), SubmitError<F>>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        future::execute(self.registry(), fut)
    }

    /// Runs `fut` in the lane of `ctx`, as [`spawn_sequential`](Pool::spawn_sequential) does,
    /// with no handle: the fire-and-forget form, which allocates no [`TaskHandle`] (an actor
    /// per key whose messages are futures). A panic of the future goes to the
    /// [panic hook](crate::PoolBuilder::panic_hook), with the context's hash, and the context
    /// goes on.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = keyway::Pool::new().unwrap();
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// for i in 0..5 {
    ///     let log = log.clone();
    ///     pool.execute_async_sequential("account-1", async move {
    ///         keyway::yield_now().await;
    ///         log.lock().unwrap().push(i);
    ///     }).unwrap();
    /// }
    /// pool.shutdown();
    /// assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    /// ```
    #[doc(alias = "spawn_sequential_detached")]
    pub fn execute_async_sequential<K, F>(&self, ctx: K, fut: F) -> Result<(), SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let handle = &self.handle;
        // Written in its storage first: the submit path moves a pointer, not the future (a
        // large one was copied at each step); refused, it comes back as it was.
        let fut = Unsent::new(fut, Runtime::for_pool(&handle.registry));
        closures::submit_entry(&handle.registry, &handle.lanes, ctx, fut, spawn::detached)
            .map_err(|refused| refused.map_task(Unsent::into_future))
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
        spawn::in_lane(&self.handle.registry, &self.handle.lanes, ctx, fut, false)
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
        spawn::in_lane(&self.handle.registry, &self.handle.lanes, ctx, fut, true)
    }

    /// Runs `fut` holding every key in `keys` until it completes, awaits included: two tasks
    /// sharing a key never overlap and run in submission order; disjoint ones run in parallel
    /// (the rules of [`Contexts::execute_keyed`](crate::Contexts::execute_keyed)).
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
        keyed::submit_entry(
            &self.handle.registry,
            &self.handle.lanes,
            keys,
            fut,
            |fut| spawn::entry(&self.handle.registry, fut, false),
        )
    }
}
