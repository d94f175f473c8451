//! One key's lane of a [`TypedLanes`], held open: `TypedLanes::lane(key)`. Sending through it
//! skips the key's look-up (hash, shard lock, table probe), as a [`Lane`](crate::Lane) does for
//! closures: the lane is pinned in its table (rule 3) while a handle exists.

use std::hash::Hash;
use std::sync::Arc;

use super::typed_lanes::TypedLanes;
use crate::error::SubmitError;
use crate::lane::typed::{self, Typed};
use crate::lane::LaneCore;
use crate::task::{Reply, TaskHandle};

/// One key's lane of a [`TypedLanes`]: [`send`](TypedLane::send) queues a message for that key
/// without looking the key up each time — an actor's mailbox handle. Messages sent through it
/// and through [`TypedLanes::send`] with the same key share one lane and one order.
///
/// While a handle exists the key's lane stays in its table even when idle, and so does the
/// key's state (see [`TypedLanes`], "Keyed state"); it is let go of when the last handle is
/// dropped. Cheap to clone.
///
/// ```
/// let pool = keyway::Pool::new().unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// let lanes = pool.typed_lanes(move |user: &u32, n: u32| tx.send((*user, n)).unwrap());
/// let user7 = lanes.lane(7);
/// for n in 0..3 {
///     user7.send(n).unwrap();
/// }
/// assert_eq!(rx.iter().take(3).collect::<Vec<_>>(), [(7, 0), (7, 1), (7, 2)]);
/// assert_eq!(*user7.key(), 7);
/// ```
pub struct TypedLane<K, M, S = ()>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    lanes: TypedLanes<K, M, S>,
    core: Arc<LaneCore<Typed<K, M, S>>>,
}

impl<K, M, S> TypedLanes<K, M, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    /// A handle on the lane of `key`, kept in the table while the handle exists.
    ///
    /// # Panics
    /// If the key's `Hash`, `Eq` or `Drop` panics (as [`Pool::lane`](crate::Pool::lane)).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lanes = pool.typed_lanes(|_: &&str, _: u8| ());
    /// let lane = lanes.lane("sensor-1");
    /// lane.send(1).unwrap();
    /// ```
    pub fn lane(&self, key: K) -> TypedLane<K, M, S> {
        match typed::pin(&self.table, key) {
            Ok(core) => TypedLane {
                lanes: self.clone(),
                core,
            },
            Err(_) => panic!("the key's Hash, Eq or Drop panicked"),
        }
    }
}

impl<K, M, S> TypedLane<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    /// Queues `msg` for this lane's key, after every message sent for it before.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lanes = pool.typed_lanes(|_: &u8, _: u32| ());
    /// lanes.lane(1).send(5).unwrap();
    /// ```
    pub fn send(&self, msg: M) -> Result<(), SubmitError<M>> {
        typed::send_pinned::<_, _, _, false>(
            self.lanes.pool.registry(),
            &self.lanes.table,
            &self.core,
            msg,
        )
    }

    /// Sends this lane's key a request and returns a handle to its answer, as
    /// [`TypedLanes::ask`] does.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lanes = pool.typed_lanes(|key: &u8, reply: keyway::Reply<u8>| reply.send(key + 1));
    /// let lane = lanes.lane(41);
    /// assert_eq!(lane.ask(|reply| reply).unwrap().join().unwrap(), 42);
    /// ```
    pub fn ask<R>(
        &self,
        make: impl FnOnce(Reply<R>) -> M,
    ) -> Result<TaskHandle<R>, SubmitError<M>> {
        let (answer, reply) = Reply::pair();
        self.send(make(reply))?;
        Ok(answer)
    }

    /// Queues every message of `msgs` for this lane's key, in order, after every message sent
    /// for it before: one admission count, one lock of the lane and at most one wake-up per run
    /// of up to 1,024 messages, each message kept in place in the lane (no allocation per
    /// message; a run costs the one buffer it is gathered in). Each message is still handled on
    /// its own, as if sent by [`send`](TypedLane::send) one after another with none between.
    ///
    /// If the pool refuses some (shut down, or full: a bounded pool takes as many as it has
    /// room for), the error hands back the first refused message and every later one, in
    /// order; those before it were queued. For all or none, see
    /// [`send_all_or_none`](TypedLane::send_all_or_none). `msgs` is iterated on the calling
    /// thread; if it panics, the messages of the run being gathered are dropped unsent.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let lanes = pool.typed_lanes(move |_: &u8, n: u32| tx.send(n).unwrap());
    /// let lane = lanes.lane(1);
    /// lane.send_all(0..100).unwrap();
    /// assert_eq!(rx.iter().take(100).collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
    /// pool.shutdown();
    /// assert_eq!(lane.send_all([7, 8]).unwrap_err().into_inner(), [7, 8]); // handed back
    /// ```
    #[doc(alias = "send_batch")]
    pub fn send_all<I>(&self, msgs: I) -> Result<(), SubmitError<Vec<M>>>
    where
        I: IntoIterator<Item = M>,
    {
        typed::send_all_pinned(
            self.lanes.pool.registry(),
            &self.lanes.table,
            &self.core,
            msgs,
            false,
        )
    }

    /// Like [`send_all`](TypedLane::send_all), but the messages are admitted all or none: a
    /// bounded pool without room for every one of them takes none and hands them all back in
    /// [`SubmitError::Full`], in order (a batch longer than the capacity is never admitted).
    /// The whole batch is gathered before any of it is queued.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().capacity(3).build().unwrap();
    /// let lanes = pool.typed_lanes(|_: &u8, _: u32| ());
    /// let lane = lanes.lane(1);
    /// let refused = lane.send_all_or_none([1, 2, 3, 4]).unwrap_err();
    /// assert!(matches!(refused, keyway::SubmitError::Full(_)));
    /// assert_eq!(refused.into_inner(), [1, 2, 3, 4]);
    /// lane.send_all_or_none([1, 2, 3]).unwrap();
    /// ```
    pub fn send_all_or_none<I>(&self, msgs: I) -> Result<(), SubmitError<Vec<M>>>
    where
        I: IntoIterator<Item = M>,
    {
        typed::send_all_pinned(
            self.lanes.pool.registry(),
            &self.lanes.table,
            &self.core,
            msgs,
            true,
        )
    }

    /// Like [`TypedLanes::send_coalescing`] for this lane's key.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let prices = pool.typed_lanes(|_: &&str, _: f64| ());
    /// let eurusd = prices.lane("EURUSD");
    /// eurusd.send_coalescing(1.10).unwrap();
    /// eurusd.send_coalescing(1.11).unwrap();
    /// ```
    pub fn send_coalescing(&self, msg: M) -> Result<(), SubmitError<M>> {
        typed::send_pinned::<_, _, _, true>(
            self.lanes.pool.registry(),
            &self.lanes.table,
            &self.core,
            msg,
        )
    }

    /// This lane's key.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lanes = pool.typed_lanes(|_: &u8, _: ()| ());
    /// assert_eq!(*lanes.lane(3).key(), 3);
    /// ```
    pub fn key(&self) -> &K {
        typed::key_of(&self.core)
    }
}

impl<K, M, S> Clone for TypedLane<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    fn clone(&self) -> Self {
        TypedLane {
            lanes: self.lanes.clone(),
            core: self.core.repin(),
        }
    }
}

impl<K, M, S> Drop for TypedLane<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    fn drop(&mut self) {
        self.core.unpin(&self.lanes.table);
    }
}

impl<K, M, S> std::fmt::Debug for TypedLane<K, M, S>
where
    K: std::fmt::Debug + Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TypedLane").field(self.key()).finish()
    }
}
