//! The lane side of multi-key tasks (rule 6 of `README.md`): putting a task in the lane of each
//! of its keys, and popping it once it is done, arriving at once at the next multi-key task.

use std::sync::Arc;

use super::closures::{ClosureEntry, Closures};
use super::keyed::MultiTask;
use super::table::{LaneCore, LaneTable};

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
        st.queue.push_back(ClosureEntry::Many(multi.clone()));
        let fresh = st.table.is_none();
        if fresh {
            st.table = Some(table.clone());
        }
        fresh
    }

    /// The multi-key task at this lane's head is done: pop it. The worker that ran it holds
    /// the lane as its runner (rule 1: the lane is scheduled and parked), so it acts as that
    /// runner would after the task: turns the lane idle if empty (rule 2), or counts its
    /// arrival at the next multi-key task (exactly as a runner's `take_chunk` would see it, with
    /// no job and no `Arc` traffic unless that task is now ready), or hands the lane back for a
    /// runner. If `shutdown_now` already drained the lane (called from
    /// inside the task), there is nothing to pop and the lane stays as the drain left it.
    pub(crate) fn pass_multi(self: &Arc<Self>, multi: &Arc<MultiTask>) -> Passed {
        let idle = {
            let mut st = self.state.lock();
            let at_head =
                matches!(st.queue.front(), Some(ClosureEntry::Many(m)) if Arc::ptr_eq(m, multi));
            if !at_head {
                return Passed::Done;
            }
            st.queue.pop_front();
            match st.queue.front() {
                None => st.table.take(),
                Some(ClosureEntry::Many(next)) => {
                    return if next.arrived(1) {
                        Passed::Ready(next.clone())
                    } else {
                        Passed::Done
                    };
                }
                Some(_) => return Passed::Restart(self.clone()),
            }
        };
        if let Some(table) = idle {
            self.release(table);
        }
        Passed::Done
    }
}
