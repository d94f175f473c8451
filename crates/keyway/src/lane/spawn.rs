//! Futures onto lanes: the lane entry of a submitted future, submitting one to a context, and
//! the driver that runs a lane's futures one after another (rule 7).

use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::activation::{self, hand_over, pass_on, poll_on, wait, Activity, Driver, Handover};
use super::closures::{self, ClosureEntry, Closures};
use super::entry::Parts;
use super::table::{LaneCore, LaneTable, Ran};
use super::turn::Turn;
use crate::engine::{on_pool, with_pool, OnPool, Registry};
use crate::error::SubmitError;
use crate::future::{
    poll_inline, promote, run_inline, Launcher, Parks, Runtime, Started, Step, Unsent,
};
use crate::task::TaskHandle;

/// A future's handle and lane entry for the pool of `registry`, keeping what
/// [`Runtime::for_pool`] says (the runtime current here, or nothing for a bound pool).
pub(crate) fn entry<F>(
    registry: &Registry,
    fut: F,
    coalescing: bool,
) -> (TaskHandle<F::Output>, ClosureEntry)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = Runtime::for_pool(registry);
    let (handle, completer) = TaskHandle::for_future();
    let fut = Launcher::new(fut, Some(completer), runtime);
    (handle, ClosureEntry::future(fut, coalescing))
}

/// A fire-and-forget future's lane entry: no handle (`Pool::execute_async_sequential`). The
/// future is already in its storage, so the submit path moves a pointer, not the future.
pub(crate) fn detached<F>(fut: Unsent<F>) -> ((), ClosureEntry)
where
    F: Future<Output = ()> + Send + 'static,
{
    ((), ClosureEntry::future(fut.into_launcher(None), false))
}

/// Runs `fut` in the lane of `ctx` (`coalescing`: it may replace, and be replaced by, the
/// lane's last pending coalescing entry).
pub(crate) fn in_lane<K, F>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    ctx: K,
    fut: F,
    coalescing: bool,
) -> Result<TaskHandle<F::Output>, SubmitError<F>>
where
    K: Hash + Eq + Send + Sync + 'static,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    closures::submit_entry(registry, lanes, ctx, fut, |fut| {
        entry(registry, fut, coalescing)
    })
}

/// Rule 7 for a closure lane: starts `fut`, the future `lane`'s runner took from the head.
/// Its first poll is made here, in the runner's turn, with no driver and no task
/// (`poll_inline`); during it the thread holds the entry's admission only, as for a closure
/// entry. A future that completes at once is counted finished by the runner (a panic reported
/// in the lane's context); then the lane goes on here as after a driver's future ([`go_on`]).
/// Only a future that waits (or yields past its streak) gets a driver (`FutureLoop`) at once,
/// which holds one more admission (`extend_task`) and becomes a task (`promote`), taking over
/// the wakes of the inline poll. A driver polls its future in place, and when it is done takes
/// the lane's next entry under the lane lock while it is a future too, and polls that one in
/// the same activation. So a lane of futures costs no task while they complete at once, and at
/// most one per activation, not one per future.
pub(super) fn launch(
    lane: &Arc<LaneCore<Closures>>,
    registry: &Arc<Registry>,
    fut: Launcher,
) -> Ran {
    on_pool(registry, |pool| {
        let mut fut = fut.start();
        let may_resume = || pool.may_resume();
        let (step, left) = poll_inline(|cx| fut.poll(cx, &may_resume, registry));
        match step {
            // `shutdown_now` began: the runner leaves the lane to the drain.
            Step::Done(report) if pool.stopping() => Ran::Done(report.map_or(Ok(()), Err)),
            Step::Done(report) => {
                drop(fut);
                if let Some(report) = report {
                    registry.report_panic_in(Some(lane.hash), report);
                }
                go_on(lane, &pool);
                Ran::Suspended
            }
            // `shutdown_now` began: this await point is where the future is cancelled.
            Step::Waits { .. } if pool.stopping() => {
                fut.cancel(Some(registry));
                Ran::Done(Ok(()))
            }
            Step::Waits { .. } => {
                // The runner counts the entry finished once this returns; the driver holds the
                // future's admission (and each later future it takes holds its own) until its
                // future is done.
                registry.extend_task();
                let mut driver = FutureLoop::new(lane, registry, fut);
                driver.promoted();
                promote(registry, driver, left);
                Ran::Suspended
            }
        }
    })
}

/// The runner's future completed in its first poll: the lane goes on as after a driver's
/// future (the runner leaves it: `Ran::Suspended`). Under the lane lock, a future at the head is
/// taken and started by a driver (inline first, a task only if it waits; it holds its own
/// admission); an empty lane turns idle and is let go; any other entry gets a runner next on
/// this worker. One lane lock, as the runner's next look at the lane would take, and a lane of
/// backlogged futures runs them in one driver rather than one runner step each.
fn go_on(lane: &Arc<LaneCore<Closures>>, pool: &OnPool<'_>) {
    match lane.next_future() {
        Ok(next) => run_inline(
            pool.registry,
            FutureLoop::new(lane, pool.registry, next.start()),
        ),
        Err(next) => pass_on(lane, pool, next),
    }
}

impl LaneCore<Closures> {
    /// Rule 7: the lane's current future is done; the next one, or how the lane is handed on,
    /// under the lane lock. An entry at the head is the very next to run, so taking it keeps
    /// rule 5.
    #[inline]
    fn next_future(&self) -> Result<Launcher, Handover<Closures>> {
        let mut st = self.state.lock();
        if st.table.is_none() {
            return Err(Handover::Drained);
        }
        match st.queue.front() {
            None => Err(Handover::Idle(st.turn_idle(self.pinned()))),
            Some(entry) if entry.is_async() => match st.queue.pop_front().map(|e| e.into_parts()) {
                Some(Parts::Launch(fut)) => Ok(fut),
                _ => unreachable!("the head was just seen to be a future"),
            },
            Some(_) => Err(Handover::Other),
        }
    }
}

/// One activation of a closure lane whose head is a future: it holds the lane (scheduled, no
/// job) from the runner's launch until the lane is empty or its head is not a future.
struct FutureLoop {
    registry: Weak<Registry>,
    /// The current future; `None` between two.
    fut: Option<Started>,
    lane: Arc<LaneCore<Closures>>,
    activity: Activity,
}

impl Driver for FutureLoop {
    fn activity(&mut self) -> &mut Activity {
        &mut self.activity
    }

    fn cancel(&mut self, (): &(), pool: Option<&OnPool<'_>>) {
        if let Some(mut fut) = self.fut.take() {
            // Dropped inside the runtime its polls enter (its drop may use tokio), also when
            // `shutdown_now` cancels it from a thread in no runtime.
            fut.cancel(pool.map(|p| &**p.registry));
            if let Some(pool) = pool {
                pool.finished(1);
            }
        }
        self.activity.end(pool.map(|p| &**p.registry));
    }
}

impl FutureLoop {
    /// The driver of `lane`'s activation, its first poll still to make inline (`run_inline`).
    fn new(lane: &Arc<LaneCore<Closures>>, registry: &Arc<Registry>, fut: Started) -> Self {
        FutureLoop {
            registry: Arc::downgrade(registry),
            fut: Some(fut),
            lane: lane.clone(),
            activity: Activity::inline(),
        }
    }

    /// The turn: the current future, then the lane's next futures while they complete at once
    /// (at most the turn's batch of them: fairness, then back through the queue).
    fn poll_turn(&mut self, turn: &Turn<'_>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if let Some(fut) = &mut self.fut {
                let may_resume = || turn.pool.may_resume();
                match fut.poll(cx, &may_resume, turn.pool.registry) {
                    Step::Waits { woke_itself } => return wait(self, turn, cx, woke_itself),
                    Step::Done(report) => {
                        // Counted finished by the turn; a panic reported in the lane's context.
                        self.fut = None;
                        if let Some(report) = report {
                            turn.registry()
                                .report_panic_in(Some(self.lane.hash), report);
                        }
                        turn.done(1);
                    }
                }
            }
            if let Some(polled) = self.activity.pause(turn, cx) {
                return polled;
            }
            match self.lane.next_future() {
                Ok(fut) => self.fut = Some(fut.start()),
                Err(next) => {
                    hand_over(&mut self.activity, &self.lane, turn, next);
                    return Poll::Ready(());
                }
            }
        }
    }
}

impl Future for FutureLoop {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Each future is pinned in its own box (`Started`): the driver itself is not.
        let this = self.get_mut();
        if this.activity.is_over() {
            return Poll::Ready(());
        }
        let registry = this.registry.clone();
        poll_on(&registry, this, (), |this, turn| this.poll_turn(turn, cx))
    }
}

impl Parks for FutureLoop {
    fn promoted(&mut self) {
        self.activity.promoted();
    }

    fn park(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let registry = self.registry.clone();
        activation::park(&registry, self, (), cx)
    }
}

impl Drop for FutureLoop {
    fn drop(&mut self) {
        // Dropped unfinished: the pool dropped its poll (`shutdown_now`, at an await point or
        // between two futures) or is gone. The lane is not resumed: the drain turned it off.
        if !self.activity.is_over() {
            let registry = self.registry.clone();
            with_pool(&registry, |pool| self.cancel(&(), pool.as_ref()));
        }
    }
}
