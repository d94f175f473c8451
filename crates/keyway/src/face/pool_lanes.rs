//! [`Pool`]'s context lanes: sequential and coalescing tasks, lane handles, flushes.

use std::hash::Hash;

use super::lane::Lane;
use super::pool::Pool;
use crate::error::SubmitError;
use crate::lane::closures::{self, plain, with_handle};
use crate::task::TaskHandle;

/// Context lanes on the pool.
impl Pool {
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
        closures::submit(
            &self.handle.registry,
            &self.handle.lanes,
            ctx,
            f,
            false,
            plain,
        )
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
        closures::submit(
            &self.handle.registry,
            &self.handle.lanes,
            ctx,
            f,
            false,
            with_handle,
        )
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
        closures::submit(
            &self.handle.registry,
            &self.handle.lanes,
            ctx,
            f,
            true,
            plain,
        )
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
        closures::submit(
            &self.handle.registry,
            &self.handle.lanes,
            ctx,
            f,
            true,
            with_handle,
        )
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
        Lane::pin(self, ctx)
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
