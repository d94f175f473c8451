//! What the two drivers of rule 7 share — the typed lane's (`typed/asynchronous.rs`) and the
//! closure lane's (`spawn.rs`), each one driver per lane activation polling the lane's futures
//! one after another, first inline in the runner's turn and as a task only once it waits: the
//! activation's place in the pool's waiting set, its end, one poll as one turn of the lane, and
//! how the lane is handed on when its head is no longer the driver's.

use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::table::{LaneCore, LaneKind, LaneTable};
use super::turn::{Again, Holds, Turn};
use crate::engine::{on_pool, with_pool, OnPool, Registry};

/// An activation's bookkeeping besides its current future.
#[derive(Default)]
pub(super) struct Activity {
    /// Its key in the pool's set of waiting futures, once it waited (once per activation).
    live: Option<u64>,
    /// The activation is over: the lane is released, resumed or drained.
    over: bool,
    /// Polled inline, with no task yet (`future::poll_inline`): a wait joins the waiting set
    /// only once the task exists, with its real waker (`Parks::park`).
    inline: bool,
}

impl Activity {
    /// An activation whose first poll is made inline, in the runner's turn.
    pub(super) fn inline() -> Self {
        Activity {
            inline: true,
            ..Activity::default()
        }
    }

    /// The inline poll waited: the activation is now a task's.
    pub(super) fn promoted(&mut self) {
        self.inline = false;
    }

    #[inline]
    pub(super) fn is_over(&self) -> bool {
        self.over
    }

    /// The activation ends; the caller lets go of the lane (or `shutdown_now` took it).
    pub(super) fn end(&mut self, registry: Option<&Registry>) {
        self.over = true;
        if let (Some(registry), Some(id)) = (registry, self.live.take()) {
            registry.futures.remove(id);
        }
    }

    /// Between two entries: `Some` when the turn stops here. `shutdown_now` began: the
    /// activation ends (the drain takes the lane's entries; nothing is resumed). Or the turn's
    /// batch is used up: the driver wakes itself and yields its thread (fairness, then back
    /// through the queue).
    #[inline]
    pub(super) fn pause<H: Holds>(
        &mut self,
        turn: &Turn<'_, H>,
        cx: &Context<'_>,
    ) -> Option<Poll<()>> {
        if turn.stopping() {
            self.end(Some(turn.registry()));
            return Some(Poll::Ready(()));
        }
        if turn.used_up() {
            cx.waker().wake_by_ref();
            return Some(Poll::Pending);
        }
        None
    }

    /// The current future returned `Pending`. True if the pool is stopping: `shutdown_now` may
    /// have cancelled the waiting set already, so this await point is where the caller cancels
    /// it. Else a real wait (not `woke_itself`) joins the waiting set, once per activation.
    pub(super) fn waits<H: Holds>(
        &mut self,
        turn: &Turn<'_, H>,
        cx: &Context<'_>,
        woke_itself: bool,
    ) -> bool {
        if turn.stopping() {
            return true;
        }
        if self.live.is_none() && !woke_itself && !self.inline {
            self.live = Some(turn.registry().futures.insert(cx.waker().clone()));
        }
        false
    }
}

/// A driver as the steps both drivers share see it: its activation's bookkeeping, and how it
/// is cancelled. `H`: what its turns hold besides their count (the typed driver's lane and the
/// messages it took from it; nothing for the closure lane's).
pub(super) trait Driver<H: Holds = ()> {
    fn activity(&mut self) -> &mut Activity;

    /// Cancelled (`shutdown_now`, or the pool is gone): the current future is dropped at its
    /// await point and counted finished (on `pool`, if it is still there), and the activation
    /// ends; the lane is not resumed (the drain turned it off).
    fn cancel(&mut self, held: &H, pool: Option<&OnPool<'_>>);
}

/// One poll of `driver` on the pool `registry` points to: `turn_`, one turn of its lane holding
/// `held`, registered as held while its futures run (a `shutdown_now` called from one of them
/// puts back what the turn holds and counts the entries it finished). The pool gone, the driver
/// is cancelled.
#[inline]
pub(super) fn poll_on<H: Holds, D: Driver<H>>(
    registry: &Weak<Registry>,
    driver: &mut D,
    held: H,
    turn_: impl FnOnce(&mut D, &Turn<'_, H>) -> Poll<()>,
) -> Poll<()> {
    with_pool(registry, |pool| match pool {
        Some(pool) => turn_on(pool, driver, held, turn_),
        None => {
            driver.cancel(&held, None);
            Poll::Ready(())
        }
    })
}

/// [`poll_on`] for a driver's first poll, inline in the turn of the runner that launched it, on
/// the runner's pool (`registry`, which lives: no weak reference to upgrade).
#[inline]
pub(super) fn poll_in<H: Holds, D: Driver<H>>(
    registry: &Arc<Registry>,
    driver: &mut D,
    held: H,
    turn_: impl FnOnce(&mut D, &Turn<'_, H>) -> Poll<()>,
) -> Poll<()> {
    on_pool(registry, |pool| turn_on(pool, driver, held, turn_))
}

/// One turn of `driver` on `pool`, holding `held` (see [`poll_on`]).
#[inline]
fn turn_on<H: Holds, D: Driver<H>>(
    pool: OnPool<'_>,
    driver: &mut D,
    held: H,
    turn_: impl FnOnce(&mut D, &Turn<'_, H>) -> Poll<()>,
) -> Poll<()> {
    let turn = Turn::new(pool, held);
    let polled = turn.holding(|| turn_(driver, &turn));
    turn.flush();
    polled
}

/// The driver's current future returned `Pending` (`woke_itself`: by waking itself, its task
/// already queued again): it waits, or it is cancelled at this await point if the pool is
/// stopping (`Activity::waits`).
#[inline]
pub(super) fn wait<H: Holds, D: Driver<H>>(
    driver: &mut D,
    turn: &Turn<'_, H>,
    cx: &Context<'_>,
    woke_itself: bool,
) -> Poll<()> {
    if driver.activity().waits(turn, cx, woke_itself) {
        driver.cancel(&turn.held, Some(&turn.pool));
        return Poll::Ready(());
    }
    Poll::Pending
}

/// `Parks::park` of either driver: the promoted task's first poll, no wake having come since
/// the inline poll. Its wait joins the waiting set, now with the task's waker; or it is
/// cancelled, if the pool is stopping or gone. (A cancel through a future's handle since the
/// inline poll woke the slot, the handle keeping a clone of the inline waker: the task then
/// polls instead of parking.)
pub(super) fn park<H: Holds, D: Driver<H>>(
    registry: &Weak<Registry>,
    driver: &mut D,
    held: H,
    cx: &Context<'_>,
) -> Poll<()> {
    poll_on(registry, driver, held, |driver, turn| {
        wait(driver, turn, cx, false)
    })
}

/// What a driver finds at its lane's head once its current future is done, besides an entry
/// of its own.
pub(super) enum Handover<S: LaneKind> {
    /// The queue is empty: the lane turned idle (rule 2); here is the table it held.
    Idle(Option<Arc<LaneTable<S>>>),
    /// Something else is next: the lane goes back to a runner.
    Other,
    /// `shutdown_now` drained the lane.
    Drained,
}

/// The activation ends on `next`, its lane handed on as it says.
pub(super) fn hand_over<S: LaneKind, H: Holds>(
    activity: &mut Activity,
    lane: &Arc<LaneCore<S>>,
    turn: &Turn<'_, H>,
    next: Handover<S>,
) {
    activity.end(Some(turn.registry()));
    pass_on(lane, &turn.pool, next);
}

/// `lane` handed on as `next` says, once the future that held it is done (a driver's, or the
/// runner's inline first poll): let go when idle, back to a runner when something else is next.
pub(super) fn pass_on<S: LaneKind>(lane: &Arc<LaneCore<S>>, pool: &OnPool<'_>, next: Handover<S>) {
    match next {
        Handover::Idle(table) => lane.let_go(table),
        Handover::Other => lane.clone().run_again(pool, Again::Next),
        Handover::Drained => {}
    }
}
