//! The lane side of multi-key tasks (rule 6 of `README.md`): putting a task in the lane of each
//! of its keys, and popping it once it is done, arriving at once at the next multi-key task.

use std::sync::Arc;

use super::run::MultiTask;
use crate::lane::closures::{ClosureEntry, Closures};
use crate::lane::table::{Barrier, LaneCore, LaneTable};

/// What popping a finished multi-key task from one of its lanes left behind.
pub(crate) enum Passed {
    /// Nothing for the caller: the lane went idle (and was let go, rule 3), or arrived at its
    /// next multi-key task, which still waits for other lanes, or `shutdown_now` already
    /// drained it.
    Done,
    /// The lane's new head is another multi-key task, and this lane's arrival there (it stays
    /// parked: scheduled, no job) was the last one: the task is ready, the caller owns its run.
    Ready(Arc<MultiTask>),
    /// The lane has more entries of its own: it is still scheduled and needs a runner.
    Restart(Arc<LaneCore<Closures>>),
}

/// True if `entry` is the multi-key task `multi`.
fn is(entry: Option<&ClosureEntry>, multi: &MultiTask) -> bool {
    matches!(entry.and_then(ClosureEntry::barrier), Some(m) if std::ptr::addr_eq(Arc::as_ptr(m), multi))
}

impl LaneCore<Closures> {
    /// Appends the multi-key task (under the lane's shard lock, rule 6). True if the lane was
    /// idle: the task is then at its head and the lane parks there at once (it stays scheduled
    /// with no job; the submitter counts its arrival).
    pub(crate) fn push_multi(
        self: &Arc<Self>,
        table: &Arc<LaneTable<Closures>>,
        multi: &Arc<MultiTask>,
    ) -> bool {
        let mut st = self.state.lock();
        st.queue
            .push_back(ClosureEntry::many(multi.clone() as Arc<dyn Barrier>));
        let fresh = st.table.is_none();
        if fresh {
            st.schedule(table);
        }
        fresh
    }

    /// The multi-key task at this lane's head is done: pop it, ending the lane's turn for it.
    /// The worker that ran it holds the lane as its runner (rule 1: the lane is scheduled and
    /// parked), so it acts as that runner would after the task: turns the lane idle if empty
    /// (rule 2), or counts its arrival at the next multi-key task (exactly as a runner's
    /// `take_chunk` would see it, with no job and no `Arc` traffic unless that task is now
    /// ready), or hands the lane back for a runner. If `shutdown_now` already drained the lane
    /// (called from inside the task), there is nothing to pop and the lane stays as the drain
    /// left it.
    pub(crate) fn pass_multi(self: &Arc<Self>, multi: &MultiTask) -> Passed {
        let idle = {
            let mut st = self.state.lock();
            if !is(st.queue.front(), multi) {
                return Passed::Done;
            }
            st.queue.pop_front();
            match st.queue.front().map(ClosureEntry::barrier) {
                None => st.turn_idle(self.pinned()),
                Some(Some(next)) => return arrive_next(next),
                Some(None) => return Passed::Restart(self.clone()),
            }
        };
        self.let_go(idle);
        Passed::Done
    }
}

/// The lane arrives at `next`, the multi-key task now at its head (it stays parked).
fn arrive_next(next: &Arc<dyn Barrier>) -> Passed {
    if !next.arrive_counted() {
        return Passed::Done;
    }
    match next.clone().into_any().downcast::<MultiTask>() {
        Ok(task) => Passed::Ready(task),
        Err(_) => unreachable!("multi-key tasks are the only barriers"),
    }
}
