//! Typed lanes whose handler is async: `Pool::typed_lanes_async`. Each message's future holds
//! its key until it completes (rule 7), so a per-key handler can await I/O in order.
//!
//! A lane's messages are handled by one *driver* per activation (rule 7, "async typed lanes"),
//! monomorphised over the handler's future type, holding the current message's future in a
//! place of the activation (each message's future in turn, written into it in place). When that
//! future completes, the driver starts the lane's next message and polls the handler's new
//! future at once, taking the lane's messages as a runner takes its chunk: all of them under one
//! lane lock (those its turn does not start go back in front of the lane before it waits or
//! yields); when the lane is empty it turns the lane idle (rule 2) and ends.
//!
//! Its first poll is made in the runner's turn, with no task (`future::run_inline_with`), on
//! the lane, pool and handler the runner lends it: an activation whose futures all complete at
//! once never has a task, takes no reference, and pins its futures in a recycled cell
//! (`future::FuturePlace`); one that waits becomes an `async-task` task then. So neither a warm
//! lane nor a key sent one message at a time allocates per message, and a message costs one
//! poll per real wake-up, not a launch and a lane job.
//!
//! A handler that owns its key's state gets it from the previous message's future through the
//! driver, not through the key's slot (a lock, and a count on the `on_idle` hook, per message):
//! the driver puts it back in the slot under the hold of the lane lock that turns the lane idle.

use std::future::Future;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::state::{KeyState, Keyed};
use super::taken::{Chunk, DriverTurn, Taken};
use super::{AsyncHandler, Typed, TypedHandler};
use crate::engine::{on_pool, with_pool, OnPool, Registry};
use crate::error::panic_message;
use crate::future::{poll_resuming, run_here, run_inline_with, FuturePlace, Parks, Runtime};
use crate::lane::activation::{self, hand_over, poll_in, poll_on, Activity, Driver};
use crate::lane::table::{LaneCore, LaneKind, Ran};
use crate::lane::turn::Holds;
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

/// How an async typed lane calls its handler: with the key alone, or with the key's state by
/// value, given back as the future's output.
trait Call<K, M, S>: Send + Sync + 'static {
    type Fut: Future + Send + 'static;
    /// The future of `msg`, given the key's state `carried` from the activation's previous
    /// message, else the one in the key's slot (the handler, and the state's `init`, are user
    /// code: a panic comes back as its report, the message dropped).
    fn call(
        &self,
        keyed: &Keyed<K, S>,
        spec: &KeyState<K, S>,
        carried: &mut Option<S>,
        msg: M,
    ) -> Result<Self::Fut, PanicReport>;
    /// The message's future completed with `out`: the state it gave back, if the handler owns
    /// one, for the activation's next message (or the key's slot).
    fn done(out: <Self::Fut as Future>::Output) -> Option<S>;
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

/// One activation of an async typed lane: it holds the lane (scheduled, no job) from the
/// runner's launch until the lane is empty, handling its messages one future at a time.
struct MessageLoop<K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    registry: Weak<Registry>,
    /// Borrowed by each poll (not counted again: the count is shared by every lane's driver).
    handler: Arc<C>,
    /// Its lane, and the messages a turn took from it: what each turn holds (`Taken`).
    lane: Arc<LaneCore<Typed<K, M, S>>>,
    chunk: Chunk<M>,
    act: Activation<K, M, S, C>,
}

/// A driver's state but its pool (borrowed from the worker polling it: `with_pool`), its
/// handler and its lane (the turn's: `Taken`).
struct Activation<K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    /// The message the runner launched, until the driver's first poll calls the handler on it.
    first: Option<M>,
    /// The current message's future, pinned in the activation's place (each message's future in
    /// turn: dropped in place when done, the next one written into the empty place; its cell
    /// recycled once the activation is over).
    fut: FuturePlace<C::Fut>,
    /// The key's state the last message's future gave back, for the next message: it goes back
    /// to the key's slot (where `on_idle` finds it) before the activation lets go of the lane.
    carried: Option<S>,
    /// The current message's future waited: the next message is popped alone (a handler that
    /// waits would give back, at its wait, what the driver took with it), not taken with the
    /// lane's others.
    waited: bool,
    activity: Activity,
    _types: PhantomData<fn(M)>,
}

impl<K, M, S, C> Activation<K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    /// An activation launched with `first`, polled inline first.
    fn new(first: M) -> Self {
        Activation {
            first: Some(first),
            fut: FuturePlace::new(),
            carried: None,
            waited: false,
            activity: Activity::inline(),
            _types: PhantomData,
        }
    }

    /// The first poll, inline in the runner's turn, on the lane and pool the runner lends it
    /// (`taken`, `registry`). Something unwinding out of it cancels the activation, as the drop
    /// of an unfinished driver does.
    fn poll_first(
        &mut self,
        call: &C,
        taken: Taken<'_, K, M, S>,
        registry: &Arc<Registry>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let runtime = &taken.lane.kind.runtime;
        let first = FirstPoll {
            act: self,
            taken,
            registry,
        };
        let mut driver = InRuntime {
            act: &mut *first.act,
            runtime,
        };
        let polled = poll_in(registry, &mut driver, taken, |driver, turn| {
            runtime.enter_in(turn.pool.registry, || driver.act.poll_turn(call, turn, cx))
        });
        std::mem::forget(first);
        polled
    }

    /// Drops the current future in place (its drop is user code: contained). True if there was
    /// one.
    fn drop_fut(&mut self) -> bool {
        if !self.fut.is_some() {
            return false;
        }
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| self.fut.as_mut().set(None))) {
            tracing::error!(
                panic = panic_message(&*p),
                "keyway: a future's drop panicked"
            );
            // Already `None` (an assignment writes its value even when the old one's drop
            // panics); said again for the reader.
            self.fut.as_mut().set(None);
        }
        true
    }

    /// The current message is done (completed, or panicked with `report`): counted finished by
    /// the turn.
    fn message_done(&mut self, turn: &DriverTurn<'_, '_, K, M, S>, report: Option<PanicReport>) {
        self.drop_fut();
        if let Some(report) = report {
            turn.registry()
                .report_panic_in(Some(turn.held.lane.hash), report);
        }
        turn.done(1);
    }

    /// The carried state back to the key's slot (of `lane`, the driver's).
    fn put_back(&mut self, lane: &LaneCore<Typed<K, M, S>>) {
        if let Some(state) = self.carried.take() {
            let keyed = Typed::<K, M, S>::keyed(lane.key.get());
            keyed.put_state(lane.kind.key_state(), state);
        }
    }

    /// The turn: the current future, then the lane's next messages while they complete at once
    /// (at most the turn's batch of them: fairness, then back through the queue). The messages
    /// it took and did not start go back in front of the lane as it ends: no message waits in
    /// a driver while its future waits or its task is queued, only in the lane.
    fn poll_turn(
        &mut self,
        call: &C,
        turn: &DriverTurn<'_, '_, K, M, S>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let polled = self.run_turn(call, turn, cx);
        turn.held.put_back();
        polled
    }

    fn run_turn(
        &mut self,
        call: &C,
        turn: &DriverTurn<'_, '_, K, M, S>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let lane = turn.held.lane;
        if let Some(msg) = self.first.take() {
            self.start(call, turn, msg);
        }
        loop {
            if self.fut.is_some() {
                if let Some(waits) = self.poll_fut(turn, cx) {
                    return waits;
                }
            }
            if let Some(polled) = self.activity.pause(turn, cx) {
                self.put_back(lane);
                return polled;
            }
            let max = if self.waited { 1 } else { turn.left() };
            match turn.held.next_message(&mut self.carried, max) {
                Ok(msg) => self.start(call, turn, msg),
                // The state went back to its slot if the lane turned idle; else it goes now.
                Err(next) => {
                    self.put_back(lane);
                    hand_over(&mut self.activity, lane, turn, next);
                    return Poll::Ready(());
                }
            }
        }
    }

    /// Polls the current future; `None` once its message is done (completed or panicked),
    /// else what the driver's poll returns (it waits, or it was cancelled at this await point).
    fn poll_fut(
        &mut self,
        turn: &DriverTurn<'_, '_, K, M, S>,
        cx: &mut Context<'_>,
    ) -> Option<Poll<()>> {
        let mut fut = self.fut.as_mut().as_pin_mut()?;
        // A self-wake (a yield) is resumed here while the worker's streak allows.
        let polled = catch_unwind(AssertUnwindSafe(|| {
            poll_resuming(cx, || turn.pool.may_resume(), |cx| fut.as_mut().poll(cx))
        }));
        match polled {
            Ok((Poll::Pending, queued)) => {
                self.waited = true;
                // It waits, or it is cancelled at this await point if the pool is stopping
                // (`activation::wait`; the turn is inside the runtime already).
                if self.activity.waits(turn, cx, queued) {
                    self.cancel(&turn.held, Some(&turn.pool));
                    return Some(Poll::Ready(()));
                }
                Some(Poll::Pending)
            }
            Ok((Poll::Ready(out), _)) => {
                self.carried = C::done(out);
                self.message_done(turn, None);
                None
            }
            Err(p) => {
                self.message_done(turn, Some(PanicReport::from_payload(p)));
                None
            }
        }
    }

    /// `Driver::cancel`, in the runtime its caller is in.
    fn cancel(&mut self, taken: &Taken<'_, K, M, S>, pool: Option<&OnPool<'_>>) {
        self.put_back(taken.lane);
        if self.drop_fut() {
            if let Some(pool) = pool {
                pool.finished(1);
            }
        }
        self.activity.end(pool.map(|p| &**p.registry));
    }

    /// Calls the handler on `msg`, the lane's next message (popped: it has started); a panic of
    /// the handler (or of the state's `init`) ends the message at once.
    fn start(&mut self, call: &C, turn: &DriverTurn<'_, '_, K, M, S>, msg: M) {
        let lane = turn.held.lane;
        let keyed = Typed::<K, M, S>::keyed(lane.key.get());
        let spec = lane.kind.key_state();
        self.waited = false;
        match call.call(keyed, spec, &mut self.carried, msg) {
            // The box is empty: the new future is pinned in it from here on.
            Ok(fut) => self.fut.as_mut().set(Some(fut)),
            Err(report) => {
                turn.registry().report_panic_in(Some(lane.hash), report);
                turn.done(1);
            }
        }
    }
}

/// A driver's activation with the runtime its futures are polled in (its table's, or the pool's
/// bound one while the pool lives): a cancel drops the current future inside that runtime, as its
/// polls ran, wherever the cancel happens (the thread of a `shutdown_now` caller, or whichever
/// thread dropped the last waker of a driver whose pool is gone), so that a future's drop may use
/// tokio. (Within a turn, a cancel at an await point is the activation's own: the turn is inside
/// the runtime already.)
struct InRuntime<'a, K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    act: &'a mut Activation<K, M, S, C>,
    runtime: &'a Runtime,
}

impl<'t, K, M, S, C> Driver<Taken<'t, K, M, S>> for InRuntime<'_, K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    fn activity(&mut self) -> &mut Activity {
        &mut self.act.activity
    }

    fn cancel(&mut self, taken: &Taken<'t, K, M, S>, pool: Option<&OnPool<'_>>) {
        let act = &mut *self.act;
        // The pool gone: the table's runtime (the bound one it kept, if the pool had one).
        self.runtime
            .enter_for(pool.map(|on| &**on.registry), || act.cancel(taken, pool));
    }
}

impl<K, M, S, C> Future for MessageLoop<K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.act.activity.is_over() {
            return Poll::Ready(());
        }
        let (act, call) = (&mut this.act, &*this.handler);
        let taken = Taken {
            lane: &this.lane,
            chunk: &this.chunk,
        };
        // Inside the pool's bound runtime, or else the one the table was made in (`tokio`
        // feature): the polls, and the handler making the next messages' futures.
        let runtime = &this.lane.kind.runtime;
        let mut driver = InRuntime { act, runtime };
        poll_on(&this.registry, &mut driver, taken, |driver, turn| {
            runtime.enter_in(turn.pool.registry, || driver.act.poll_turn(call, turn, cx))
        })
    }
}

// Nothing of the driver is pinned but the future, in its own box: it may move (from the
// runner's inline poll into its task) whatever the key's state and the future are.
impl<K, M, S, C> Unpin for MessageLoop<K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
}

impl<K, M, S, C> Parks for MessageLoop<K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    fn promoted(&mut self) {
        self.act.activity.promoted();
    }

    fn park(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let taken = Taken {
            lane: &self.lane,
            chunk: &self.chunk,
        };
        let mut driver = InRuntime {
            act: &mut self.act,
            runtime: &self.lane.kind.runtime,
        };
        activation::park(&self.registry, &mut driver, taken, cx)
    }
}

impl<K, M, S, C> Drop for MessageLoop<K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    fn drop(&mut self) {
        // Dropped unfinished: the pool dropped its poll (`shutdown_now`, at an await point or
        // between two messages) or is gone. The lane is not resumed: the drain turned it off.
        if !self.act.activity.is_over() {
            let taken = Taken {
                lane: &self.lane,
                chunk: &self.chunk,
            };
            let mut driver = InRuntime {
                act: &mut self.act,
                runtime: &self.lane.kind.runtime,
            };
            with_pool(&self.registry, |pool| driver.cancel(&taken, pool.as_ref()));
        }
    }
}

/// A driver's first poll, inline (`Activation::poll_first`): forgotten once the poll returns,
/// dropped only if something unwinds out of it, which cancels the activation as the drop of an
/// unfinished driver does (its pool is the runner's: it lives).
struct FirstPoll<'a, K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    act: &'a mut Activation<K, M, S, C>,
    taken: Taken<'a, K, M, S>,
    registry: &'a Arc<Registry>,
}

impl<K, M, S, C> Drop for FirstPoll<'_, K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    fn drop(&mut self) {
        if !self.act.activity.is_over() {
            let taken = self.taken;
            let mut driver = InRuntime {
                act: &mut *self.act,
                runtime: &taken.lane.kind.runtime,
            };
            on_pool(self.registry, |pool| driver.cancel(&taken, Some(&pool)));
        }
    }
}
