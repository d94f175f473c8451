//! `Scheduler`: schedule, repeat, change limits, read statistics, shut down.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::{check_tps, Due, Timing};
use super::coordinator::Coordinator;
use super::entry::Entry;
use super::error::{ConfigError, ScheduleError};
use super::executor::{ExecCore, Shared};
use super::job_kinds::{Anywhere, Detached, InContext, Once, Place};
use super::lifeline::Lifeline;
use super::scheduled_job::InlineJob;
use super::stats::ExecutorStats;
use crate::face::Pool;
use crate::task::{PendingTask, TaskHandle};

/// A rate-limited scheduler on a keyway [`Pool`](crate::Pool): tasks scheduled for a time run no faster
/// than each named executor's limit, best first when more are due than the limit allows.
///
/// Time is cut into intervals (default 1 s). At the start of each interval an executor takes
/// the tasks due in it (and those carried over), and admits as many as its limit allows for
/// one interval, in its [`PriorityOrder`](crate::PriorityOrder); the rest carry over and
/// compete again in the next interval. A task scheduled for an interval already running
/// competes with the admitted tasks not yet released for what is left of the quota. A limited
/// executor releases its admitted tasks best first, spread evenly over the interval (over what
/// is left of it for late arrivals) and at least `1 / limit` apart while it can, and never
/// more than the limit (rounded up) in any sliding second (see "Rate limits: what is
/// guaranteed" in the crate docs); an unlimited one spreads each interval's tasks over it.
/// A task may start before its due time, by less than one interval, unless the executor
/// forbids early dispatch. A task whose timeout passes before it starts is not
/// run: its handle says [`TaskError::TimedOut`](crate::TaskError::TimedOut) and the
/// timed-out hook sees it.
///
/// On a pool with a [`capacity`](crate::PoolBuilder::capacity), a released task that finds the
/// pool full waits for room (the scheduler's thread waits with it): a full pool is
/// backpressure, not a refusal. A task the pool refuses because it was shut down, or hands back
/// from [`Pool::shutdown_now`](crate::Pool::shutdown_now) and that is then dropped, ends
/// `Rejected` and is counted so; one whose handle was cancelled first stays `Cancelled`, and is
/// counted so.
///
/// `Scheduler` is a cheap handle: clone it to share it. It keeps its pool open. Dropping the
/// last handle shuts the scheduler down (as [`shutdown`](Scheduler::shutdown)): if it was also
/// the last handle you held of the pool, the drop waits for every task of both (due or not
/// yet due), as the pool's drop does; otherwise the pool's last drop (or
/// [`Pool::shutdown`](crate::Pool::shutdown)) waits for it. The tasks of an executor paused
/// at 0 TPS then end `Rejected`, as nobody can resume it; so do they when the pool is shut
/// down. See "Shutting down" in the crate docs.
///
/// ```
/// use std::time::Duration;
/// use keyway::{ExecutorConfig, Scheduler};
/// let pool = keyway::Pool::new().unwrap();
/// let scheduler = Scheduler::builder(&pool)
///     .interval(Duration::from_millis(50))
///     .executor("emails", ExecutorConfig::with_tps(100.0))
///     .build()
///     .unwrap();
/// let sent = scheduler.schedule("emails", Duration::from_millis(20), || "sent").unwrap();
/// assert_eq!(sent.join().unwrap(), "sent");
/// scheduler.shutdown();
/// ```
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) shared: Arc<Shared>,
    pub(crate) by_name: HashMap<String, Arc<ExecCore>>,
    /// The same executors, searched by a scan when there are few (hashing the name with the
    /// map's SipHash cost 240 instructions per schedule, a third of it).
    pub(crate) few: Option<Box<[Arc<ExecCore>]>>,
    pub(crate) coordinator: Arc<dyn Coordinator>,
    pub(crate) life: Arc<Lifeline>,
    /// A user-held handle of the pool, for as long as the user holds this scheduler: the last
    /// of the user's handles, of either, shuts both down and waits (see "Shutting down" in the
    /// crate docs). Dropped after `Inner`'s drop has closed the scheduler.
    pub(crate) _user: Pool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shared.pauses_end.store(true, Ordering::SeqCst);
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.driver.unpark();
    }
}

impl Scheduler {
    pub(crate) fn from_inner(inner: Inner) -> Self {
        Scheduler {
            inner: Arc::new(inner),
        }
    }

    #[inline]
    pub(super) fn executor(&self, name: &str) -> Option<&Arc<ExecCore>> {
        match &self.inner.few {
            Some(few) => few.iter().find(|e| *e.name == *name),
            None => self.inner.by_name.get(name),
        }
    }

    #[inline]
    pub(super) fn due(&self, timing: Timing) -> u64 {
        let clock = &self.inner.shared.clock;
        match timing.due {
            Due::After(delay) => clock.after(clock.now(), delay),
            Due::At(instant) => clock.at(instant),
        }
    }

    /// Runs `f` on executor `executor` once `delay` has passed (subject to its limit).
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
    /// let handle = scheduler.schedule("jobs", Duration::from_millis(5), || 6 * 7).unwrap();
    /// assert_eq!(handle.join().unwrap(), 42);
    /// ```
    pub fn schedule<F, T>(
        &self,
        executor: &str,
        delay: Duration,
        f: F,
    ) -> Result<TaskHandle<T>, ScheduleError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.schedule_with(executor, Timing::after(delay), f)
    }

    /// Runs `f` on executor `executor` at `instant` (subject to its limit).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use keyway::{ExecutorConfig, Scheduler};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("jobs", ExecutorConfig::unlimited().early_dispatch(false))
    ///     .build()
    ///     .unwrap();
    /// let at = Instant::now() + Duration::from_millis(20);
    /// let handle = scheduler.schedule_at("jobs", at, Instant::now).unwrap();
    /// assert!(handle.join().unwrap() >= at); // never early: the executor forbids it
    /// ```
    pub fn schedule_at<F, T>(
        &self,
        executor: &str,
        instant: Instant,
        f: F,
    ) -> Result<TaskHandle<T>, ScheduleError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.schedule_with(executor, Timing::at(instant), f)
    }

    /// Runs `f` on executor `executor` at the time and with the priority `timing` gives.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("jobs", ExecutorConfig::with_tps(1000.0))
    ///     .build()
    ///     .unwrap();
    /// let urgent = scheduler
    ///     .schedule_with("jobs", Timing::after(Duration::ZERO).priority(9), || "first")
    ///     .unwrap();
    /// assert_eq!(urgent.join().unwrap(), "first");
    /// ```
    pub fn schedule_with<F, T>(
        &self,
        executor: &str,
        timing: Timing,
        f: F,
    ) -> Result<TaskHandle<T>, ScheduleError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.place_once(executor, timing, Anywhere, f)
    }

    /// Like [`schedule_with`](Scheduler::schedule_with), but when due the task runs as a
    /// sequential task of context `ctx` (see
    /// [`Pool::execute_sequential`](crate::Pool::execute_sequential)): tasks of one context run
    /// one at a time, in due order (ties: in the order they were scheduled), whatever the
    /// interval. Two exceptions: among tasks of different priorities competing for a limit,
    /// the better goes first; and a task scheduled for a time already passed (or, on an
    /// executor that releases early, for the interval already running) can only follow the
    /// tasks of its context released before it arrived.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("jobs", ExecutorConfig::unlimited().early_dispatch(false))
    ///     .build()
    ///     .unwrap();
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let handles: Vec<_> = (0..3u64)
    ///     .map(|i| {
    ///         let log = log.clone();
    ///         let at = Timing::after(Duration::from_millis(15 * i));
    ///         scheduler.schedule_sequential("jobs", at, "account-1", move || log.lock().unwrap().push(i)).unwrap()
    ///     })
    ///     .collect();
    /// for h in handles { h.join().unwrap(); }
    /// assert_eq!(*log.lock().unwrap(), vec![0, 1, 2]);
    /// ```
    pub fn schedule_sequential<K, F, T>(
        &self,
        executor: &str,
        timing: Timing,
        ctx: K,
        f: F,
    ) -> Result<TaskHandle<T>, ScheduleError<F>>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.place_once(executor, timing, InContext::new(ctx), f)
    }

    fn place_once<P, F, T>(
        &self,
        executor: &str,
        timing: Timing,
        place: P,
        f: F,
    ) -> Result<TaskHandle<T>, ScheduleError<F>>
    where
        P: Place,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let Some(exec) = self.executor(executor) else {
            return Err(ScheduleError::UnknownExecutor(executor.to_owned(), f));
        };
        let Some(seq) = exec.admit() else {
            return Err(ScheduleError::Shutdown(f));
        };
        let due = self.due(timing);
        let (handle, job) = Once::new(place, f);
        exec.push(Entry {
            job: InlineJob::new(job),
            due,
            deadline: exec.deadline(due, timing.timeout),
            priority: timing.priority,
            seq,
        });
        Ok(handle)
    }

    /// Like [`schedule_with`](Scheduler::schedule_with), without a handle: the cheapest way to
    /// schedule a task whose result nobody waits for (no allocation beyond the task itself).
    /// Its outcome is only counted in [`stats`](Scheduler::stats) (and a panic goes to the
    /// pool's panic hook).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("jobs", ExecutorConfig::unlimited())
    ///     .build()
    ///     .unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// scheduler.execute_with("jobs", Timing::after(Duration::from_millis(5)), move || tx.send(1).unwrap()).unwrap();
    /// assert_eq!(rx.recv().unwrap(), 1);
    /// ```
    pub fn execute_with<F>(
        &self,
        executor: &str,
        timing: Timing,
        f: F,
    ) -> Result<(), ScheduleError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        let Some(exec) = self.executor(executor) else {
            return Err(ScheduleError::UnknownExecutor(executor.to_owned(), f));
        };
        let Some(seq) = exec.admit() else {
            return Err(ScheduleError::Shutdown(f));
        };
        let due = self.due(timing);
        exec.push(Entry {
            job: InlineJob::new(Detached::new(Anywhere, f)),
            due,
            deadline: exec.deadline(due, timing.timeout),
            priority: timing.priority,
            seq,
        });
        Ok(())
    }

    /// Changes executor `executor`'s limit while it runs, from its next interval on (`0.0`
    /// pauses it: its tasks wait, and time out if they have a timeout). The spacing of the new
    /// limit applies then too: raised from 0.2 to 100 per second, the next task goes at the
    /// next interval, not the old 5 s after the last one.
    ///
    /// ```
    /// use keyway::{ConfigError, ExecutorConfig, Scheduler};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .executor("emails", ExecutorConfig::with_tps(10.0))
    ///     .build()
    ///     .unwrap();
    /// scheduler.set_tps("emails", 0.0).unwrap(); // paused
    /// scheduler.set_tps("emails", 25.0).unwrap(); // resumed, faster
    /// assert!(matches!(scheduler.set_tps("emails", -1.0), Err(ConfigError::InvalidTps { .. })));
    /// assert!(matches!(scheduler.set_tps("sms", 1.0), Err(ConfigError::UnknownExecutor(_))));
    /// ```
    pub fn set_tps(&self, executor: &str, tps: f64) -> Result<(), ConfigError> {
        let exec = self
            .inner
            .by_name
            .get(executor)
            .ok_or_else(|| ConfigError::UnknownExecutor(executor.to_owned()))?;
        check_tps(executor, tps)?;
        exec.set_tps(tps);
        let coordinator = &self.inner.coordinator;
        exec.contain(|| coordinator.join(executor, tps));
        self.inner.shared.driver.unpark();
        Ok(())
    }

    /// The limit of executor `executor` (`None`: no limit).
    ///
    /// ```
    /// use keyway::{ExecutorConfig, Scheduler};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .executor("emails", ExecutorConfig::with_tps(10.0))
    ///     .executor("reports", ExecutorConfig::unlimited())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(scheduler.tps("emails").unwrap(), Some(10.0));
    /// assert_eq!(scheduler.tps("reports").unwrap(), None);
    /// assert_eq!(scheduler.interval(), std::time::Duration::from_secs(1)); // the default
    /// assert!(!scheduler.is_shutdown());
    /// ```
    pub fn tps(&self, executor: &str) -> Result<Option<f64>, ConfigError> {
        self.inner
            .by_name
            .get(executor)
            .map(|e| e.tps())
            .ok_or_else(|| ConfigError::UnknownExecutor(executor.to_owned()))
    }

    /// Executor `executor`'s counts (see [`ExecutorStats`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = keyway::Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("jobs", keyway::ExecutorConfig::unlimited())
    ///     .build()
    ///     .unwrap();
    /// s.schedule("jobs", Duration::ZERO, || ()).unwrap().join().unwrap();
    /// s.shutdown();
    /// let stats = s.stats("jobs").unwrap();
    /// assert_eq!((stats.scheduled, stats.ran), (1, 1));
    /// assert!(s.stats("nobody").is_err());
    /// ```
    pub fn stats(&self, executor: &str) -> Result<ExecutorStats, ConfigError> {
        self.inner
            .by_name
            .get(executor)
            .map(|e| e.stats.snapshot())
            .ok_or_else(|| ConfigError::UnknownExecutor(executor.to_owned()))
    }

    /// The interval's length.
    ///
    /// See the example on [`tps`](Scheduler::tps).
    pub fn interval(&self) -> Duration {
        self.inner.shared.clock.interval()
    }

    /// Stops intake (later tasks are refused with [`ScheduleError::Shutdown`]) and ends
    /// repeating tasks (their handles say `Rejected`); every one-shot task already scheduled
    /// still runs when due, under its executor's limit. Waits until they have all ended and the
    /// scheduler's thread has exited, unless called on the scheduler's own thread (a hook) or
    /// on a thread of the pool (from a scheduled task), where it returns at once. Calling it
    /// again is harmless.
    ///
    /// A task that is never due (scheduled [`Duration::MAX`] ahead) could never run: it ends
    /// `Rejected` instead of being waited for. A task of an executor paused at 0 TPS (with no
    /// timeout) is waited for until [`set_tps`](Scheduler::set_tps) resumes the executor, or
    /// until the pool shuts down ([`Pool::shutdown`](crate::Pool::shutdown),
    /// [`shutdown_timeout`](crate::Pool::shutdown_timeout), or the drop of the last handle of
    /// either), which ends it `Rejected`: a shutdown the pool starts does not wait for a pause
    /// that no one will lift. [`shutdown_now`](Scheduler::shutdown_now) hands such tasks back
    /// instead.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, ScheduleError};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("jobs", ExecutorConfig::unlimited())
    ///     .build()
    ///     .unwrap();
    /// let late = scheduler.schedule("jobs", Duration::from_millis(30), || "still runs").unwrap();
    /// scheduler.shutdown();
    /// assert_eq!(late.join().unwrap(), "still runs");
    /// assert!(matches!(scheduler.schedule("jobs", Duration::ZERO, || ()), Err(ScheduleError::Shutdown(_))));
    /// ```
    pub fn shutdown(&self) {
        let life = &self.inner.life;
        life.close();
        if life.may_wait() {
            life.wait_for_driver(None);
            life.wait_for_pending();
        }
    }

    /// Stops intake and hands back every one-shot task that was not yet released to the pool
    /// (repeating tasks end; their handles say `Rejected`). Tasks already released still run.
    /// Called on the scheduler's own thread (a hook) it returns nothing: the tasks are then
    /// dropped, their handles saying `Rejected`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .executor("jobs", ExecutorConfig::unlimited())
    ///     .build()
    ///     .unwrap();
    /// let handle = scheduler.schedule("jobs", Duration::from_secs(3600), || 7).unwrap();
    /// let pending = scheduler.shutdown_now();
    /// assert_eq!(pending.len(), 1);
    /// for task in pending { task.run().unwrap(); } // run here, now
    /// assert_eq!(handle.join().unwrap(), 7);
    /// ```
    #[must_use = "dropping the handed-back tasks rejects them; run or keep them"]
    pub fn shutdown_now(&self) -> Vec<PendingTask> {
        self.inner.life.stop_now()
    }

    /// True once [`shutdown`](Scheduler::shutdown) or
    /// [`shutdown_now`](Scheduler::shutdown_now) was called.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = keyway::Scheduler::builder(&pool).build().unwrap();
    /// assert!(!s.is_shutdown());
    /// s.shutdown();
    /// assert!(s.is_shutdown());
    /// ```
    pub fn is_shutdown(&self) -> bool {
        self.inner.shared.closed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
impl Scheduler {
    /// Tests: wakes the scheduler's thread (to see a time a test set).
    pub(crate) fn wake_driver(&self) {
        self.inner.shared.driver.unpark();
    }
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.inner.by_name.keys().collect();
        names.sort();
        f.debug_struct("Scheduler")
            .field("interval", &self.interval())
            .field("executors", &names)
            .field("shutdown", &self.is_shutdown())
            .finish()
    }
}
