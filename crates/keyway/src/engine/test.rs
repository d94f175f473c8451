//! Unit tests of the pool's parts: counters, the sleep protocol, configuration defaults.

use std::sync::Arc;

use super::counter::Striped;
use super::sleep::Sleep;

#[test]
fn striped_counter_sums_adds_from_many_threads() {
    let c = Arc::new(Striped::new());
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    c.incr();
                }
                c.decr();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(c.sum(), 8 * 9_999);
}

#[test]
fn sleep_wakes_the_most_recent_sleeper_once() {
    let s = Sleep::new();
    assert_eq!(s.wake_one(), None);
    s.announce(3);
    s.announce(5);
    assert_eq!(s.sleepers(), 2);
    assert_eq!(s.wake_one(), Some(5));
    assert!(
        !s.withdraw(5),
        "a woken worker is no longer on the idle stack"
    );
    assert!(s.withdraw(3));
    assert_eq!(s.sleepers(), 0);
    s.announce(1);
    s.announce(2);
    let mut all = s.wake_all();
    all.sort();
    assert_eq!(all, vec![1, 2]);
    assert_eq!(s.sleepers(), 0);
}

/// Reasoned, then confirmed: an unpark token left over from a wake-up the worker had already
/// answered made `park_timeout` return at once, and the worker read that as `keep_alive`
/// passing (an auxiliary thread retired at once). `park_idle` parks again for the time left.
#[test]
fn a_stale_unpark_token_is_not_a_keep_alive_expiry() {
    let parker = crossbeam_utils::sync::Parker::new();
    parker.unparker().unpark(); // the stale token
    let keep_alive = std::time::Duration::from_millis(50);
    let started = std::time::Instant::now();
    let mut wake_ups = 0;
    let expired = super::worker::park_idle(&parker, keep_alive, || {
        wake_ups += 1;
        false // still idle, nothing to do
    });
    // A lower bound only: `keep_alive` cannot have passed before `keep_alive`.
    assert!(
        expired && started.elapsed() >= keep_alive,
        "expiry reported after {:?}",
        started.elapsed()
    );
    assert!(wake_ups >= 1, "the stale token did not wake the worker");
}

#[test]
fn park_idle_with_keep_alive_max_waits_for_a_wake_up() {
    let parker = crossbeam_utils::sync::Parker::new();
    let unparker = parker.unparker().clone();
    let waker = std::thread::spawn(move || unparker.unpark());
    assert!(!super::worker::park_idle(
        &parker,
        std::time::Duration::MAX,
        || true
    ));
    waker.join().unwrap();
}
