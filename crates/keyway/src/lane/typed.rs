//! Typed lanes: one handler for every key, messages queued as themselves (no boxed closure per
//! message). Same ordering, coalescing and fairness rules as the closure lanes.

use std::any::Any;
use std::hash::Hash;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::key::drop_quietly;
use super::table::Ran;
use super::table::{LaneCore, LaneKind, LaneTable};
use super::typed_async::TypedHandler;
use crate::error::{panic_message, SubmitError};
use crate::future::{run_here, Launcher, Release};
use crate::pool::registry::Registry;
use crate::pool::{refused, Pool};
use crate::task::{Abandon, PanicReport, Runnable, Task};

pub(crate) struct Typed<K, M> {
    handler: TypedHandler<K, M>,
    _types: PhantomData<fn(K, M)>,
}

pub(crate) struct Message<M> {
    msg: M,
    coalescing: bool,
}

impl<K, M> LaneKind for Typed<K, M>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
{
    type Entry = Message<M>;

    fn is_coalescing(entry: &Message<M>) -> bool {
        entry.coalescing
    }

    fn run(&self, key: &(dyn Any + Send + Sync), entry: Message<M>) -> Result<(), PanicReport> {
        let Some(key) = key.downcast_ref::<K>() else {
            unreachable!("a typed lane table only holds keys of its own type")
        };
        match &self.handler {
            TypedHandler::Sync(handler) => {
                catch_unwind(AssertUnwindSafe(|| handler(key, entry.msg)))
                    .map_err(|p| PanicReport::new(panic_message(&*p).to_owned()))
            }
            // Never a chunk entry (rule 7): only a message handed back by `shutdown_now` and run
            // by the caller comes here, to run on the caller's thread.
            TypedHandler::Async(handler) => {
                let fut = catch_unwind(AssertUnwindSafe(|| handler(key, entry.msg)))
                    .map_err(|p| PanicReport::new(panic_message(&*p).to_owned()))?;
                run_here(fut, None)
            }
        }
    }

    fn is_async(&self, _entry: &Message<M>) -> bool {
        matches!(self.handler, TypedHandler::Async(_))
    }

    fn launch(
        &self,
        lane: &Arc<LaneCore<Self>>,
        key: &(dyn Any + Send + Sync),
        registry: &Arc<Registry>,
        entry: Message<M>,
    ) -> Ran {
        let TypedHandler::Async(handler) = &self.handler else {
            return Ran::Done(self.run(key, entry));
        };
        let Some(key) = key.downcast_ref::<K>() else {
            unreachable!("a typed lane table only holds keys of its own type")
        };
        match catch_unwind(AssertUnwindSafe(|| handler(key, entry.msg))) {
            Ok(fut) => {
                Launcher::new(fut, None).launch(registry, Release::Lane(lane.clone()));
                Ran::Suspended
            }
            Err(p) => Ran::Done(Err(PanicReport::new(panic_message(&*p).to_owned()))),
        }
    }

    fn abandon(&self, entry: Message<M>, _why: Abandon) -> Result<(), PanicReport> {
        // A message has no handle to tell: dropping it is all there is (contained).
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(entry)))
            .map_err(|p| PanicReport::new(crate::error::panic_message(&*p).to_owned()))
    }

    fn pending(lane: &Arc<LaneCore<Self>>, entry: Message<M>) -> Option<Task> {
        Some(Task::new(PendingMessage {
            lane: lane.clone(),
            msg: entry.msg,
        }))
    }
}

/// A message handed back by `shutdown_now`: running it calls the handler as the lane would.
struct PendingMessage<K, M>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
{
    lane: Arc<LaneCore<Typed<K, M>>>,
    msg: M,
}

impl<K, M> Runnable for PendingMessage<K, M>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
{
    fn run(self) -> Result<(), PanicReport> {
        let lane = self.lane;
        lane.run_entry(Message {
            msg: self.msg,
            coalescing: false,
        })
    }

    fn abandon(self, _why: Abandon) {}
}

/// Lanes of messages for one handler, for processing each key's messages in order (the seed's
/// "server handling each client's messages"). `send(key, msg)` queues the message itself; the
/// handler runs as `handler(&key, msg)`, one message at a time per key, in send order.
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
pub struct TypedLanes<K, M>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
{
    pool: Pool,
    table: Arc<LaneTable<Typed<K, M>>>,
}

impl Pool {
    /// Lanes of messages of type `M`, keyed by `K`, all handled by `handler`.
    pub fn typed_lanes<K, M, H>(&self, handler: H) -> TypedLanes<K, M>
    where
        K: Hash + Eq + Send + Sync + 'static,
        M: Send + 'static,
        H: Fn(&K, M) + Send + Sync + 'static,
    {
        self.typed_lanes_with(TypedHandler::Sync(Box::new(handler)))
    }

    pub(super) fn typed_lanes_with<K, M>(&self, handler: TypedHandler<K, M>) -> TypedLanes<K, M>
    where
        K: Hash + Eq + Send + Sync + 'static,
        M: Send + 'static,
    {
        let registry = self.registry();
        let table = LaneTable::new(
            Typed {
                handler,
                _types: PhantomData,
            },
            registry.config.max_threads,
        );
        registry.register_table(Arc::downgrade(&table) as _);
        TypedLanes {
            pool: self.clone(),
            table,
        }
    }
}

impl<K, M> TypedLanes<K, M>
where
    K: Hash + Eq + Send + Sync + 'static,
    M: Send + 'static,
{
    fn push(&self, key: K, msg: M, coalescing: bool) -> Result<(), SubmitError<M>> {
        let registry = self.pool.registry();
        if let Err(why) = registry.admit() {
            // A key whose `Drop` panics must not unwind through the return (see `admit_then`).
            drop_quietly(key);
            return Err(refused(why, msg));
        }
        let mut msg = Some(msg);
        let placed = self.table.submit(registry, key, || match msg.take() {
            Some(msg) => ((), Message { msg, coalescing }),
            None => unreachable!("a message's entry is made once"),
        });
        match (placed, msg) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some(msg)) => {
                registry.unadmit();
                Err(SubmitError::KeyPanicked(msg))
            }
            (Err(_), None) => unreachable!("a key panicked after the message was queued"),
        }
    }

    /// Queues `msg` for `key`; the handler sees it after every message sent for `key` before.
    pub fn send(&self, key: K, msg: M) -> Result<(), SubmitError<M>> {
        self.push(key, msg, false)
    }

    /// Queues `msg` for `key`, replacing the key's last pending message if that one was also
    /// sent with `send_coalescing` and has not started.
    pub fn send_coalescing(&self, key: K, msg: M) -> Result<(), SubmitError<M>> {
        self.push(key, msg, true)
    }

    /// The pool these lanes run on.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

impl<K, M> Clone for TypedLanes<K, M>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
{
    fn clone(&self) -> Self {
        TypedLanes {
            pool: self.pool.clone(),
            table: self.table.clone(),
        }
    }
}

impl<K, M> std::fmt::Debug for TypedLanes<K, M>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedLanes").finish_non_exhaustive()
    }
}
