//! The scheduler's errors: bad configuration, and tasks it refused (handed back).

use std::fmt;
use std::time::Duration;

/// A scheduler or executor setting that cannot work. The message says which and why.
///
/// ```
/// use keyway::{ConfigError, ExecutorConfig, Scheduler};
/// let pool = keyway::Pool::new().unwrap();
/// let err = Scheduler::builder(&pool)
///     .executor("emails", ExecutorConfig::with_tps(f64::NAN))
///     .build()
///     .unwrap_err();
/// assert!(matches!(err, ConfigError::InvalidTps { .. }));
/// assert!(err.to_string().contains("emails"));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A TPS limit was negative, NaN or infinite (use [`ExecutorConfig::unlimited`] for no
    /// limit, and `0.0` to pause an executor).
    ///
    /// [`ExecutorConfig::unlimited`]: crate::ExecutorConfig::unlimited
    InvalidTps {
        /// The executor's name.
        executor: String,
        /// The value given.
        value: f64,
    },
    /// The interval is shorter than the 10 ms minimum (zero included).
    IntervalTooShort(Duration),
    /// The interval is longer than the one-day maximum.
    IntervalTooLong(Duration),
    /// Two executors were given the same name.
    DuplicateExecutor(String),
    /// No executor has this name.
    UnknownExecutor(String),
    /// The scheduler's driver thread could not be started.
    Spawn(String),
    /// The name given for the scheduler's thread contains a NUL byte, which no thread name may
    /// hold.
    InvalidThreadName(String),
    /// The [`Coordinator`](crate::Coordinator)'s `join` panicked for this executor while the
    /// scheduler was being built (no scheduler was started).
    CoordinatorPanicked(String),
}

/// A task the scheduler refused. The task is handed back, so nothing is lost.
///
/// ```
/// use keyway::{ExecutorConfig, ScheduleError, Scheduler};
/// use std::time::Duration;
/// let pool = keyway::Pool::new().unwrap();
/// let scheduler = Scheduler::builder(&pool)
///     .executor("emails", ExecutorConfig::with_tps(10.0))
///     .build()
///     .unwrap();
/// let err = scheduler.schedule("sms", Duration::ZERO, || 1).unwrap_err();
/// assert!(matches!(err, ScheduleError::UnknownExecutor(ref name, _) if name == "sms"));
/// let task = err.into_inner();
/// assert_eq!(task(), 1); // still ours
/// ```
#[non_exhaustive]
pub enum ScheduleError<F> {
    /// No executor has this name; the task is handed back.
    UnknownExecutor(String, F),
    /// The scheduler was shut down; the task is handed back.
    Shutdown(F),
    /// A repetition period (or delay) of zero; the task is handed back.
    ZeroPeriod(F),
}

impl<F> ScheduleError<F> {
    /// Gives back the refused task.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = keyway::Scheduler::builder(&pool).build().unwrap();
    /// let err = s.schedule("nobody", std::time::Duration::ZERO, || 5).unwrap_err();
    /// assert_eq!(err.into_inner()(), 5); // the task, unrun
    /// # s.shutdown();
    /// ```
    pub fn into_inner(self) -> F {
        match self {
            ScheduleError::UnknownExecutor(_, f)
            | ScheduleError::Shutdown(f)
            | ScheduleError::ZeroPeriod(f) => f,
        }
    }
}

impl<F> fmt::Debug for ScheduleError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleError::UnknownExecutor(name, _) => {
                f.debug_tuple("UnknownExecutor").field(name).finish()
            }
            ScheduleError::Shutdown(_) => f.write_str("Shutdown(..)"),
            ScheduleError::ZeroPeriod(_) => f.write_str("ZeroPeriod(..)"),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::InvalidTps { executor, value } => write!(
                f,
                "executor {executor:?}: the TPS limit must be a finite number >= 0 (got {value})"
            ),
            ConfigError::IntervalTooShort(d) => {
                write!(f, "the interval must be at least 10 ms (got {d:?})")
            }
            ConfigError::IntervalTooLong(d) => {
                write!(f, "the interval must be at most one day (got {d:?})")
            }
            ConfigError::DuplicateExecutor(name) => {
                write!(f, "executor {name:?} is configured twice")
            }
            ConfigError::UnknownExecutor(name) => write!(f, "no executor is named {name:?}"),
            ConfigError::Spawn(e) => write!(f, "could not start the scheduler's thread: {e}"),
            ConfigError::InvalidThreadName(name) => write!(
                f,
                "the scheduler's thread name {name:?} contains a NUL byte, which no thread name may hold"
            ),
            ConfigError::CoordinatorPanicked(name) => {
                write!(f, "the coordinator panicked joining executor {name:?}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

impl<F> fmt::Display for ScheduleError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleError::UnknownExecutor(name, _) => write!(f, "no executor is named {name:?}"),
            ScheduleError::Shutdown(_) => {
                f.write_str("the scheduler is shut down and accepts no more tasks")
            }
            ScheduleError::ZeroPeriod(_) => {
                f.write_str("a repeating task needs a period longer than zero")
            }
        }
    }
}

impl<F> std::error::Error for ScheduleError<F> {}
