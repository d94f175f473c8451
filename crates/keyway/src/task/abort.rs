//! `AbortHandle`: cancel a queued task (or a started future) without holding its `TaskHandle`.

use std::fmt;
use std::sync::Arc;

/// What an [`AbortHandle`] needs from a task's shared state, whatever its result type.
pub(super) trait Abortable: Send + Sync {
    fn abort(&self) -> bool;
    fn is_finished(&self) -> bool;
}

/// Cancels a task that has not started, without holding its [`TaskHandle`](crate::TaskHandle).
///
/// Made by [`TaskHandle::abort_handle`](crate::TaskHandle::abort_handle). Unlike the
/// `TaskHandle` it can be cloned and shared between threads, and it still works once the
/// `TaskHandle` has been moved into an `.await` or to another thread: aborting wakes whoever
/// awaits or joins the task, with [`TaskError::Cancelled`](crate::TaskError::Cancelled). A task
/// that already started runs to the end (keyway never interrupts running code), except a future
/// (from one of the `spawn*` methods): that one is dropped at its next await point, and the
/// contexts it held are released. Dropping an `AbortHandle` does nothing.
///
/// ```
/// use std::sync::mpsc;
/// let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
/// let (release, gate) = mpsc::channel::<()>();
/// // Keep the context busy, so that the next task of it stays queued.
/// pool.execute_sequential("report", move || gate.recv().unwrap()).unwrap();
/// let handle = pool.submit_sequential("report", || "expensive").unwrap();
/// let abort = handle.abort_handle();
/// // The handle goes off to be joined (or awaited) elsewhere...
/// let waiter = std::thread::spawn(move || handle.join());
/// // ...and the task can still be called off from here.
/// assert!(abort.abort());
/// assert!(matches!(waiter.join().unwrap(), Err(keyway::TaskError::Cancelled)));
/// assert!(abort.is_finished());
/// release.send(()).unwrap();
/// ```
#[derive(Clone)]
pub struct AbortHandle {
    task: Arc<dyn Abortable>,
}

impl AbortHandle {
    pub(super) fn new(task: Arc<dyn Abortable>) -> Self {
        AbortHandle { task }
    }

    /// Cancels the task if it has not started: it will not run, and its handle's outcome
    /// becomes [`TaskError::Cancelled`](crate::TaskError::Cancelled). Returns false if the task
    /// already started or finished (a running task is not interrupted). A started future is
    /// cancelled too, at its next await point. Same as
    /// [`TaskHandle::cancel`](crate::TaskHandle::cancel).
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// pool.execute_sequential(1, move || gate.recv().unwrap()).unwrap(); // lane 1 busy
    /// let handle = pool.submit_sequential(1, || ()).unwrap();
    /// let abort = handle.abort_handle();
    /// assert!(abort.clone().abort());
    /// assert!(!abort.abort()); // already cancelled
    /// release.send(()).unwrap();
    /// assert!(matches!(handle.join(), Err(keyway::TaskError::Cancelled)));
    /// ```
    #[doc(alias = "cancel")]
    pub fn abort(&self) -> bool {
        self.task.abort()
    }

    /// True once the task has an outcome (ran, panicked, cancelled, coalesced or rejected).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let handle = pool.submit(|| 5).unwrap();
    /// let abort = handle.abort_handle();
    /// assert_eq!(handle.join().unwrap(), 5);
    /// assert!(abort.is_finished());
    /// ```
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}
