//! A graceful shutdown that did not finish in time ([`ShutdownTimedOut`]).

use std::fmt;

/// [`Pool::shutdown_timeout`](crate::Pool::shutdown_timeout) ran out of time: some accepted
/// tasks were not done yet. They still run, in the background; intake stays stopped.
///
/// ```
/// use std::time::Duration;
/// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
/// let (release, wait) = std::sync::mpsc::channel::<()>();
/// pool.execute(move || wait.recv().unwrap()).unwrap();
/// let err = pool.shutdown_timeout(Duration::ZERO).unwrap_err();
/// assert_eq!(err.pending_tasks(), 1);
/// assert!(err.to_string().contains("1 accepted task"));
/// release.send(()).unwrap();
/// pool.shutdown();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownTimedOut {
    pending: u64,
}

impl ShutdownTimedOut {
    pub(crate) fn new(pending: u64) -> Self {
        ShutdownTimedOut { pending }
    }

    /// How many accepted tasks were queued or running when the wait ended (see the type's
    /// example).
    pub fn pending_tasks(&self) -> u64 {
        self.pending
    }
}

impl fmt::Display for ShutdownTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the pool did not finish shutting down in time: {} accepted task(s) not done yet",
            self.pending
        )
    }
}

impl std::error::Error for ShutdownTimedOut {}
