//! A snapshot of what the pool is doing.

use std::sync::atomic::Ordering;

use super::registry::Registry;

/// How many tasks wait in one lane (see [`Stats::largest_lanes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneDepth {
    /// The hash of the lane's context, as [`Pool::context_hash`](crate::Pool::context_hash)
    /// computes it.
    pub context_hash: u64,
    /// Tasks queued in the lane (not counting one that is running).
    pub queued: usize,
}

/// A snapshot of a pool's threads, tasks and lanes, from [`Pool::stats`](crate::Pool::stats).
///
/// The counts are read one after another while the pool runs, so they are each exact but not
/// necessarily from one instant.
///
/// ```
/// let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
/// assert_eq!(pool.stats().core_threads, 2);
/// pool.submit_sequential(5, || ()).unwrap().join().unwrap();
/// // A task is counted completed just after its handle has the result: `shutdown` waits for
/// // every accepted task to be done and counted.
/// pool.shutdown();
/// assert_eq!(pool.stats().completed_tasks, 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Threads counted against the core size.
    pub core_threads: usize,
    /// Threads above the core size (they retire after `keep_alive` idle).
    pub auxiliary_threads: usize,
    /// Reserved threads started (for [`Pool::try_execute`](crate::Pool::try_execute)).
    pub reserved_threads: usize,
    /// Reserved threads idle now, ready to take a task.
    pub idle_reserved_threads: usize,
    /// Threads parked for lack of work.
    pub idle_threads: usize,
    /// Threads inside [`blocking`](crate::blocking) or stuck in one task past `blocked_after`.
    pub blocked_threads: usize,
    /// Auxiliary threads started so far.
    pub auxiliary_started: u64,
    /// Accepted tasks not yet finished (queued or running).
    pub queued_tasks: u64,
    /// Tasks finished: ran (or panicked), skipped after cancel, coalesced away, handed back.
    pub completed_tasks: u64,
    /// Tasks that panicked.
    pub panicked_tasks: u64,
    /// Jobs moved away from blocked workers.
    pub transfers: u64,
    /// Lanes that exist now (idle lanes are freed unless a [`Lane`](crate::Lane) handle pins
    /// them).
    pub live_lanes: usize,
    /// The deepest lanes, deepest first (at most 8).
    pub largest_lanes: Vec<LaneDepth>,
}

pub(crate) fn snapshot(registry: &Registry) -> Stats {
    let live = registry.live.load(Ordering::Acquire);
    let core = registry.core_target.load(Ordering::Acquire).min(live);
    let tables = registry.tables();
    let mut largest = Vec::new();
    for t in &tables {
        t.deepest(8, &mut largest);
    }
    largest.sort_by_key(|d: &LaneDepth| std::cmp::Reverse(d.queued));
    largest.truncate(8);
    let finished = registry.finished.sum();
    Stats {
        core_threads: core,
        auxiliary_threads: live - core,
        reserved_threads: registry.reserved.live.load(Ordering::Acquire),
        idle_reserved_threads: registry.reserved.idle_count(),
        idle_threads: registry.sleep.sleepers(),
        blocked_threads: registry.blocked_threads(),
        auxiliary_started: registry.aux_spawned.load(Ordering::Acquire),
        queued_tasks: registry.accepted.sum().saturating_sub(finished),
        completed_tasks: finished,
        panicked_tasks: registry.panicked.load(Ordering::Acquire),
        transfers: registry.transfers.load(Ordering::Acquire),
        live_lanes: tables.iter().map(|t| t.live_lanes()).sum(),
        largest_lanes: largest,
    }
}
