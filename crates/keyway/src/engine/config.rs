//! The checked configuration a pool runs with (`PoolBuilder` makes it), and its limits.

use std::sync::Arc;
use std::time::Duration;

use super::hasher::KeyHasher;
use crate::task::PanicReport;

/// The most threads of one kind (`core_threads`, `max_threads`, `reserved_threads`) a pool may
/// be configured with.
pub(crate) const THREAD_LIMIT: usize = 4096;

/// The smallest stack [`PoolBuilder::stack_size`] accepts: keyway's own frames need some room,
/// and a stack overflow aborts the process.
pub(crate) const MIN_STACK_SIZE: usize = 64 * 1024;

/// The largest stack [`PoolBuilder::stack_size`] accepts (1 GiB, Go's limit for a goroutine's
/// stack): each thread reserves that much address space.
pub(crate) const MAX_STACK_SIZE: usize = 1 << 30;

/// A hook run on a pool thread as it starts or stops.
pub(crate) type ThreadHook = Arc<dyn Fn() + Send + Sync + 'static>;
pub(crate) type PanicHook = Arc<dyn Fn(&PanicReport) + Send + Sync + 'static>;

/// The checked configuration a pool runs with.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) core_threads: usize,
    pub(crate) max_threads: usize,
    pub(crate) keep_alive: Duration,
    pub(crate) core_growth_after: usize,
    pub(crate) monitor_period: Duration,
    pub(crate) blocked_after: Duration,
    pub(crate) lane_batch: usize,
    pub(crate) capacity: Option<usize>,
    pub(crate) reserved_threads: usize,
    pub(crate) min_reserved_threads: usize,
    pub(crate) reserved_idle_timeout: Duration,
    pub(crate) thread_name: String,
    pub(crate) panic_hook: Option<PanicHook>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) on_thread_start: Option<ThreadHook>,
    pub(crate) on_thread_stop: Option<ThreadHook>,
    pub(crate) hasher: KeyHasher,
    /// `PoolBuilder::idle_lanes`: the most idle lanes a lane table keeps (`None`: the default).
    pub(crate) idle_lanes: Option<usize>,
    /// `PoolBuilder::keep_idle`: how long an idle lane is kept (`None`: until the monitor's
    /// next look).
    pub(crate) keep_idle: Option<Duration>,
    /// The pool's name in its tracing span and events (default: `thread_name`).
    pub(crate) name: String,
    /// `PoolBuilder::metrics`: time one admission in this many (a power of two) per stripe of
    /// the admission counter (`None`: no timing).
    pub(crate) metrics: Option<u32>,
    /// Admission does more than count when its stripe's count before it, masked with this, is
    /// 0: every admission with a `capacity` (0), one in `metrics` (a power of two, less one)
    /// with a meter, else none but the first of each stripe (`u64::MAX`), which finds nothing
    /// more to do (`accounting.rs`).
    pub(crate) admit_mask: u64,
    /// The key types printed as lane labels in snapshots (`PoolBuilder::label_keys`).
    pub(crate) labels: super::label::Labels,
    /// `PoolBuilder::tokio_runtime`: the runtime the pool's threads live inside, and its
    /// futures are polled in (`None`: each future is polled in the runtime it was spawned from).
    #[cfg(feature = "tokio")]
    pub(crate) runtime: Option<tokio::runtime::Handle>,
}
