//! The monitor: finds workers stuck in one task and gets the work queued behind them going.
//!
//! Each period it reads every worker's `run_seq` (odd while in a task). A worker whose odd
//! `run_seq` has not changed for `blocked_after` is marked stuck, its deque is moved to the
//! injector (idle workers are woken for it), and if work still waits while fewer than
//! `core` threads can take it, an auxiliary thread is added (see `Registry::ensure_threads`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_utils::sync::Parker;

use super::registry::Registry;

pub(crate) fn run(registry: Arc<Registry>, parker: Parker) {
    let n = registry.slots.len();
    let mut last_seq = vec![0u64; n];
    let mut since = vec![Instant::now(); n];
    let period = registry.config.monitor_period;
    let blocked_after = registry.config.blocked_after;
    loop {
        parker.park_timeout(period);
        if registry.is_closed() && registry.live.load(Ordering::Acquire) == 0 {
            return;
        }
        let now = Instant::now();
        for i in 0..registry.high_water() {
            let slot = &registry.slots[i];
            let seq = slot.run_seq.load(Ordering::Acquire);
            if seq != last_seq[i] {
                last_seq[i] = seq;
                since[i] = now;
                continue;
            }
            let in_task = seq % 2 == 1;
            if in_task
                && now.duration_since(since[i]) >= blocked_after
                && !slot.stuck.load(Ordering::Acquire)
                && !slot.blocking.load(Ordering::Acquire)
            {
                slot.stuck.store(true, Ordering::Release);
                if slot.run_seq.load(Ordering::Acquire) != seq {
                    // It finished meanwhile (and may have cleared the flag before we set it).
                    slot.stuck.store(false, Ordering::Release);
                    continue;
                }
                tracing::debug!(slot = i, "keyway worker blocked in one task");
                registry.transfer_from(i);
            }
        }
        registry.ensure_threads();
        for table in registry.tables() {
            table.sweep_idle();
        }
    }
}
