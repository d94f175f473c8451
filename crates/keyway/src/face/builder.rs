//! `PoolBuilder`: every setting of the pool, its default, and the checks `build` makes.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use super::pool::Pool;
use crate::engine::config::{
    Config, PanicHook, ThreadHook, MAX_STACK_SIZE, MIN_STACK_SIZE, THREAD_LIMIT,
};
use crate::engine::KeyHasher;
use crate::error::{BuildError, BuildErrorKind};
use crate::task::PanicReport;

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
    core_threads: Option<usize>,
    max_threads: Option<usize>,
    keep_alive: Option<Duration>,
    core_growth_after: Option<usize>,
    monitor_period: Option<Duration>,
    blocked_after: Option<Duration>,
    lane_batch: Option<usize>,
    capacity: Option<usize>,
    reserved_threads: Option<usize>,
    min_reserved_threads: Option<usize>,
    reserved_idle_timeout: Option<Duration>,
    thread_name: Option<String>,
    panic_hook: Option<PanicHook>,
    stack_size: Option<usize>,
    on_thread_start: Option<ThreadHook>,
    on_thread_stop: Option<ThreadHook>,
    hasher: Option<KeyHasher>,
    idle_lanes: Option<usize>,
    keep_idle: Option<Duration>,
    name: Option<String>,
    /// `metrics` and `metrics_sampling` (`pool_metrics.rs`).
    pub(super) metrics: bool,
    pub(super) metrics_sampling: Option<u32>,
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

    /// The most tasks a lane runs before it yields its thread to other work. Default: 32.
    ///
    /// ```
    /// // 1: a lane yields its thread after every task (fairest, most hand-offs).
    /// let pool = keyway::Pool::builder().lane_batch(1).build().unwrap();
    /// assert!(keyway::Pool::builder().lane_batch(0).build().is_err());
    /// # pool.shutdown();
    /// ```
    pub fn lane_batch(mut self, n: usize) -> Self {
        self.lane_batch = Some(n);
        self
    }

    /// The most accepted tasks not yet done: queued (on the pool, in a context's lane, or a
    /// multi-key task waiting for its keys) *or running* — a task holds its place until it
    /// returns. Beyond it submissions are refused with
    /// [`SubmitError::Full`](crate::SubmitError::Full), task handed back; to wait for room
    /// instead, use [`Pool::execute_wait`](crate::Pool::execute_wait),
    /// [`Pool::wait_for_room`](crate::Pool::wait_for_room) or its async form. Default:
    /// unbounded.
    ///
    /// ```
    /// use std::sync::mpsc::channel;
    /// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).capacity(2).build().unwrap();
    /// let (started_tx, started) = channel();
    /// let (release, gate) = channel::<()>();
    /// pool.execute(move || { started_tx.send(()).unwrap(); gate.recv().unwrap(); }).unwrap();
    /// started.recv().unwrap();
    /// pool.execute(|| ()).unwrap(); // the running task and this one: 2
    /// let refused = pool.execute(|| ()).unwrap_err();
    /// assert!(matches!(refused, keyway::SubmitError::Full(_))); // closure handed back
    /// release.send(()).unwrap();
    /// # pool.shutdown();
    /// assert!(keyway::Pool::builder().capacity(0).build().is_err());
    /// ```
    pub fn capacity(mut self, n: usize) -> Self {
        self.capacity = Some(n);
        self
    }

    /// The most reserved threads: idle threads parked for [`Pool::try_execute`], started
    /// lazily (the first `try_execute` that finds none idle starts one) and in addition to
    /// `max_threads`. 0 makes every `try_execute` refuse. Default: 1. At most 4,096.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
    /// let back = pool.try_execute(|| ()).unwrap_err(); // nobody to start it now
    /// assert!(matches!(back, keyway::TryExecuteError::Busy(_)));
    /// # pool.shutdown();
    /// ```
    ///
    /// [`Pool::try_execute`] shows a reserved thread taking a task.
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

    /// Prefix of the worker threads' names. Default: `"keyway"`. Must not contain a NUL byte.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().thread_name("ingest").build().unwrap();
    /// let name = pool.submit(|| std::thread::current().name().map(str::to_owned)).unwrap();
    /// assert!(name.join().unwrap().unwrap().starts_with("ingest-"));
    /// assert!(keyway::Pool::builder().thread_name("a\0b").build().is_err());
    /// # pool.shutdown();
    /// ```
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = Some(prefix.into());
        self
    }

    /// The pool's name: the `pool` field of its tracing events and of the `keyway_pool` span
    /// its threads run in, so that a subscriber can tell pools apart and filter on one (see the
    /// crate docs' "Observability" section). Default: the [`thread_name`](Self::thread_name)
    /// prefix. Any string, empty included.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().name("orders").build().unwrap();
    /// assert_eq!(pool.name(), "orders");
    /// let unnamed = keyway::Pool::builder().thread_name("io").build().unwrap();
    /// assert_eq!(unnamed.name(), "io");
    /// # pool.shutdown(); unnamed.shutdown();
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Called on the worker thread with each panic a task raises (after the task's handle, if
    /// any, has it), and with each panic of an [`on_thread_start`](Self::on_thread_start) or
    /// [`on_thread_stop`](Self::on_thread_stop) hook (its message then starts with the hook's
    /// name). A panic in the hook itself is caught and logged.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let panics = Arc::new(AtomicUsize::new(0));
    /// let count = panics.clone();
    /// let pool = keyway::Pool::builder()
    ///     .panic_hook(move |_report| { count.fetch_add(1, Ordering::Relaxed); })
    ///     .build()
    ///     .unwrap();
    /// pool.execute(|| panic!("oops")).unwrap();
    /// pool.shutdown();
    /// assert_eq!(panics.load(Ordering::Relaxed), 1);
    /// ```
    ///
    /// [`PanicReport`]'s example reads the context, thread and payload of a report.
    #[doc(alias = "panic_handler")]
    pub fn panic_hook(mut self, hook: impl Fn(&PanicReport) + Send + Sync + 'static) -> Self {
        self.panic_hook = Some(Arc::new(hook));
        self
    }

    /// The stack size, in bytes, of every thread the pool starts. Default: the standard
    /// library's (2 MiB unless the `RUST_MIN_STACK` environment variable says otherwise). Must be
    /// at least 64 KiB and at most 1 GiB: outside that range [`build`](Self::build) returns a
    /// [`BuildError`].
    ///
    /// ```
    /// let pool = keyway::Pool::builder().stack_size(64 << 20).build().unwrap();
    /// // Deep recursion that would overflow a default 2 MiB stack.
    /// fn depth(n: u64) -> u64 {
    ///     let frame = std::hint::black_box([0u8; 512]);
    ///     if n == 0 { frame[0] as u64 } else { 1 + depth(n - 1) + frame[1] as u64 }
    /// }
    /// assert_eq!(pool.submit(|| depth(10_000)).unwrap().join().unwrap(), 10_000);
    /// assert!(keyway::Pool::builder().stack_size(usize::MAX).build().is_err());
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Called on each thread that runs tasks — core and auxiliary workers, reserved threads —
    /// as it starts, before its first task. The monitor thread runs no task and does not call
    /// it. Use it to set up thread-local state (a logging context, CPU affinity, a per-thread
    /// connection); its pair is [`on_thread_stop`](Self::on_thread_stop).
    ///
    /// A panic in the hook is caught and reported to the [`panic_hook`](Self::panic_hook) (and
    /// logged); the thread goes on and still calls `on_thread_stop` when it exits.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let count = started.clone();
    /// let pool = keyway::Pool::builder()
    ///     .core_threads(2)
    ///     .on_thread_start(move || {
    ///         count.fetch_add(1, Ordering::SeqCst);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.shutdown();
    /// assert!(started.load(Ordering::SeqCst) >= 2);
    /// ```
    #[doc(alias = "start_handler")]
    pub fn on_thread_start(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_thread_start = Some(Arc::new(hook));
        self
    }

    /// Called on each thread that runs tasks as it exits — at shutdown, or when an idle
    /// auxiliary or reserved thread retires — after its last task. Every thread that called
    /// [`on_thread_start`](Self::on_thread_start) calls this once; [`Pool::shutdown`] returns
    /// after every call made by the threads it waited for. A panic in the hook is caught and
    /// reported as in `on_thread_start`.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let live = Arc::new(AtomicUsize::new(0));
    /// let (up, down) = (live.clone(), live.clone());
    /// let pool = keyway::Pool::builder()
    ///     .on_thread_start(move || {
    ///         up.fetch_add(1, Ordering::SeqCst);
    ///     })
    ///     .on_thread_stop(move || {
    ///         down.fetch_sub(1, Ordering::SeqCst);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.submit(|| ()).unwrap().join().unwrap();
    /// pool.shutdown();
    /// assert_eq!(live.load(Ordering::SeqCst), 0); // each start was matched by a stop
    /// ```
    #[doc(alias = "exit_handler")]
    pub fn on_thread_stop(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_thread_stop = Some(Arc::new(hook));
        self
    }

    /// The most idle lanes kept, per kind of lanes (the pool's context lanes, and each
    /// [`TypedLanes`](crate::TypedLanes)), so that a context used again finds its lane — and a
    /// typed lane its key's state ([`KeyState`](crate::KeyState)) — instead of making a new one.
    /// They are split evenly between the table's shards (a shard keeps `n / shards`, rounded
    /// up), so with a bound below the number of idle keys a few more than the bound may be
    /// freed. Default: 4,096, or no bound once [`keep_idle`](PoolBuilder::keep_idle) is set (the
    /// time then bounds them). `0`: an idle lane is freed at once; `usize::MAX`: no bound.
    ///
    /// Memory: an idle typed lane with a `u32` key and a `u32` state costs about 270 bytes
    /// (measured: 1,000,000 idle keys, 274 MB), its message buffer included; add what a larger
    /// key, state or message takes (a lane keeps buffers of up to 16 messages).
    ///
    /// ```
    /// // Keep at most 100,000 idle keys, each for 10 minutes after its last message.
    /// let pool = keyway::Pool::builder()
    ///     .idle_lanes(100_000)
    ///     .keep_idle(std::time::Duration::from_secs(600))
    ///     .build()?;
    /// assert!(keyway::Pool::builder().idle_lanes(0).build().is_ok()); // free at once
    /// assert!(keyway::Pool::builder().idle_lanes(usize::MAX).build().is_ok()); // no bound
    /// # pool.shutdown();
    /// # Ok::<(), keyway::BuildError>(())
    /// ```
    pub fn idle_lanes(mut self, n: usize) -> Self {
        self.idle_lanes = Some(n);
        self
    }

    /// How long an idle lane (and a typed lane's state) is kept after its last task, up to
    /// [`idle_lanes`](PoolBuilder::idle_lanes) of them: the monitor frees it at its first look
    /// (every [`monitor_period`](PoolBuilder::monitor_period)) once it has been idle that long,
    /// `keep_idle` being rounded up to whole periods. Default: until the monitor's next look
    /// (at most one period). `Duration::ZERO`: the same; `Duration::MAX`: until shutdown.
    /// A lane used again before it is freed is not freed.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::builder().keep_idle(Duration::from_secs(30)).build()?;
    /// assert!(keyway::Pool::builder().keep_idle(Duration::MAX).build().is_ok());
    /// assert!(keyway::Pool::builder().keep_idle(Duration::ZERO).build().is_ok());
    /// # pool.shutdown();
    /// # Ok::<(), keyway::BuildError>(())
    /// ```
    pub fn keep_idle(mut self, d: Duration) -> Self {
        self.keep_idle = Some(d);
        self
    }

    /// The hasher for context keys (of context lanes, multi-key tasks and typed lanes).
    ///
    /// The default is [hashbrown]'s (foldhash), seeded at random per pool: on short keys it
    /// takes several times fewer instructions than SipHash, but it is not built to resist
    /// *hash flooding*. When keys come from clients (a user id, a connection's address, a
    /// header), a client who can make many keys hash alike puts them all in one shard of the
    /// lane table, behind one lock, where every lookup probes past the others: submissions
    /// slow down for everyone, though order and results stay right. A keyed hasher such as the
    /// standard library's
    /// [`RandomState`](std::collections::hash_map::RandomState) (SipHash-1-3 with a random
    /// 128-bit key) makes such keys impractical to find, for a slower hash on every submission
    /// that names a context. Any `BuildHasher` works; it is also what
    /// [`Pool::context_hash`](crate::Pool::context_hash) uses. A hasher that panics is
    /// contained like a key whose `Hash` panics
    /// ([`SubmitError::KeyPanicked`](crate::SubmitError::KeyPanicked)).
    ///
    /// [hashbrown]: https://docs.rs/hashbrown
    ///
    /// ```
    /// use std::collections::hash_map::RandomState;
    /// let pool = keyway::Pool::builder().hasher(RandomState::new()).build().unwrap();
    /// let client_id = String::from("203.0.113.9");
    /// let reply = pool.submit_sequential(client_id, || "served").unwrap();
    /// assert_eq!(reply.join().unwrap(), "served");
    /// ```
    pub fn hasher<B>(mut self, hasher: B) -> Self
    where
        B: BuildHasher + Send + Sync + 'static,
    {
        self.hasher = Some(KeyHasher::custom(hasher));
        self
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

    pub(crate) fn into_config(self) -> Result<Config, BuildError> {
        let err = |k| Err(BuildError::new(k));
        let available = std::thread::available_parallelism().map_or(1, |n| n.get());
        let core = match (self.core_threads, self.max_threads) {
            (Some(c), _) => c,
            (None, Some(m)) => available.min(m),
            (None, None) => available,
        };
        // Each thread position costs a slot (a deque and a parker) allocated up front, and the
        // OS would refuse long before this many threads anyway: beyond it, a typed error rather
        // than an allocation failure.
        if core > THREAD_LIMIT {
            return err(BuildErrorKind::TooManyThreads {
                setting: "core_threads",
                value: core,
                limit: THREAD_LIMIT,
            });
        }
        let max = self
            .max_threads
            .unwrap_or_else(|| core.saturating_mul(4).max(16));
        if max > THREAD_LIMIT {
            return err(BuildErrorKind::TooManyThreads {
                setting: "max_threads",
                value: max,
                limit: THREAD_LIMIT,
            });
        }
        if max == 0 {
            return err(BuildErrorKind::ZeroMaxThreads);
        }
        if core == 0 {
            return err(BuildErrorKind::ZeroCoreThreads);
        }
        if core > max {
            return err(BuildErrorKind::CoreAboveMax { core, max });
        }
        let duration = |setting, value: Option<Duration>, default| match value.unwrap_or(default) {
            value if value.is_zero() => Err(BuildError::new(BuildErrorKind::ZeroDuration {
                setting,
                value,
            })),
            value => Ok(value),
        };
        let keep_alive = duration("keep_alive", self.keep_alive, Duration::from_secs(10))?;
        let monitor_period = duration(
            "monitor_period",
            self.monitor_period,
            Duration::from_millis(250),
        )?;
        let blocked_after = duration(
            "blocked_after",
            self.blocked_after,
            Duration::from_millis(250),
        )?;
        let reserved_idle_timeout = duration(
            "reserved_idle_timeout",
            self.reserved_idle_timeout,
            Duration::from_secs(60),
        )?;
        let counts = [
            ("core_growth_after", self.core_growth_after),
            ("lane_batch", self.lane_batch),
            ("capacity", self.capacity),
        ];
        for (setting, value) in counts {
            if value == Some(0) {
                return err(BuildErrorKind::ZeroCount { setting });
            }
        }
        let reserved = self.reserved_threads.unwrap_or(1);
        if reserved > THREAD_LIMIT {
            return err(BuildErrorKind::TooManyThreads {
                setting: "reserved_threads",
                value: reserved,
                limit: THREAD_LIMIT,
            });
        }
        let min_reserved = self.min_reserved_threads.unwrap_or(0);
        if min_reserved > reserved {
            return err(BuildErrorKind::MinReservedAboveMax {
                min: min_reserved,
                max: reserved,
            });
        }
        let thread_name = self.thread_name.unwrap_or_else(|| "keyway".to_owned());
        if thread_name.contains('\0') {
            return err(BuildErrorKind::NulInThreadName);
        }
        if self.metrics_sampling == Some(0) {
            return err(BuildErrorKind::ZeroCount {
                setting: "metrics_sampling",
            });
        }
        if let Some(size) = self.stack_size {
            if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&size) {
                return err(BuildErrorKind::StackSize {
                    value: size,
                    min: MIN_STACK_SIZE,
                    max: MAX_STACK_SIZE,
                });
            }
        }
        let metrics = (self.metrics).then(|| {
            crate::engine::meter::sampling(
                self.metrics_sampling
                    .unwrap_or(crate::engine::meter::DEFAULT_SAMPLING),
            )
        });
        Ok(Config {
            name: self.name.unwrap_or_else(|| thread_name.clone()),
            reserved_threads: reserved,
            min_reserved_threads: min_reserved,
            reserved_idle_timeout,
            core_threads: core,
            max_threads: max,
            keep_alive,
            monitor_period,
            blocked_after,
            core_growth_after: self.core_growth_after.unwrap_or(10),
            lane_batch: self.lane_batch.unwrap_or(32),
            capacity: self.capacity,
            thread_name,
            panic_hook: self.panic_hook,
            stack_size: self.stack_size,
            on_thread_start: self.on_thread_start,
            on_thread_stop: self.on_thread_stop,
            hasher: self.hasher.unwrap_or_default(),
            idle_lanes: self.idle_lanes,
            keep_idle: self.keep_idle,
            metrics,
            admit_mask: crate::engine::meter::admit_mask(self.capacity.is_some(), metrics),
        })
    }
}

impl std::fmt::Debug for PoolBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolBuilder")
            .field("core_threads", &self.core_threads)
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
            .finish_non_exhaustive()
    }
}
