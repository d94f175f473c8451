//! `Contexts<K>`: the pool's context lanes with the key type fixed once, so that a key of
//! another type (a `u32` where the rest of the program uses `u64`, a `&str` for a `String`)
//! is a compile error instead of a different lane.

use std::hash::Hash;
use std::marker::PhantomData;

use super::lane::Lane;
use super::pool::Pool;
use crate::error::SubmitError;
use crate::lane::KeyPanicked;
use crate::task::TaskHandle;

/// The pool's context lanes for keys of type `K` alone, from [`Pool::contexts`].
///
/// A context's type is part of its identity: `"a"` and `String::from("a")` are different
/// contexts for the untyped methods of [`Pool`], as are `1u32` and `1u64`, and their tasks run in
/// different lanes, in parallel. `Contexts<K>` takes keys of type `K` only, so such a mix-up does
/// not compile. It is the same lanes as the untyped methods called with a `K`: the two can be
/// used together. Cheap to clone (a [`Pool`] handle).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// let pool = keyway::Pool::new().unwrap();
/// let accounts = pool.contexts::<u64>();
/// let log = Arc::new(Mutex::new(Vec::new()));
/// for i in 0..10 {
///     let log = log.clone();
///     accounts.execute_sequential(7, move || log.lock().unwrap().push(i)).unwrap();
/// }
/// accounts.flush(7).unwrap().join().unwrap();
/// assert_eq!(*log.lock().unwrap(), (0..10).collect::<Vec<_>>());
/// ```
///
/// A key of another type is refused at compile time (here a transfer keyed by `u32` accounts
/// on a `Contexts<u64>`: with the untyped API it would run beside the `u64` tasks of the same
/// accounts):
///
/// ```compile_fail,E0308
/// let pool = keyway::Pool::new().unwrap();
/// let accounts = pool.contexts::<u64>();
/// let (from, to): (u32, u32) = (1, 2);
/// accounts.execute_keyed([from, to], || ()).unwrap();
/// ```
pub struct Contexts<K> {
    pool: Pool,
    _key: PhantomData<fn(K)>,
}

impl Pool {
    /// The pool's context lanes with keys of type `K` only (see [`Contexts`]): the way to submit
    /// to contexts without mixing key types by accident.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let users = pool.contexts::<String>();
    /// let greeting = users.submit_sequential("ann".to_string(), || "hello").unwrap();
    /// assert_eq!(greeting.join().unwrap(), "hello");
    /// ```
    pub fn contexts<K>(&self) -> Contexts<K>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        Contexts {
            pool: self.clone(),
            _key: PhantomData,
        }
    }
}

impl<K> Contexts<K>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    /// Runs `f` in the lane of `ctx`, after every task submitted to `ctx` before (see
    /// [`Pool::execute_sequential`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.contexts::<u32>().execute_sequential(1, move || tx.send("ran").unwrap()).unwrap();
    /// assert_eq!(rx.recv().unwrap(), "ran");
    /// ```
    pub fn execute_sequential<F>(&self, ctx: K, f: F) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.pool.execute_sequential(ctx, f)
    }

    /// Runs every task of `tasks` in the lane of `ctx`, in order, after every task submitted to
    /// `ctx` before: one look-up, one lock of the lane and at most one wake-up for the whole
    /// batch (see [`Lane::execute_all`], which says what a refusal hands back). A panic of the
    /// key's `Hash`, `Eq` or `Drop` hands back every task ([`SubmitError::KeyPanicked`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let streams = pool.contexts::<u64>();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let entries = (0..100).map(|i| {
    ///     let tx = tx.clone();
    ///     move || tx.send(i).unwrap()
    /// });
    /// streams.execute_all(7, entries).unwrap();
    /// assert_eq!(rx.iter().take(100).collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
    /// ```
    #[doc(alias = "execute_batch")]
    pub fn execute_all<I, F>(&self, ctx: K, tasks: I) -> Result<(), SubmitError<Vec<F>>>
    where
        I: IntoIterator<Item = F>,
        F: FnOnce() + Send + 'static,
    {
        match Lane::try_pin(&self.pool, ctx) {
            Ok(lane) => lane.execute_all(tasks),
            Err(KeyPanicked) => Err(SubmitError::KeyPanicked(tasks.into_iter().collect())),
        }
    }

    /// Like [`execute_all`](Self::execute_all), but the batch is admitted whole or not at all
    /// (see [`Lane::execute_all_or_none`]): a bounded pool without room for all of it hands the
    /// whole batch back in [`SubmitError::Full`], in order.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().capacity(2).build().unwrap();
    /// let streams = pool.contexts::<u64>();
    /// let refused = streams.execute_all_or_none(7, [|| (), || (), || ()]).unwrap_err();
    /// assert_eq!(refused.into_inner().len(), 3); // larger than the capacity: never admitted
    /// streams.execute_all_or_none(7, [|| (), || ()]).unwrap();
    /// ```
    pub fn execute_all_or_none<I, F>(&self, ctx: K, tasks: I) -> Result<(), SubmitError<Vec<F>>>
    where
        I: IntoIterator<Item = F>,
        F: FnOnce() + Send + 'static,
    {
        match Lane::try_pin(&self.pool, ctx) {
            Ok(lane) => lane.execute_all_or_none(tasks),
            Err(KeyPanicked) => Err(SubmitError::KeyPanicked(tasks.into_iter().collect())),
        }
    }

    /// Like [`execute_sequential`](Self::execute_sequential), returning a [`TaskHandle`].
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let handle = pool.contexts::<u32>().submit_sequential(1, || 6 * 7).unwrap();
    /// assert_eq!(handle.join().unwrap(), 42);
    /// ```
    pub fn submit_sequential<F, T>(&self, ctx: K, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.pool.submit_sequential(ctx, f)
    }

    /// A coalescing task in the lane of `ctx`: it replaces the lane's last pending task if that
    /// one is coalescing and has not started (see [`Pool::execute_coalescing`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let prices = pool.contexts::<&'static str>();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// for price in [1.10, 1.11, 1.12] {
    ///     let tx = tx.clone();
    ///     prices.execute_coalescing("EURUSD", move || tx.send(price).unwrap()).unwrap();
    /// }
    /// prices.flush("EURUSD").unwrap().join().unwrap();
    /// assert_eq!(rx.try_iter().last(), Some(1.12)); // the newest always runs
    /// ```
    pub fn execute_coalescing<F>(&self, ctx: K, f: F) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.pool.execute_coalescing(ctx, f)
    }

    /// Like [`execute_coalescing`](Self::execute_coalescing), returning a [`TaskHandle`] (a
    /// replaced task's handle says [`TaskError::Coalesced`](crate::TaskError::Coalesced)).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let latest = pool.contexts::<u8>().submit_coalescing(0, || "newest").unwrap();
    /// assert_eq!(latest.join().unwrap(), "newest");
    /// ```
    pub fn submit_coalescing<F, T>(&self, ctx: K, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.pool.submit_coalescing(ctx, f)
    }

    /// Runs `f` holding every key in `keys`: tasks sharing a key never overlap and run in
    /// submission order, with each other and with the sequential tasks of those keys (see
    /// [`Pool::execute_keyed`]).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = keyway::Pool::new().unwrap();
    /// let accounts = pool.contexts::<u64>();
    /// let balances = Arc::new(Mutex::new(vec![100i64, 0]));
    /// let b = balances.clone();
    /// accounts.execute_keyed([0, 1], move || {
    ///     let mut b = b.lock().unwrap();
    ///     b[0] -= 30;
    ///     b[1] += 30;
    /// }).unwrap();
    /// accounts.flush(0).unwrap().join().unwrap();
    /// assert_eq!(*balances.lock().unwrap(), [70, 30]);
    /// ```
    pub fn execute_keyed<F>(
        &self,
        keys: impl IntoIterator<Item = K>,
        f: F,
    ) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.pool.execute_keyed(keys, f)
    }

    /// Like [`execute_keyed`](Self::execute_keyed), returning a [`TaskHandle`].
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let transfer = pool.contexts::<u64>().submit_keyed([1, 2], || "moved").unwrap();
    /// assert_eq!(transfer.join().unwrap(), "moved");
    /// ```
    pub fn submit_keyed<F, T>(
        &self,
        keys: impl IntoIterator<Item = K>,
        f: F,
    ) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.pool.submit_keyed(keys, f)
    }

    /// A handle on the lane of `ctx` (see [`Pool::lane`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let orders = pool.contexts::<u64>();
    /// let lane = orders.lane(9);
    /// let first = lane.submit(|| 1).unwrap();
    /// let second = orders.submit_sequential(9, || 2).unwrap(); // same lane
    /// assert_eq!((first.join().unwrap(), second.join().unwrap()), (1, 2));
    /// ```
    ///
    /// # Panics
    ///
    /// If `ctx`'s `Hash`, `Eq` or `Drop` panics (the pool itself is left intact).
    pub fn lane(&self, ctx: K) -> Lane<K> {
        self.pool.lane(ctx)
    }

    /// A handle that completes once every task submitted to `ctx` before has run (see
    /// [`Pool::flush`]).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// let pool = keyway::Pool::new().unwrap();
    /// let jobs = pool.contexts::<u8>();
    /// let done = Arc::new(AtomicU32::new(0));
    /// for _ in 0..50 {
    ///     let done = done.clone();
    ///     jobs.execute_sequential(1, move || { done.fetch_add(1, Ordering::SeqCst); }).unwrap();
    /// }
    /// jobs.flush(1).unwrap().join().unwrap();
    /// assert_eq!(done.load(Ordering::SeqCst), 50);
    /// ```
    pub fn flush(&self, ctx: K) -> Result<TaskHandle<()>, SubmitError<()>> {
        self.pool.flush(ctx)
    }

    /// The hash of context `ctx` (see [`Pool::context_hash`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let accounts = pool.contexts::<u64>();
    /// assert_eq!(accounts.context_hash(&7), pool.context_hash(&7u64));
    /// ```
    pub fn context_hash(&self, ctx: &K) -> u64 {
        self.pool.context_hash(ctx)
    }

    /// The pool these contexts run on.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let accounts = pool.contexts::<u64>();
    /// accounts.pool().shutdown();
    /// assert!(pool.is_shutdown());
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

impl<K> Clone for Contexts<K> {
    fn clone(&self) -> Self {
        Contexts {
            pool: self.pool.clone(),
            _key: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for Contexts<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contexts")
            .field("key", &std::any::type_name::<K>())
            .finish()
    }
}
