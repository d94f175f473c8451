//! The wait-for-room and wait-for-idle protocols (`waiters.rs`) under loom, with the real
//! [`Waiters`] and the registry's admission written out small (the registry's counters and
//! queues do not run under loom). What the model keeps from the real code:
//! * admission (`Registry::admit`, capacity part): a compare-and-swap on `queued` that never
//!   goes above the capacity; a refusal writes nothing;
//! * a task's finish (`Registry::count_finished`): `queued -= 1`, then `Waiters::released`;
//! * `Pool::wait_for_room`: a first look unregistered, then register, look, sleep, look again;
//! * `Pool::wait_idle`: `Waiters::wait_idle` over a `pending` count lowered before `released`.
//!
//! A lost wake-up leaves a waiter asleep with nobody left to wake it: loom reports the deadlock
//! and fails the model.

use super::waiters::Waiters;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::sync::Arc;
use crate::loom::thread;

const CAP: usize = 1;

/// `Registry::admit`'s capacity check: never above `CAP`, a refusal writes nothing.
fn admit(queued: &AtomicUsize) -> bool {
    queued
        .fetch_update(SeqCst, SeqCst, |q| (q < CAP).then_some(q + 1))
        .is_ok()
}

/// `Pool::wait_for_room` with no deadline.
fn wait_for_room(waiters: &Waiters, queued: &AtomicUsize) {
    if admit(queued) {
        return;
    }
    let mut wait = waiters.wait_for_room();
    while !admit(queued) {
        assert!(wait.sleep(None));
    }
}

/// `Registry::count_finished(1, None)`.
fn finish(waiters: &Waiters, queued: &AtomicUsize) {
    queued.fetch_sub(1, SeqCst);
    waiters.released();
}

#[test]
fn loom_room_waiter_vs_release() {
    crate::loom::model(|| {
        let waiters = Arc::new(Waiters::new());
        let queued = Arc::new(AtomicUsize::new(CAP)); // full: one task running
        let submitter = {
            let (waiters, queued) = (waiters.clone(), queued.clone());
            thread::spawn(move || wait_for_room(&waiters, &queued))
        };
        finish(&waiters, &queued); // the running task finishes
        submitter.join().unwrap();
        assert_eq!(queued.load(SeqCst), CAP, "the submitter took the room");
    });
}

#[test]
fn loom_idle_waiter_vs_last_finish() {
    crate::loom::model(|| {
        let waiters = Arc::new(Waiters::new());
        let pending = Arc::new(AtomicUsize::new(1));
        let worker = {
            let (waiters, pending) = (waiters.clone(), pending.clone());
            thread::spawn(move || {
                pending.fetch_sub(1, SeqCst);
                waiters.released_idle();
            })
        };
        assert!(waiters.wait_idle(None, || pending.load(SeqCst) == 0));
        worker.join().unwrap();
    });
}
