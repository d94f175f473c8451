//! What the engine's queues hold ([`Work`]), and what it asks of the layers above: a lane's
//! batch ([`LaneJob`]) and a lane table's shutdown and statistics duties ([`TableOps`]).

use std::sync::{Arc, Weak};

use super::registry::Registry;
use super::stats::LaneDepth;
use super::watch::{Watch, Watched};
use super::worker::WorkerCtx;
use crate::task::{PendingTask, Task};

/// What the pool's queues hold.
pub(crate) enum Work {
    /// A plain task.
    Task(Task),
    /// A lane with queued work: the worker that takes it runs a batch of the lane's tasks.
    Lane(Arc<dyn LaneJob>),
    /// A woken future (`spawn*`): the worker polls it once. Not a task of its own (its task was
    /// counted when it started; it is counted finished when the future completes). Dropped
    /// unrun, it cancels the future.
    Poll(PollTask),
}

/// A future task's runnable (`async-task`); its metadata is the pool it runs on, held weakly.
pub(crate) type PollTask = async_task::Runnable<Weak<Registry>>;

/// A lane as the pool sees it.
pub(crate) trait LaneJob: Send + Sync {
    /// Runs up to a batch of the lane's tasks on `worker`, then lets go of or requeues the lane.
    fn run_batch(self: Arc<Self>, worker: &WorkerCtx);
}

/// Why `admit` refused a task.
pub(crate) enum Refusal {
    Shutdown,
    Full,
}

/// What `admit_timing` says besides a plain `Ok`: refused, or accepted and to be timed.
pub(crate) enum NotPlain {
    Refused(Refusal),
    /// Accepted; this is a task the pool's meter samples (`engine::metrics`).
    Timed,
}

/// What the pool needs from every lane table, whatever its kind.
pub(crate) trait TableOps: Send + Sync {
    /// Takes every queued entry of every lane (the workers have stopped).
    fn drain(&self, out: &mut Vec<PendingTask>);
    fn live_lanes(&self) -> usize;
    /// Frees every lane kept in the idle cache (shutdown).
    fn sweep_idle(&self);
    /// The monitor's look: frees the cached lanes idle for `PoolBuilder::keep_idle`.
    fn sweep_expired(&self);
    /// Adds the `n` deepest lanes to `out` (unlabelled), each with the lane, to be labelled
    /// if listed and dropped outside every lock.
    fn deepest(&self, n: usize, out: &mut Vec<(LaneDepth, Arc<dyn Watched>)>);
    /// The monitor's look at one shard (`cursor` modulo the shard count): lanes with more than
    /// `deep` entries queued go on `watch`.
    fn scan_deep(&self, cursor: usize, deep: usize, watch: &Watch);
}
