//! Allocation budgets of batches (`Lane::execute_all`, `Contexts::execute_all`): a batch is one
//! lane entry holding its tasks in one buffer, so it costs at most one allocation whatever its
//! closures capture, where a task queued alone boxes a closure larger than its entry's place.

use crate::allocations::{allocations_for, assert_at_most, INJECTOR_BLOCK, TASKS};
use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const BATCH: u64 = 64;

/// Batches of 64 closures, each capturing 48 bytes (an `Arc` and five integers: too large to be
/// kept in place in a lane entry of its own), on a warm lane: at most one allocation per batch
/// (its buffer) plus the lane's scheduling, never one per task.
#[test]
fn a_batch_of_large_closures_costs_one_allocation() {
    let _serial = crate::serial();
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let lane = pool.lane(7u32);
    let d = done.clone();
    let n = allocations_for(&pool, &done, |i| {
        if i % BATCH == 0 {
            let batch = (0..BATCH.min(TASKS - i)).map(|j| large(&d, i + j));
            lane.execute_all(batch).unwrap();
        }
    });
    let batches = TASKS.div_ceil(BATCH);
    assert_at_most(
        "Lane::execute_all, 48-byte closures",
        n,
        batches + TASKS / INJECTOR_BLOCK,
    );
    let contexts = pool.contexts::<u32>();
    let d = done.clone();
    let n = allocations_for(&pool, &done, |i| {
        if i % BATCH == 0 {
            let batch = (0..BATCH.min(TASKS - i)).map(|j| large(&d, i + j));
            contexts.execute_all(7, batch).unwrap();
        }
    });
    assert_at_most(
        "Contexts::execute_all, 48-byte closures",
        n,
        batches + TASKS / INJECTOR_BLOCK,
    );
    drop(lane);
    pool.shutdown();
}

/// A task capturing 48 bytes: `done` and five integers.
fn large(done: &Arc<AtomicUsize>, seed: u64) -> impl FnOnce() + Send + 'static + use<> {
    let (done, pad) = (done.clone(), [seed; 5]);
    assert_eq!(std::mem::size_of_val(&(&done, pad)), 48);
    move || {
        std::hint::black_box(pad);
        done.fetch_add(1, Ordering::SeqCst);
    }
}
