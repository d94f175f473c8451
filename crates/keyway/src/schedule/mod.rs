//! Rate-limited scheduling (SPEC §7): tasks scheduled for a time, run at no more than a limit
//! per second per named executor, best first when more are due than the limit allows, expired
//! ones timed out.
//!
//! * `scheduler`, `builder` — the public [`Scheduler`] and how it is configured;
//! * `config` — an executor's settings and a task's timing and priority;
//! * `clock` — monotonic time cut into intervals;
//! * `buckets` — sharded interval buckets: where tasks wait (no global lock, no timer per task);
//! * `job` — what waits in a bucket, and how it runs on the pool or a context's lane;
//! * `executor` — one executor as every thread sees it (settings, buckets, counters);
//! * `interval` — one executor's intervals as the driver runs them (select, spread, carry);
//! * `driver` — the scheduler's one thread;
//! * `stats`, `error` — what the scheduler reports, and its errors;
//! * `coordinator` — how a process learns its share of a limit shared by a cluster.

mod buckets;
mod builder;
mod clock;
mod config;
mod coordinator;
mod driver;
mod error;
mod executor;
mod interval;
mod job;
mod scheduler;
mod stats;

#[cfg(test)]
mod test;

use std::sync::Arc;
use std::time::Instant;

pub use builder::SchedulerBuilder;
pub use config::{ExecutorConfig, PriorityOrder, Timing};
pub use coordinator::{Coordinator, LocalCoordinator};
pub use error::{ConfigError, ScheduleError};
pub use scheduler::Scheduler;
pub use stats::{ExecutorStats, IntervalReport};

/// A task that timed out, as the scheduler's timed-out hook sees it.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use keyway::{ExecutorConfig, Scheduler, TaskError};
/// let pool = keyway::Pool::new().unwrap();
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let scheduler = Scheduler::builder(&pool)
///     .interval(Duration::from_millis(10))
///     .executor("paused", ExecutorConfig::with_tps(0.0).timeout(Duration::from_millis(5)))
///     .timed_out_hook(move |t| log.lock().unwrap().push((t.executor().to_owned(), t.priority())))
///     .build()
///     .unwrap();
/// let handle = scheduler.schedule("paused", Duration::ZERO, || ()).unwrap();
/// assert!(matches!(handle.join(), Err(TaskError::TimedOut)));
/// assert_eq!(*seen.lock().unwrap(), vec![("paused".to_owned(), 0)]);
/// ```
#[derive(Debug, Clone)]
pub struct TimedOutTask {
    pub(crate) executor: Arc<str>,
    pub(crate) due: Option<Instant>,
    pub(crate) priority: i64,
}

impl TimedOutTask {
    /// The executor's name.
    ///
    /// See [`TimedOutTask`]'s example.
    pub fn executor(&self) -> &str {
        &self.executor
    }

    /// When the task was due.
    ///
    /// See [`TimedOutTask`]'s example.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// The task's priority.
    ///
    /// See [`TimedOutTask`]'s example.
    pub fn priority(&self) -> i64 {
        self.priority
    }
}
