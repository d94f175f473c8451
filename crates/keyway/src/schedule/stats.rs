//! What an executor reports: counts of outcomes, one report per interval, and each task that
//! timed out.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::time::Instant;

/// A snapshot of one executor's counts, from [`Scheduler::stats`](crate::Scheduler::stats).
///
/// Every scheduled task ends exactly one way, so once nothing is pending
/// `ran + panicked + cancelled + timed_out + rejected == scheduled`. A task is counted just
/// after its handle learns its outcome (a timed-out or rejected one just before), in the class
/// the handle says: a task cancelled through its handle is counted `cancelled` however it was
/// then dropped, and a `cancel()` that returns false came too late to change the class.
///
/// ```
/// use std::time::Duration;
/// use keyway::{ExecutorConfig, Scheduler};
/// let pool = keyway::Pool::new().unwrap();
/// let scheduler = Scheduler::builder(&pool)
///     .interval(Duration::from_millis(10))
///     .executor("jobs", ExecutorConfig::unlimited())
///     .build()
///     .unwrap();
/// scheduler.schedule("jobs", Duration::ZERO, || ()).unwrap().join().unwrap();
/// scheduler.shutdown(); // waits until every task has ended and been counted
/// let stats = scheduler.stats("jobs").unwrap();
/// assert_eq!((stats.scheduled, stats.ran), (1, 1));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecutorStats {
    /// Tasks scheduled (each run of a repeating task counts once).
    pub scheduled: u64,
    /// Tasks that ran to completion.
    pub ran: u64,
    /// Tasks that panicked.
    pub panicked: u64,
    /// Tasks cancelled through their handle before they started.
    pub cancelled: u64,
    /// Tasks whose timeout passed before they could start.
    pub timed_out: u64,
    /// Tasks the pool refused (it was shut down) or handed back at `shutdown_now`.
    pub rejected: u64,
    /// Tasks accepted and not yet ended one of the ways above.
    pub pending: u64,
    /// Tasks that were due in the last interval (carried-over ones included).
    pub due: u64,
    /// Tasks over the limit at the end of the last interval, carried over to the next.
    pub carried_over: u64,
}

/// What one executor did in one interval, given to the hook set with
/// [`SchedulerBuilder::interval_hook`](crate::SchedulerBuilder::interval_hook).
///
/// ```
/// use keyway::IntervalReport;
/// fn ran_the_best(r: &IntervalReport) -> bool {
///     // With the default order (highest first), nothing carried over beats what ran.
///     match (r.worst_dispatched, r.best_carried_over) {
///         (Some(ran), Some(waiting)) => ran >= waiting,
///         _ => true,
///     }
/// }
/// # let _ = ran_the_best;
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IntervalReport {
    /// The executor's name.
    pub executor: std::sync::Arc<str>,
    /// The interval's number (counted from the scheduler's start).
    pub interval: u64,
    /// How many tasks this process could release in the interval (`None`: no limit).
    pub quota: Option<u64>,
    /// How many tasks were released to the pool in the interval.
    pub dispatched: u64,
    /// How many tasks were left over for the next interval.
    pub carried_over: u64,
    /// How many tasks timed out while the interval ran.
    pub timed_out: u64,
    /// The priority of the released task that came last in the executor's order.
    pub worst_dispatched: Option<i64>,
    /// The priority of the carried-over task that comes first in the executor's order.
    pub best_carried_over: Option<i64>,
}

/// The live counters behind [`ExecutorStats`].
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

#[derive(Default)]
pub(crate) struct Counters {
    scheduled: AtomicU64,
    ran: AtomicU64,
    panicked: AtomicU64,
    cancelled: AtomicU64,
    timed_out: AtomicU64,
    rejected: AtomicU64,
    pub(crate) due: AtomicU64,
    pub(crate) carried_over: AtomicU64,
    /// Handed to the pool by the driver.
    released: AtomicU64,
    /// Ended by the driver itself (cancelled or timed out before release, handed back).
    ended_unreleased: AtomicU64,
}

impl Counters {
    /// Counts a task in before the caller checks for shutdown (SeqCst, paired with the
    /// shutdown flag: either the driver sees the count or the caller sees the flag).
    /// Returns the count before (a number in scheduling order).
    #[inline]
    pub(crate) fn scheduled(&self) -> u64 {
        self.scheduled.fetch_add(1, SeqCst)
    }
    pub(crate) fn unscheduled(&self) {
        self.scheduled.fetch_sub(1, SeqCst);
    }
    pub(crate) fn ran(&self) {
        self.ran.fetch_add(1, Relaxed);
    }
    pub(crate) fn panicked(&self) {
        self.panicked.fetch_add(1, Relaxed);
    }
    pub(crate) fn cancelled(&self) {
        self.cancelled.fetch_add(1, Relaxed);
    }
    pub(crate) fn timed_out(&self) {
        self.timed_out.fetch_add(1, Relaxed);
    }
    pub(crate) fn rejected(&self) {
        self.rejected.fetch_add(1, Relaxed);
    }

    pub(crate) fn released(&self) {
        self.released.fetch_add(1, SeqCst);
    }
    pub(crate) fn ended_unreleased(&self) {
        self.ended_unreleased.fetch_add(1, SeqCst);
    }

    /// Tasks accepted that the driver has neither released nor ended.
    pub(crate) fn held(&self) -> u64 {
        let out = self.released.load(SeqCst) + self.ended_unreleased.load(SeqCst);
        self.scheduled.load(SeqCst).saturating_sub(out)
    }

    /// Tasks accepted and not yet ended.
    pub(crate) fn pending(&self) -> u64 {
        let ended = self.ended();
        self.scheduled.load(SeqCst).saturating_sub(ended)
    }

    fn ended(&self) -> u64 {
        self.ran.load(Relaxed)
            + self.panicked.load(Relaxed)
            + self.cancelled.load(Relaxed)
            + self.timed_out.load(Relaxed)
            + self.rejected.load(Relaxed)
    }

    pub(crate) fn snapshot(&self) -> ExecutorStats {
        // Ends first, so that `pending` never underflows in a racing snapshot.
        let mut s = ExecutorStats {
            ran: self.ran.load(Relaxed),
            panicked: self.panicked.load(Relaxed),
            cancelled: self.cancelled.load(Relaxed),
            timed_out: self.timed_out.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            due: self.due.load(Relaxed),
            carried_over: self.carried_over.load(Relaxed),
            ..ExecutorStats::default()
        };
        s.scheduled = self.scheduled.load(Relaxed);
        s.pending = s
            .scheduled
            .saturating_sub(s.ran + s.panicked + s.cancelled + s.timed_out + s.rejected);
        s
    }
}
