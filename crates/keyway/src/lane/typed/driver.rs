//! The driver of an async typed lane's activation.
//!
//! A lane's messages are handled by one *driver* per activation (rule 7, "async typed lanes"),
//! monomorphised over the handler's future type, holding the current message's future in a
//! place of the activation (each message's future in turn, written into it in place). When that
//! future completes, the driver starts the lane's next message and polls the handler's new
//! future at once, taking the lane's messages as a runner takes its chunk: all of them under one
//! lane lock (those its turn does not start go back in front of the lane before it waits or
//! yields); when the lane is empty it turns the lane idle (rule 2) and ends.
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
use super::Typed;
use crate::engine::{on_pool, with_pool, OnPool, Registry};
use crate::error::panic_message;
use crate::future::{poll_resuming, FuturePlace, Parks, Runtime};
use crate::lane::activation::{self, hand_over, poll_in, poll_on, Activity, Driver};
use crate::lane::table::LaneCore;
use crate::lane::turn::Holds;
use crate::task::PanicReport;

/// How an async typed lane calls its handler: with the key alone, or with the key's state by
/// value, given back as the future's output.
pub(super) trait Call<K, M, S>: Send + Sync + 'static {
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

/// One activation of an async typed lane: it holds the lane (scheduled, no job) from the
/// runner's launch until the lane is empty, handling its messages one future at a time.
pub(super) struct MessageLoop<K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    pub(super) registry: Weak<Registry>,
    /// Borrowed by each poll (not counted again: the count is shared by every lane's driver).
    pub(super) handler: Arc<C>,
    /// Its lane, and the messages a turn took from it: what each turn holds (`Taken`).
    pub(super) lane: Arc<LaneCore<Typed<K, M, S>>>,
    pub(super) chunk: Chunk<M>,
    pub(super) act: Activation<K, M, S, C>,
}

/// A driver's state but its pool (borrowed from the worker polling it: `with_pool`), its
/// handler and its lane (the turn's: `Taken`).
pub(super) struct Activation<K, M, S, C>
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
    pub(super) fn new(first: M) -> Self {
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
    pub(super) fn poll_first(
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

    /// The activation dropped before it was over (its driver, or its inline first poll
    /// unwinding): cancelled in its runtime, as a drain would.
    fn cancel_unfinished(&mut self, taken: &Taken<'_, K, M, S>, pool: Option<&OnPool<'_>>) {
        if !self.activity.is_over() {
            let runtime = &taken.lane.kind.runtime;
            InRuntime { act: self, runtime }.cancel(taken, pool);
        }
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

/// A message loop's parts as each of its turns, and its cancel, work on them
/// ([`MessageLoop::parts`]).
type LoopParts<'a, K, M, S, C> = (
    &'a Weak<Registry>,
    &'a C,
    Taken<'a, K, M, S>,
    InRuntime<'a, K, M, S, C>,
);

impl<K, M, S, C> MessageLoop<K, M, S, C>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    C: Call<K, M, S>,
{
    /// What each of its turns, and its cancel, works on: its pool, its handler, what the turn
    /// holds (its lane and the messages taken from it), and its activation in the runtime its
    /// futures are polled in.
    fn parts(&mut self) -> LoopParts<'_, K, M, S, C> {
        let taken = Taken {
            lane: &self.lane,
            chunk: &self.chunk,
        };
        let driver = InRuntime {
            act: &mut self.act,
            runtime: &self.lane.kind.runtime,
        };
        (&self.registry, &*self.handler, taken, driver)
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
        let (registry, call, taken, mut driver) = this.parts();
        // Inside the pool's bound runtime, or else the one the table was made in (`tokio`
        // feature): the polls, and the handler making the next messages' futures.
        let runtime = driver.runtime;
        poll_on(registry, &mut driver, taken, |driver, turn| {
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
        let (registry, _, taken, mut driver) = self.parts();
        activation::park(registry, &mut driver, taken, cx)
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
        let (registry, _, taken, driver) = self.parts();
        with_pool(registry, |pool| {
            driver.act.cancel_unfinished(&taken, pool.as_ref())
        });
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
        let taken = self.taken;
        on_pool(self.registry, |pool| {
            self.act.cancel_unfinished(&taken, Some(&pool))
        });
    }
}
