//! Errors: bad configuration, refused submissions, and the outcomes of a task that did not run.

use std::any::Any;
use std::fmt;
use std::time::Duration;

/// A [`PoolBuilder`](crate::PoolBuilder) was given a configuration that cannot work.
///
/// The message says which setting is wrong and why.
///
/// ```
/// let err = keyway::Pool::builder().core_threads(0).build().unwrap_err();
/// assert!(err.to_string().contains("core_threads"));
/// ```
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct BuildError(#[from] BuildErrorKind);

impl BuildError {
    pub(crate) fn new(kind: BuildErrorKind) -> Self {
        BuildError(kind)
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildErrorKind {
    #[error("core_threads must be at least 1")]
    ZeroCoreThreads,
    #[error("max_threads must be at least 1")]
    ZeroMaxThreads,
    #[error("core_threads ({core}) is greater than max_threads ({max})")]
    CoreAboveMax { core: usize, max: usize },
    #[error("{setting} must be longer than zero (got {value:?})")]
    ZeroDuration {
        setting: &'static str,
        value: Duration,
    },
    #[error("min_reserved_threads ({min}) is greater than reserved_threads ({max})")]
    MinReservedAboveMax { min: usize, max: usize },
    #[error("{setting} must be at least 1")]
    ZeroCount { setting: &'static str },
    #[error("{setting} ({value}) is more than the {limit} threads a pool may have")]
    TooManyThreads {
        setting: &'static str,
        value: usize,
        limit: usize,
    },
    #[error("thread_name must not contain a NUL byte")]
    NulInThreadName,
    #[error("could not start a worker thread")]
    Spawn(#[source] std::io::Error),
}

/// A task the pool refused. The task is handed back, so nothing is lost.
///
/// ```
/// let pool = keyway::Pool::new().unwrap();
/// pool.shutdown();
/// let err = pool.execute(|| ()).unwrap_err();
/// assert!(matches!(err, keyway::SubmitError::Shutdown(_)));
/// let task = err.into_inner();
/// task(); // still ours to run
/// ```
#[derive(thiserror::Error)]
pub enum SubmitError<T> {
    /// The pool was shut down; the task is handed back.
    #[error("the pool is shut down and accepts no more tasks")]
    Shutdown(T),
    /// The pool holds as many queued tasks as its configured capacity; the task is handed back.
    #[error("the pool is full: its capacity of queued tasks is reached")]
    Full(T),
    /// The context key's `Hash`, `Eq` or `Drop` panicked while the pool looked its lane up; the
    /// task is handed back, and the pool is unharmed.
    ///
    /// ```
    /// use std::hash::{Hash, Hasher};
    /// #[derive(PartialEq, Eq)]
    /// struct Bad;
    /// impl Hash for Bad {
    ///     fn hash<H: Hasher>(&self, _: &mut H) {
    ///         panic!("no hash for you")
    ///     }
    /// }
    /// let pool = keyway::Pool::new().unwrap();
    /// let err = pool.execute_sequential(Bad, || ()).unwrap_err();
    /// assert!(matches!(err, keyway::SubmitError::KeyPanicked(_)));
    /// pool.shutdown(); // nothing was left half-admitted
    /// ```
    #[error("the context key's Hash, Eq or Drop panicked; the task is handed back")]
    KeyPanicked(T),
}

impl<T> SubmitError<T> {
    /// Gives back the refused task (or message).
    pub fn into_inner(self) -> T {
        match self {
            SubmitError::Shutdown(t) | SubmitError::Full(t) | SubmitError::KeyPanicked(t) => t,
        }
    }
}

impl<T> fmt::Debug for SubmitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::Shutdown(_) => f.write_str("Shutdown(..)"),
            SubmitError::Full(_) => f.write_str("Full(..)"),
            SubmitError::KeyPanicked(_) => f.write_str("KeyPanicked(..)"),
        }
    }
}

/// A task [`Pool::try_execute`](crate::Pool::try_execute) did not start. The task is handed
/// back.
///
/// ```
/// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
/// let err = pool.try_execute(|| ()).unwrap_err();
/// assert!(matches!(err, keyway::TryExecuteError::Busy(_)));
/// ```
#[derive(thiserror::Error)]
pub enum TryExecuteError<T> {
    /// No reserved thread was idle to take the task now; the task is handed back (nothing was
    /// queued).
    #[error("no reserved thread is idle to take the task now")]
    Busy(T),
    /// The pool was shut down; the task is handed back.
    #[error("the pool is shut down and accepts no more tasks")]
    Shutdown(T),
}

impl<T> TryExecuteError<T> {
    /// Gives back the task.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
    /// let task = pool.try_execute(|| ()).unwrap_err().into_inner();
    /// pool.execute(task).unwrap(); // queue it instead
    /// # pool.shutdown();
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            TryExecuteError::Busy(t) | TryExecuteError::Shutdown(t) => t,
        }
    }
}

impl<T> fmt::Debug for TryExecuteError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryExecuteError::Busy(_) => f.write_str("Busy(..)"),
            TryExecuteError::Shutdown(_) => f.write_str("Shutdown(..)"),
        }
    }
}

/// Why a [`TaskHandle`](crate::TaskHandle) has no value: the task did not run to completion.
///
/// `Ok(value)` from a handle means the task *ran*; each variant here is one of the other outcomes.
#[derive(thiserror::Error)]
pub enum TaskError {
    /// The task panicked; the payload is the one `panic!` was given.
    #[error("the task panicked: {}", panic_message(.0.as_ref()))]
    Panicked(Box<dyn Any + Send + 'static>),
    /// The task was cancelled through its handle before it started.
    #[error("the task was cancelled before it started")]
    Cancelled,
    /// A newer coalescing task of the same context replaced this one before it started.
    #[error("the task was replaced by a newer coalescing task of its context")]
    Coalesced,
    /// The task was accepted but never ran: it was handed back by
    /// [`Pool::shutdown_now`](crate::Pool::shutdown_now) and then dropped.
    #[error("the task was handed back at shutdown and dropped without running")]
    Rejected,
    /// A scheduled task's timeout passed before it could start, so it was not run.
    #[error("the task's timeout passed before it could start; it was not run")]
    TimedOut,
}

impl TaskError {
    /// True if the task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, TaskError::Panicked(_))
    }

    /// Resumes the task's panic on this thread if it panicked; otherwise returns `self`.
    pub fn resume_panic(self) -> Self {
        match self {
            TaskError::Panicked(p) => std::panic::resume_unwind(p),
            other => other,
        }
    }
}

impl fmt::Debug for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Panicked(p) => f
                .debug_tuple("Panicked")
                .field(&panic_message(p.as_ref()))
                .finish(),
            TaskError::Cancelled => f.write_str("Cancelled"),
            TaskError::Coalesced => f.write_str("Coalesced"),
            TaskError::Rejected => f.write_str("Rejected"),
            TaskError::TimedOut => f.write_str("TimedOut"),
        }
    }
}

/// The text of a panic payload, when it has one.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "<non-string panic payload>"
    }
}
