//! A lane's turn: one activation of a lane, from the job (or the future's end) that starts it
//! to the moment it gives the lane away. Every kind of lane runs its entries through it — the
//! closure and typed runner (`runner.rs`), a chain of multi-key tasks (`keyed/run.rs`), an async
//! typed lane's driver (`typed/asynchronous.rs`) — and ends through it (a lane future's driver,
//! `activation.rs`, and the pop of a finished multi-key task, `keyed/multi.rs`, included).
//! So each of these is decided here once (`README.md`, "The turn", rules 1, 2, 5 and 8):
//!
//! * the **budget**: at most the pool's lane batch of entries a turn (fairness);
//! * the **stop check**: `shutdown_now` began, the turn starts nothing more and hands back what
//!   it holds;
//! * the **holding record and unwind guard**: while the turn runs user code, what it holds (the
//!   entries it took and has not started, those it ran and has not counted) is registered with
//!   the engine's per-thread record, so a `shutdown_now` called from inside puts it back; and
//!   whatever unwinds out of the turn leaves the counts exact and the lane with a runner;
//! * the **finish count**, batched: the entries a turn ran are counted once, when it ends or
//!   hands its thread to code that may not return to it;
//! * the **one place where an entry starts and finishes** ([`Turn::run`]);
//! * the **end**: under the lane lock, an empty lane turns idle and is let go (rules 2 and 3),
//!   any other runs again (queued behind this worker's work, or next on it).

use std::cell::Cell;
use std::sync::{Arc, Weak};

use super::table::{LaneCore, LaneKind, LaneState, LaneTable};
use crate::engine::holding::{self, Held};
use crate::engine::{OnPool, Registry, Watched, Work};
use crate::task::PanicReport;

/// What a turn holds besides its count: a runner's chunk (`runner.rs`), or nothing.
pub(crate) trait Holds {
    /// Shutdown step 2 (engine README): the entries taken and not started go back to the
    /// front of the lane, in order (rule 5).
    fn put_back(&self);
    /// Something unwound out of the turn: the lane must not stay scheduled with no runner.
    fn unwound(&self, pool: &OnPool<'_>);
    /// The lane whose entries the turn runs, if one (for the pool's metrics).
    fn context_hash(&self) -> Option<u64> {
        None
    }
    /// That lane itself, weakly (a snapshot labels it).
    fn lane(&self) -> Option<Weak<dyn Watched>> {
        None
    }
}

impl Holds for () {
    fn put_back(&self) {}
    fn unwound(&self, _pool: &OnPool<'_>) {}
}

/// One activation of a lane (see the module documentation).
pub(crate) struct Turn<'a, H: Holds = ()> {
    pub(crate) pool: OnPool<'a>,
    /// Entries this turn may still run before it yields its thread.
    left: Cell<usize>,
    /// Entries this turn ran and has not yet counted finished.
    ran: Cell<usize>,
    /// What the turn took out of its lane.
    pub(super) held: H,
}

impl<'a, H: Holds> Turn<'a, H> {
    /// A turn on `pool` (the pool's lane batch to spend), holding `held`.
    #[inline]
    pub(crate) fn new(pool: OnPool<'a>, held: H) -> Self {
        Turn {
            left: Cell::new(pool.lane_budget()),
            ran: Cell::new(0),
            pool,
            held,
        }
    }

    /// The same turn spending at least one entry, whatever the lane batch says (a multi-key
    /// task made ready is run, not queued, by the worker that made it ready).
    pub(crate) fn at_least_one(self) -> Self {
        self.left.set(self.left.get().max(1));
        self
    }

    /// Entries this turn may still run.
    #[inline]
    pub(crate) fn left(&self) -> usize {
        self.left.get()
    }

    /// Fairness: the turn ran its budget and yields its thread.
    #[inline]
    pub(crate) fn used_up(&self) -> bool {
        self.left.get() == 0
    }

    /// Shutdown step 2: `shutdown_now` began; the turn starts nothing more.
    #[inline]
    pub(crate) fn stopping(&self) -> bool {
        self.pool.stopping()
    }

    /// `n` entries of this turn are done (ran, handed to a future, or failed before they could
    /// start): counted when the turn ends ([`flush`](Self::flush)).
    #[inline]
    pub(crate) fn done(&self, n: usize) {
        self.ran.set(self.ran.get() + n);
        self.left.set(self.left.get().saturating_sub(n));
    }

    /// Counts finished what this turn ran. Called as the turn ends, and before it hands its
    /// thread to code that is not part of it (a multi-key task's run, a future's launch).
    #[inline]
    pub(crate) fn flush(&self) {
        let ran = self.ran.replace(0);
        if ran > 0 {
            self.pool.finished(ran);
        }
    }

    /// Runs one entry: the one place where a lane's entry starts and finishes. On a worker,
    /// with the worker's bookkeeping (progress for the monitor, the panic report); a panic is
    /// reported in the lane's context (`context`, the lane's hash; `None` for a task holding
    /// several). Whatever unwinds out of it (user code in the bookkeeping), the entry counts as
    /// run.
    #[inline(always)]
    pub(crate) fn run(
        &self,
        context: Option<u64>,
        entry: impl FnOnce() -> Result<(), PanicReport>,
    ) {
        let unwound = OnUnwind(|| self.done(1));
        // The context goes into a report on the error path only: mapping the result by value
        // moved the whole report-sized result at every entry (callgrind: ~20 instructions per
        // task).
        match self.pool.worker {
            Some(worker) => worker.run_one(context, entry),
            None => {
                if let Err(report) = entry() {
                    self.pool.registry.report_panic_in(context, report);
                }
            }
        }
        unwound.disarm();
        self.done(1);
    }

    /// Runs `section` (the part of the turn that runs user code) with the turn registered as
    /// held: a `shutdown_now` called from inside puts back what the turn holds and counts what
    /// it ran. Whatever unwinds out of `section`, the turn's count is flushed, what it holds goes
    /// back, and the lane is not left scheduled with no runner ([`Holds::unwound`]).
    pub(crate) fn holding<R>(&self, section: impl FnOnce() -> R) -> R {
        let unwound = OnUnwind(|| {
            self.held.put_back();
            self.flush();
            self.held.unwound(&self.pool);
        });
        let out = holding::holding(self, section);
        unwound.disarm();
        out
    }
}

impl<H: Holds> Held for Turn<'_, H> {
    fn put_back(&self) -> usize {
        self.held.put_back();
        self.ran.replace(0)
    }

    fn context_hash(&self) -> Option<u64> {
        self.held.context_hash()
    }

    fn lane(&self) -> Option<Weak<dyn Watched>> {
        self.held.lane()
    }
}

/// Runs its closure if dropped, that is if what it guards unwinds: the normal path ends with
/// [`disarm`](OnUnwind::disarm), which costs nothing.
pub(super) struct OnUnwind<F: FnMut()>(pub(super) F);

impl<F: FnMut()> OnUnwind<F> {
    #[inline]
    pub(super) fn disarm(self) {
        std::mem::forget(self);
    }
}

impl<F: FnMut()> Drop for OnUnwind<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// How a lane that still has entries when its turn ends runs again.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Again {
    /// Its batch is used up (fairness): behind the work already queued on this worker, and the
    /// worker's next search looks at the global queue first.
    Yield,
    /// Right after the current job on this worker when it can (a lane its future resumed, a
    /// lane restarted by the completion of a multi-key task): no queue, no wake-up.
    Next,
}

impl<S: LaneKind> LaneCore<S> {
    /// Rule 2, the end of a turn: under the lane lock, `give_back` returns what the turn still
    /// holds (false: the lane is no longer the turn's, `shutdown_now`'s drain took it), then an
    /// empty lane turns idle and is let go (rule 3); any other runs again as `again` says. Only
    /// the lane's runner may call it (rule 1).
    pub(super) fn end_turn(
        self: Arc<Self>,
        pool: &OnPool<'_>,
        again: Again,
        give_back: impl FnOnce(&mut LaneState<S>) -> bool,
    ) {
        let idle = {
            let mut st = self.state.lock();
            if !give_back(&mut st) {
                return;
            }
            if st.queue.is_empty() {
                Some(st.turn_idle(self.pinned()))
            } else {
                None
            }
        };
        match idle {
            Some(table) => self.let_go(table),
            None => self.run_again(pool, again),
        }
    }

    /// Rule 3: the lane went idle under its lock; `table` is the reference it held while
    /// scheduled (`None`: a pinned lane kept it for its next activation).
    #[inline]
    pub(super) fn let_go(self: &Arc<Self>, table: Option<Arc<LaneTable<S>>>) {
        if let Some(table) = table {
            self.release(table);
        }
    }

    /// The lane, scheduled with entries, gets a runner (rule 1: the caller was its runner).
    pub(super) fn run_again(self: Arc<Self>, pool: &OnPool<'_>, again: Again) {
        match (again, pool.worker) {
            (Again::Yield, Some(worker)) => worker.requeue_lane(Work::Lane(self)),
            (Again::Next, _) | (Again::Yield, None) => pool.schedule_next(Work::Lane(self)),
        }
    }
}

/// The registry of a turn's pool (for code that queues work).
impl<H: Holds> Turn<'_, H> {
    #[inline]
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        self.pool.registry
    }
}
