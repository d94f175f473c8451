//! `PoolBuilder`: every setting of the pool, its default, and the checks `build` makes.
//!
//! The setters sit beside it by topic: `builder_threads` (how many threads, and when they
//! retire), `builder_lanes` (a lane's batch, capacity, idle lanes, the key hasher),
//! `builder_hooks` (names, stack size, panic and thread hooks) and `pool_metrics` (timing).
//! `builder_check` turns the settings into the engine's configuration, refusing the first one
//! that cannot work with a typed error.

use std::time::Duration;

use super::pool::Pool;
use crate::engine::config::{PanicHook, ThreadHook};
use crate::engine::KeyHasher;
use crate::error::BuildError;

/// Configures and builds a [`Pool`].
///
/// Every setting has a default; [`build`](PoolBuilder::build) checks them together and returns
/// a [`BuildError`] naming the first one that cannot work. Nothing here panics.
///
/// ```
/// use std::time::Duration;
/// let pool = keyway::Pool::builder()
///     .core_threads(2)
///     .max_threads(8)
///     .keep_alive(Duration::from_secs(5))
///     .lane_batch(16)
///     .build()
///     .unwrap();
/// assert_eq!(pool.stats().core_threads, 2);
/// # pool.shutdown();
/// ```
#[derive(Default)]
#[must_use = "a builder does nothing until `build` is called"]
#[doc(alias = "ThreadPoolBuilder")]
pub struct PoolBuilder {
    pub(super) core_threads: Option<usize>,
    pub(super) max_threads: Option<usize>,
    pub(super) keep_alive: Option<Duration>,
    pub(super) core_growth_after: Option<usize>,
    pub(super) monitor_period: Option<Duration>,
    pub(super) blocked_after: Option<Duration>,
    pub(super) lane_batch: Option<usize>,
    pub(super) capacity: Option<usize>,
    pub(super) reserved_threads: Option<usize>,
    pub(super) min_reserved_threads: Option<usize>,
    pub(super) reserved_idle_timeout: Option<Duration>,
    pub(super) thread_name: Option<String>,
    pub(super) panic_hook: Option<PanicHook>,
    pub(super) stack_size: Option<usize>,
    pub(super) on_thread_start: Option<ThreadHook>,
    pub(super) on_thread_stop: Option<ThreadHook>,
    pub(super) hasher: Option<KeyHasher>,
    pub(super) idle_lanes: Option<usize>,
    pub(super) keep_idle: Option<Duration>,
    pub(super) name: Option<String>,
    /// `metrics` and `metrics_sampling` (`pool_metrics.rs`).
    pub(super) metrics: bool,
    pub(super) metrics_sampling: Option<u32>,
    /// `label_keys` (`pool_metrics.rs`): the common key types and those named.
    pub(super) labels: Option<crate::engine::Labels>,
    /// `tokio_runtime` (`builder_hooks.rs`).
    #[cfg(feature = "tokio")]
    pub(super) runtime: Option<tokio::runtime::Handle>,
}

impl PoolBuilder {
    /// A builder with every setting at its default.
    ///
    /// ```
    /// let pool = keyway::PoolBuilder::new().build().unwrap();
    /// assert!(pool.stats().core_threads >= 1);
    /// # pool.shutdown();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks the configuration, starts the core threads and the monitor.
    ///
    /// ```
    /// let err = keyway::Pool::builder().core_threads(8).max_threads(4).build().unwrap_err();
    /// println!("{err}"); // names the setting that cannot work
    /// let pool = keyway::Pool::builder().core_threads(4).max_threads(8).build().unwrap();
    /// # pool.shutdown();
    /// ```
    pub fn build(self) -> Result<Pool, BuildError> {
        Pool::start(self.into_config()?)
    }
}

impl std::fmt::Debug for PoolBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("PoolBuilder");
        f.field("core_threads", &self.core_threads)
            .field("max_threads", &self.max_threads)
            .field("keep_alive", &self.keep_alive)
            .field("lane_batch", &self.lane_batch)
            .field("capacity", &self.capacity)
            .field("stack_size", &self.stack_size)
            .field("hasher", &self.hasher)
            .field("idle_lanes", &self.idle_lanes)
            .field("keep_idle", &self.keep_idle)
            .field("name", &self.name)
            .field("metrics", &self.metrics)
            .field("metrics_sampling", &self.metrics_sampling)
            .field("labels", &self.labels);
        #[cfg(feature = "tokio")]
        f.field("tokio_runtime", &self.runtime);
        f.finish_non_exhaustive()
    }
}
