//! The callers inside `shutdown_now` and what they hold (the engine README, "Shutdown", steps
//! 3 and 4): nobody waits for a pool thread inside it to exit, and step 4 ends once what is still
//! pending is what they hold. Modelled under loom by `loom_shutdown_now`.

use crate::loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The pool threads inside `shutdown_now`, and what they hold. Nobody waits for such a thread to
/// exit (it cannot, until its own task returns), and step 4 ends once what is still pending is
/// what they hold ([`Stoppers::allow`]).
pub(crate) struct Stoppers {
    /// Workers inside `shutdown_now`.
    workers: AtomicUsize,
    /// Reserved threads inside `shutdown_now`.
    reserved: AtomicUsize,
    /// The admissions the callers inside `shutdown_now` hold: the task each pool thread among
    /// them runs, and the launching entry of each future whose first poll (on any of their
    /// threads) called it (`holding::launching`).
    held: AtomicU64,
}

/// A caller inside `shutdown_now`, from [`Stoppers::enter`] until dropped.
pub(crate) struct Stopper<'a> {
    stoppers: &'a Stoppers,
    own: OwnThread,
    held: u64,
}

impl Stoppers {
    pub(crate) fn new() -> Self {
        Stoppers {
            workers: AtomicUsize::new(0),
            reserved: AtomicUsize::new(0),
            held: AtomicU64::new(0),
        }
    }

    /// A caller on thread `own` comes in, whose thread is launching `launching` futures (their
    /// entries are still pending: `holding::launching_here`).
    pub(crate) fn enter(&self, own: OwnThread, launching: u64) -> Stopper<'_> {
        let running = match own {
            OwnThread::None => 0,
            OwnThread::Worker => {
                self.workers.fetch_add(1, Ordering::SeqCst);
                1
            }
            OwnThread::Reserved => {
                self.reserved.fetch_add(1, Ordering::SeqCst);
                1
            }
        };
        let held = running + launching;
        self.held.fetch_add(held, Ordering::SeqCst);
        Stopper {
            stoppers: self,
            own,
            held,
        }
    }

    /// Step 4's exit test: true once the `pending` admissions are all held by the callers inside
    /// `shutdown_now` (this one's among them). `pending` is read first: a caller that leaves in
    /// between only makes the test stricter, and none can enter with an admission that was not
    /// already pending.
    pub(crate) fn allow(&self, pending: u64) -> bool {
        pending <= self.held.load(Ordering::SeqCst)
    }

    /// Step 3: whether the `workers` and `reserved` threads still live are all inside
    /// `shutdown_now` (so none is left to wait for).
    pub(super) fn all_inside(&self, workers: usize, reserved: usize) -> bool {
        workers <= self.workers.load(Ordering::SeqCst)
            && reserved <= self.reserved.load(Ordering::SeqCst)
    }
}

impl Drop for Stopper<'_> {
    fn drop(&mut self) {
        match self.own {
            OwnThread::None => {}
            OwnThread::Worker => {
                self.stoppers.workers.fetch_sub(1, Ordering::SeqCst);
            }
            OwnThread::Reserved => {
                self.stoppers.reserved.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.stoppers.held.fetch_sub(self.held, Ordering::SeqCst);
    }
}

/// Which of a pool's threads this is, if any (`worker::own_thread`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OwnThread {
    None,
    Worker,
    Reserved,
}
