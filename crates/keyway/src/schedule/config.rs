//! What an executor is configured with, and when (and how urgently) one task is due.

use std::time::{Duration, Instant};

use super::error::ConfigError;

/// Which tasks run first when more are due in an interval than the limit allows.
///
/// Ties are broken by the earlier due time.
///
/// ```
/// use keyway::{ExecutorConfig, PriorityOrder};
/// let config = ExecutorConfig::with_tps(5.0).order(PriorityOrder::LowestFirst);
/// # let _ = config;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PriorityOrder {
    /// The highest [`Timing::priority`] runs first (the default).
    #[default]
    HighestFirst,
    /// The lowest [`Timing::priority`] runs first.
    LowestFirst,
}

/// The settings of one named executor of a [`Scheduler`](crate::Scheduler).
///
/// ```
/// use std::time::Duration;
/// use keyway::ExecutorConfig;
/// let payments = ExecutorConfig::with_tps(500.0)
///     .timeout(Duration::from_secs(30)) // not run if it cannot start within 30 s of its time
///     .early_dispatch(false); // never before its time
/// # let _ = payments;
/// ```
#[derive(Debug, Clone)]
#[must_use = "an ExecutorConfig does nothing until given to `SchedulerBuilder::executor`"]
pub struct ExecutorConfig {
    pub(crate) tps: Option<f64>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) order: PriorityOrder,
    pub(crate) early: bool,
}

impl ExecutorConfig {
    /// An executor running at most `tps` tasks per second (`0.0` pauses it). The value is
    /// checked when the scheduler is built: negative, NaN or infinite values are refused.
    ///
    /// ```
    /// use keyway::{ExecutorConfig, Scheduler};
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = Scheduler::builder(&pool).executor("sms", ExecutorConfig::with_tps(20.0)).build().unwrap();
    /// assert_eq!(s.tps("sms").unwrap(), Some(20.0));
    /// # s.shutdown();
    /// for bad in [-1.0, f64::NAN, f64::INFINITY] {
    ///     assert!(Scheduler::builder(&pool).executor("sms", ExecutorConfig::with_tps(bad)).build().is_err());
    /// }
    /// ```
    pub fn with_tps(tps: f64) -> Self {
        ExecutorConfig {
            tps: Some(tps),
            ..Self::unlimited()
        }
    }

    /// An executor with no rate limit: every task runs in the interval it is due in.
    ///
    /// ```
    /// use keyway::{ExecutorConfig, Scheduler};
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = Scheduler::builder(&pool).executor("any", ExecutorConfig::unlimited()).build().unwrap();
    /// assert_eq!(s.tps("any").unwrap(), None);
    /// # s.shutdown();
    /// ```
    pub fn unlimited() -> Self {
        ExecutorConfig {
            tps: None,
            timeout: None,
            order: PriorityOrder::HighestFirst,
            early: true,
        }
    }

    /// A task not started within `timeout` of its due time is not run: its handle says
    /// [`TaskError::TimedOut`](crate::TaskError::TimedOut) and the scheduler's timed-out hook
    /// sees it. Default: no timeout. A timeout so long that it overflows means no timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, TaskError};
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     // Paused (0 per second): nothing starts, so the task times out.
    ///     .executor("paused", ExecutorConfig::with_tps(0.0).timeout(Duration::from_millis(5)))
    ///     .build()
    ///     .unwrap();
    /// let h = s.schedule("paused", Duration::ZERO, || ()).unwrap();
    /// assert!(matches!(h.join(), Err(TaskError::TimedOut)));
    /// let _ = ExecutorConfig::unlimited().timeout(Duration::MAX); // overflows: no timeout
    /// # s.shutdown();
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Which tasks run first when more are due than the limit allows (default
    /// [`PriorityOrder::HighestFirst`]).
    ///
    /// See [`PriorityOrder`]'s example.
    pub fn order(mut self, order: PriorityOrder) -> Self {
        self.order = order;
        self
    }

    /// Whether a task may start before its due time, by less than one interval (default
    /// `true`): the interval's tasks are then released from its start, spread over the
    /// interval. With `false` no task starts before its due time.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use keyway::{ExecutorConfig, Scheduler};
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("exact", ExecutorConfig::with_tps(100.0).early_dispatch(false))
    ///     .build()
    ///     .unwrap();
    /// let due = Instant::now() + Duration::from_millis(20);
    /// let started = s.schedule_at("exact", due, Instant::now).unwrap().join().unwrap();
    /// assert!(started >= due); // never before its time
    /// # s.shutdown();
    /// ```
    pub fn early_dispatch(mut self, allowed: bool) -> Self {
        self.early = allowed;
        self
    }
}

/// When a scheduled task is due, and its priority among the tasks due with it.
///
/// ```
/// use std::time::{Duration, Instant};
/// use keyway::Timing;
/// let soon = Timing::after(Duration::from_millis(50)).priority(10);
/// let then = Timing::at(Instant::now() + Duration::from_secs(1));
/// # let _ = (soon, then);
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use = "a Timing does nothing until given to `Scheduler::schedule_with`"]
pub struct Timing {
    pub(crate) due: Due,
    pub(crate) priority: i64,
    pub(crate) timeout: Option<Duration>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Due {
    After(Duration),
    At(Instant),
}

impl Timing {
    /// Due `delay` from now (a delay so long that it overflows means "never due").
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = Scheduler::builder(&pool).interval(Duration::from_millis(10))
    ///     .executor("jobs", ExecutorConfig::unlimited()).build().unwrap();
    /// let h = s.schedule_with("jobs", Timing::after(Duration::from_millis(5)), || "done").unwrap();
    /// assert_eq!(h.join().unwrap(), "done");
    /// let never = s.schedule_with("jobs", Timing::after(Duration::MAX), || ()).unwrap();
    /// assert!(!never.is_finished());
    /// # drop(never); s.shutdown_now();
    /// ```
    pub fn after(delay: Duration) -> Self {
        Timing {
            due: Due::After(delay),
            priority: 0,
            timeout: None,
        }
    }

    /// Due at `instant` (an instant in the past means now).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use keyway::{ExecutorConfig, Scheduler, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = Scheduler::builder(&pool).interval(Duration::from_millis(10))
    ///     .executor("jobs", ExecutorConfig::unlimited()).build().unwrap();
    /// let past = Instant::now(); // already passed when it is scheduled: due now
    /// assert_eq!(s.schedule_with("jobs", Timing::at(past), || 1).unwrap().join().unwrap(), 1);
    /// # s.shutdown();
    /// ```
    pub fn at(instant: Instant) -> Self {
        Timing {
            due: Due::At(instant),
            priority: 0,
            timeout: None,
        }
    }

    /// The task's priority (default 0); see [`PriorityOrder`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = Scheduler::builder(&pool).interval(Duration::from_millis(10))
    ///     .executor("jobs", ExecutorConfig::unlimited()).build().unwrap();
    /// let urgent = Timing::after(Duration::ZERO).priority(i64::MAX);
    /// assert_eq!(s.schedule_with("jobs", urgent, || "first").unwrap().join().unwrap(), "first");
    /// # s.shutdown();
    /// ```
    pub fn priority(mut self, priority: i64) -> Self {
        self.priority = priority;
        self
    }

    /// This task's own timeout, in place of its executor's
    /// ([`ExecutorConfig::timeout`]): not started within `timeout` of its due time, it is not
    /// run (its handle says [`TaskError::TimedOut`](crate::TaskError::TimedOut), the
    /// timed-out hook sees it). `Duration::ZERO`: it runs only if it starts by its due time
    /// (possibly early, if the executor allows it); a timeout so long that it overflows
    /// (`Duration::MAX`) means no timeout for this task, whatever the executor's. A repeating
    /// task applies it to every run.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler, TaskError, Timing};
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = Scheduler::builder(&pool).interval(Duration::from_millis(10))
    ///     // Paused: nothing starts. The executor's own timeout is an hour.
    ///     .executor("paused", ExecutorConfig::with_tps(0.0).timeout(Duration::from_secs(3600)))
    ///     .build().unwrap();
    /// let urgent = s.schedule_with("paused", Timing::after(Duration::ZERO).timeout(Duration::from_millis(5)), || ()).unwrap();
    /// assert!(matches!(urgent.join(), Err(TaskError::TimedOut))); // its own 5 ms, not the hour
    /// # s.shutdown_now();
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// A TPS limit must be finite and not negative.
pub(crate) fn check_tps(executor: &str, tps: f64) -> Result<(), ConfigError> {
    if tps.is_finite() && tps >= 0.0 {
        Ok(())
    } else {
        Err(ConfigError::InvalidTps {
            executor: executor.to_owned(),
            value: tps,
        })
    }
}
