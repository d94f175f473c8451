//! A multi-key task as its lanes see it and as it runs (rule 6 of `lane/README.md`): the
//! [`Barrier`] each of its lanes parks at, the count of arrivals, and the run of a chain of
//! ready tasks through one turn, each completion making the next one ready on the same worker.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::cells;
use super::multi::Passed;
use crate::engine::{LaneJob, OnPool, Work, WorkerCtx};
use crate::future::{Launcher, Release, Resume};
use crate::lane::closures::Closures;
use crate::lane::table::{Barrier, LaneCore};
use crate::lane::turn::Turn;
use crate::task::{ContextOf, LaneRefs, PendingTask, Task};

/// What a multi-key task runs: a closure, or a future that holds the keys until it is done.
pub(crate) enum Body {
    Run(Task),
    Launch(Launcher),
}

/// A task waiting at the head of several lanes.
pub(crate) struct MultiTask {
    pub(super) task: Mutex<Option<Body>>,
    /// Lanes that have not yet reached this task.
    pub(super) waiting: AtomicUsize,
    pub(super) lanes: SmallVec<[Arc<LaneCore<Closures>>; 4]>,
}

impl MultiTask {
    /// `n` of the task's lanes reached it; true if these were the last (the caller then owns
    /// the run). `n` is never 0.
    pub(crate) fn arrived(&self, n: usize) -> bool {
        self.waiting.fetch_sub(n, Ordering::AcqRel) == n
    }

    /// The task, once: for the run, or for `shutdown_now` from whichever lane drains first.
    fn take_task(&self) -> Option<Task> {
        match self.task.lock().take()? {
            Body::Run(task) => Some(task),
            // Handed back unstarted: run on the calling thread, inside the pool's bound runtime
            // if it has one (its lanes' kind keeps it).
            Body::Launch(fut) => {
                let bound = self.lanes.first().and_then(|lane| lane.kind.bound.clone());
                Some(Task::new(fut.handed_back(bound)))
            }
        }
    }

    /// The lanes of the task's keys, for the task handed back by `shutdown_now`.
    fn contexts(&self) -> LaneRefs {
        self.lanes
            .iter()
            .map(|lane| lane.clone() as Arc<dyn ContextOf>)
            .collect()
    }
}

impl Barrier for MultiTask {
    /// The runner's reference is given up here, not after the run: the cell is recycled only
    /// when the worker holds the last one (`cells::recycle`), and a reference kept across the
    /// run made most cells go back to the allocator.
    fn arrive(self: Arc<Self>, worker: &WorkerCtx) {
        if self.arrived(1) {
            run_ready(self, worker);
        }
    }

    fn hand_back(&self) -> Option<PendingTask> {
        let task = self.take_task()?;
        Some(PendingTask::in_contexts(task, self.contexts()))
    }

    fn arrive_counted(&self) -> bool {
        self.arrived(1)
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// Rule 7: the multi-key future is done: pop it from every lane and let the lanes go on (each
/// on the pool: this may run on any thread). Under `shutdown_now` nothing is resumed: the drain
/// takes the lanes' entries.
impl Resume for MultiTask {
    fn resume(self: Arc<Self>, pool: &OnPool<'_>) {
        if pool.stopping() {
            return;
        }
        for lane in self.lanes.iter() {
            match lane.pass_multi(&self) {
                Passed::Done => {}
                Passed::Ready(next) => pool.registry.schedule(Work::Lane(next)),
                Passed::Restart(lane) => pool.registry.schedule(Work::Lane(lane)),
            }
        }
    }

    /// A panic report names no single context for a task holding several.
    fn context_hash(&self) -> Option<u64> {
        None
    }
}

/// A multi-key task whose every lane arrived, queued by the thread whose arrivals completed the
/// count (a submitter, or a worker that made several tasks ready at once).
impl LaneJob for MultiTask {
    fn run_batch(self: Arc<Self>, worker: &WorkerCtx) {
        run_ready(self, worker);
    }
}

/// Runs a multi-key task whose every lane arrived, pops it from its lanes and lets them go on,
/// in one turn. A lane whose next entry is another multi-key task arrives there at once (no
/// job: it stays parked); a task that this makes ready runs next on this worker while the
/// turn's batch lasts (at least one task; further ready tasks are queued). A lane with entries
/// of its own is restarted: the last of them continues on this worker when no ready task does.
fn run_ready(first: Arc<MultiTask>, worker: &WorkerCtx) {
    let turn = Turn::new(OnPool::worker(worker), ()).at_least_one();
    turn.holding(|| {
        let mut next = Some(first);
        while let Some(multi) = next.take() {
            if !run_one(&turn, &multi) {
                return; // handed to a future, or `shutdown_now` drains the lanes
            }
            next = pass_lanes(&turn, multi);
        }
    });
    turn.flush();
}

/// Runs `multi`'s body; false when its lanes are no longer this turn's to pop: the body is a
/// future (it holds every key until it is done; its end pops them, `Resume`), or the pool is
/// stopping (`shutdown_now`, maybe called by this very task, hands the task back from the
/// lanes or drains them).
fn run_one(turn: &Turn<'_>, multi: &Arc<MultiTask>) -> bool {
    if turn.stopping() {
        return false;
    }
    let body = multi.task.lock().take();
    match body {
        Some(Body::Run(task)) => turn.run(None, || task.run()),
        Some(Body::Launch(fut)) => {
            turn.run(None, || {
                fut.launch(turn.registry(), Release::Resume(multi.clone()));
                Ok(())
            });
            return false;
        }
        None => {}
    }
    !turn.stopping()
}

/// Pops `multi` (it ran) from each of its lanes and acts on each outcome at once (no vectors):
/// a task made ready is kept to run next while the turn's batch lasts (a second one, or one
/// past the batch, is queued), as is a restarted lane when another one comes after it. A task
/// made ready here is at the head of all its lanes, so none of them is one of `multi`'s lanes
/// not yet passed: queueing it early is safe. Returns the task to run next.
fn pass_lanes(turn: &Turn<'_>, multi: Arc<MultiTask>) -> Option<Arc<MultiTask>> {
    let registry = turn.registry();
    let mut next = None;
    let mut inline = None;
    for lane in multi.lanes.iter() {
        match lane.pass_multi(&multi) {
            Passed::Done => {}
            Passed::Ready(m) if !turn.used_up() => {
                if let Some(other) = next.replace(m) {
                    registry.schedule(Work::Lane(other));
                }
            }
            Passed::Ready(m) => registry.schedule(Work::Lane(m)),
            Passed::Restart(lane) => {
                if let Some(other) = inline.replace(lane) {
                    registry.schedule(Work::Lane(other));
                }
            }
        }
    }
    cells::recycle(multi);
    if let Some(lane) = inline {
        match (&next, turn.pool.worker) {
            (None, Some(worker)) => continue_inline(lane, worker),
            _ => registry.schedule(Work::Lane(lane)),
        }
    }
    next
}

thread_local! {
    /// How many lanes this thread is running inline, one inside the other (`continue_inline`).
    static INLINE_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// A completed multi-key task leaves `lane` scheduled with more work: run it on this worker at
/// once (it may reach another multi-key task, whose completion may continue inline again —
/// bounded, so the stack stays flat), or queue it when already nested deep or stopping.
fn continue_inline(lane: Arc<LaneCore<Closures>>, worker: &WorkerCtx) {
    const MAX_DEPTH: u32 = 4;
    let depth = INLINE_DEPTH.with(|d| d.get());
    if depth >= MAX_DEPTH || OnPool::worker(worker).stopping() {
        worker.registry.schedule(Work::Lane(lane));
        return;
    }
    INLINE_DEPTH.with(|d| d.set(depth + 1));
    struct Reset(u32);
    impl Drop for Reset {
        fn drop(&mut self) {
            let _ = INLINE_DEPTH.try_with(|d| d.set(self.0));
        }
    }
    let _reset = Reset(depth);
    LaneJob::run_batch(lane, worker);
}
