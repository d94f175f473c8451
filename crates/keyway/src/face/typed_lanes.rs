//! [`TypedLanes`]: lanes of messages for one handler, one lane per key.

use std::hash::Hash;

use super::pool::Pool;
use crate::error::SubmitError;
use crate::lane::typed;
use crate::task::{Reply, TaskHandle};

/// Lanes of messages for one handler, for processing each key's messages in order — a server
/// handling each client's messages, say. `send(key, msg)` queues the message itself; the handler
/// runs as `handler(&key, msg)`, one message at a time per key, in send order.
///
/// Cheap to clone; every clone feeds the same lanes.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// let pool = keyway::Pool::new().unwrap();
/// let totals = Arc::new(Mutex::new(std::collections::HashMap::new()));
/// let sink = totals.clone();
/// let accounts = pool.typed_lanes(move |account: &u32, amount: i64| {
///     *sink.lock().unwrap().entry(*account).or_insert(0) += amount;
/// });
/// for i in 0..100 {
///     accounts.send(i % 4, 10).unwrap();
/// }
/// pool.shutdown();
/// assert!(totals.lock().unwrap().values().all(|&t| t == 250));
/// ```
///
/// # Keyed state
///
/// With [`Pool::typed_lanes_with_state`] each key's lane owns a state `S`, passed to the handler
/// as `&mut S`: an actor per key, with no lock shared between keys and no thread per key. With
/// [`Pool::typed_lanes_async_with_state`] the async handler takes the state by value and its
/// future gives it back.
///
/// * The state is made by [`KeyState::new`](crate::KeyState::new)'s `init(&key)` on the first message of a lane.
/// * It lives as long as the key's lane. A lane is freed when it has been idle (no message
///   queued or running) for a while. By default idle lanes are kept in a small cache (4,096)
///   and freed by the pool's monitor at its next period
///   ([`PoolBuilder::monitor_period`](crate::PoolBuilder::monitor_period), 250 ms by default)
///   — or at once when the cache is full: 1,000,000 keys touched three times (each touch after
///   the pool went idle) make 3,000,000 states. To make state last between touches, set
///   [`PoolBuilder::keep_idle`](crate::PoolBuilder::keep_idle) (and, to bound memory,
///   [`PoolBuilder::idle_lanes`](crate::PoolBuilder::idle_lanes)): with `keep_idle` set, the
///   same 1,000,000 keys make 1,000,000 states, at about 280 bytes per idle key (a `u32` key
///   and state). Shutdown frees every lane.
/// * When the lane is freed the state is dropped, or handed to [`KeyState::on_idle`](crate::KeyState::on_idle) to be
///   saved. The next message for the key makes a new state with `init`.
/// * If the handler panics, the state (perhaps half updated) is dropped — not given to
///   `on_idle` — and the key's next message gets a new one from `init`. If `init` panics, its
///   message is dropped unhandled and the next message tries `init` again. Every such panic is
///   contained and goes to the pool's panic hook.
/// * Messages handed back by [`Pool::shutdown_now`] keep their lane, and so the state, until
///   they are run or dropped; run, they get the key's state as the lane would give it. (One run
///   from inside the handler of its own key, which holds that state, is refused with a panic
///   report instead of deadlocking.)
/// * Typed lanes made with [`Pool::typed_lanes`] keep no state, and pay nothing for it.
///
/// So the state is a cache of what a key is doing now (a session, a running total, a buffer),
/// kept while the key is busy or idle for less than `keep_idle`, not a store that outlives a
/// quiet key: keep what must last in `on_idle`.
///
/// ```
/// let pool = keyway::Pool::new().unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// let chat = pool.typed_lanes_with_state(
///     keyway::KeyState::new(|_user: &String| Vec::new()), // each user's history
///     move |user: &String, history: &mut Vec<String>, line: String| {
///         history.push(line);
///         tx.send((user.clone(), history.len())).unwrap();
///     },
/// );
/// for line in ["hi", "how are you", "bye"] {
///     chat.send("ann".to_string(), line.to_string()).unwrap();
/// }
/// chat.flush("ann".to_string()).unwrap().join().unwrap();
/// let seen: Vec<_> = rx.try_iter().collect();
/// assert_eq!(seen.last(), Some(&("ann".to_string(), 3))); // one history, three lines
/// ```
pub struct TypedLanes<K, M, S = ()>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    pub(super) pool: Pool,
    pub(super) table: typed::Table<K, M, S>,
}

impl<K, M, S> TypedLanes<K, M, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    /// Queues `msg` for `key`; the handler sees it after every message sent for `key` before.
    ///
    /// `Ok` means the message was accepted: it will be handled, or handed back by
    /// [`Pool::shutdown_now`]. If its handler (or an async handler's future) panics, the panic is
    /// contained, the message is dropped and the key goes on with its next message; the panic
    /// goes to the [panic hook](crate::PoolBuilder::panic_hook) as a
    /// [`PanicReport`](crate::PanicReport) whose `context_hash` is
    /// [`Pool::context_hash`]`(&key)`, is logged as a `tracing` error event (nothing shows
    /// without a subscriber) and is counted in [`Stats::panicked_tasks`](crate::Stats). To learn
    /// of a message's outcome from the sender, [`ask`](TypedLanes::ask) instead (the handler
    /// answers through a [`Reply`] in the message), or [`flush`](TypedLanes::flush) the key and
    /// check the hook's reports. An async handler that
    /// uses tokio's timers or sockets needs keyway's `tokio` feature and the lanes made from
    /// inside a tokio runtime; otherwise each message panics, and its report says so.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let lanes = pool.typed_lanes(move |_: &u8, n: u32| tx.send(n).unwrap());
    /// for n in 0..5 {
    ///     lanes.send(0, n).unwrap();
    /// }
    /// assert_eq!(rx.iter().take(5).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    /// ```
    pub fn send(&self, key: K, msg: M) -> Result<(), SubmitError<M>> {
        typed::send(self.pool.registry(), &self.table, key, msg, false)
    }

    /// Queues `msg` for `key`, replacing the key's last pending message if that one was also
    /// sent with `send_coalescing` and has not started. The newest message always arrives.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let prices = pool.typed_lanes(move |_: &&str, price: f64| tx.send(price).unwrap());
    /// for price in [1.10, 1.11, 1.12] {
    ///     prices.send_coalescing("EURUSD", price).unwrap();
    /// }
    /// prices.flush("EURUSD").unwrap().join().unwrap();
    /// let shown: Vec<f64> = rx.try_iter().collect();
    /// assert_eq!(shown.last(), Some(&1.12)); // older prices may have been skipped
    /// ```
    pub fn send_coalescing(&self, key: K, msg: M) -> Result<(), SubmitError<M>> {
        typed::send(self.pool.registry(), &self.table, key, msg, true)
    }

    /// Sends `key` a request and returns a handle to its answer: `make` builds the message
    /// around a [`Reply`], which the handler answers with [`Reply::send`]. The request is queued
    /// as [`send`](TypedLanes::send) queues a message, after every message sent for `key`
    /// before; the handle is a [`Future`](std::future::Future) to await from any runtime, or
    /// [`join`](TaskHandle::join) it.
    ///
    /// The handle completes with the answer, or with [`TaskError::Unanswered`] if the reply was
    /// dropped unanswered (the handler dropped it or panicked, or the message was dropped
    /// unhandled). Once queued, a request cannot be taken back: `cancel` on its handle returns
    /// false. A refused request is handed back in the error, reply and all. Do not wait for
    /// the answer inside a handler of the same key: the request queues behind the handler that
    /// waits for it.
    ///
    /// ```
    /// enum Msg {
    ///     Deposit(u64),
    ///     Balance(keyway::Reply<u64>),
    /// }
    /// # fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let pool = keyway::Pool::new().unwrap();
    /// let accounts = pool.typed_lanes_with_state(
    ///     keyway::KeyState::new(|_: &&str| 0u64),
    ///     |_: &&str, balance: &mut u64, msg: Msg| match msg {
    ///         Msg::Deposit(n) => *balance += n,
    ///         Msg::Balance(reply) => reply.send(*balance),
    ///     },
    /// );
    /// accounts.send("ann", Msg::Deposit(30)).unwrap();
    /// accounts.send("ann", Msg::Deposit(12)).unwrap();
    /// assert_eq!(accounts.ask("ann", Msg::Balance)?.join()?, 42);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`TaskError::Unanswered`]: crate::TaskError::Unanswered
    #[doc(alias = "call")]
    #[doc(alias = "request")]
    pub fn ask<R>(
        &self,
        key: K,
        make: impl FnOnce(Reply<R>) -> M,
    ) -> Result<TaskHandle<R>, SubmitError<M>> {
        let (answer, reply) = Reply::pair();
        self.send(key, make(reply))?;
        Ok(answer)
    }

    /// A handle that completes once every message sent for `key` before this call has been
    /// handled (it does not wait for messages sent after). It works as every flush does (see
    /// [`Contexts::flush`](crate::Contexts::flush)): a place in the key's lane, refused like a
    /// message, not replaced by a later coalescing message, `Rejected` after
    /// [`Pool::shutdown_now`].
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// let pool = keyway::Pool::new().unwrap();
    /// let handled = Arc::new(AtomicU32::new(0));
    /// let count = handled.clone();
    /// let lanes = pool.typed_lanes(move |_: &u8, _: ()| { count.fetch_add(1, Ordering::SeqCst); });
    /// for _ in 0..100 {
    ///     lanes.send(3, ()).unwrap();
    /// }
    /// lanes.flush(3).unwrap().join().unwrap();
    /// assert_eq!(handled.load(Ordering::SeqCst), 100);
    /// ```
    pub fn flush(&self, key: K) -> Result<TaskHandle<()>, SubmitError<()>> {
        typed::flush(self.pool.registry(), &self.table, key)
    }

    /// The pool these lanes run on.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lanes = pool.typed_lanes(|_: &u8, _: ()| ());
    /// lanes.pool().shutdown();
    /// assert!(pool.is_shutdown());
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

impl<K, M, S> Clone for TypedLanes<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    fn clone(&self) -> Self {
        TypedLanes {
            pool: self.pool.clone(),
            table: self.table.clone(),
        }
    }
}

impl<K, M, S> std::fmt::Debug for TypedLanes<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedLanes").finish_non_exhaustive()
    }
}
