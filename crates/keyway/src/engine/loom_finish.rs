//! A worker's finishes under loom ("Finishing on a worker" in `accounting.rs`): the
//! worker counts a finished task with a plain store on its slot's own counter and owes the
//! wake-ups of that finish only when it runs out of work (`Registry::finishes_published`: a
//! `SeqCst` fence, then the reads of `closed`, `pending` and the waiters' registrations).
//! Whoever waits for `pending` to reach 0 must still be woken: a `wait_idle` caller (with the
//! real [`Waiters`]) and, once the pool is closed, a thread waiting for the drain (a parked
//! worker, the monitor). A lost wake-up leaves the waiter asleep with nobody left to wake it:
//! loom reports the deadlock.
//!
//! The registry's counters are written out small (its `Striped` and its slots do not run under
//! loom). loom treats `SeqCst` accesses as `AcqRel` and models fences fully; each side's
//! `SeqCst` reads are therefore modelled as C11 orders them after a fence (see `Pool::pending`
//! and `Pool::is_closed`). The drain model fails without the finisher's fence (checked: loom
//! reports the deadlock); the idle model reads the registrations as the real `Waiters` does
//! under loom, with read-modify-writes, and checks the hand-over to the waiters' generations.

use super::waiters::Waiters;
use crate::loom::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering::*};
use crate::loom::sync::{Arc, Condvar, Mutex};
use crate::loom::thread;

struct Pool {
    /// One task accepted (a submitter's stripe).
    accepted: AtomicU64,
    /// The worker slot's own counter: plain stores by the worker only.
    slot_finished: AtomicU64,
    closed: AtomicBool,
    waiters: Waiters,
    /// Bumped and notified by `notify_all` (the parkers and the monitor, written out small).
    drained: Mutex<u64>,
    woken: Condvar,
}

impl Pool {
    fn new() -> Self {
        Pool {
            accepted: AtomicU64::new(1),
            slot_finished: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            waiters: Waiters::new(),
            drained: Mutex::new(0),
            woken: Condvar::new(),
        }
    }

    /// `Registry::pending`: the finishes first, then `accepted`. The fence stands for what C11
    /// gives the real code's `SeqCst` load of the slot's counter, made after a `SeqCst`
    /// read-modify-write (the waiter's registration, the closer's store of `closed`): it
    /// follows the finisher's fence in the single total order, so it sees the finisher's store
    /// (loom treats those accesses as `AcqRel`; it models fences fully). Not a read-modify-write
    /// as in the other models: loom orders a plain store from another thread after one of
    /// those only partially, and then lets a later one read around it.
    fn pending(&self) -> u64 {
        fence(SeqCst);
        let finished = self.slot_finished.load(SeqCst);
        self.accepted.load(SeqCst) - finished
    }

    /// A plain `SeqCst` load, as in the real code: after the finisher's fence, only the fence
    /// orders it (loom treats the load itself as an acquire), so the model fails without it.
    fn is_closed(&self) -> bool {
        self.closed.load(SeqCst)
    }

    fn notify_all(&self) {
        let mut generation = self.drained.lock();
        *generation += 1;
        self.woken.notify_all();
    }

    /// `Registry::wake_if_drained`.
    fn wake_if_drained(&self) {
        if self.is_closed() && self.pending() == 0 {
            self.notify_all();
        }
        self.waiters.released();
    }

    /// The worker: runs the task (`Registry::count_finished` on a worker: a plain store), finds no more
    /// work and goes idle (`Registry::finishes_published`).
    fn work(&self) {
        let c = &self.slot_finished;
        c.store(c.load(Relaxed) + 1, Release);
        fence(SeqCst);
        self.wake_if_drained();
    }

    /// `Registry::close`.
    fn close(&self) {
        self.closed.swap(true, SeqCst);
        self.notify_all();
    }

    /// A parked worker (or the monitor) waiting for the drain: it looks after every wake-up.
    fn wait_drained(&self) {
        let mut generation = self.drained.lock();
        while !(self.is_closed() && self.pending() == 0) {
            generation = self.woken.wait(generation);
        }
    }
}

#[test]
fn loom_finish_idle_waiter_vs_worker_finish() {
    crate::loom::model(|| {
        let pool = Arc::new(Pool::new());
        let worker = {
            let pool = pool.clone();
            thread::spawn(move || pool.work())
        };
        assert!(pool.waiters.wait_idle(None, || pool.pending() == 0));
        worker.join().unwrap();
    });
}

#[test]
fn loom_finish_drain_waiter_vs_worker_finish_and_close() {
    crate::loom::model(|| {
        let pool = Arc::new(Pool::new());
        let worker = {
            let pool = pool.clone();
            thread::spawn(move || pool.work())
        };
        let closer = {
            let pool = pool.clone();
            thread::spawn(move || pool.close())
        };
        pool.wait_drained();
        worker.join().unwrap();
        closer.join().unwrap();
        assert_eq!(pool.pending(), 0);
    });
}
