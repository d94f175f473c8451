//! [`Stats`] read from a pool's registry: what `Pool::stats` returns.

use std::sync::atomic::Ordering;

use super::registry::Registry;
use super::stats::{LaneDepth, Stats};
use super::watch::label_listed;

/// Up to this many live lanes, `Stats::largest_lanes` looks at every lane.
pub(crate) const WALK_MAX: usize = 256;

impl Stats {
    /// A snapshot of `registry`'s threads, tasks and lanes.
    pub(crate) fn of(registry: &Registry) -> Stats {
        let live = registry.live.load(Ordering::Acquire);
        let core = registry.core_target.load(Ordering::Acquire).min(live);
        let tables = registry.tables();
        let live_lanes = tables.iter().map(|t| t.live_lanes()).sum();
        // Up to `WALK_MAX` lanes, each is looked at; beyond, the watch list (lanes that used up
        // a turn's batch), so that the cost does not grow with the lanes.
        registry.watch.want(live_lanes > WALK_MAX);
        let labels = &registry.config.labels;
        let largest = if live_lanes <= WALK_MAX {
            let mut listed = Vec::new();
            for t in &tables {
                t.deepest(8, &mut listed);
            }
            listed.sort_by_key(|(d, _): &(LaneDepth, _)| std::cmp::Reverse(d.queued));
            listed.truncate(8);
            // Labelled (user code) outside every lock; the lanes dropped after.
            let (mut largest, lanes): (Vec<_>, Vec<_>) = listed.into_iter().unzip();
            label_listed(&mut largest, &lanes, labels);
            largest
        } else {
            registry.watch.deepest(8, labels)
        };
        let finished = registry.finished_total();
        let unfinished = registry.accepted.sum().saturating_sub(finished);
        // Read after `unfinished`; a task accepted in between may show as running although
        // `unfinished` missed it: clamped, so that `waiting + running == unfinished`.
        let in_task = registry.slots[..registry.high_water()]
            .iter()
            .filter(|s| s.progress.in_task())
            .count()
            + registry.reserved.running.load(Ordering::Acquire);
        let running = (in_task as u64).min(unfinished);
        let moved = registry.transfers.load(Ordering::Acquire);
        #[allow(deprecated)] // the deprecated aliases are still filled in
        Stats {
            core_threads: core,
            auxiliary_threads: live - core,
            reserved_threads: registry.reserved.live.load(Ordering::Acquire),
            idle_reserved_threads: registry.reserved.idle_count(),
            idle_threads: registry.sleep.sleepers(),
            blocked_threads: registry.blocked_threads(),
            auxiliary_started: registry.aux_spawned.load(Ordering::Acquire),
            waiting_tasks: unfinished - running,
            running_tasks: running,
            queued_tasks: unfinished,
            completed_tasks: finished,
            panicked_tasks: registry.panicked.load(Ordering::Acquire),
            jobs_moved_off_blocked: moved,
            transfers: moved,
            live_lanes,
            largest_lanes: largest,
        }
    }
}
