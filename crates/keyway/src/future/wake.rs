//! Where a future's wake-up goes: its task is queued on its own pool as a poll job, or dropped
//! (cancelling the future at its await point) once that pool is stopping or gone.
//!
//! A future's task holds its pool weakly (a stopped pool drops it): see the engine's `on_pool`.

use std::future::Future;
use std::sync::Arc;

use crate::engine::{schedule_woken, PollTask, Registry};
use crate::task::drop_quietly;

/// Makes `fut` a task of the pool of `registry` (detached: it runs until done or cancelled) and
/// returns its first poll. The pool is the task's metadata, so the schedule function is a plain
/// function: `async-task` then wakes and schedules without taking a reference on the task for
/// the schedule call (it does so for a schedule closure with captures: two read-modify-writes
/// per wake-up).
pub(crate) fn spawn_on<F>(registry: &Arc<Registry>, fut: F) -> PollTask
where
    F: Future<Output = ()> + Send + 'static,
{
    let (runnable, task) = async_task::Builder::new()
        .metadata(Arc::downgrade(registry))
        .spawn(move |_| fut, schedule_poll);
    task.detach();
    runnable
}

/// A future task's schedule function: its woken `runnable` is queued on its pool as a poll job
/// (run next on this worker when it can), or dropped, cancelling the future at its await point,
/// once the pool is stopping or gone.
fn schedule_poll(runnable: PollTask) {
    if let Some(runnable) = schedule_woken(runnable) {
        drop_quietly(runnable);
    }
}
