//! Futures onto lanes: the lane entry of a submitted future, submitting one to a context, and
//! the driver that runs a lane's futures one after another (rule 7).

use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::closures::{self, ClosureEntry, Closures};
use super::entry::Parts;
use super::table::{LaneCore, LaneTable};
use super::turn::{Again, Turn};
use crate::engine::holding::launching;
use crate::engine::{with_pool, OnPool, Registry};
use crate::error::SubmitError;
use crate::future::{spawn_on, Launcher, Started, Step};
use crate::task::{PanicReport, TaskHandle};

/// A future's handle and lane entry.
pub(crate) fn entry<F>(fut: F, coalescing: bool) -> (TaskHandle<F::Output>, ClosureEntry)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (handle, completer) = TaskHandle::for_future();
    let fut = Launcher::new(fut, Some(completer));
    (handle, ClosureEntry::future(fut, coalescing))
}

/// A fire-and-forget future's lane entry: no handle (`Pool::execute_async_sequential`).
pub(crate) fn detached<F>(fut: F) -> ((), ClosureEntry)
where
    F: Future<Output = ()> + Send + 'static,
{
    let fut = Launcher::new(fut, None);
    ((), ClosureEntry::future(fut, false))
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
    closures::submit_entry(registry, lanes, ctx, fut, |fut| entry(fut, coalescing))
}

/// Rule 7 for a closure lane: starts the driver of `lane`'s activation with `fut`, the future
/// its runner took from the head. The driver polls it in place; when it is done, the driver
/// takes the lane's next entry under the lane lock while it is a future too, and polls that one
/// in the same task. So a lane of futures costs one task per activation, not one per future,
/// and no runner turn between two futures.
pub(super) fn launch(lane: &Arc<LaneCore<Closures>>, registry: &Arc<Registry>, fut: Launcher) {
    // The runner counts the entry finished once this returns; the driver holds it (and each
    // later future it takes holds its own admission) until its future is done.
    registry.extend_task();
    let driver = FutureLoop {
        registry: Arc::downgrade(registry),
        fut: Some(fut.start()),
        lane: lane.clone(),
        live: None,
        over: false,
    };
    let first = spawn_on(registry, driver);
    launching(|| first.run());
}

/// What a driver finds at its lane's head once its future is done.
enum Next {
    /// A future, taken out of the queue: the driver starts it.
    Future(Launcher),
    /// The queue is empty: the lane turned idle (rule 2); here is the table it held.
    Idle(Option<Arc<LaneTable<Closures>>>),
    /// Something else is next (a closure, a multi-key task, a batch): back to a runner.
    Other,
    /// `shutdown_now` drained the lane.
    Drained,
}

impl LaneCore<Closures> {
    /// Rule 7: the lane's current future is done; what comes next, under the lane lock. An
    /// entry at the head is the very next to run, so taking it keeps rule 5.
    fn next_future(&self) -> Next {
        let mut st = self.state.lock();
        if st.table.is_none() {
            return Next::Drained;
        }
        match st.queue.front() {
            None => Next::Idle(st.turn_idle(self.pinned())),
            Some(entry) if entry.is_async() => match st.queue.pop_front().map(|e| e.into_parts()) {
                Some(Parts::Launch(fut)) => Next::Future(fut),
                _ => unreachable!("the head was just seen to be a future"),
            },
            Some(_) => Next::Other,
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
    /// Its key in the pool's set of waiting futures, once it waited (once per activation).
    live: Option<u64>,
    /// The activation is over: the lane is released, resumed or drained.
    over: bool,
}

impl FutureLoop {
    /// The current future is done (`report`: it panicked): counted finished by the turn.
    fn future_done(&mut self, turn: &Turn<'_>, report: Option<PanicReport>) {
        self.fut = None;
        if let Some(report) = report {
            turn.registry()
                .report_panic(report.in_context(self.lane.hash));
        }
        turn.done(1);
    }

    /// The activation ends; the caller lets go of the lane (or `shutdown_now` took it).
    fn end(&mut self, registry: Option<&Registry>) {
        self.over = true;
        if let (Some(registry), Some(id)) = (registry, self.live.take()) {
            registry.futures.remove(id);
        }
    }

    /// Cancelled (`shutdown_now`, or the pool is gone): the started future is dropped at its
    /// await point and counted finished; the lane is not resumed (the drain turned it off).
    fn cancel(&mut self, pool: Option<&OnPool<'_>>) {
        if let Some(mut fut) = self.fut.take() {
            fut.cancel();
            if let Some(pool) = pool {
                pool.finished(1);
            }
        }
        self.end(pool.map(|p| &**p.registry));
    }

    /// One poll of the driver: one turn of its lane, registered as held while its futures run
    /// (a `shutdown_now` called from one of them counts the futures this turn finished).
    fn poll_on(&mut self, pool: OnPool<'_>, cx: &mut Context<'_>) -> Poll<()> {
        let turn = Turn::new(pool, ());
        let polled = turn.holding(|| self.poll_turn(&turn, cx));
        turn.flush();
        polled
    }

    /// The turn: the current future, then the lane's next futures while they complete at once
    /// (at most the turn's batch of them: fairness, then back through the queue).
    fn poll_turn(&mut self, turn: &Turn<'_>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if let Some(fut) = &mut self.fut {
                let may_resume = || turn.pool.may_resume();
                match fut.poll(cx, &may_resume) {
                    Step::Waits { woke_itself } => {
                        if turn.stopping() {
                            // `shutdown_now` may have cancelled the waiting set already: this
                            // await point is where the future is cancelled.
                            self.cancel(Some(&turn.pool));
                            return Poll::Ready(());
                        }
                        // A real wait joins the waiting set, once per activation.
                        if self.live.is_none() && !woke_itself {
                            self.live = Some(turn.registry().futures.insert(cx.waker().clone()));
                        }
                        return Poll::Pending;
                    }
                    Step::Done(report) => self.future_done(turn, report),
                }
            }
            if turn.stopping() {
                // `shutdown_now`: the drain takes the lane's entries; nothing is resumed.
                self.end(Some(turn.registry()));
                return Poll::Ready(());
            }
            if turn.used_up() {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let next = self.lane.next_future();
            if let Next::Future(fut) = next {
                self.fut = Some(fut.start());
                continue;
            }
            self.end(Some(turn.registry()));
            match next {
                Next::Idle(table) => self.lane.let_go(table),
                Next::Other => self.lane.clone().run_again(&turn.pool, Again::Next),
                Next::Future(_) | Next::Drained => {}
            }
            return Poll::Ready(());
        }
    }
}

impl Future for FutureLoop {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Each future is pinned in its own box (`Started`): the driver itself is not.
        let this = self.get_mut();
        if this.over {
            return Poll::Ready(());
        }
        let registry = this.registry.clone();
        with_pool(&registry, |pool| match pool {
            Some(pool) => this.poll_on(pool, cx),
            None => {
                this.cancel(None);
                Poll::Ready(())
            }
        })
    }
}

impl Drop for FutureLoop {
    fn drop(&mut self) {
        // Dropped unfinished: the pool dropped its poll (`shutdown_now`, at an await point or
        // between two futures) or is gone. The lane is not resumed: the drain turned it off.
        if !self.over {
            let registry = self.registry.clone();
            with_pool(&registry, |pool| self.cancel(pool.as_ref()));
        }
    }
}
