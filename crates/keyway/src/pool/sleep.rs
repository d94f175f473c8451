//! Idle workers: who sleeps, and how a producer wakes one without a lost wake-up.
//!
//! Protocol (a Dekker pair, both sides `SeqCst`):
//! 1. a worker that found no work pushes itself on the idle stack, increments `sleepers`, issues a
//!    `SeqCst` fence, and looks for work once more before it parks;
//! 2. a producer publishes its job, issues a `SeqCst` fence, then reads `sleepers`.
//!
//! Either the worker's second look sees the job, or the producer sees `sleepers > 0` and pops a
//! worker to unpark. The parker keeps an unpark that arrives before `park`, so a worker popped
//! between its second look and its `park` still wakes.

use std::sync::atomic::{fence, AtomicUsize, Ordering};

use parking_lot::Mutex;

pub(crate) struct Sleep {
    sleepers: AtomicUsize,
    idle: Mutex<Vec<usize>>,
}

impl Sleep {
    pub(crate) fn new() -> Self {
        Sleep {
            sleepers: AtomicUsize::new(0),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Step 1: `worker` is about to sleep. The caller must look for work again afterwards.
    pub(crate) fn announce(&self, worker: usize) {
        self.idle.lock().push(worker);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Takes `worker` off the idle stack; false if a producer already popped it (its unpark is
    /// then pending and the next park returns at once, which is harmless).
    pub(crate) fn withdraw(&self, worker: usize) -> bool {
        let mut idle = self.idle.lock();
        match idle.iter().rposition(|&w| w == worker) {
            Some(pos) => {
                idle.remove(pos);
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// Step 2: after publishing work, pops the most recently idle worker, if any, to unpark.
    pub(crate) fn wake_one(&self) -> Option<usize> {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut idle = self.idle.lock();
        let w = idle.pop()?;
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        Some(w)
    }

    /// Pops every idle worker.
    pub(crate) fn wake_all(&self) -> Vec<usize> {
        fence(Ordering::SeqCst);
        let mut idle = self.idle.lock();
        self.sleepers.fetch_sub(idle.len(), Ordering::SeqCst);
        std::mem::take(&mut *idle)
    }

    pub(crate) fn sleepers(&self) -> usize {
        self.sleepers.load(Ordering::SeqCst)
    }
}
