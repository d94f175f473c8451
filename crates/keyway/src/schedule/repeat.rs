//! Repeating tasks: fixed rate and fixed delay, anywhere on the pool or in a context's lane.

use std::hash::Hash;
use std::time::Duration;

use super::config::Timing;
use super::entry::Entry;
use super::error::ScheduleError;
use super::job_kinds::{Anywhere, InContext, Place, Repeat, Repeating};
use super::scheduled_job::InlineJob;
use super::scheduler::Scheduler;
use crate::task::TaskHandle;

impl Scheduler {
    /// Runs `f` repeatedly: first at `first`, then every `period` after the previous *due*
    /// time (fixed rate). Each run is subject to the executor's limit, priority and timeout.
    ///
    /// The returned handle never has a value: it ends with
    /// [`TaskError::Cancelled`](crate::TaskError::Cancelled) once cancelled,
    /// `Panicked` if a run panicked, `TimedOut` if a run timed out, `Rejected` at shutdown.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("ticks", ExecutorConfig::unlimited())
    ///     .build()
    ///     .unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let runs = Arc::new(AtomicU32::new(0));
    /// let counter = runs.clone();
    /// let ticker = scheduler
    ///     .schedule_at_fixed_rate("ticks", Timing::after(Duration::ZERO), Duration::from_millis(10), move || {
    ///         if counter.fetch_add(1, Ordering::SeqCst) == 2 { tx.send(()).unwrap(); }
    ///     })
    ///     .unwrap();
    /// rx.recv().unwrap(); // three runs
    /// assert!(ticker.cancel());
    /// assert!(matches!(ticker.join(), Err(keyway::TaskError::Cancelled)));
    /// ```
    pub fn schedule_at_fixed_rate<F>(
        &self,
        executor: &str,
        first: Timing,
        period: Duration,
        f: F,
    ) -> Result<TaskHandle<()>, ScheduleError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        self.repeat(executor, first, period, Anywhere, f, Repeat::Rate)
    }

    /// Runs `f` repeatedly: first at `first`, then `delay` after each run finished (fixed
    /// delay). The handle behaves as for
    /// [`schedule_at_fixed_rate`](Scheduler::schedule_at_fixed_rate).
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("polls", ExecutorConfig::unlimited())
    ///     .build()
    ///     .unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let poller = scheduler
    ///     .schedule_with_fixed_delay("polls", Timing::after(Duration::ZERO), Duration::from_millis(5), move || {
    ///         let _ = tx.send(());
    ///     })
    ///     .unwrap();
    /// rx.recv().unwrap();
    /// rx.recv().unwrap();
    /// poller.cancel();
    /// ```
    pub fn schedule_with_fixed_delay<F>(
        &self,
        executor: &str,
        first: Timing,
        delay: Duration,
        f: F,
    ) -> Result<TaskHandle<()>, ScheduleError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        self.repeat(executor, first, delay, Anywhere, f, Repeat::Delay)
    }

    /// Like [`schedule_at_fixed_rate`](Scheduler::schedule_at_fixed_rate), but every run is
    /// a sequential task of context `ctx` (see
    /// [`schedule_sequential`](Scheduler::schedule_sequential)): it runs in order with the
    /// context's other tasks, one at a time.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("ticks", ExecutorConfig::unlimited())
    ///     .build()
    ///     .unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let ticker = scheduler
    ///     .schedule_sequential_at_fixed_rate("ticks", Timing::after(Duration::ZERO), Duration::from_millis(10), "account-1", move || {
    ///         let _ = tx.send(());
    ///     })
    ///     .unwrap();
    /// rx.recv().unwrap();
    /// rx.recv().unwrap();
    /// ticker.cancel();
    /// ```
    pub fn schedule_sequential_at_fixed_rate<K, F>(
        &self,
        executor: &str,
        first: Timing,
        period: Duration,
        ctx: K,
        f: F,
    ) -> Result<TaskHandle<()>, ScheduleError<F>>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        F: FnMut() + Send + 'static,
    {
        self.repeat(
            executor,
            first,
            period,
            InContext::new(ctx),
            f,
            Repeat::Rate,
        )
    }

    /// Like [`schedule_with_fixed_delay`](Scheduler::schedule_with_fixed_delay), but every
    /// run is a sequential task of context `ctx`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let scheduler = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("polls", ExecutorConfig::unlimited())
    ///     .build()
    ///     .unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let poller = scheduler
    ///     .schedule_sequential_with_fixed_delay("polls", Timing::after(Duration::ZERO), Duration::from_millis(5), 7u32, move || {
    ///         let _ = tx.send(());
    ///     })
    ///     .unwrap();
    /// rx.recv().unwrap();
    /// poller.cancel();
    /// ```
    pub fn schedule_sequential_with_fixed_delay<K, F>(
        &self,
        executor: &str,
        first: Timing,
        delay: Duration,
        ctx: K,
        f: F,
    ) -> Result<TaskHandle<()>, ScheduleError<F>>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        F: FnMut() + Send + 'static,
    {
        self.repeat(
            executor,
            first,
            delay,
            InContext::new(ctx),
            f,
            Repeat::Delay,
        )
    }

    fn repeat<P, F>(
        &self,
        executor: &str,
        first: Timing,
        period: Duration,
        place: P,
        f: F,
        how: fn(u64) -> Repeat,
    ) -> Result<TaskHandle<()>, ScheduleError<F>>
    where
        P: Place,
        F: FnMut() + Send + 'static,
    {
        let Some(exec) = self.executor(executor) else {
            return Err(ScheduleError::UnknownExecutor(executor.to_owned(), f));
        };
        if period.is_zero() {
            return Err(ScheduleError::ZeroPeriod(f));
        }
        let Some(seq) = exec.admit() else {
            return Err(ScheduleError::Shutdown(f));
        };
        let period = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
        let due = self.due(first);
        let (handle, job) = Repeating::new(place, f, how(period), first.timeout);
        exec.push(Entry {
            job: InlineJob::new(Box::new(job)),
            due,
            deadline: exec.deadline(due, first.timeout),
            priority: first.priority,
            seq,
        });
        Ok(handle)
    }
}
