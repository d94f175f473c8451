//! Hostile but legal use of the public API (issue 9): each test is one reproduced defect. A hang
//! is turned into a failure by `finishes`, which runs the scenario on its own thread and gives up
//! after `HANG`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use common::{eventually, Gate, Latch, HANG};
use keyway::{AdaptiveStrategy, PendingTask, Pool, TryExecuteError};

/// Runs `scenario` on its own thread; fails the test if it panics or has not returned within
/// `HANG` (the thread is then leaked: it is hung).
fn finishes<R: Send + 'static>(what: &str, scenario: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(scenario));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(HANG) {
        Ok(Ok(r)) => r,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("hang: {what} did not return within {HANG:?}"),
    }
}

/// A value whose `Drop` panics.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("PanicOnDrop dropped");
        }
    }
}

/// Starts the pool's reserved thread and waits until it is parked idle.
fn reserved_ready(pool: &Pool) {
    if let Err(e) = pool.try_execute(|| ()) {
        assert!(matches!(e, TryExecuteError::Busy(_)));
    }
    eventually("a reserved thread is idle", || {
        pool.stats().idle_reserved_threads >= 1
    });
}

// ---- defect 11 -------------------------------------------------------------------------------

#[test]
fn join_timeout_max_does_not_panic() {
    finishes("join_timeout(MAX)", || {
        let pool = Pool::new().unwrap();
        let handle = pool.submit(|| 5).unwrap();
        assert_eq!(handle.join_timeout(Duration::MAX).ok().unwrap().unwrap(), 5);
        let gate = common::hold_workers(&pool, pool.stats().core_threads);
        let slow = pool.submit(|| 6).unwrap();
        let slow = slow.join_timeout(Duration::ZERO).unwrap_err();
        gate.open();
        assert_eq!(slow.join_timeout(Duration::MAX).ok().unwrap().unwrap(), 6);
        pool.shutdown();
    });
}

