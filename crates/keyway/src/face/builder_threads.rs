//! `PoolBuilder`'s thread settings: how many threads (core, most, reserved), when auxiliary
//! and reserved ones retire, and when the monitor counts a worker as blocked.

use std::time::Duration;

use super::builder::PoolBuilder;

impl PoolBuilder {
    /// Threads that live as long as the pool. Default: the machine's available parallelism
    /// (capped by [`max_threads`](Self::max_threads) when only that is set). Must be at least 1
    /// and at most 4,096.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(3).build().unwrap();
    /// assert_eq!(pool.stats().core_threads, 3);
    /// assert!(keyway::Pool::builder().core_threads(0).build().is_err());
    /// assert!(keyway::Pool::builder().core_threads(usize::MAX).build().is_err());
    /// # pool.shutdown();
    /// ```
    #[doc(alias = "num_threads")]
    #[doc(alias = "worker_threads")]
    pub fn core_threads(mut self, n: usize) -> Self {
        self.core_threads = Some(n);
        self
    }

    /// The most threads the pool ever has (core and auxiliary). Default: four times the core
    /// threads, and at least 16. Must be at least `core_threads` and at most 4,096.
    ///
    /// ```
    /// assert!(keyway::Pool::builder().core_threads(2).max_threads(2).build().is_ok());
    /// assert!(keyway::Pool::builder().core_threads(4).max_threads(2).build().is_err());
    /// assert!(keyway::Pool::builder().max_threads(0).build().is_err());
    /// ```
    #[doc(alias = "max_blocking_threads")]
    pub fn max_threads(mut self, n: usize) -> Self {
        self.max_threads = Some(n);
        self
    }

    /// How long an auxiliary thread may stay idle before it retires. Default: 10 s. Must not be
    /// zero; `Duration::MAX` means auxiliary threads never retire.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert!(keyway::Pool::builder().keep_alive(Duration::MAX).build().is_ok()); // never retire
    /// assert!(keyway::Pool::builder().keep_alive(Duration::ZERO).build().is_err());
    /// ```
    pub fn keep_alive(mut self, d: Duration) -> Self {
        self.keep_alive = Some(d);
        self
    }

    /// After this many auxiliary threads were needed, the core grows by one thread (up to
    /// `max_threads`). Default: 10.
    ///
    /// ```
    /// assert!(keyway::Pool::builder().core_growth_after(1).build().is_ok());
    /// assert!(keyway::Pool::builder().core_growth_after(0).build().is_err());
    /// ```
    pub fn core_growth_after(mut self, n: usize) -> Self {
        self.core_growth_after = Some(n);
        self
    }

    /// How often the monitor looks for workers stuck in one task. Default: 250 ms. Must not be
    /// zero; `Duration::MAX` turns the periodic look off (the monitor then wakes only at
    /// shutdown).
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::builder().monitor_period(Duration::from_millis(50)).build().unwrap();
    /// assert!(keyway::Pool::builder().monitor_period(Duration::MAX).build().is_ok()); // off
    /// assert!(keyway::Pool::builder().monitor_period(Duration::ZERO).build().is_err());
    /// # pool.shutdown();
    /// ```
    pub fn monitor_period(mut self, d: Duration) -> Self {
        self.monitor_period = Some(d);
        self
    }

    /// A worker in one task for longer than this counts as blocked: the work queued behind it
    /// moves to free workers or to a new auxiliary thread. Default: 250 ms. Must not be zero;
    /// `Duration::MAX` means never.
    ///
    /// ```
    /// use std::time::Duration;
    /// // Long tasks that do not block: tell the monitor to leave them alone for 5 s.
    /// let pool = keyway::Pool::builder().blocked_after(Duration::from_secs(5)).build().unwrap();
    /// assert!(keyway::Pool::builder().blocked_after(Duration::ZERO).build().is_err());
    /// # pool.shutdown();
    /// ```
    pub fn blocked_after(mut self, d: Duration) -> Self {
        self.blocked_after = Some(d);
        self
    }

    /// The most reserved threads: idle threads parked for
    /// [`Pool::try_execute`](crate::Pool::try_execute), started lazily (the first
    /// `try_execute` that finds none idle starts one) and in addition to `max_threads`. 0 makes
    /// every `try_execute` refuse. Default: 1. At most 4,096.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
    /// let back = pool.try_execute(|| ()).unwrap_err(); // nobody to start it now
    /// assert!(matches!(back, keyway::TryExecuteError::Busy(_)));
    /// # pool.shutdown();
    /// ```
    ///
    /// [`Pool::try_execute`](crate::Pool::try_execute) shows a reserved thread taking a task.
    pub fn reserved_threads(mut self, n: usize) -> Self {
        self.reserved_threads = Some(n);
        self
    }

    /// Idle reserved threads retire after `reserved_idle_timeout`, down to this many.
    /// Default: 0. Must not exceed `reserved_threads`.
    ///
    /// ```
    /// assert!(keyway::Pool::builder().reserved_threads(2).min_reserved_threads(1).build().is_ok());
    /// assert!(keyway::Pool::builder().reserved_threads(1).min_reserved_threads(2).build().is_err());
    /// ```
    pub fn min_reserved_threads(mut self, n: usize) -> Self {
        self.min_reserved_threads = Some(n);
        self
    }

    /// How long a reserved thread waits idle before it retires. Default: 60 s. Must not be zero;
    /// `Duration::MAX` means reserved threads never retire.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert!(keyway::Pool::builder().reserved_idle_timeout(Duration::MAX).build().is_ok());
    /// assert!(keyway::Pool::builder().reserved_idle_timeout(Duration::ZERO).build().is_err());
    /// ```
    pub fn reserved_idle_timeout(mut self, d: Duration) -> Self {
        self.reserved_idle_timeout = Some(d);
        self
    }
}
