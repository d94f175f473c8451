//! `rayon-scope`: a `rayon::ThreadPool` of available-parallelism threads
//! whose producers run inside the pool: one job per producer in a
//! `ThreadPool::scope`, each spawning its tasks with `Scope::spawn` from a
//! pool thread (onto that thread's own deque, rayon's fast path), where
//! the `rayon` peer spawns from outside threads (through the global
//! injector).

use std::ops::Range;

/// The row name.
pub const NAME: &str = "rayon-scope";

/// Untimed: builds the pool.
pub fn build(threads: usize) -> Result<rayon::ThreadPool, String> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| format!("building the rayon pool: {e}"))
}

/// Untimed: has every pool thread run a no-op, so that all have started.
pub fn warm(pool: &rayon::ThreadPool) {
    pool.broadcast(|_| ());
}

/// Timed: one scope job per range, each spawning `task(index)` for every
/// index of its range, in order; returns when every task has run.
pub fn produce(pool: &rayon::ThreadPool, ranges: Vec<Range<u64>>, task: impl Fn(u64) + Sync) {
    let task = &task;
    pool.scope(|s| {
        for range in ranges {
            s.spawn(move |s| {
                for index in range {
                    s.spawn(move |_| task(index));
                }
            });
        }
    });
}
