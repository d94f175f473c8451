//! The unit of work the pool moves around, and what it tells its submitter.
//!
//! Every accepted task is a [`Runnable`]: it is either run exactly once, or abandoned exactly once
//! with a reason (its handle then says why). Nothing else happens to a task, which is what makes
//! "no accepted task is ever lost" checkable.

mod handle;
mod raw;

pub use handle::TaskHandle;
pub(crate) use handle::{Completer, WithHandle};
pub(crate) use raw::Task;

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::panic_message;

/// A panic caught while running a task, reported to the pool's panic hook.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let pool = keyway::Pool::builder()
///     .panic_hook(move |report: &keyway::PanicReport| log.lock().unwrap().push(report.message().to_owned()))
///     .build()
///     .unwrap();
/// let handle = pool.submit(|| -> () { panic!("boom") }).unwrap();
/// assert!(handle.join().unwrap_err().is_panic());
/// pool.shutdown();
/// assert_eq!(*seen.lock().unwrap(), vec!["boom".to_string()]);
/// ```
#[derive(Debug, Clone)]
pub struct PanicReport {
    message: String,
}

impl PanicReport {
    pub(crate) fn new(message: String) -> Self {
        PanicReport { message }
    }

    /// The panic's message (`"<non-string panic payload>"` when the payload is not a string).
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Why an accepted task is dropped without running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abandon {
    /// A newer coalescing task of its lane replaced it.
    Coalesced,
    /// It was handed back at `shutdown_now` and the caller dropped it.
    Rejected,
    /// Its timeout passed before it could start (the scheduler's executors).
    TimedOut,
}

/// A task the pool holds: run once, or abandoned once. Stored type-erased as a [`Task`].
pub(crate) trait Runnable: Send + Sized {
    /// Runs the task, catching a panic; a panic comes back as its report.
    fn run(self) -> Result<(), PanicReport>;
    /// Drops the task without running it, telling its handle (if any) why.
    fn abandon(self, why: Abandon);
}

/// A closure submitted without a handle.
pub(crate) struct Plain<F>(pub(crate) F);

impl<F: FnOnce() + Send> Runnable for Plain<F> {
    fn run(self) -> Result<(), PanicReport> {
        let f = self.0;
        catch_unwind(AssertUnwindSafe(f))
            .map_err(|p| PanicReport::new(panic_message(&*p).to_owned()))
    }

    fn abandon(self, _why: Abandon) {}
}

/// A task that was accepted but had not started when the pool was stopped with
/// [`Pool::shutdown_now`](crate::Pool::shutdown_now).
///
/// The caller may [`run`](PendingTask::run) it (on its own thread) or drop it; dropping tells the
/// task's handle, if it has one, [`TaskError::Rejected`](crate::TaskError::Rejected).
///
/// ```
/// use std::sync::mpsc::channel;
/// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
/// let (started_tx, started) = channel();
/// let (release, release_rx) = channel::<()>();
/// pool.execute(move || {
///     started_tx.send(()).unwrap();
///     release_rx.recv().unwrap();
/// })
/// .unwrap();
/// started.recv().unwrap(); // the only worker is now busy
/// let handle = pool.submit_sequential("ctx", || 42).unwrap();
/// let stopper = { let pool = pool.clone(); std::thread::spawn(move || pool.shutdown_now()) };
/// while !pool.is_shutdown() { std::thread::yield_now(); }
/// release.send(()).unwrap(); // let the running task finish
/// let pending = stopper.join().unwrap();
/// assert_eq!(pending.len(), 1);
/// for task in pending { task.run().unwrap(); }
/// assert_eq!(handle.join().unwrap(), 42);
/// ```
pub struct PendingTask {
    task: Option<Task>,
}

impl PendingTask {
    pub(crate) fn new(task: Task) -> Self {
        PendingTask { task: Some(task) }
    }

    /// Runs the task on the calling thread. A panic is caught: it goes to the task's handle, if
    /// it has one, and comes back here as its report.
    pub fn run(mut self) -> Result<(), PanicReport> {
        match self.task.take() {
            Some(task) => task.run(),
            None => Ok(()),
        }
    }
}

impl Drop for PendingTask {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abandon(Abandon::Rejected);
        }
    }
}

impl std::fmt::Debug for PendingTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingTask(..)")
    }
}
