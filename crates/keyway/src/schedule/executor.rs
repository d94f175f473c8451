//! One named executor as every thread sees it: its settings, its buckets, its counters, and
//! the scheduler-wide pieces it needs (pool, clock, hooks, the driver to wake).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::sync::Unparker;
use parking_lot::{Condvar, Mutex};

use super::buckets::{Buckets, Placed};
use super::clock::{Clock, NEVER};
use super::config::{ExecutorConfig, PriorityOrder};
use super::entry::Entry;
use super::scheduled_job::{InlineJob, Unrun};
use super::stats::{Counters, IntervalReport, TimedOutTask};
use crate::face::Pool;
use crate::task::{Abandon, PanicReport};

pub(crate) type TimedOutHook = Arc<dyn Fn(&TimedOutTask) + Send + Sync>;
pub(crate) type IntervalHook = Arc<dyn Fn(&IntervalReport) + Send + Sync>;

/// What every executor of one scheduler shares.
pub(crate) struct Shared {
    pub(crate) clock: Clock,
    pub(crate) pool: Pool,
    /// Intake stopped (`shutdown`, `shutdown_now`, or the last handle dropped).
    pub(crate) closed: AtomicBool,
    /// `shutdown_now`: the driver hands back what has not been released instead of running it.
    pub(crate) stop_now: AtomicBool,
    /// `shutdown_now` was called on the driver's own thread: nobody takes what comes back,
    /// so it is dropped (handles say `Rejected`).
    pub(crate) drop_handed_back: AtomicBool,
    /// Nobody will resume a paused executor: the last `Scheduler` handle was dropped, or the
    /// pool is shutting down (`Pool::shutdown`, `shutdown_timeout`, the drop of its last
    /// handle). Once intake is closed too, the tasks of an executor paused at 0 TPS end
    /// `Rejected` instead of being waited for.
    pub(crate) pauses_end: AtomicBool,
    pub(crate) timed_out_hook: Option<TimedOutHook>,
    pub(crate) interval_hook: Option<IntervalHook>,
    pub(crate) driver: Unparker,
    /// Notified when the driver exits.
    pub(crate) exited: (Mutex<bool>, Condvar),
}

/// One named executor.
pub(crate) struct ExecCore {
    pub(crate) name: Arc<str>,
    pub(crate) shared: Arc<Shared>,
    /// The limit's bits (`f64`); infinity means no limit.
    tps: AtomicU64,
    timeout: Option<u64>,
    pub(crate) order: PriorityOrder,
    pub(crate) early: bool,
    pub(crate) buckets: Buckets,
    pub(crate) stats: Counters,
    /// Runs of repeating tasks put in the buckets so far (the driver sweeps them out at
    /// shutdown when this moved).
    pub(crate) repeats: AtomicU64,
    /// Tasks put in the buckets so far that are never due (`Duration::MAX`): the driver ends
    /// them at shutdown when this moved (they could never run).
    pub(crate) nevers: AtomicU64,
}

impl ExecCore {
    pub(crate) fn new(name: Arc<str>, config: &ExecutorConfig, shared: Arc<Shared>) -> Self {
        ExecCore {
            name,
            shared,
            tps: AtomicU64::new(config.tps.unwrap_or(f64::INFINITY).to_bits()),
            timeout: config
                .timeout
                .and_then(|t| u64::try_from(t.as_nanos()).ok()),
            order: config.order,
            early: config.early,
            buckets: Buckets::new(),
            stats: Counters::default(),
            repeats: AtomicU64::new(0),
            nevers: AtomicU64::new(0),
        }
    }

    /// The limit in tasks per second; `None` for no limit.
    pub(crate) fn tps(&self) -> Option<f64> {
        let tps = f64::from_bits(self.tps.load(Ordering::Acquire));
        tps.is_finite().then_some(tps)
    }

    pub(crate) fn set_tps(&self, tps: f64) {
        self.tps.store(tps.to_bits(), Ordering::Release);
    }

    /// Accepts a job due at `due` (ns since the epoch), or hands it back after shutdown.
    pub(crate) fn enqueue(
        &self,
        job: InlineJob,
        due: u64,
        timeout: Option<Duration>,
        priority: i64,
    ) -> Result<(), InlineJob> {
        match self.admit() {
            Some(seq) => {
                self.push(Entry {
                    job,
                    due,
                    deadline: self.deadline(due, timeout),
                    priority,
                    seq,
                });
                Ok(())
            }
            None => Err(job),
        }
    }

    /// Counts one task in, unless the scheduler is shut down, and numbers it in scheduling
    /// order. Every admitted task must then be [`push`](ExecCore::push)ed: the driver does not
    /// exit while one is missing.
    #[inline]
    pub(crate) fn admit(&self) -> Option<u64> {
        let seq = self.stats.scheduled();
        if self.shared.closed.load(Ordering::SeqCst) {
            self.stats.unscheduled();
            return None;
        }
        Some(seq)
    }

    /// Puts an admitted task in its bucket (or the late list).
    #[inline]
    pub(crate) fn push(&self, entry: Entry) {
        let repeating = entry.job.is_repeating();
        let due = entry.due;
        let k = self.shared.clock.interval_of(due);
        let placed = self.buckets.push(k, entry);
        if repeating {
            // After the push: a sweep that sees the count also finds the entry.
            self.repeats.fetch_add(1, Ordering::SeqCst);
        }
        if due == NEVER {
            // As for `repeats`.
            self.nevers.fetch_add(1, Ordering::SeqCst);
        }
        if placed == Placed::LateFirst {
            self.shared.driver.unpark();
        }
    }

    /// The deadline of a task due at `due`: `due` plus its own timeout if it has one, else
    /// plus the executor's ([`NEVER`]: none, or one that overflows).
    pub(crate) fn deadline(&self, due: u64, own: Option<Duration>) -> u64 {
        let timeout = match own {
            Some(t) => u64::try_from(t.as_nanos()).ok(),
            None => self.timeout,
        };
        match timeout.and_then(|t| due.checked_add(t)) {
            Some(deadline) => deadline,
            None => NEVER,
        }
    }

    /// True if a task with this deadline can no longer start in time.
    pub(crate) fn timed_out(&self, deadline: u64) -> bool {
        deadline != NEVER && self.shared.clock.now() > deadline
    }

    /// Claims a job that is to end unrun (rejected or timed out) from its handle, so that the
    /// check "was it cancelled?" and the end are one step against a racing `cancel()`: a cancel
    /// either lands first — the job ends here, counted cancelled as its handle says, and `None`
    /// comes back — or returns false. The caller counts the job it gets back, then abandons it.
    fn claim_unrun<J: Unrun>(&self, job: J) -> Option<J> {
        if job.claim() {
            return Some(job);
        }
        self.stats.cancelled();
        self.contain(move || drop(job));
        None
    }

    /// Ends a job that will not run as rejected: counted so, then its handle told `Rejected`
    /// (whoever waits on the handle sees the count); counted cancelled instead if its handle
    /// was cancelled first ([`claim_unrun`](ExecCore::claim_unrun)). Dropping the job is user
    /// code: contained.
    pub(crate) fn reject<J: Unrun>(&self, job: J) {
        if let Some(job) = self.claim_unrun(job) {
            self.stats.rejected();
            self.contain(|| job.abandon(Abandon::Rejected));
        }
    }

    /// Ends a job as timed out: its handle says so, the hook sees it, it is counted.
    ///
    /// The hook and the counters come first, so that whoever waits on the handle sees them.
    /// A job whose handle was cancelled meanwhile (queued on the pool) is counted cancelled,
    /// as its handle says; one cancelled later (in the hook, say) stays timed out, the cancel
    /// returning false ([`claim_unrun`](ExecCore::claim_unrun)).
    pub(crate) fn time_out(&self, job: InlineJob, due: u64, priority: i64) {
        let Some(job) = self.claim_unrun(job) else {
            return;
        };
        self.stats.timed_out();
        if let Some(hook) = &self.shared.timed_out_hook {
            let task = TimedOutTask {
                executor: self.name.clone(),
                due: self.shared.clock.instant(due),
                priority,
            };
            self.contain(|| hook(&task));
        }
        self.contain(|| job.abandon(Abandon::TimedOut));
    }

    /// A task panicked: counted, and reported to the pool's panic hook.
    pub(crate) fn panicked(&self, report: PanicReport) {
        self.stats.panicked();
        self.shared.pool.registry().report_panic(report);
    }

    /// Runs user code (a drop, a hook) so that its panic cannot unwind into the scheduler.
    pub(crate) fn contain(&self, f: impl FnOnce()) {
        if catch_unwind(AssertUnwindSafe(f)).is_err() {
            tracing::error!(
                executor = &*self.name,
                "keyway scheduler: user code panicked"
            );
        }
    }

    /// How many tasks this process may release in one interval, before fractions carry.
    pub(crate) fn budget(&self, share: f64, interval: Duration) -> f64 {
        share * interval.as_secs_f64()
    }
}
