//! Typed lanes: one handler for every key, messages queued as themselves (no boxed closure per
//! message), optionally with state per key (`state.rs`). Same ordering, coalescing and fairness
//! rules as the closure lanes.

use std::any::{Any, TypeId};
use std::hash::Hash;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use smallvec::smallvec;

use super::closures::with_handle;
use super::key::drop_quietly;
use super::state::{KeyState, Keyed};
use super::table::{LaneCore, LaneKind, LaneTable, Ran};
use super::typed_async::TypedHandler;
use crate::error::{panic_message, SubmitError};
use crate::pool::registry::Registry;
use crate::pool::{refused, Pool};
use crate::task::{
    Abandon, ContextOf, PanicReport, PendingMessage, PendingTask, Task, TaskHandle, Work,
};

pub(crate) struct Typed<K, M, S> {
    handler: TypedHandler<K, M, S>,
    state: KeyState<K, S>,
    /// Made by `typed_lanes`: the state is `()`, made by a no-op, so no slot is kept (measured:
    /// the slot's lock per message nearly doubled a typed lane's cost per message).
    stateless: bool,
    _types: PhantomData<fn(M)>,
}

/// What a typed lane queues: a message, or a flush marker.
pub(crate) enum Entry<M> {
    Message {
        msg: M,
        coalescing: bool,
    },
    /// Boxed: a flush is rare, and a message entry stays as small as the message.
    Flush(Box<Task>),
}

impl<K, M, S> Typed<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    pub(super) fn keyed(key: &(dyn Any + Send + Sync)) -> &Keyed<K, S> {
        match key.downcast_ref::<Keyed<K, S>>() {
            Some(keyed) => keyed,
            None => unreachable!("a typed lane table only holds keys of its own type"),
        }
    }
}

impl<K, M, S> LaneKind for Typed<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    type Entry = Entry<M>;

    fn context_type<Q: 'static>() -> std::any::TypeId {
        // The table stores `Keyed<K, S>`, which hashes as its `K` does.
        std::any::TypeId::of::<K>()
    }

    fn is_coalescing(entry: &Entry<M>) -> bool {
        matches!(
            entry,
            Entry::Message {
                coalescing: true,
                ..
            }
        )
    }

    fn run(&self, key: &(dyn Any + Send + Sync), entry: Entry<M>) -> Result<(), PanicReport> {
        let msg = match entry {
            Entry::Message { msg, .. } => msg,
            Entry::Flush(task) => return (*task).run(),
        };
        match &self.handler {
            TypedHandler::Sync(handler) if self.stateless => {
                let key = &Self::keyed(key).key;
                catch_unwind(AssertUnwindSafe(|| {
                    let mut unit = (self.state.init)(key);
                    handler(key, &mut unit, msg)
                }))
                .map_err(PanicReport::from_payload)
            }
            TypedHandler::Sync(handler) => {
                Self::keyed(key).with_state(&self.state, |key, state| handler(key, state, msg))
            }
            // Never a chunk entry (rule 7): only a message handed back by `shutdown_now` and run
            // by the caller comes here, to run on the caller's thread.
            TypedHandler::Async(handler) => handler.run_here(&Self::keyed(key).key, msg),
        }
    }

    fn is_async(&self, entry: &Entry<M>) -> bool {
        matches!(self.handler, TypedHandler::Async(_)) && matches!(entry, Entry::Message { .. })
    }

    /// Rule 7: starts the lane's driver (`typed_async.rs`), which handles this message and the
    /// lane's next ones, one future at a time, until the lane is empty.
    fn launch(
        &self,
        lane: &Arc<LaneCore<Self>>,
        _key: &(dyn Any + Send + Sync),
        registry: &Arc<Registry>,
        entry: Entry<M>,
    ) -> Ran {
        let (TypedHandler::Async(handler), Entry::Message { msg, .. }) = (&self.handler, entry)
        else {
            unreachable!("only an async handler's messages are launched (`is_async`)")
        };
        handler.launch(lane, registry, msg)
    }

    fn abandon(&self, entry: Entry<M>, why: Abandon) -> Result<(), PanicReport> {
        match entry {
            // A message has no handle to tell: dropping it is all there is (contained).
            Entry::Message { msg, .. } => catch_unwind(AssertUnwindSafe(|| drop(msg)))
                .map_err(|p| PanicReport::new(panic_message(&*p).to_owned())),
            Entry::Flush(task) => (*task).abandon_reporting(why),
        }
    }

    fn pending(lane: &Arc<LaneCore<Self>>, entry: Entry<M>) -> Option<PendingTask> {
        let context = lane.clone() as Arc<dyn ContextOf>;
        Some(match entry {
            Entry::Message { msg, .. } => PendingTask::from_work(
                Work::Message(Box::new(Unhandled {
                    lane: lane.clone(),
                    msg,
                })),
                context,
            ),
            Entry::Flush(task) => PendingTask::in_contexts(*task, smallvec![context]),
        })
    }

    fn context_key(key: &(dyn Any + Send + Sync)) -> &(dyn Any + Send + Sync) {
        &Self::keyed(key).key
    }
}

/// A message handed back by `shutdown_now`: running it calls the handler (with the key's state)
/// as the lane would; [`PendingTask::into_message`] takes it out instead.
struct Unhandled<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    lane: Arc<LaneCore<Typed<K, M, S>>>,
    msg: M,
}

impl<K, M, S> PendingMessage for Unhandled<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    fn run(self: Box<Self>) -> Result<(), PanicReport> {
        let Unhandled { lane, msg } = *self;
        lane.run_entry(Entry::Message {
            msg,
            coalescing: false,
        })
    }

    fn message_type(&self) -> TypeId {
        TypeId::of::<M>()
    }

    fn into_message(self: Box<Self>) -> Box<dyn Any + Send> {
        Box::new(self.msg)
    }
}

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
/// as `&mut S`: an actor per key, with no lock shared between keys and no thread per key.
///
/// * The state is made by [`KeyState::new`]'s `init(&key)` on the first message of a lane.
/// * It lives as long as the key's lane. A lane is freed when it has been idle (no message
///   queued or running) for a while: idle lanes are kept in a small cache and freed by the pool's
///   monitor at its next period ([`PoolBuilder::monitor_period`](crate::PoolBuilder::monitor_period),
///   250 ms by default) — or at once when the cache is full. Shutdown frees every lane.
/// * When the lane is freed the state is dropped, or handed to [`KeyState::on_idle`] to be
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
/// not a store that outlives a quiet key: keep what must last in `on_idle`.
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
    pub(super) table: Arc<LaneTable<Typed<K, M, S>>>,
}

impl Pool {
    /// Lanes of messages of type `M`, keyed by `K`, all handled by `handler` (see
    /// [`TypedLanes`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let lanes = pool.typed_lanes(move |key: &&str, n: u32| tx.send((*key, n)).unwrap());
    /// lanes.send("a", 1).unwrap();
    /// assert_eq!(rx.recv().unwrap(), ("a", 1));
    /// ```
    pub fn typed_lanes<K, M, H>(&self, handler: H) -> TypedLanes<K, M>
    where
        K: Hash + Eq + Send + Sync + 'static,
        M: Send + 'static,
        H: Fn(&K, M) + Send + Sync + 'static,
    {
        let handler = move |key: &K, _: &mut (), msg: M| handler(key, msg);
        self.make_typed_lanes(
            KeyState::new(|_| ()),
            TypedHandler::Sync(Box::new(handler)),
            true,
        )
    }

    /// Typed lanes whose handler also gets the key's state, `handler(&key, &mut state, msg)`;
    /// `state` says how a key's state is made and let go of. See [`TypedLanes`], "Keyed state",
    /// for how long a state lives.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let counters = pool.typed_lanes_with_state(
    ///     keyway::KeyState::new(|_: &u8| 0u32),
    ///     |_: &u8, count: &mut u32, add: u32| *count += add,
    /// );
    /// counters.send(1, 5).unwrap();
    /// counters.send(1, 6).unwrap();
    /// # counters.flush(1).unwrap().join().unwrap();
    /// ```
    pub fn typed_lanes_with_state<K, M, S, H>(
        &self,
        state: KeyState<K, S>,
        handler: H,
    ) -> TypedLanes<K, M, S>
    where
        K: Hash + Eq + Send + Sync + 'static,
        M: Send + 'static,
        S: Send + 'static,
        H: Fn(&K, &mut S, M) + Send + Sync + 'static,
    {
        self.make_typed_lanes(state, TypedHandler::Sync(Box::new(handler)), false)
    }

    /// `stateless`: the state is `()` and kept in no slot (an async handler's must be).
    pub(super) fn make_typed_lanes<K, M, S>(
        &self,
        state: KeyState<K, S>,
        handler: TypedHandler<K, M, S>,
        stateless: bool,
    ) -> TypedLanes<K, M, S>
    where
        K: Hash + Eq + Send + Sync + 'static,
        M: Send + 'static,
        S: Send + 'static,
    {
        let registry = self.registry();
        let table = LaneTable::new(
            Typed {
                handler,
                state,
                stateless,
                _types: PhantomData,
            },
            registry.config.max_threads,
            registry.config.hasher.clone(),
        );
        registry.register_table(Arc::downgrade(&table) as _);
        TypedLanes {
            pool: self.clone(),
            table,
        }
    }
}

impl<K, M, S> TypedLanes<K, M, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    fn push<T>(&self, key: K, item: T, entry: impl FnOnce(T) -> Entry<M>) -> Result<(), T> {
        let registry = self.pool.registry();
        let mut item = Some(item);
        let placed = self
            .table
            .submit(registry, Keyed::<K, S>::new(key), || match item.take() {
                Some(item) => ((), entry(item)),
                None => unreachable!("an entry is made once"),
            });
        match (placed, item) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some(item)) => {
                registry.unadmit();
                Err(item)
            }
            (Err(_), None) => unreachable!("a key panicked after the entry was queued"),
        }
    }

    fn send_entry(&self, key: K, msg: M, coalescing: bool) -> Result<(), SubmitError<M>> {
        if let Err(why) = self.pool.registry().admit() {
            // A key whose `Drop` panics must not unwind through the return (see `admit_then`).
            drop_quietly(key);
            return Err(refused(why, msg));
        }
        self.push(key, msg, |msg| Entry::Message { msg, coalescing })
            .map_err(SubmitError::KeyPanicked)
    }

    /// Queues `msg` for `key`; the handler sees it after every message sent for `key` before.
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
        self.send_entry(key, msg, false)
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
        self.send_entry(key, msg, true)
    }

    /// A handle that completes once every message sent for `key` before this call has been
    /// handled (it does not wait for messages sent after). The flush takes a place in the key's
    /// lane: a later coalescing message does not replace one sent before the flush.
    ///
    /// Refused like a message (after shutdown, or when the pool is full). If the pool is stopped
    /// with [`Pool::shutdown_now`] first, the handle says
    /// [`TaskError::Rejected`](crate::TaskError::Rejected) once the handed-back flush is dropped.
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
        if let Err(why) = self.pool.registry().admit() {
            drop_quietly(key);
            return Err(refused(why, ()));
        }
        let (handle, task) = with_handle(|| ());
        match self.push(key, Box::new(task), Entry::Flush) {
            Ok(()) => Ok(handle),
            Err(task) => {
                drop(task); // never ran, never will: its handle is dropped with it
                Err(SubmitError::KeyPanicked(()))
            }
        }
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
