//! The handles a user holds on a pool, counted apart from the pool's own internal ones, and
//! what is built on the pool and must be shut down before it ([`Attached`]: a scheduler).
//!
//! A scheduler keeps an internal handle on its pool to hand it tasks; that one does not count
//! as the user's. When the last user-held handle goes (a `Pool`, or a `Scheduler`, which holds
//! a user handle for as long as the user holds it), [`Users`]' drop shuts down every attached
//! scheduler gracefully and then the pool, waiting for both: what was accepted, scheduled or
//! not yet due, runs before the drop returns.

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::Mutex;

use super::shutdown_async::Stopped;
use crate::engine::Registry;
use crate::error::ShutdownTimedOut;
use crate::task::PendingTask;

/// Something built on a pool that hands it tasks later (a scheduler): shut down before the
/// pool, so that the pool does not refuse what it still has to hand over.
pub(crate) trait Attached: Send + Sync {
    /// Stops intake; every task already accepted still goes to the pool when due. Waits until
    /// nothing is left to hand over, or `deadline`; false if it could not wait that long (or
    /// not at all: called on its own thread, see [`can_wait`](Attached::can_wait)).
    fn shut_down(&self, deadline: Option<Instant>) -> bool;

    /// Stops intake and hands back every task not yet handed to the pool.
    fn shut_down_now(&self) -> Vec<PendingTask>;

    /// False on the attached thing's own thread (a hook), which cannot wait for itself.
    fn can_wait(&self) -> bool;
}

/// What every user-held handle of one pool shares.
pub(crate) struct Users {
    registry: Arc<Registry>,
    attached: Mutex<Vec<Weak<dyn Attached>>>,
    /// Threads finishing a shutdown started where it could not wait: joined by the next
    /// shutdown that waits, so that it returns once they are gone, not only done.
    finishers: Mutex<Vec<JoinHandle<()>>>,
    /// The shutdown `Pool::shutdown_async` started in the background, once one was.
    background: Mutex<Option<Arc<Stopped>>>,
}

impl Users {
    pub(crate) fn new(registry: Arc<Registry>) -> Self {
        Users {
            registry,
            attached: Mutex::new(Vec::new()),
            finishers: Mutex::new(Vec::new()),
            background: Mutex::new(None),
        }
    }

    /// Attaches `a`: the pool shuts it down before itself.
    pub(crate) fn attach(&self, a: Weak<dyn Attached>) {
        let mut attached = self.attached.lock();
        attached.retain(|w| w.strong_count() > 0);
        attached.push(a);
    }

    fn live(&self) -> Vec<Arc<dyn Attached>> {
        self.attached
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// `Pool::shutdown`, `shutdown_timeout` and the drop of the last user-held handle: every
    /// attached scheduler shuts down gracefully, then the pool; both waited for until
    /// `deadline`. On a thread that cannot wait (one of the pool's, or a scheduler's), with a
    /// scheduler still to finish, the rest goes on in the background: the pool closes once the
    /// schedulers have handed over what they hold.
    pub(crate) fn close_and_wait(
        self: &Arc<Self>,
        deadline: Option<Instant>,
    ) -> Result<(), ShutdownTimedOut> {
        let live = self.live();
        let can_wait = !self.registry.on_own_thread() && live.iter().all(|a| a.can_wait());
        if can_wait && live.iter().all(|a| a.shut_down(deadline)) {
            self.registry.close_and_wait(deadline)?;
            self.join_finishers();
            return Ok(());
        }
        if live.is_empty() {
            return self.registry.close_and_wait(deadline);
        }
        // Not done in time (or not waitable here): finish in the background.
        for a in &live {
            a.shut_down(Some(Instant::now()));
        }
        let users = self.clone();
        let finish = move || {
            let live = users.live();
            for a in &live {
                a.shut_down(None);
            }
            let _ = users.registry.close_and_wait(None);
        };
        match std::thread::Builder::new()
            .name("keyway-shutdown".into())
            .spawn(finish)
        {
            Ok(thread) => self.finishers.lock().push(thread),
            // No thread to finish in: close now (what the schedulers still hold is refused,
            // and ends rejected, counted).
            Err(_) => self.registry.close(),
        }
        Err(ShutdownTimedOut::new(self.registry.pending()))
    }

    /// `Pool::shutdown_async`: intake stops here (the schedulers' at once, the pool's once they
    /// have handed over what they hold), and one close-and-wait runs in the background, the same
    /// for every caller.
    pub(crate) fn shut_down_in_background(self: &Arc<Self>) -> Arc<Stopped> {
        let mut background = self.background.lock();
        if let Some(stopped) = &*background {
            return stopped.clone();
        }
        let live = self.live();
        for a in &live {
            a.shut_down(Some(Instant::now()));
        }
        if live.is_empty() {
            self.registry.close();
        }
        let users = self.clone();
        let stopped = Stopped::start(move || {
            let _ = users.close_and_wait(None);
        });
        *background = Some(stopped.clone());
        stopped
    }

    /// Joins the threads finishing earlier shutdowns (each is done or about to be: the caller
    /// has just waited for everything they wait for). The lock is held while joining, so that
    /// a concurrent shutdown also returns once they are gone.
    fn join_finishers(&self) {
        let mut finishers = self.finishers.lock();
        for thread in finishers.drain(..) {
            let _ = thread.join();
        }
    }

    /// `Pool::shutdown_now`: every attached scheduler hands back what it holds, then the pool.
    pub(crate) fn shutdown_now(&self) -> Vec<PendingTask> {
        let mut back = Vec::new();
        for a in self.live() {
            back.extend(a.shut_down_now());
        }
        back.extend(self.registry.shutdown_now());
        back
    }
}

impl Drop for Users {
    /// The last user-held handle is gone.
    fn drop(&mut self) {
        let live = self.live();
        let can_wait = !self.registry.on_own_thread() && live.iter().all(|a| a.can_wait());
        if !can_wait {
            // Cannot wait here: the schedulers finish in the background, and the pool closes
            // when its last internal handle goes (the last scheduler's thread exiting).
            for a in &live {
                a.shut_down(Some(Instant::now()));
            }
            if live.is_empty() {
                let _ = self.registry.close_and_wait(None);
            }
            return;
        }
        for a in &live {
            a.shut_down(None);
        }
        let _ = self.registry.close_and_wait(None);
    }
}
