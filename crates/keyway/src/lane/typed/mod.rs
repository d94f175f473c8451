//! Typed lanes: one handler for every key, messages queued as themselves (no boxed closure per
//! message), optionally with state per key. Same ordering, coalescing and fairness rules as the
//! closure lanes.
//!
//! * this file — the kind (`Typed`): its entries, how they run, are abandoned or handed back;
//!   sending to a key's lane;
//! * `state` — a typed lane's state per key, owned by the key's lane: [`KeyState`];
//! * `asynchronous` — async handlers: one driver per lane activation;
//! * `taken` — what such a driver's turn holds: its lane, and the messages it took together;
//! * `loaded` — state per key loaded and saved by futures: [`AsyncKeyState`].

use std::any::{Any, TypeId};
use std::hash::Hash;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use smallvec::smallvec;

mod asynchronous;
mod driver;
mod loaded;
mod send_all;
mod state;
mod taken;
#[cfg(test)]
mod test;

pub(crate) use loaded::split as split_loaded;
pub use loaded::{AsyncKeyState, Loaded};
pub(crate) use send_all::send_all_pinned;
pub use state::KeyState;

use crate::engine::{refused, Registry};
use crate::error::{panic_message, SubmitError};
use crate::future::Runtime;
use crate::lane::closures::with_handle;
use crate::lane::key::KeyPanicked;
use crate::lane::table::{LaneCore, LaneKind, LaneTable, Ran};
use crate::task::{
    drop_quietly, Abandon, ContextOf, PanicReport, PendingMessage, PendingTask, Task, TaskHandle,
    Unstarted,
};
use state::Keyed;

type SyncHandler<K, M, S> = dyn Fn(&K, &mut S, M) + Send + Sync + 'static;
type StatelessHandler<K, M> = dyn Fn(&K, M) + Send + Sync + 'static;

/// A typed lane table's handler: run to the end, with no state (the user's handler itself,
/// called with no state made or kept: measured, making a `()` state by a call per message and
/// passing it through a wrapper cost about 10 instructions per message) or with the key's state,
/// or started as a future.
pub(crate) enum TypedHandler<K, M, S> {
    Stateless(Box<StatelessHandler<K, M>>),
    Sync(Box<SyncHandler<K, M, S>>),
    Async(Box<dyn AsyncHandler<K, M, S>>),
}

/// An async handler with its future type erased once per table, not per message.
pub(crate) trait AsyncHandler<K, M, S>: Send + Sync + 'static {
    /// Rule 7: starts a driver on `lane` (scheduled, its runner calling) with `msg`, the message
    /// it took from the lane's head.
    fn launch(&self, lane: &Arc<LaneCore<Typed<K, M, S>>>, registry: &Arc<Registry>, msg: M) -> Ran
    where
        Typed<K, M, S>: LaneKind;
    /// Handles `msg` on this thread (a message handed back by `shutdown_now`, run by the
    /// caller), with the key's state if the handler owns one, inside `runtime` (the table's).
    fn run_here(
        &self,
        keyed: &Keyed<K, S>,
        spec: &KeyState<K, S>,
        msg: M,
        runtime: &Runtime,
    ) -> Result<(), PanicReport>;
}

pub(crate) struct Typed<K, M, S> {
    /// `Stateless` (made by `typed_lanes`) keeps no state slot (measured: the slot's lock per
    /// message nearly doubled a typed lane's cost per message).
    handler: TypedHandler<K, M, S>,
    state: KeyState<K, S>,
    /// Where an async handler's futures run off the pool's threads with no pool to ask
    /// (`Runtime::for_lanes`: the pool's bound runtime, else the one the table was made in);
    /// none for other handlers.
    runtime: Runtime,
    _types: PhantomData<fn(M)>,
}

/// What a typed lane queues: a message, or a flush marker.
///
/// Whether a message coalesces is its variant, not a flag beside it: the entry is then the tag
/// and the message, with no byte of its own between them. (With a `bool` after the tag, the
/// compiler copied the tag's word as two overlapping 4-byte moves and read them back; the
/// second read waited on a store it could not forward from: perf, `contexts --work 10`, the
/// runner's hottest instruction but one, a quarter of its samples.)
pub(crate) enum Entry<M> {
    /// A message sent to run after every one before it.
    Message(M),
    /// A message a later coalescing message replaces while both are pending (`send_coalescing`).
    Coalescing(M),
    /// Boxed: a flush is rare, and a message entry stays as small as the message.
    Flush(Box<Task>),
}

impl<M> Entry<M> {
    /// The entry of `msg`, coalescing or not.
    #[inline(always)]
    pub(crate) fn message(msg: M, coalescing: bool) -> Self {
        if coalescing {
            Entry::Coalescing(msg)
        } else {
            Entry::Message(msg)
        }
    }

    /// The message, if the entry is one (else the entry itself: a flush).
    #[inline(always)]
    pub(crate) fn into_message(self) -> Result<M, Self> {
        match self {
            Entry::Message(msg) | Entry::Coalescing(msg) => Ok(msg),
            flush => Err(flush),
        }
    }

    /// Whether the entry is a message (not a flush).
    #[inline(always)]
    pub(crate) fn is_message(&self) -> bool {
        !matches!(self, Entry::Flush(_))
    }
}

impl<K, M, S> Typed<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    /// How the table makes each key's state.
    pub(super) fn key_state(&self) -> &KeyState<K, S> {
        &self.state
    }

    pub(super) fn keyed(key: &(dyn Any + Send + Sync)) -> &Keyed<K, S> {
        match key.downcast_ref::<Keyed<K, S>>() {
            Some(keyed) => keyed,
            None => unreachable!("a typed lane table only holds keys of its own type"),
        }
    }

    /// [`keyed`](Self::keyed) without the `TypeId` check (a call through the key's vtable and a
    /// 128-bit compare: about 10 instructions per message, measured with callgrind).
    ///
    /// # Safety
    /// `key` is the key of a lane of a `Typed<K, M, S>` table: every path that makes such a lane
    /// (`push`, `pin` here, both through `LaneTable::with_lane`) stores a `Keyed<K, S>`.
    #[inline]
    unsafe fn keyed_unchecked(key: &(dyn Any + Send + Sync)) -> &Keyed<K, S> {
        debug_assert!(
            key.is::<Keyed<K, S>>(),
            "a typed lane's key is a Keyed<K, S>"
        );
        // SAFETY: the caller's promise: the value behind `key` is a `Keyed<K, S>`, so the data
        // pointer of the trait object points to one, live for the borrow.
        unsafe { &*(key as *const (dyn Any + Send + Sync) as *const Keyed<K, S>) }
    }

    /// Every entry but a message to a stateless handler: off the path of `run`, which stays
    /// small (see there).
    #[inline(never)]
    fn run_other(&self, key: &(dyn Any + Send + Sync), entry: Entry<M>) -> Result<(), PanicReport> {
        let msg = match entry {
            Entry::Message(msg) | Entry::Coalescing(msg) => msg,
            Entry::Flush(task) => return (*task).run(),
        };
        match &self.handler {
            TypedHandler::Stateless(_) => unreachable!("`run` handles a stateless lane's messages"),
            TypedHandler::Sync(handler) => {
                Self::keyed(key).with_state(&self.state, |key, state| handler(key, state, msg))
            }
            // Never a chunk entry (rule 7): only a message handed back by `shutdown_now` and run
            // by the caller comes here, to run on the caller's thread.
            TypedHandler::Async(handler) => {
                handler.run_here(Self::keyed(key), &self.state, msg, &self.runtime)
            }
        }
    }
}

/// The report of a handler's panic (off the runner's path).
#[cold]
#[inline(never)]
fn report_of(payload: Box<dyn Any + Send>) -> PanicReport {
    PanicReport::from_payload(payload)
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
        matches!(entry, Entry::Coalescing(_))
    }

    /// The common case (a message to a stateless handler) is all this does in line: no state
    /// made, no `TypeId` check of the key, nothing but a unit across the unwind boundary; every
    /// other case is a call out of line, so that the runner's loop keeps this inlined (measured
    /// with callgrind, `contexts --work 10` at 16 contexts: 46 instructions per message in this
    /// function and 31 in the runner's closure around it, out of line, before).
    #[inline(always)]
    fn run(&self, key: &(dyn Any + Send + Sync), entry: Entry<M>) -> Result<(), PanicReport> {
        match (&self.handler, entry) {
            (TypedHandler::Stateless(handler), Entry::Message(msg) | Entry::Coalescing(msg)) => {
                // SAFETY: the key of a typed lane's table is a `Keyed<K, S>` (`keyed_unchecked`).
                let key = &unsafe { Self::keyed_unchecked(key) }.key;
                match catch_unwind(AssertUnwindSafe(|| handler(key, msg))) {
                    Ok(()) => Ok(()),
                    Err(payload) => Err(report_of(payload)),
                }
            }
            (_, entry) => self.run_other(key, entry),
        }
    }

    fn is_async(&self, entry: &Entry<M>) -> bool {
        matches!(self.handler, TypedHandler::Async(_)) && entry.is_message()
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
        let (TypedHandler::Async(handler), Ok(msg)) = (&self.handler, entry.into_message()) else {
            unreachable!("only an async handler's messages are launched (`is_async`)")
        };
        handler.launch(lane, registry, msg)
    }

    fn abandon(&self, entry: Entry<M>, why: Abandon) -> Result<(), PanicReport> {
        match entry {
            // A message has no handle to tell: dropping it is all there is (contained).
            Entry::Message(msg) | Entry::Coalescing(msg) => {
                catch_unwind(AssertUnwindSafe(|| drop(msg)))
                    .map_err(|p| PanicReport::new(panic_message(&*p).to_owned()))
            }
            Entry::Flush(task) => (*task).abandon_reporting(why),
        }
    }

    fn pending(lane: &Arc<LaneCore<Self>>, entry: Entry<M>) -> Option<PendingTask> {
        let context = lane.clone() as Arc<dyn ContextOf>;
        Some(match entry {
            Entry::Message(msg) | Entry::Coalescing(msg) => PendingTask::from_work(
                Unstarted::Message(Box::new(Unhandled {
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
        lane.run_entry(Entry::Message(msg))
    }

    fn message_type(&self) -> TypeId {
        TypeId::of::<M>()
    }

    fn into_message(self: Box<Self>) -> Box<dyn Any + Send> {
        Box::new(self.msg)
    }
}

/// The lanes of typed messages a `TypedLanes` feeds: their table, registered with the pool for
/// shutdown and statistics.
pub(crate) type Table<K, M, S> = Arc<LaneTable<Typed<K, M, S>>>;

/// One key's typed lane.
pub(crate) type TypedCore<K, M, S> = Arc<LaneCore<Typed<K, M, S>>>;

/// A new table of typed lanes on the pool of `registry`.
pub(crate) fn new_table<K, M, S>(
    registry: &Registry,
    state: KeyState<K, S>,
    handler: TypedHandler<K, M, S>,
) -> Table<K, M, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    let runtime = match handler {
        TypedHandler::Async(_) => Runtime::for_lanes(registry),
        _ => Runtime::default(),
    };
    let table = LaneTable::new(
        Typed {
            handler,
            state,
            runtime,
            _types: PhantomData,
        },
        &registry.config,
    );
    registry.register_table(Arc::downgrade(&table) as _);
    table
}

/// Queues the entry `entry` makes of `item` in `key`'s lane (admitted already); the item comes
/// back if the key's `Hash`, `Eq` or `Drop` panicked (the admission is then taken back).
fn push<K, M, S, T>(
    registry: &Arc<Registry>,
    table: &Table<K, M, S>,
    key: K,
    item: T,
    entry: impl FnOnce(T) -> Entry<M>,
) -> Result<(), T>
where
    K: Hash + Eq + Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    let mut item = Some(item);
    let placed = table.submit(registry, Keyed::<K, S>::new(key), || match item.take() {
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

/// `TypedLanes::send` and `send_coalescing`: `msg` is admitted and queued in `key`'s lane.
pub(crate) fn send<K, M, S>(
    registry: &Arc<Registry>,
    table: &Table<K, M, S>,
    key: K,
    msg: M,
    coalescing: bool,
) -> Result<(), SubmitError<M>>
where
    K: Hash + Eq + Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    if let Err(why) = registry.admit() {
        // A key whose `Drop` panics must not unwind through the return (see `admit_then`).
        drop_quietly(key);
        return Err(refused(why, msg));
    }
    push(registry, table, key, msg, |msg| {
        Entry::message(msg, coalescing)
    })
    .map_err(SubmitError::KeyPanicked)
}

/// `TypedLanes::flush`: a handle completing once `key`'s lane reached this point.
pub(crate) fn flush<K, M, S>(
    registry: &Arc<Registry>,
    table: &Table<K, M, S>,
    key: K,
) -> Result<TaskHandle<()>, SubmitError<()>>
where
    K: Hash + Eq + Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    if let Err(why) = registry.admit() {
        drop_quietly(key);
        return Err(refused(why, ()));
    }
    let (handle, task) = with_handle(|| ());
    match push(
        registry,
        table,
        key,
        Box::new(Task::new(task)),
        Entry::Flush,
    ) {
        Ok(()) => Ok(handle),
        Err(task) => {
            drop(task); // never ran, never will: its handle is dropped with it
            Err(SubmitError::KeyPanicked(()))
        }
    }
}

/// `TypedLanes::lane`: `key`'s lane, pinned in `table` (rule 3) until `unpin`.
pub(crate) fn pin<K, M, S>(
    table: &Table<K, M, S>,
    key: K,
) -> Result<TypedCore<K, M, S>, KeyPanicked>
where
    K: Hash + Eq + Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    table.pin(Keyed::<K, S>::new(key))
}

/// `TypedLane::send` (`COALESCING` false) and `send_coalescing`: `msg` admitted and queued in
/// the pinned lane `lane` of `table`. Pinned: no look-up, so no key code runs (rule 3). The flag
/// is a constant: a plain send then has no coalescing test and no replaced entry to look at
/// (callgrind: 5 instructions per send).
#[inline]
pub(crate) fn send_pinned<K, M, S, const COALESCING: bool>(
    registry: &Arc<Registry>,
    table: &Table<K, M, S>,
    lane: &TypedCore<K, M, S>,
    msg: M,
) -> Result<(), SubmitError<M>>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    if let Err(why) = registry.admit_inline() {
        return Err(refused(why, msg));
    }
    let entry = Entry::message(msg, COALESCING);
    lane.push_pinned(table, registry, entry);
    Ok(())
}

/// The key of a pinned typed lane.
pub(crate) fn key_of<K, M, S>(lane: &LaneCore<Typed<K, M, S>>) -> &K
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    &Typed::<K, M, S>::keyed(lane.key.get()).key
}
