//! Allocation budget of multi-key tasks: no allocation per multi-key task in the common case. A counting
//! global allocator counts every allocation in the process while 100,000 two-key tasks on a few
//! warm keys go through the pool, at most `WINDOW` of them in flight at once (a producer that runs
//! far ahead of the workers needs a task cell per task in flight, however cells are kept).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const TASKS: usize = 100_000;
const WINDOW: usize = 64;
const KEYS: u32 = 64;

/// Submits `TASKS` two-key tasks in windows of `WINDOW`, each window run before the next; each
/// closure captures 32 bytes when `large` (an `Arc` and three integers), else an `Arc` alone.
fn run_windows_of(pool: &keyway::Pool, done: &Arc<AtomicUsize>, large: bool) {
    done.store(0, Ordering::SeqCst);
    for start in (0..TASKS).step_by(WINDOW) {
        let end = (start + WINDOW).min(TASKS);
        for i in start..end {
            let a = i as u32 % KEYS;
            let b = (a + 1 + (i as u32 / KEYS) % (KEYS - 1)) % KEYS;
            let d = done.clone();
            if large {
                let pad = [i as u64, u64::from(a), u64::from(b)];
                pool.execute_keyed([a, b], move || {
                    std::hint::black_box(pad);
                    d.fetch_add(1, Ordering::SeqCst);
                })
                .map_err(drop)
            } else {
                pool.execute_keyed([a, b], move || {
                    d.fetch_add(1, Ordering::SeqCst);
                })
                .map_err(drop)
            }
            .unwrap();
        }
        common::eventually("the window ran", || done.load(Ordering::SeqCst) == end);
    }
}

/// Allocations of a second `run_windows_of(large)` on a fresh pool (the first warms task cells,
/// lane buffers and the pool's queues to their working size), checked against the budget: the
/// global queue allocates a block per 63 jobs that go through it; a task cell or a box per task
/// would be 100,000.
fn check_budget(large: bool, what: &str) {
    let _serial = crate::serial();
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    run_windows_of(&pool, &done, large);
    let before = common::counting::allocations();
    run_windows_of(&pool, &done, large);
    let n = common::counting::allocations() - before;
    println!("execute_keyed, 2 keys, {what}: {n} allocations for {TASKS} tasks");
    assert!(
        n <= (TASKS / 20) as u64,
        "{n} allocations for {TASKS} two-key tasks of {what} (at most {})",
        TASKS / 20
    );
    pool.shutdown();
    assert_eq!(pool.stats().live_lanes, 0);
}

#[test]
fn two_key_tasks_on_warm_keys_allocate_nothing_per_task() {
    check_budget(false, "closures capturing an Arc");
}

/// A closure of 32 bytes fits a task in place: a multi-key task made from it allocates nothing
/// either (it is made into its task cell directly, not boxed into a lane entry of 24 bytes of
/// place on the way).
#[test]
fn two_key_tasks_of_32_byte_closures_allocate_nothing_per_task() {
    check_budget(true, "32-byte closures");
}
