//! Futures onto lanes: the lane entry of a submitted future, and submitting one to a context.

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use super::closures::{self, ClosureEntry, Closures};
use super::table::LaneTable;
use crate::engine::Registry;
use crate::error::SubmitError;
use crate::future::Launcher;
use crate::task::TaskHandle;

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
