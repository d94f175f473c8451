//! [`Lane`]: a handle on one context's lane, skipping the context look-up per submission.

use std::future::Future;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use super::pool::Pool;
use crate::error::SubmitError;
use crate::lane::batch;
use crate::lane::closures::{self, plain, with_handle, Closures};
use crate::lane::{spawn, KeyPanicked, LaneCore};
use crate::task::TaskHandle;

/// A handle on one context's lane (from [`Contexts::lane`](crate::Contexts::lane) or
/// [`Pool::lane`]): the same lane as `execute_sequential(ctx, …)`, without looking the context
/// up on each submission.
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
    /// The lane of `ctx`, pinned while a handle lives (`Pool::lane`).
    pub(super) fn pin(pool: &Pool, ctx: K) -> Lane<K>
    where
        K: Hash + Eq + Send + Sync,
    {
        match Lane::try_pin(pool, ctx) {
            Ok(lane) => lane,
            Err(KeyPanicked) => panic!("the context key's Hash, Eq or Drop panicked"),
        }
    }

    /// [`pin`](Lane::pin), saying so when the key's `Hash`, `Eq` or `Drop` panicked.
    pub(super) fn try_pin(pool: &Pool, ctx: K) -> Result<Lane<K>, KeyPanicked>
    where
        K: Hash + Eq + Send + Sync,
    {
        pool.handle.lanes.pin(ctx).map(|core| Lane {
            core,
            pool: pool.clone(),
            _key: PhantomData,
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
        closures::push(
            &self.pool.handle.registry,
            &self.pool.handle.lanes,
            &self.core,
            f,
            false,
            plain,
        )
    }

    /// Runs every task of `tasks` in this lane, in order, after every task submitted to it
    /// before: a batch (a socket read, a stream read of many entries) takes the lane's lock once
    /// and wakes a worker at most once, instead of once per task.
    ///
    /// The batch is stored as one entry of the lane (one buffer for up to 1,024 tasks, kept in
    /// place: no allocation per task) and admitted with one count, each task counting as one
    /// against the pool's [`capacity`](crate::PoolBuilder::capacity). If the pool refuses some
    /// (shut down, or full: a bounded pool takes as many as it has room for), the error hands
    /// back the first refused task and every later one of the batch, in order; the tasks before
    /// it were queued and run. To admit a batch whole or not at all, see
    /// [`execute_all_or_none`](Lane::execute_all_or_none). Each task still runs as a task of
    /// its own: one that panics is contained as any other (the rest of the batch still runs,
    /// and a task's panicking drop stops no other), and a batch longer than the pool's lane
    /// batch is run over several turns of the lane, as that many single tasks would be.
    /// `tasks` is iterated on the calling thread, before the batch is queued (up to 1,024 tasks
    /// at a time); if the iterator panics, the tasks it gave are admitted and run.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lane = pool.lane("feed");
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let batch = (0..64).map(|i| {
    ///     let tx = tx.clone();
    ///     move || tx.send(i).unwrap()
    /// });
    /// lane.execute_all(batch).unwrap();
    /// assert_eq!(rx.iter().take(64).collect::<Vec<_>>(), (0..64).collect::<Vec<_>>());
    ///
    /// pool.shutdown();
    /// let refused = lane.execute_all([|| (), || ()]).unwrap_err();
    /// assert_eq!(refused.into_inner().len(), 2); // handed back, in order
    /// ```
    #[doc(alias = "execute_batch")]
    pub fn execute_all<I, F>(&self, tasks: I) -> Result<(), SubmitError<Vec<F>>>
    where
        I: IntoIterator<Item = F>,
        F: FnOnce() + Send + 'static,
    {
        batch::push_all(
            &self.pool.handle.registry,
            &self.pool.handle.lanes,
            &self.core,
            tasks,
            false,
        )
    }

    /// Like [`execute_all`](Lane::execute_all), but the batch is admitted whole or not at all:
    /// a pool without room for every task of it (a bounded pool, see
    /// [`capacity`](crate::PoolBuilder::capacity)) takes none of them and hands the whole batch
    /// back in [`SubmitError::Full`], in order, so the caller can wait for room
    /// ([`Pool::wait_for_room`]) and try again, or give up, without tracking which part ran.
    /// (A batch longer than the capacity is never admitted.) On a pool without a capacity it is
    /// `execute_all`, except that the whole batch is gathered before any of it is queued; if the
    /// iterator panics, none of it is admitted.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).capacity(4).build().unwrap();
    /// let lane = pool.lane("feed");
    /// let (started_tx, started) = std::sync::mpsc::channel();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// lane.execute(move || { started_tx.send(()).unwrap(); gate.recv().unwrap(); }).unwrap();
    /// started.recv().unwrap(); // one of the 4 is taken
    /// let refused = lane.execute_all_or_none([|| (), || (), || (), || ()]).unwrap_err();
    /// assert!(matches!(refused, keyway::SubmitError::Full(_)));
    /// assert_eq!(refused.into_inner().len(), 4); // all of it, nothing queued
    /// lane.execute_all_or_none([|| (), || (), || ()]).unwrap(); // 3 fit
    /// release.send(()).unwrap();
    /// # drop(lane);
    /// # pool.shutdown();
    /// ```
    pub fn execute_all_or_none<I, F>(&self, tasks: I) -> Result<(), SubmitError<Vec<F>>>
    where
        I: IntoIterator<Item = F>,
        F: FnOnce() + Send + 'static,
    {
        batch::push_all(
            &self.pool.handle.registry,
            &self.pool.handle.lanes,
            &self.core,
            tasks,
            true,
        )
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
        closures::push(
            &self.pool.handle.registry,
            &self.pool.handle.lanes,
            &self.core,
            f,
            false,
            with_handle,
        )
    }

    /// A coalescing task in this lane: it replaces the lane's last pending task if that one is
    /// coalescing and has not started (the rule:
    /// [`Contexts::execute_coalescing`](crate::Contexts::execute_coalescing)).
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
        closures::push(
            &self.pool.handle.registry,
            &self.pool.handle.lanes,
            &self.core,
            f,
            true,
            plain,
        )
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
        closures::push(
            &self.pool.handle.registry,
            &self.pool.handle.lanes,
            &self.core,
            f,
            true,
            with_handle,
        )
    }

    /// A handle that completes once every task submitted to this lane before has run: a flush
    /// of this lane's context, as [`Contexts::flush`](crate::Contexts::flush) describes.
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
        closures::push_entry(
            &self.pool.handle.registry,
            &self.pool.handle.lanes,
            &self.core,
            fut,
            |fut| spawn::entry(&self.pool.handle.registry, fut, false),
        )
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
        closures::push_entry(
            &self.pool.handle.registry,
            &self.pool.handle.lanes,
            &self.core,
            fut,
            |fut| spawn::entry(&self.pool.handle.registry, fut, true),
        )
    }
}
