//! The monitor: finds workers stuck in one task and gets the work queued behind them going.
//!
//! Each period it reads every worker's `run_seq` (odd while in a task; `progress.rs` has the
//! protocol). A worker whose odd `run_seq` has not changed for `blocked_after` is marked stuck, its deque is moved to the
//! injector (idle workers are woken for it), and if work still waits while fewer than
//! `core` threads can take it, an auxiliary thread is added (see `Registry::ensure_threads`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_utils::sync::Parker;

use super::progress::Seen;
use super::registry::Registry;
use super::snapshot::WALK_MAX;

pub(crate) fn run(registry: Arc<Registry>, parker: Parker) {
    let _span = registry.span.clone().entered();
    let n = registry.slots.len();
    let mut last_seq = vec![0u64; n];
    let mut since = vec![Instant::now(); n];
    let period = registry.config.monitor_period;
    let blocked_after = registry.config.blocked_after;
    let mut scan = 0usize;
    loop {
        parker.park_timeout(period);
        if registry.is_closed() && registry.live.load(Ordering::Acquire) == 0 {
            return;
        }
        let now = Instant::now();
        for i in 0..registry.high_water() {
            let slot = &registry.slots[i];
            let long_enough = now.duration_since(since[i]) >= blocked_after;
            let blocking = slot.blocking.load(Ordering::Acquire);
            let seen = slot
                .progress
                .observe(&mut last_seq[i], long_enough, blocking);
            if let Some(meter) = &registry.meter {
                // Since when this worker is in its current task (not: between tasks).
                let seq = last_seq[i];
                let start = if seen == Seen::Moving { now } else { since[i] };
                meter.note_in_task(i, (seq % 2 == 1).then_some((start, seq)));
            }
            match seen {
                Seen::Moving => since[i] = now,
                Seen::Waiting => {}
                Seen::Stuck => {
                    tracing::debug!(
                        pool = registry.name(),
                        slot = i,
                        "keyway worker blocked in one task"
                    );
                    registry.transfer_from(i);
                }
            }
        }
        #[cfg(feature = "metrics")]
        if let Some(meter) = &registry.meter {
            meter.export.publish(&registry.metrics());
        }
        registry.ensure_threads();
        // Cells of closures too large for a lane entry, recycled through a burst: given back
        // to the allocator once no list has moved for a while.
        crate::task::trim_spilled_cells(now);
        // Freeing idle lanes drops their keys: user code, which must not end the monitor.
        // Each period also scans one shard of each table for deep lanes (the watch list).
        scan += 1;
        let swept = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let tables = registry.tables();
            let live: usize = tables.iter().map(|t| t.live_lanes()).sum();
            registry.watch.want(live > WALK_MAX);
            for table in &tables {
                table.sweep_expired();
                if registry.watch.wanted() {
                    table.scan_deep(scan, registry.config.lane_batch, &registry.watch);
                }
            }
        }));
        if swept.is_err() {
            tracing::error!(
                pool = registry.name(),
                "keyway: dropping an idle lane's key panicked"
            );
        }
    }
}
