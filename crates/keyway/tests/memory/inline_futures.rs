//! Allocation budget of a lane's future that completes at once: it is polled in the runner's
//! turn with no task, and stored in a recycled cell (a submitted future) or in place (an async
//! typed lane's), so a future submitted to an idle lane (its own activation each time)
//! allocates nothing once the cells are warm; a closure lane's activation whose futures wait
//! costs a task (not measured here).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::serial;

const FUTURES: u64 = 2_000;

/// Allocations made while `FUTURES` ready futures are each submitted to an idle lane and run
/// before the next is submitted (so each is an activation of its own); the second of two
/// rounds, so every buffer on the path is warm. `typed`: an async typed lane's message instead.
fn allocations_per_activation_round(typed: bool) -> u64 {
    let pool = common::fixed_pool(1);
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let lanes = pool.typed_lanes_async(move |_: &u32, ()| {
        let d = d.clone();
        async move {
            d.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut measured = 0;
    for _round in 0..2 {
        done.store(0, Ordering::SeqCst);
        let before = common::counting::allocations();
        for i in 0..FUTURES as usize {
            if typed {
                lanes.send(7, ()).unwrap();
            } else {
                let d = done.clone();
                pool.execute_async_sequential(7u32, async move {
                    d.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
            }
            while done.load(Ordering::SeqCst) <= i {
                std::thread::yield_now();
            }
        }
        measured = common::counting::allocations() - before;
    }
    pool.shutdown();
    measured
}

#[test]
fn a_future_that_completes_at_once_in_an_idle_lane_allocates_nothing() {
    let _serial = serial();
    let n = allocations_per_activation_round(false);
    println!("{FUTURES} ready futures, an activation each: {n} allocations");
    // The global queue's blocks only (one per 63 lane jobs); a box per future would be 2,000.
    assert!(
        n <= FUTURES / 20,
        "{n} allocations for {FUTURES} activations (none each)"
    );
}

#[test]
fn an_async_typed_lanes_ready_message_in_an_idle_lane_allocates_nothing() {
    let _serial = serial();
    let n = allocations_per_activation_round(true);
    println!("{FUTURES} ready messages, an activation each: {n} allocations");
    // The global queue's blocks only; a box per activation's futures would be 2,000.
    assert!(
        n <= FUTURES / 20,
        "{n} allocations for {FUTURES} activations (none each)"
    );
}
