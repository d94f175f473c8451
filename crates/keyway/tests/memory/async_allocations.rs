//! Allocation budget of async typed lanes (`typed_lanes_async`, `typed_lanes_async_with_state`):
//! nothing per message. A counting global allocator counts every allocation in the process while
//! 100,000 messages go through one busy lane, with a handler whose future is ready at once and
//! with one that yields once; and while keys with state are sent one message at a time, each
//! message an activation of its own. (Its own test binary: the allocator counts the whole
//! process.)

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::least_of;

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
    let _serial = crate::serial();
    let n = allocations_per_round(false);
    println!("ready handler: {n} allocations for {MESSAGES} messages");
    assert!(
        n <= MAX,
        "{n} allocations for {MESSAGES} messages (at most {MAX})"
    );
}

#[test]
fn a_busy_async_typed_lane_allocates_nothing_per_yielding_message() {
    let _serial = crate::serial();
    let n = allocations_per_round(true);
    println!("yielding handler: {n} allocations for {MESSAGES} messages");
    assert!(
        n <= MAX,
        "{n} allocations for {MESSAGES} messages (at most {MAX})"
    );
}

const KEYS: u32 = 1_000;
const TOUCHES: u32 = 20;

/// Allocations made while each of `KEYS` keys of an async typed lane with state (a count of its
/// messages, with an `on_idle` hook) is sent `TOUCHES` messages, one at a time: a round sends
/// each key one message and waits until every one is handled, so each key's lane is idle when
/// its next message comes, and every message is an activation of its own (its first poll in the
/// runner's turn, its state taken from the key's slot and put back as the lane turns idle). The
/// least of three measured rounds, after a first that makes the lanes and warms every buffer.
fn allocations_per_one_message_round() -> u64 {
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .keep_idle(std::time::Duration::from_secs(600))
        .build()
        .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let idled = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let i = idled.clone();
    let state = keyway::KeyState::new(|_: &u32| 0u32).on_idle(move |_: &u32, n: u32| {
        i.fetch_add(n as usize, Ordering::SeqCst);
    });
    let lanes = pool.typed_lanes_async_with_state(state, move |_: &u32, n: u32, ()| {
        let d = d.clone();
        async move {
            d.fetch_add(1, Ordering::SeqCst);
            n + 1
        }
    });
    let mut measured = u64::MAX;
    for round in 0..4 {
        let before = common::counting::allocations();
        for touch in 0..TOUCHES {
            for key in 0..KEYS {
                lanes.send(key, ()).unwrap();
            }
            let handled = ((round * TOUCHES + touch + 1) * KEYS) as usize;
            common::eventually("the round handled", || {
                done.load(Ordering::SeqCst) == handled
            });
        }
        if round > 0 {
            measured = measured.min(common::counting::allocations() - before);
        }
    }
    pool.shutdown();
    // Every key kept one state through all its messages, handed to `on_idle` at shutdown.
    assert_eq!(idled.load(Ordering::SeqCst), (4 * TOUCHES * KEYS) as usize);
    measured
}

/// A key with state sent one message at a time allocates nothing per message: the activation
/// has no task and its future's place is a recycled cell; the state moves from the key's slot
/// to the future and back. What is left is the lane's job in the global queue, sent from
/// outside the pool: a block of the queue per `INJECTOR_BLOCK` jobs. A box per message would be
/// 20,000.
#[test]
fn a_key_with_state_sent_one_message_at_a_time_allocates_nothing_per_message() {
    let _serial = crate::serial();
    let messages = u64::from(TOUCHES * KEYS);
    let n = allocations_per_one_message_round();
    println!("{messages} one-message activations of keys with state: {n} allocations");
    let max = messages / crate::allocations::INJECTOR_BLOCK + 64;
    assert!(
        n <= max,
        "{n} allocations for {messages} messages (at most {max})"
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
    let _serial = crate::serial();
    for in_lane in [false, true] {
        // Noise only adds allocations (a submitter that ran ahead of the workers finds no
        // recycled cell at hand): the least of three rounds of each.
        let least =
            |detached| least_of(3, || allocations_per_future_round(in_lane, detached, false));
        let with_handles = least(false);
        let detached = least(true);
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
    let _serial = crate::serial();
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
