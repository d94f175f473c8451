//! `SchedulerBuilder`: the interval, the executors, the coordinator and the hooks; and
//! `Scheduler::builder`, which makes one (here rather than in `scheduler`, so that only the
//! builder knows both).

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use crossbeam_utils::sync::Parker;
use parking_lot::{Condvar, Mutex};

use super::clock::Clock;
use super::config::{check_tps, ExecutorConfig};
use super::coordinator::{Coordinator, LocalCoordinator};
use super::error::ConfigError;
use super::executor::{ExecCore, IntervalHook, Shared, TimedOutHook};
use super::interval::Intervals;
use super::lifeline::Lifeline;
use super::scheduler::{Inner, Scheduler};
use super::stats::{IntervalReport, TimedOutTask};
use super::timer_thread::TimerThread;
use crate::face::{Attached, Pool};

/// The shortest interval a scheduler accepts.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// The longest interval a scheduler accepts.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);

impl Scheduler {
    /// A builder for a scheduler running its tasks on `pool`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = keyway::Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("jobs", keyway::ExecutorConfig::unlimited())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(s.schedule("jobs", Duration::ZERO, || 3).unwrap().join().unwrap(), 3);
    /// s.shutdown();
    /// ```
    pub fn builder(pool: &Pool) -> SchedulerBuilder {
        SchedulerBuilder::new(pool)
    }
}

/// Configures a [`Scheduler`]: its interval, its named executors, its [`Coordinator`] and its
/// hooks.
///
/// ```
/// use std::time::Duration;
/// use keyway::{ExecutorConfig, Scheduler};
/// let pool = keyway::Pool::new().unwrap();
/// let scheduler = Scheduler::builder(&pool)
///     .interval(Duration::from_millis(100))
///     .executor("emails", ExecutorConfig::with_tps(50.0))
///     .executor("reports", ExecutorConfig::unlimited())
///     .timed_out_hook(|task| eprintln!("{} timed out", task.executor()))
///     .build()
///     .unwrap();
/// # scheduler.shutdown();
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct SchedulerBuilder {
    pool: Pool,
    interval: Duration,
    executors: Vec<(String, ExecutorConfig)>,
    coordinator: Arc<dyn Coordinator>,
    timed_out_hook: Option<TimedOutHook>,
    interval_hook: Option<IntervalHook>,
    thread_name: String,
    /// Tests: the scheduler's time is this one's.
    #[cfg(test)]
    manual_time: Option<&'static super::clock::ManualTime>,
}

impl SchedulerBuilder {
    pub(crate) fn new(pool: &Pool) -> Self {
        SchedulerBuilder {
            pool: pool.clone(),
            interval: Duration::from_secs(1),
            executors: Vec::new(),
            coordinator: Arc::new(LocalCoordinator),
            timed_out_hook: None,
            interval_hook: None,
            thread_name: "keyway-scheduler".into(),
            #[cfg(test)]
            manual_time: None,
        }
    }

    /// Tests: the scheduler's time moves only when `time` is set.
    #[cfg(test)]
    pub(crate) fn manual_time(mut self, time: &'static super::clock::ManualTime) -> Self {
        self.manual_time = Some(time);
        self
    }

    fn clock(&self) -> Clock {
        #[cfg(test)]
        if let Some(time) = self.manual_time {
            return Clock::manual(self.interval, time);
        }
        Clock::new(self.interval)
    }

    /// The length of an interval (default 1 s; from 10 ms to one day): how often an executor
    /// admits the tasks due, best first, up to its limit for one interval (the rest compete
    /// again in the next). Its limit also holds in every sliding second, whatever the
    /// interval.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = keyway::Scheduler::builder(&pool).interval(Duration::from_millis(100)).build().unwrap();
    /// assert_eq!(s.interval(), Duration::from_millis(100));
    /// # s.shutdown();
    /// let too_short = keyway::Scheduler::builder(&pool).interval(Duration::from_millis(1)).build();
    /// assert!(too_short.is_err());
    /// assert!(keyway::Scheduler::builder(&pool).interval(Duration::MAX).build().is_err());
    /// ```
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Adds an executor named `name`.
    ///
    /// ```
    /// use keyway::ExecutorConfig;
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = keyway::Scheduler::builder(&pool)
    ///     .executor("emails", ExecutorConfig::with_tps(50.0))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(s.tps("emails").unwrap(), Some(50.0));
    /// assert!(s.tps("sms").is_err()); // no such executor
    /// # s.shutdown();
    /// let twice = keyway::Scheduler::builder(&pool)
    ///     .executor("a", ExecutorConfig::unlimited())
    ///     .executor("a", ExecutorConfig::unlimited())
    ///     .build();
    /// assert!(twice.is_err()); // names are unique
    /// ```
    pub fn executor(mut self, name: impl Into<String>, config: ExecutorConfig) -> Self {
        self.executors.push((name.into(), config));
        self
    }

    /// Who decides this process's share of each executor's limit (default
    /// [`LocalCoordinator`]: the whole limit).
    ///
    /// ```
    /// use keyway::{Coordinator, ExecutorConfig};
    /// /// Two processes share every limit equally (a fixed split, for the example).
    /// struct Half;
    /// impl Coordinator for Half {
    ///     fn join(&self, _executor: &str, _limit: f64) {}
    ///     fn leave(&self, _executor: &str) {}
    ///     fn share(&self, _executor: &str, limit: f64) -> f64 { limit / 2.0 }
    /// }
    /// let pool = keyway::Pool::new().unwrap();
    /// let s = keyway::Scheduler::builder(&pool)
    ///     .executor("emails", ExecutorConfig::with_tps(100.0))
    ///     .coordinator(Half)
    ///     .build()
    ///     .unwrap();
    /// # s.shutdown();
    /// ```
    ///
    /// [`Coordinator`] says what each method is for; `keyway-redis` has one shared through Redis.
    pub fn coordinator(mut self, coordinator: impl Coordinator) -> Self {
        self.coordinator = Arc::new(coordinator);
        self
    }

    /// Called for every task that timed out (on the scheduler's thread or a pool thread). A
    /// panic in it is caught.
    ///
    /// [`TimedOutTask`]'s example counts the timed-out tasks of a paused executor with it.
    pub fn timed_out_hook(mut self, hook: impl Fn(&TimedOutTask) + Send + Sync + 'static) -> Self {
        self.timed_out_hook = Some(Arc::new(hook));
        self
    }

    /// Called on the scheduler's thread at the end of every interval of every executor with
    /// what it did. A panic in it is caught.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway::{ExecutorConfig, Scheduler};
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let tx = std::sync::Mutex::new(tx);
    /// let s = Scheduler::builder(&pool)
    ///     .interval(Duration::from_millis(10))
    ///     .executor("jobs", ExecutorConfig::with_tps(1000.0))
    ///     .interval_hook(move |r| { let _ = tx.lock().unwrap().send(r.dispatched); })
    ///     .build()
    ///     .unwrap();
    /// s.schedule("jobs", Duration::ZERO, || ()).unwrap().join().unwrap();
    /// // Reports keep coming, one per interval: the task shows in one of them.
    /// let mut dispatched = 0;
    /// while dispatched == 0 { dispatched += rx.recv().unwrap(); }
    /// assert_eq!(dispatched, 1);
    /// s.shutdown();
    /// ```
    ///
    /// [`IntervalReport`] has an example reading the rest of a report.
    pub fn interval_hook(mut self, hook: impl Fn(&IntervalReport) + Send + Sync + 'static) -> Self {
        self.interval_hook = Some(Arc::new(hook));
        self
    }

    /// The name of the scheduler's thread (default `keyway-scheduler`). It must not contain
    /// a NUL byte: [`build`](SchedulerBuilder::build) then fails with
    /// [`ConfigError::InvalidThreadName`].
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let tx = std::sync::Mutex::new(tx);
    /// let s = keyway::Scheduler::builder(&pool)
    ///     .thread_name("billing-timer")
    ///     .interval(Duration::from_millis(10))
    ///     .executor("jobs", keyway::ExecutorConfig::unlimited())
    ///     .interval_hook(move |_| { // hooks run on the scheduler's thread
    ///         let _ = tx.lock().unwrap().send(std::thread::current().name().map(str::to_owned));
    ///     })
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(rx.recv().unwrap().as_deref(), Some("billing-timer"));
    /// s.shutdown();
    /// ```
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// Checks the settings and starts the scheduler's thread.
    ///
    /// ```
    /// use keyway::{ConfigError, ExecutorConfig, Scheduler};
    /// let pool = keyway::Pool::new().unwrap();
    /// let bad = Scheduler::builder(&pool).executor("x", ExecutorConfig::with_tps(f64::NAN)).build();
    /// assert!(bad.is_err());
    /// let s = Scheduler::builder(&pool).executor("x", ExecutorConfig::with_tps(1.0)).build().unwrap();
    /// # s.shutdown();
    /// ```
    pub fn build(self) -> Result<Scheduler, ConfigError> {
        if self.interval < MIN_INTERVAL {
            return Err(ConfigError::IntervalTooShort(self.interval));
        }
        if self.interval > MAX_INTERVAL {
            return Err(ConfigError::IntervalTooLong(self.interval));
        }
        if self.thread_name.contains('\0') {
            // Checked before anything starts: the thread's spawn would panic on it.
            return Err(ConfigError::InvalidThreadName(self.thread_name));
        }
        let mut names = HashMap::new();
        for (i, (name, config)) in self.executors.iter().enumerate() {
            if let Some(tps) = config.tps {
                check_tps(name, tps)?;
            }
            if names.insert(name.clone(), i).is_some() {
                return Err(ConfigError::DuplicateExecutor(name.clone()));
            }
        }
        let parker = Parker::new();
        let shared = Arc::new(Shared {
            clock: self.clock(),
            pool: self.pool.internal(),
            closed: AtomicBool::new(false),
            stop_now: AtomicBool::new(false),
            drop_handed_back: AtomicBool::new(false),
            pauses_end: AtomicBool::new(false),
            timed_out_hook: self.timed_out_hook,
            interval_hook: self.interval_hook,
            driver: parker.unparker().clone(),
            exited: (Mutex::new(false), Condvar::new()),
        });
        let execs: Vec<Arc<ExecCore>> = self
            .executors
            .iter()
            .map(|(name, config)| {
                Arc::new(ExecCore::new(name.as_str().into(), config, shared.clone()))
            })
            .collect();
        for e in &execs {
            if let Some(limit) = e.tps() {
                // User code: its panic is an error here, as it is contained in `set_tps`.
                let coordinator = &self.coordinator;
                let joined = catch_unwind(AssertUnwindSafe(|| coordinator.join(&e.name, limit)));
                if joined.is_err() {
                    return Err(ConfigError::CoordinatorPanicked(e.name.to_string()));
                }
            }
        }
        let handed_back = Arc::new(Mutex::new(Vec::new()));
        let life = Arc::new(Lifeline {
            shared: shared.clone(),
            execs: execs.clone(),
            driver_thread: OnceLock::new(),
            driver_join: Mutex::new(None),
            handed_back: handed_back.clone(),
        });
        let driver = TimerThread {
            shared: shared.clone(),
            executors: execs.iter().cloned().map(Intervals::new).collect(),
            coordinator: self.coordinator.clone(),
            parker,
            handed_back,
            _life: life.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(self.thread_name)
            .spawn(move || driver.run())
            .map_err(|e| ConfigError::Spawn(e.to_string()))?;
        let _ = life.driver_thread.set(thread.thread().id());
        *life.driver_join.lock() = Some(thread);
        self.pool
            .attach(Arc::downgrade(&life) as Weak<dyn Attached>);
        Ok(Scheduler::from_inner(Inner {
            shared,
            by_name: names
                .into_iter()
                .map(|(name, i)| (name, execs[i].clone()))
                .collect(),
            few: (execs.len() <= FEW).then(|| execs.iter().cloned().collect()),
            coordinator: self.coordinator,
            life,
            _user: self.pool,
        }))
    }
}

/// Up to this many executors are found by a scan rather than by hashing their name.
const FEW: usize = 8;
