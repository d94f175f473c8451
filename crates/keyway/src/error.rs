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
#[derive(Debug)]
pub struct BuildError(BuildErrorKind);

impl BuildError {
    pub(crate) fn new(kind: BuildErrorKind) -> Self {
        BuildError(kind)
    }
}

#[derive(Debug)]
pub(crate) enum BuildErrorKind {
    ZeroCoreThreads,
    ZeroMaxThreads,
    CoreAboveMax {
        core: usize,
        max: usize,
    },
    ZeroDuration {
        setting: &'static str,
        value: Duration,
    },
    MinReservedAboveMax {
        min: usize,
        max: usize,
    },
    ZeroCount {
        setting: &'static str,
    },
    TooManyThreads {
        setting: &'static str,
        value: usize,
        limit: usize,
    },
    NulInThreadName,
    Spawn(std::io::Error),
    StackSize {
        value: usize,
        min: usize,
        max: usize,
    },
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
pub enum SubmitError<T> {
    /// The pool was shut down; the task is handed back.
    Shutdown(T),
    /// The pool holds as many queued tasks as its configured capacity; the task is handed back.
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
pub enum TryExecuteError<T> {
    /// No reserved thread was idle to take the task now; the task is handed back (nothing was
    /// queued).
    Busy(T),
    /// The pool was shut down; the task is handed back.
    Shutdown(T),
}

impl<T> TryExecuteError<T> {
    /// Gives back the task.
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
#[doc(alias = "JoinError")]
pub enum TaskError {
    /// The task panicked; the payload is the one `panic!` was given.
    Panicked(Box<dyn Any + Send + 'static>),
    /// The task was cancelled through its handle before it started.
    Cancelled,
    /// A newer coalescing task of the same context replaced this one before it started.
    Coalesced,
    /// The task was accepted but never ran: it was handed back by
    /// [`Pool::shutdown_now`](crate::Pool::shutdown_now) and then dropped.
    Rejected,
    /// A scheduled task's timeout passed before it could start, so it was not run.
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

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

impl From<BuildErrorKind> for BuildError {
    fn from(kind: BuildErrorKind) -> Self {
        BuildError(kind)
    }
}

impl fmt::Display for BuildErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCoreThreads => f.write_str("core_threads must be at least 1"),
            Self::ZeroMaxThreads => f.write_str("max_threads must be at least 1"),
            Self::CoreAboveMax { core, max } => {
                write!(
                    f,
                    "core_threads ({core}) is greater than max_threads ({max})"
                )
            }
            Self::ZeroDuration { setting, value } => {
                write!(f, "{setting} must be longer than zero (got {value:?})")
            }
            Self::MinReservedAboveMax { min, max } => write!(
                f,
                "min_reserved_threads ({min}) is greater than reserved_threads ({max})"
            ),
            Self::ZeroCount { setting } => write!(f, "{setting} must be at least 1"),
            Self::TooManyThreads {
                setting,
                value,
                limit,
            } => write!(
                f,
                "{setting} ({value}) is more than the {limit} threads a pool may have"
            ),
            Self::NulInThreadName => f.write_str("thread_name must not contain a NUL byte"),
            Self::Spawn(_) => f.write_str("could not start a worker thread"),
            Self::StackSize { value, min, max } => write!(
                f,
                "stack_size ({value} bytes) must be between {min} and {max} bytes"
            ),
        }
    }
}

impl std::error::Error for BuildErrorKind {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

impl<T> fmt::Display for SubmitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SubmitError::Shutdown(_) => "the pool is shut down and accepts no more tasks",
            SubmitError::Full(_) => "the pool is full: its capacity of queued tasks is reached",
            SubmitError::KeyPanicked(_) => {
                "the context key's Hash, Eq or Drop panicked; the task is handed back"
            }
        })
    }
}

impl<T> std::error::Error for SubmitError<T> {}

impl<T> fmt::Display for TryExecuteError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TryExecuteError::Busy(_) => "no reserved thread is idle to take the task now",
            TryExecuteError::Shutdown(_) => "the pool is shut down and accepts no more tasks",
        })
    }
}

impl<T> std::error::Error for TryExecuteError<T> {}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Panicked(p) => {
                write!(f, "the task panicked: {}", panic_message(p.as_ref()))
            }
            TaskError::Cancelled => f.write_str("the task was cancelled before it started"),
            TaskError::Coalesced => {
                f.write_str("the task was replaced by a newer coalescing task of its context")
            }
            TaskError::Rejected => {
                f.write_str("the task was handed back at shutdown and dropped without running")
            }
            TaskError::TimedOut => {
                f.write_str("the task's timeout passed before it could start; it was not run")
            }
        }
    }
}

impl std::error::Error for TaskError {}
