//! Released tasks handed to the pool in batches.
//!
//! When the driver releases many tasks in one step (an unlimited executor with a full
//! interval, say), handing each to the pool on its own costs an allocation, a queue push and a
//! wake-up per task — more than scheduling the task did (callgrind, `keyway-bench schedule`:
//! 690 instructions per released task, against 318 to schedule it). Tasks that may run
//! anywhere on the pool are then grouped: one pool task runs a batch of them, one after the
//! other. A step releasing `n` tasks makes batches of `n / SPREAD_OVER` (at most [`MAX`]), so
//! it still hands the pool at least `SPREAD_OVER` pieces of work to share among its threads;
//! a step releasing few tasks hands them over one by one, as before. Tasks on a context's lane
//! always go one by one (the lane orders them).

use std::sync::Arc;

use super::executor::ExecCore;
use super::job_kinds::submit_waiting;
use super::scheduled_job::InlineJob;

/// Tasks per batch, at most.
const MAX: usize = 32;
/// A step is cut into at least this many pieces of work.
const SPREAD_OVER: usize = 64;

/// The driver's batch in progress for one executor.
pub(crate) struct Batcher {
    jobs: Vec<(InlineJob, u64, u64, i64)>,
    size: usize,
}

impl Batcher {
    pub(crate) fn new() -> Self {
        Batcher {
            jobs: Vec::new(),
            size: 1,
        }
    }

    /// About `n` tasks are to be released now: sets the batch size for them.
    pub(crate) fn plan(&mut self, n: usize) {
        self.size = (n / SPREAD_OVER).clamp(1, MAX);
    }

    /// Releases one task: into the batch, or straight to the pool.
    pub(crate) fn release(
        &mut self,
        exec: &Arc<ExecCore>,
        job: InlineJob,
        due: u64,
        deadline: u64,
        priority: i64,
    ) {
        if self.size > 1 && job.is_batchable() {
            self.jobs.push((job, due, deadline, priority));
            if self.jobs.len() >= self.size {
                self.flush(exec);
            }
        } else {
            exec.contain(|| job.dispatch(exec, due, deadline, priority));
        }
    }

    /// Hands the batch in progress to the pool.
    pub(crate) fn flush(&mut self, exec: &Arc<ExecCore>) {
        if self.jobs.is_empty() {
            return;
        }
        let jobs = std::mem::replace(&mut self.jobs, Vec::with_capacity(self.size));
        let batch = ReleasedBatch {
            jobs,
            core: exec.clone(),
        };
        let shared = &exec.shared;
        let run = move || batch.run();
        if let Err(run) = submit_waiting(shared, run, |run| shared.pool.execute(run)) {
            // Dropping the unrun batch ends its tasks rejected (`ReleasedBatch`).
            exec.contain(move || drop(run));
        }
    }
}

/// A batch on its way to the pool; as [`Released`](super::job_kinds::Released) for one task:
/// dropped unrun (refused, or handed back by the pool's `shutdown_now` and dropped), each of its
/// tasks ends rejected, counted once (cancelled, if its handle was cancelled meanwhile).
struct ReleasedBatch {
    jobs: Vec<(InlineJob, u64, u64, i64)>,
    core: Arc<ExecCore>,
}

impl ReleasedBatch {
    fn run(mut self) {
        let core = self.core.clone();
        for (job, due, deadline, priority) in std::mem::take(&mut self.jobs) {
            // Each task contains its own panics; this only keeps the batch going if
            // something else unwinds.
            core.contain(|| job.run_here(&core, due, deadline, priority));
        }
    }
}

impl Drop for ReleasedBatch {
    fn drop(&mut self) {
        for (job, _, _, _) in std::mem::take(&mut self.jobs) {
            self.core.reject(job);
        }
    }
}
