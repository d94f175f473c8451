//! Rate-limited scheduling: tasks scheduled for a time, run at no more than a limit
//! per second per named executor, best first when more are due than the limit allows, expired
//! ones timed out.
//!
//! The top layer, beside `strategy` and `sequencer`. It hands released tasks to the pool
//! through the pool's own methods (`execute`, `execute_sequential`, waiting for room on a full
//! pool), as a user would; but it is not built on the public API alone. It also uses, from the
//! layers below:
//!
//! * `face`: a pool handle that does not count as the user's (`Pool::internal`), and the
//!   attachment (`Pool::attach`, the `Attached` trait) through which the pool's shutdowns shut
//!   the scheduler down first;
//! * `engine`, through the pool's registry (`Pool::registry`), for two things: reporting a
//!   scheduled task's panic to the pool's panic hook, and asking whether the calling thread is
//!   one of the pool's (which cannot wait for a shutdown);
//! * `task`: handles and outcomes (`TaskHandle`, `PendingTask`, how a task is abandoned), and
//!   the inline task store that a scheduled job lives in (no allocation per small task).
//!
//! The files, each using only files below it in this list (one exception, at the end):
//!
//! * `builder` — how a [`Scheduler`] is configured, and `Scheduler::builder`;
//! * `repeat` — the scheduler's repeating tasks (fixed rate, fixed delay);
//! * `lifeline` — the scheduler as its pool sees it: shut down before the pool, waited for by
//!   the last user-held handle of either;
//! * `scheduler` — the public [`Scheduler`]: schedule, change limits, read counts, shut down;
//! * `timer_thread` — the scheduler's one thread (the `TimerThread`), which starts intervals and
//!   releases tasks through them;
//! * `interval` — one executor's intervals as the timer thread runs them (select, spread,
//!   carry);
//! * `spread` — a limited executor's releases spread evenly over its interval;
//! * `pace` — a limited executor's pace: one release per `1 / rate`, so that no second sees a
//!   burst;
//! * `batch` — released tasks handed to the pool in batches when many are due at once;
//! * `job_kinds` — the kinds of job (one-shot with or without a handle, repeating) and where
//!   each runs when released (the pool or a context's lane);
//! * `executor` — one executor as every thread sees it (settings, buckets, counters);
//! * `buckets` — sharded interval buckets: where tasks wait (no global lock, no timer per task);
//! * `entry` — one waiting task as a bucket holds it, and the order of release;
//! * `scheduled_job` — the `ScheduledJob` trait, and a job stored in its entry, type-erased
//!   (no allocation per small task; the store itself is `task::inline`);
//! * `stats`, `config`, `error` — what the scheduler reports, an executor's settings and a
//!   task's timing and priority, and the errors;
//! * `clock`, `coordinator` — monotonic time cut into intervals; how a process learns its share
//!   of a limit shared by a cluster.
//!
//! The exception: `scheduled_job` names `executor`'s `ExecCore`, because a job runs against
//! its executor (`ScheduledJob::dispatch` takes it) while the executor holds jobs (in its
//! buckets' entries). That is a recursion of the types themselves, not of the files.

mod batch;
mod buckets;
mod builder;
mod clock;
mod config;
mod coordinator;
mod entry;
mod error;
mod executor;
mod interval;
mod job_kinds;
mod lifeline;
mod pace;
mod repeat;
mod scheduled_job;
mod scheduler;
mod spread;
mod stats;
mod timer_thread;

#[cfg(test)]
mod test;

pub use builder::SchedulerBuilder;
pub use config::{ExecutorConfig, PriorityOrder, Timing};
pub use coordinator::{Coordinator, LocalCoordinator};
pub use error::{ConfigError, ScheduleError};
pub use scheduler::Scheduler;
pub use stats::{ExecutorStats, IntervalReport, TimedOutTask};
