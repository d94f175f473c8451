//! Allocation budget of async typed lanes: an async typed lane (`typed_lanes_async`) allocates nothing per message. A counting
//! global allocator counts every allocation in the process while 100,000 messages go through
//! one busy lane, with a handler whose future is ready at once and with one that yields once.
//! (Its own test binary: the allocator counts the whole process.)

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::SERIAL;

const MESSAGES: u64 = 100_000;

enum Msg {
    /// Holds the lane until the test opens it, so the messages behind it queue up.
    Gate(futures::channel::oneshot::Receiver<()>),
    Work,
}

/// Allocations made while `MESSAGES` messages are sent to one key held busy by a gate, and all
/// are handled (after a warm-up round that sizes every buffer on the path).
fn allocations_per_round(yielding: bool) -> u64 {
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let lanes = pool.typed_lanes_async(move |_: &u32, msg: Msg| {
        let d = d.clone();
        async move {
            match msg {
                Msg::Gate(open) => drop(open.await),
                Msg::Work => {
                    if yielding {
                        keyway::yield_now().await;
                    }
                    d.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    });
    let mut measured = u64::MAX;
    for round in 0..4 {
        done.store(0, Ordering::SeqCst);
        let (open, gate) = futures::channel::oneshot::channel();
        let before = common::counting::allocations();
        lanes.send(7, Msg::Gate(gate)).unwrap();
        for _ in 0..MESSAGES {
            lanes.send(7, Msg::Work).unwrap();
        }
        open.send(()).unwrap();
        common::eventually("all handled", || {
            done.load(Ordering::SeqCst) as u64 == MESSAGES
        });
        if round > 0 {
            measured = measured.min(common::counting::allocations() - before);
        }
    }
    pool.shutdown();
    measured
}

/// Far below one per message: a lane activation (its driver task), the waiting set's entry, a
/// block of the global queue for the gate's wake-up. One allocation per message would be
/// 100,000; one per fairness batch (32 messages) would be 3,125.
const MAX: u64 = 64;

#[test]
fn a_busy_async_typed_lane_allocates_nothing_per_ready_message() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = allocations_per_round(false);
    println!("ready handler: {n} allocations for {MESSAGES} messages");
    assert!(
        n <= MAX,
        "{n} allocations for {MESSAGES} messages (at most {MAX})"
    );
}

#[test]
fn a_busy_async_typed_lane_allocates_nothing_per_yielding_message() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = allocations_per_round(true);
    println!("yielding handler: {n} allocations for {MESSAGES} messages");
    assert!(
        n <= MAX,
        "{n} allocations for {MESSAGES} messages (at most {MAX})"
    );
}

const FUTURES: u64 = 10_000;

/// Allocations made while `FUTURES` futures (ready at once) are submitted and all have run: in
/// one context (queued behind a future held by a gate, so the context's lane is activated once
/// whatever the threads' timing) or on the pool, with a handle each (dropped at once) or none
/// (`execute_async*`); the least of three rounds after a first, so every buffer on the path is
/// warm, and the submitter finds the recycled cells of the futures it needs (`task/spill.rs`)
/// however far it ran ahead of the workers in a round. With
/// `large`, each future holds 192 bytes more (about 240 bytes with its handle and runtime: the
/// class of cells of the `actor_per_key_tokio` example's future, 232 bytes with a tokio timeout).
fn allocations_per_future_round(in_lane: bool, detached: bool, large: bool) -> u64 {
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let mut measured = u64::MAX;
    for round in 0..4 {
        done.store(0, Ordering::SeqCst);
        let (open, gate) = futures::channel::oneshot::channel::<()>();
        let before = common::counting::allocations();
        if in_lane {
            pool.execute_async_sequential(7u32, async move {
                let _ = gate.await;
            })
            .unwrap();
        }
        for i in 0..FUTURES {
            let d = done.clone();
            let pad = [i; 24];
            let fut = async move {
                let n = if large { 1 + (pad[0] - pad[23]) } else { 1 };
                d.fetch_add(n as usize, Ordering::SeqCst);
            };
            match (in_lane, detached) {
                (true, true) => pool.execute_async_sequential(7u32, fut).unwrap(),
                (true, false) => drop(pool.spawn_sequential(7u32, fut).unwrap()),
                (false, true) => pool.execute_async(fut).unwrap(),
                (false, false) => drop(pool.spawn(fut).unwrap()),
            }
        }
        let _ = open.send(());
        common::eventually("all run", || done.load(Ordering::SeqCst) as u64 == FUTURES);
        if round > 0 {
            measured = measured.min(common::counting::allocations() - before);
        }
    }
    pool.shutdown();
    measured
}

#[test]
fn fire_and_forget_futures_allocate_no_handle() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for in_lane in [false, true] {
        let with_handles = allocations_per_future_round(in_lane, false, false);
        let detached = allocations_per_future_round(in_lane, true, false);
        println!(
            "{FUTURES} futures {}: {with_handles} allocations with handles, {detached} without",
            if in_lane {
                "in one context"
            } else {
                "on the pool"
            },
        );
        // A handle is one allocation: one fewer per future. (A few allocations of the pool's
        // own, a queue growing, may fall in either round, and the recycled cells a submitter
        // that ran ahead of the workers found none of at hand, 1.5% in one run of 10: 5% of slack.)
        assert!(
            detached + FUTURES - FUTURES / 20 <= with_handles,
            "in_lane {in_lane}: {detached} allocations without handles, {with_handles} with"
        );
    }
}

/// A future's storage (the future, its handle's completer, its runtime) is a recycled cell up to
/// 512 bytes: the cells the workers free come back to the submitter, so a warm context's
/// futures allocate nothing each, small or as large as the actor example's. A `Box` per future
/// would be `FUTURES` allocations; the lane's driver task is one per activation, not per
/// future. Slack: the gate, its wake-up, the pool's own, and the few cells still in the
/// workers' own lists when the round begins.
#[test]
fn futures_queued_in_a_context_allocate_nothing_each() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for large in [false, true] {
        let n = allocations_per_future_round(true, true, large);
        let size = if large { "large" } else { "small" };
        println!("{FUTURES} queued {size} futures in one context: {n} allocations");
        assert!(
            n <= FUTURES / 100,
            "{n} allocations for {FUTURES} {size} futures (at most {})",
            FUTURES / 100
        );
    }
}
