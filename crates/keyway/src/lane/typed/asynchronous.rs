//! Typed lanes whose handler is async: `Pool::typed_lanes_async`. Each message's future holds
//! its key until it completes (rule 7), so a per-key handler can await I/O in order.
//!
//! This file adapts the user's handler (with the key alone, or with the key's state by value)
//! to what a driver calls ([`Call`]), and launches an activation's driver (`driver.rs`) when a
//! runner finds the lane's first message: its first poll is made in the runner's turn, with no
//! task (`future::run_inline_with`), on the lane, pool and handler the runner lends it. An
//! activation whose futures all complete at once never has a task, takes no reference, and pins
//! its futures in a recycled cell (`future::FuturePlace`); one that waits becomes an
//! `async-task` task then. So neither a warm lane nor a key sent one message at a time
//! allocates per message, and a message costs one poll per real wake-up, not a launch and a
//! lane job.

use std::future::Future;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::driver::{Activation, Call, MessageLoop};
use super::state::{KeyState, Keyed};
use super::taken::{Chunk, Taken};
use super::{AsyncHandler, Typed, TypedHandler};
use crate::engine::Registry;
use crate::future::{run_here, run_inline_with, Runtime};
use crate::lane::table::{LaneCore, LaneKind, Ran};
use crate::task::{drop_quietly, PanicReport};

impl<K, M> TypedHandler<K, M, ()>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
{
    /// An async handler (`Pool::typed_lanes_async`), its future type erased once here.
    pub(crate) fn new_async<H, Fut>(handler: H) -> Self
    where
        H: Fn(&K, M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Shared::boxed(Stateless(handler, PhantomData))
    }
}

impl<K, M, S> TypedHandler<K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    /// An async handler that owns its key's state (`Pool::typed_lanes_async_with_state`): it
    /// takes the state by value and its future gives it back.
    pub(crate) fn new_async_with_state<H, Fut>(handler: H) -> Self
    where
        H: Fn(&K, S, M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = S> + Send + 'static,
    {
        Shared::boxed(Stateful(handler, PhantomData))
    }
}

/// `handler(&key, msg)`: no state (kept in no slot).
struct Stateless<H, Fut>(H, PhantomData<fn() -> Fut>);

impl<K, M, H, Fut> Call<K, M, ()> for Stateless<H, Fut>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    H: Fn(&K, M) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    type Fut = Fut;

    fn call(
        &self,
        keyed: &Keyed<K, ()>,
        _: &KeyState<K, ()>,
        _: &mut Option<()>,
        msg: M,
    ) -> Result<Fut, PanicReport> {
        catch_unwind(AssertUnwindSafe(|| (self.0)(&keyed.key, msg)))
            .map_err(PanicReport::from_payload)
    }

    fn done((): ()) -> Option<()> {
        None
    }
}

/// `handler(&key, state, msg)`, whose future gives the state back: the state leaves its slot
/// for the message's future; once that completes, the activation carries it to the key's next
/// message, and puts it back in the slot before it lets go of the lane.
struct Stateful<H, Fut>(H, PhantomData<fn() -> Fut>);

impl<K, M, S, H, Fut> Call<K, M, S> for Stateful<H, Fut>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    H: Fn(&K, S, M) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = S> + Send + 'static,
{
    type Fut = Fut;

    fn call(
        &self,
        keyed: &Keyed<K, S>,
        spec: &KeyState<K, S>,
        carried: &mut Option<S>,
        msg: M,
    ) -> Result<Fut, PanicReport> {
        let state = match carried.take().map_or_else(|| keyed.take_state(spec), Ok) {
            Ok(state) => state,
            Err(report) => {
                drop_quietly(msg);
                return Err(report);
            }
        };
        catch_unwind(AssertUnwindSafe(|| (self.0)(&keyed.key, state, msg)))
            .map_err(PanicReport::from_payload)
    }

    fn done(state: S) -> Option<S> {
        Some(state)
    }
}

/// A table's async handler as the table holds it; each activation shares it. Its futures run
/// in the runtime the table keeps (`Typed::runtime`: the pool's bound one, else the one the
/// table was made in), or, while the pool lives, in the pool's bound one (`Runtime::enter_in`).
struct Shared<C>(Arc<C>);

impl<C> Shared<C> {
    fn boxed<K, M, S>(call: C) -> TypedHandler<K, M, S>
    where
        K: Send + Sync + 'static,
        M: Send + 'static,
        S: Send + 'static,
        C: Call<K, M, S>,
    {
        TypedHandler::Async(Box::new(Shared(Arc::new(call))))
    }
}

impl<K, M, S, C> AsyncHandler<K, M, S> for Shared<C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    fn launch(&self, lane: &Arc<LaneCore<Typed<K, M, S>>>, registry: &Arc<Registry>, msg: M) -> Ran
    where
        Typed<K, M, S>: LaneKind,
    {
        // The runner counts the message finished once this returns; the driver holds it (and
        // each later message it pops holds its own admission) until its future is done. Its
        // first poll is made here, with no task (`run_inline_with`), and calls the handler on
        // `msg` inside the runtime it enters once for the turn, on the lane, pool and handler
        // the runner lends it: an activation whose messages' futures complete at once takes no
        // reference on them and pins its futures in a recycled cell (`FuturePlace`), not a
        // fresh allocation. Only a driver whose future waits is made, to be a task.
        registry.extend_task();
        run_inline_with(
            registry,
            (Activation::<K, M, S, C>::new(msg), Chunk::default()),
            |(act, chunk), cx| {
                let taken = Taken { lane, chunk };
                act.poll_first(&*self.0, taken, registry, cx)
            },
            |(act, chunk)| MessageLoop {
                registry: Arc::downgrade(registry),
                handler: self.0.clone(),
                lane: lane.clone(),
                chunk,
                act,
            },
        );
        Ran::Suspended
    }

    fn run_here(
        &self,
        keyed: &Keyed<K, S>,
        spec: &KeyState<K, S>,
        msg: M,
        runtime: &Runtime,
    ) -> Result<(), PanicReport> {
        let fut = runtime.enter(|| self.0.call(keyed, spec, &mut None, msg))?;
        let done = async move {
            if let Some(state) = C::done(fut.await) {
                keyed.put_state(spec, state);
            }
        };
        run_here(done, None, runtime)
    }
}
