//! Rate-limited consumption: each entry waits for a slot of a keyway [`Scheduler`] executor
//! before it goes to its lane, so the executor's limit (shared among processes by the
//! scheduler's coordinator) bounds the group's throughput. Entries keep their order: the
//! reader waits in id order.

use std::time::Duration;

use keyway::{Scheduler, Timing};

/// Blocks the shard's reader until `executor` admits one more task. If the scheduler refuses
/// (unknown executor, shut down), the entry goes on without waiting.
pub(crate) fn wait_for_slot(scheduler: &Scheduler, executor: &str) {
    let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
    let slot = move || {
        let _ = tx.send(());
    };
    match scheduler.execute_with(executor, Timing::after(Duration::ZERO), slot) {
        // A task the scheduler drops (shutdown) closes the channel: go on.
        Ok(()) => {
            let _ = rx.recv();
        }
        Err(e) => tracing::debug!(error = %e, "rate limit unavailable; consuming without it"),
    }
}
