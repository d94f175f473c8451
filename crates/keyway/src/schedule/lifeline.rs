//! A scheduler's life as its pool sees it ([`Lifeline`]): attached to the pool when built, so
//! that the pool's `shutdown`, `shutdown_now` and the drop of its last user-held handle shut
//! the scheduler down first, and what a `Scheduler` handle's own shutdown calls.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::executor::{ExecCore, Shared};
use crate::face::Attached;
use crate::task::PendingTask;

/// Held by every `Scheduler` handle and by the scheduler's thread until it exits; the pool
/// holds it weakly.
pub(crate) struct Lifeline {
    pub(crate) shared: Arc<Shared>,
    pub(crate) execs: Vec<Arc<ExecCore>>,
    pub(crate) driver_thread: OnceLock<ThreadId>,
    /// Joined by the first shutdown that waits for the driver, so that it returns once the
    /// thread is gone (its thread-local destructors run as it exits).
    pub(crate) driver_join: Mutex<Option<JoinHandle<()>>>,
    pub(crate) handed_back: Arc<Mutex<Vec<PendingTask>>>,
}

impl Lifeline {
    /// Stops intake and wakes the driver.
    pub(crate) fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.driver.unpark();
    }

    pub(crate) fn on_driver(&self) -> bool {
        self.driver_thread.get() == Some(&std::thread::current().id())
    }

    /// Whether this thread may wait for the scheduler: not its own, nor one of the pool's.
    pub(crate) fn may_wait(&self) -> bool {
        !self.on_driver() && !self.shared.pool.registry().on_own_thread()
    }

    /// Waits until the driver has exited (it has handed over or ended everything it held), or
    /// until `deadline`: false then.
    pub(crate) fn wait_for_driver(&self, deadline: Option<Instant>) -> bool {
        let (lock, cv) = &self.shared.exited;
        let mut exited = lock.lock();
        while !*exited {
            match deadline {
                Some(d) => {
                    if cv.wait_until(&mut exited, d).timed_out() {
                        return *exited;
                    }
                }
                None => cv.wait(&mut exited),
            }
        }
        drop(exited);
        // Done; then gone. The lock is held while joining: a concurrent shutdown returns once
        // the thread is gone too.
        let mut join = self.driver_join.lock();
        if let Some(thread) = join.take() {
            let _ = thread.join();
        }
        true
    }

    /// Waits until every released task has ended on the pool.
    pub(crate) fn wait_for_pending(&self) {
        for exec in &self.execs {
            while exec.stats.pending() > 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// `shutdown_now`: see `Scheduler::shutdown_now`.
    pub(crate) fn stop_now(&self) -> Vec<PendingTask> {
        self.shared.stop_now.store(true, Ordering::SeqCst);
        self.close();
        if self.on_driver() {
            self.shared.drop_handed_back.store(true, Ordering::SeqCst);
            return Vec::new();
        }
        self.wait_for_driver(None);
        std::mem::take(&mut *self.handed_back.lock())
    }
}

impl Attached for Lifeline {
    /// The pool is shutting down: a pause no one will lift ends (its tasks end `Rejected`),
    /// then as `Scheduler::shutdown`.
    fn shut_down(&self, deadline: Option<Instant>) -> bool {
        self.shared.pauses_end.store(true, Ordering::SeqCst);
        self.close();
        self.may_wait() && self.wait_for_driver(deadline)
    }

    fn shut_down_now(&self) -> Vec<PendingTask> {
        self.stop_now()
    }

    fn can_wait(&self) -> bool {
        !self.on_driver()
    }
}
