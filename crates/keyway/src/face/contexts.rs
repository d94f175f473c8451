//! `Contexts<K>`: the pool's context lanes with the key type fixed once, so that a key of
//! another type (a `u32` where the rest of the program uses `u64`, a `&str` for a `String`)
//! is a compile error instead of a different lane. It is the keyed entry point: its methods
//! carry the rules and examples of sequential, coalescing and multi-key tasks, lanes and
//! flushes; the pool's untyped keyed methods link here.

use std::hash::Hash;
use std::marker::PhantomData;

use super::lane::Lane;
use super::pool::Pool;
use crate::error::SubmitError;
use crate::lane::KeyPanicked;
use crate::task::TaskHandle;

/// The pool's context lanes for keys of type `K` alone, from [`Pool::contexts`]: the way in
/// for work keyed by a client, account or stream.
///
/// Tasks of one context run one at a time, in submission order; contexts run in parallel
/// ([`execute_sequential`](Self::execute_sequential)). A coalescing task replaces its
/// context's older pending one ([`execute_coalescing`](Self::execute_coalescing)); a
/// multi-key task holds several contexts at once ([`execute_keyed`](Self::execute_keyed)); a
/// [`Lane`] holds one context's lane open ([`lane`](Self::lane)); a flush waits for one
/// context ([`flush`](Self::flush)). Futures on the same lanes: [`Pool::spawn_sequential`].
///
/// A context's type is part of its identity: `"a"` and `String::from("a")` are different
/// contexts for the untyped keyed methods of [`Pool`] (`pool.execute_sequential(ctx, f)` and
/// its kin), as are `1u32` and `1u64`, and their tasks run in different lanes, in parallel.
/// `Contexts<K>` takes keys of type `K` only, so such a mix-up does not compile. It is the same
/// lanes as the untyped methods called with a `K`: the two can be used together. Cheap to
/// clone (a [`Pool`] handle).
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
    /// Runs `f` in the lane of `ctx`: tasks with an equal `ctx` never run concurrently and run
    /// in submission order; different contexts run in parallel.
    ///
    /// "Submission order" is happens-before order: a task submitted after another submission
    /// for the same context has returned (on any thread) runs after it.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = keyway::Pool::new().unwrap();
    /// let users = pool.contexts::<(&str, u32)>();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// for i in 0..10 {
    ///     let seen = seen.clone();
    ///     users.execute_sequential(("user", 42), move || seen.lock().unwrap().push(i)).unwrap();
    /// }
    /// pool.shutdown();
    /// assert_eq!(*seen.lock().unwrap(), (0..10).collect::<Vec<_>>());
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
    /// let accounts = pool.contexts::<&str>();
    /// let balance = std::sync::Arc::new(std::sync::Mutex::new(100));
    /// let b = balance.clone();
    /// let withdrawn = accounts.submit_sequential("acct-1", move || { *b.lock().unwrap() -= 30; 30 }).unwrap();
    /// let b = balance.clone();
    /// let after = accounts.submit_sequential("acct-1", move || *b.lock().unwrap()).unwrap();
    /// assert_eq!(withdrawn.join().unwrap(), 30);
    /// assert_eq!(after.join().unwrap(), 70); // ran after the withdrawal
    /// ```
    pub fn submit_sequential<F, T>(&self, ctx: K, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.pool.submit_sequential(ctx, f)
    }

    /// Runs `f` in the lane of `ctx` (same lane and order as its sequential tasks), except that
    /// when the lane's last pending task is a coalescing task that has not started, `f`
    /// replaces it. The newest coalescing task always runs: the last update is never lost.
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

    /// Like [`execute_coalescing`](Self::execute_coalescing), returning a [`TaskHandle`]; a
    /// replaced task's handle says [`TaskError::Coalesced`](crate::TaskError::Coalesced).
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// let quotes = pool.contexts::<&str>();
    /// let (started_tx, started) = std::sync::mpsc::channel();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// quotes.execute_sequential("EURUSD", move || { started_tx.send(()).unwrap(); gate.recv().unwrap(); }).unwrap();
    /// started.recv().unwrap(); // the lane is busy: the next two wait
    /// let old = quotes.submit_coalescing("EURUSD", || 1.10).unwrap();
    /// let new = quotes.submit_coalescing("EURUSD", || 1.11).unwrap();
    /// release.send(()).unwrap();
    /// assert!(matches!(old.join(), Err(keyway::TaskError::Coalesced)));
    /// assert_eq!(new.join().unwrap(), 1.11);
    /// ```
    pub fn submit_coalescing<F, T>(&self, ctx: K, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.pool.submit_coalescing(ctx, f)
    }

    /// Runs `f` holding every key in `keys`: two tasks sharing at least one key never overlap,
    /// and the one submitted first runs first, with each other and with the sequential tasks
    /// of those keys; tasks with disjoint keys run in parallel.
    ///
    /// Duplicate keys count once; no keys makes a plain task; one key is exactly
    /// [`execute_sequential`](Self::execute_sequential) on that key (same lane, same order). A
    /// task waiting for a busy key holds no thread, and nothing deadlocks.
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

    /// A handle on the lane of `ctx`, for a caller that submits to one context often: it skips
    /// the context look-up on each submission. The lane stays allocated while a handle exists.
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

    /// A handle that completes once every task submitted to `ctx` before this call has run (or
    /// was cancelled, coalesced away or panicked); tasks submitted after are not waited for.
    /// The pool keeps running: this waits for one context, not for the pool (that is
    /// [`Pool::wait_idle`]).
    ///
    /// Every flush works this way — this one, [`Lane::flush`] for a lane held open and
    /// [`TypedLanes::flush`](crate::TypedLanes::flush) for a typed lane's messages: the flush is
    /// a no-op task in the context's lane, so it is refused like a task (after shutdown, or when
    /// the pool is full), a later coalescing task does not replace one submitted before the
    /// flush, and after [`Pool::shutdown_now`] the handle says
    /// [`TaskError::Rejected`](crate::TaskError::Rejected) once the handed-back flush is
    /// dropped.
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
        self.pool
            .submit_sequential(ctx, || ())
            .map_err(|e| e.map_task(drop))
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
