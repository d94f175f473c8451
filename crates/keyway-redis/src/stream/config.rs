//! [`StreamConsumerBuilder`]: a consumer's settings, checked at `build`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use keyway::{Pool, Scheduler};

use crate::stream::delivery::{AckHook, AsyncHandler, Handler, HandlerFuture};
use crate::stream::{
    Acked, Delivery, FailurePolicy, HandlerError, StreamConsumer, StreamError, Topic,
};

/// The longest lease, heartbeat, timeout or backoff a builder accepts: one hour.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// The settings of a consumer, once checked.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) url: String,
    pub(crate) topic: Topic,
    pub(crate) group: String,
    pub(crate) member: Option<String>,
    pub(crate) window: usize,
    pub(crate) lease: Duration,
    pub(crate) heartbeat: Option<Duration>,
    pub(crate) max_attempts: u32,
    pub(crate) backoff: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) ack_batch: usize,
    pub(crate) ack_interval: Duration,
    pub(crate) io_timeout: Duration,
    pub(crate) stall_after: Duration,
    pub(crate) rate_limit: Option<(Scheduler, String)>,
    pub(crate) on_ack: Option<Arc<AckHook>>,
    pub(crate) key_order: bool,
    /// The most entries in flight over all of this consumer's shards.
    pub(crate) max_in_flight: usize,
    /// The most entries of quarantined keys held per shard before it stops reading.
    pub(crate) max_held: usize,
    pub(crate) failure_policy: FailurePolicy,
}

impl Config {
    /// The heartbeat: as set, or a fifth of the lease.
    pub(crate) fn heartbeat(&self) -> Duration {
        self.heartbeat.unwrap_or(self.lease / 5)
    }
}

/// Settings of a [`StreamConsumer`]; [`build`](Self::build) checks them, connects and starts.
///
/// ```no_run
/// use std::time::Duration;
/// use keyway_redis::stream::{StreamConsumer, Topic};
/// let pool = keyway::Pool::new()?;
/// let consumer = StreamConsumer::builder("redis://127.0.0.1:6379", Topic::new("orders", 16)?)
///     .group("billing")
///     .window(500)
///     .lease(Duration::from_secs(5))
///     .max_attempts(3)
///     .build(&pool, |delivery, payload| {
///         println!("{:?} {} bytes", delivery.key, payload.len());
///         Ok(())
///     })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a builder does nothing until build() is called"]
pub struct StreamConsumerBuilder {
    cfg: Config,
    /// The tokio runtime async handlers run in (the `tokio` feature).
    #[cfg(feature = "tokio")]
    runtime: Option<tokio::runtime::Handle>,
}

impl StreamConsumerBuilder {
    /// Settings for consuming `topic` from the Redis at `url`, with the defaults: group
    /// `keyway`, a random member id, window 1,000, lease 10 s, heartbeat a fifth of the lease,
    /// 5 attempts, backoff 50 ms doubling up to 5 s, acks every 256 entries or 20 ms, I/O
    /// timeout 2 s, stall report after 30 s without progress.
    ///
    /// ```
    /// # use keyway_redis::stream::{StreamConsumerBuilder, Topic};
    /// let builder = StreamConsumerBuilder::new("redis://127.0.0.1", Topic::new("t", 4)?);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn new(url: impl Into<String>, topic: Topic) -> Self {
        Self {
            cfg: Config {
                url: url.into(),
                topic,
                group: "keyway".to_owned(),
                member: None,
                window: 1_000,
                lease: Duration::from_secs(10),
                heartbeat: None,
                max_attempts: 5,
                backoff: Duration::from_millis(50),
                max_backoff: Duration::from_secs(5),
                ack_batch: 256,
                ack_interval: Duration::from_millis(20),
                io_timeout: Duration::from_secs(2),
                stall_after: Duration::from_secs(30),
                rate_limit: None,
                on_ack: None,
                key_order: true,
                max_in_flight: usize::MAX,
                max_held: 1_000,
                failure_policy: FailurePolicy::DeadLetter,
            },
            #[cfg(feature = "tokio")]
            runtime: None,
        }
    }

    /// The consumer group (default `keyway`): members of one group share the shards; each
    /// group sees every entry.
    ///
    /// ```
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?).group("audit");
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.cfg.group = group.into();
        self
    }

    /// This member's id in the group (default: the pid and random bits). A member restarted
    /// with the same id takes its shards back at once and first replays its own pending
    /// entries. Two live members must never share an id.
    ///
    /// ```
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?).member_id("host-a");
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn member_id(mut self, id: impl Into<String>) -> Self {
        self.cfg.member = Some(id.into());
        self
    }

    /// The most entries of one shard delivered to this member and not yet acknowledged
    /// (default 1,000; at least 1). It bounds memory and what a takeover may run again; a
    /// full window pauses reading that shard only.
    ///
    /// ```
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?).window(100);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn window(mut self, entries: usize) -> Self {
        self.cfg.window = entries;
        self
    }

    /// How long a shard's lease lasts without renewal (default 10 s): a member that dies is
    /// replaced after about this long. At least three heartbeats.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .lease(Duration::from_secs(2));
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.cfg.lease = lease;
        self
    }

    /// How often the member heartbeats and renews its leases (default a fifth of the lease).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .heartbeat(Duration::from_millis(200));
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn heartbeat(mut self, period: Duration) -> Self {
        self.cfg.heartbeat = Some(period);
        self
    }

    /// How many attempts an entry gets, counting Redis's delivery count, before it is
    /// dead-lettered (default 5; at least 1).
    ///
    /// ```
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?).max_attempts(3);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.cfg.max_attempts = attempts;
        self
    }

    /// The wait before the second attempt, doubled before each later one up to `max` (default
    /// 50 ms and 5 s). The key's later entries wait meanwhile; other keys do not.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .backoff(Duration::from_millis(10), Duration::from_secs(1));
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.cfg.backoff = first;
        self.cfg.max_backoff = max;
        self
    }

    /// Acks are sent when `count` entries are waiting, or at most `interval` after the first
    /// of them finished (defaults 256 and 20 ms), whether or not more entries come; one script
    /// call per shard per batch. Entries that finish one after another within the interval
    /// share a batch, so a slow trickle costs one round trip per interval, not one per entry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .ack_batch(100, Duration::from_millis(10));
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn ack_batch(mut self, count: usize, interval: Duration) -> Self {
        self.cfg.ack_batch = count;
        self.cfg.ack_interval = interval;
        self
    }

    /// How long connecting and each command may take (default 2 s).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .io_timeout(Duration::from_millis(500));
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn io_timeout(mut self, timeout: Duration) -> Self {
        self.cfg.io_timeout = timeout;
        self
    }

    /// A shard with entries in its window and no progress (nothing finished or acknowledged)
    /// for this long is reported as stalled (default 30 s): a `tracing` warning and
    /// [`StreamStats::stalls`](crate::stream::StreamStats::stalls).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .stall_after(Duration::from_secs(5));
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn stall_after(mut self, after: Duration) -> Self {
        self.cfg.stall_after = after;
        self
    }

    /// Consume under a rate limit: each entry waits for a slot of `executor` on `scheduler`
    /// before it is handed to its key's lane. With the scheduler's coordinator a
    /// [`RedisCoordinator`](crate::RedisCoordinator), the executor's limit is shared by every
    /// member of the group.
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// use keyway::{ExecutorConfig, Scheduler};
    /// let pool = keyway::Pool::new()?;
    /// let coordinator = keyway_redis::RedisCoordinator::builder("redis://127.0.0.1").build()?;
    /// let scheduler = Scheduler::builder(&pool)
    ///     .executor("orders", ExecutorConfig::with_tps(500.0))
    ///     .coordinator(coordinator)
    ///     .build()?;
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("orders", 4)?)
    ///     .rate_limit(scheduler, "orders");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rate_limit(mut self, scheduler: Scheduler, executor: impl Into<String>) -> Self {
        self.cfg.rate_limit = Some((scheduler, executor.into()));
        self
    }

    /// Whether a key's entries run one at a time, in stream order (`true`, the default). With
    /// `false` every entry goes straight to the pool, so one key's entries may run in parallel
    /// and in any order, and a failing entry retries without holding up its key's later ones;
    /// leases, the window, fenced acks, dead letters and takeovers work as with key order.
    /// For handlers whose entries are independent of each other.
    ///
    /// ```
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?).key_order(false);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn key_order(mut self, ordered: bool) -> Self {
        self.cfg.key_order = ordered;
        self
    }

    /// The most entries in flight — read from Redis and not yet finished and acknowledged —
    /// over all of this consumer's shards (default `usize::MAX`: no cap beyond the
    /// per-shard [`window`](Self::window)). When a slow handler fills it, the shards pause
    /// reading until entries finish: a slow dependency builds backpressure (entries wait in
    /// Redis), not memory. Entries of quarantined keys are not in flight (see
    /// [`max_held`](Self::max_held)). Zero is refused with
    /// [`StreamError::InvalidLimit`].
    ///
    /// ```
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .window(100)          // per shard
    ///     .max_in_flight(250);  // per consumer
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn max_in_flight(mut self, entries: usize) -> Self {
        self.cfg.max_in_flight = entries;
        self
    }

    /// What to do with an entry that failed [`max_attempts`](Self::max_attempts) times:
    /// dead-letter it and go on (the default), or quarantine its key (see
    /// [`FailurePolicy`]). Quarantine needs [`key_order`](Self::key_order) (`true`).
    ///
    /// ```
    /// # use keyway_redis::stream::{FailurePolicy, StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .failure_policy(FailurePolicy::Quarantine);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.cfg.failure_policy = policy;
        self
    }

    /// Under [`FailurePolicy::Quarantine`], the most entries of quarantined keys one shard
    /// holds in this member (default 1,000). Held entries leave the window (they are not in
    /// flight, so a quarantined key does not stall its shard's other keys); a shard that
    /// holds this many stops reading (its other keys wait too) until a key is released.
    /// `usize::MAX`: never stop (held entries then grow with the quarantined keys' traffic).
    /// Zero is refused with [`StreamError::InvalidLimit`].
    ///
    /// ```
    /// # use keyway_redis::stream::{FailurePolicy, StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .failure_policy(FailurePolicy::Quarantine)
    ///     .max_held(10_000);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn max_held(mut self, entries: usize) -> Self {
        self.cfg.max_held = entries;
        self
    }

    /// Calls `hook` after each batch of acknowledgements succeeded in Redis (on the thread
    /// that sent it, the shard's reader or a pool thread: keep it short).
    ///
    /// ```
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .on_ack(|acked| println!("{} acked on shard {}", acked.succeeded.len(), acked.shard));
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn on_ack(mut self, hook: impl Fn(&Acked) + Send + Sync + 'static) -> Self {
        self.cfg.on_ack = Some(Arc::new(hook));
        self
    }

    fn check(&self) -> Result<(), StreamError> {
        let c = &self.cfg;
        let bad = |name, value, why| Err(StreamError::InvalidDuration { name, value, why });
        if c.group.is_empty() || c.group.contains(['{', '}']) {
            return Err(StreamError::InvalidConfig(format!(
                "group {:?} must be non-empty, without braces",
                c.group
            )));
        }
        if c.member.as_deref().is_some_and(str::is_empty) {
            return Err(StreamError::InvalidConfig("empty member id".into()));
        }
        if c.window == 0 || c.window > 1_000_000 {
            return Err(StreamError::InvalidConfig(format!(
                "window {} must be 1 to 1,000,000",
                c.window
            )));
        }
        if c.max_in_flight == 0 {
            return Err(StreamError::InvalidLimit {
                name: "max_in_flight",
                value: 0,
                why: "at least 1 (usize::MAX: no cap beyond the window)",
            });
        }
        if c.max_held == 0 {
            return Err(StreamError::InvalidLimit {
                name: "max_held",
                value: 0,
                why: "at least 1 (usize::MAX: never stop reading)",
            });
        }
        if c.failure_policy == FailurePolicy::Quarantine && !c.key_order {
            return Err(StreamError::InvalidConfig(
                "the quarantine policy needs key order".into(),
            ));
        }
        if c.max_attempts == 0 {
            return Err(StreamError::InvalidConfig(
                "max_attempts must be at least 1".into(),
            ));
        }
        if c.ack_batch == 0 {
            return Err(StreamError::InvalidConfig(
                "ack batch must be at least 1".into(),
            ));
        }
        if c.lease < Duration::from_millis(30) || c.lease > MAX_DURATION {
            return bad("lease", c.lease, "30 ms to one hour");
        }
        let hb = c.heartbeat();
        if hb < Duration::from_millis(10) || hb.checked_mul(3).is_none_or(|t| t > c.lease) {
            return bad(
                "heartbeat",
                hb,
                "at least 10 ms, at most a third of the lease",
            );
        }
        if c.ack_interval.is_zero() || c.ack_interval > MAX_DURATION {
            return bad(
                "ack interval",
                c.ack_interval,
                "above zero, at most one hour",
            );
        }
        if c.io_timeout < Duration::from_millis(10) || c.io_timeout > MAX_DURATION {
            return bad("I/O timeout", c.io_timeout, "10 ms to one hour");
        }
        if c.backoff > MAX_DURATION || c.max_backoff > MAX_DURATION || c.backoff > c.max_backoff {
            return bad(
                "backoff",
                c.backoff,
                "at most the maximum backoff, at most one hour",
            );
        }
        if c.stall_after.is_zero() || c.stall_after > MAX_DURATION {
            return bad("stall_after", c.stall_after, "above zero, at most one hour");
        }
        Ok(())
    }

    /// Checks the settings, connects to Redis (a bad URL or an unreachable Redis is an error
    /// now), and starts consuming: each entry runs `handler` in its key's sequential lane on
    /// `pool`. See [`StreamConsumer`] for what the handler may expect.
    ///
    /// ```
    /// use keyway_redis::stream::{StreamConsumer, StreamError, Topic};
    /// let pool = keyway::Pool::new().unwrap();
    /// let err = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .window(0)
    ///     .build(&pool, |_, _| Ok(()))
    ///     .unwrap_err();
    /// assert!(matches!(err, StreamError::InvalidConfig(_)));
    /// # Ok::<(), StreamError>(())
    /// ```
    pub fn build<F>(self, pool: &Pool, handler: F) -> Result<StreamConsumer, StreamError>
    where
        F: Fn(&Delivery, &[u8]) -> Result<(), HandlerError> + Send + Sync + 'static,
    {
        self.check()?;
        let handler = Handler::Sync(Box::new(handler));
        StreamConsumer::start(self.cfg, pool, Arc::new(handler))
    }

    /// As [`build`](Self::build), for a handler that waits (a database write, an HTTP call):
    /// `handler` returns a future, and the entry is done when that future is. Each entry's
    /// future runs in its key's lane — the next entry of a key starts only once the previous
    /// one's future has completed — and a future that waits holds no pool thread, so many
    /// keys' entries are in flight at once on a few threads. Retries, dead letters, fencing,
    /// takeover and hand-off are those of [`build`](Self::build); a panic while the future is
    /// polled is a failure of its entry, as a sync handler's.
    ///
    /// The future is polled on the pool's threads (see
    /// [`Pool::spawn_sequential`](keyway::Pool::spawn_sequential)). If the pool is shut down
    /// under it ([`Pool::shutdown_now`](keyway::Pool::shutdown_now)) the future is dropped
    /// at its await point and its entry stays pending, for this member's next epoch or the
    /// next owner: nothing is lost. A future still waiting when its lease is lost may
    /// complete, but its ack is refused and the new owner runs the entry again: fence side
    /// effects with [`Delivery::epoch`].
    ///
    /// ```
    /// use keyway_redis::stream::{StreamConsumer, StreamError, Topic};
    /// let pool = keyway::Pool::new().unwrap();
    /// let err = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .window(0)
    ///     .build_async(&pool, |delivery, payload| async move {
    ///         println!("{:?}: {} bytes", delivery.key, payload.len());
    ///         Ok(())
    ///     })
    ///     .unwrap_err();
    /// assert!(matches!(err, StreamError::InvalidConfig(_)));
    /// # Ok::<(), StreamError>(())
    /// ```
    pub fn build_async<F, Fut>(self, pool: &Pool, handler: F) -> Result<StreamConsumer, StreamError>
    where
        F: Fn(Delivery, Vec<u8>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
    {
        self.check()?;
        let boxed: Box<AsyncHandler> =
            Box::new(move |d: Delivery, p: Vec<u8>| -> HandlerFuture { Box::pin(handler(d, p)) });
        #[cfg(feature = "tokio")]
        let boxed = crate::stream::in_runtime::wrap(
            boxed,
            self.runtime
                .or_else(|| tokio::runtime::Handle::try_current().ok()),
        );
        StreamConsumer::start(self.cfg, pool, Arc::new(Handler::Async(boxed)))
    }

    /// With the `tokio` feature: the tokio runtime an async handler
    /// ([`build_async`](Self::build_async)) runs in. Its calls and its futures' polls run
    /// with the runtime entered, on the pool's threads, so the handler may await the
    /// runtime's timers (`tokio::time::sleep`) and sockets; a future that waits on them holds
    /// no pool thread. The runtime must be driven while the consumer runs: a multi-thread
    /// runtime drives itself, a current-thread one only inside its `block_on`. Without this
    /// setting, `build_async` called from inside a runtime takes that one (and, from outside
    /// any, the futures are polled with none entered). Sync handlers ignore it.
    ///
    /// ```
    /// use keyway_redis::stream::{StreamConsumer, Topic};
    /// let runtime = tokio::runtime::Builder::new_multi_thread()
    ///     .worker_threads(1)
    ///     .enable_time()
    ///     .build()?;
    /// let builder = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 4)?)
    ///     .runtime(runtime.handle().clone());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tokio")]
    pub fn runtime(mut self, runtime: tokio::runtime::Handle) -> Self {
        self.runtime = Some(runtime);
        self
    }
}

impl std::fmt::Debug for StreamConsumerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = self.cfg.url.split("://").next().unwrap_or_default();
        f.debug_struct("StreamConsumerBuilder")
            .field("url", &format_args!("{scheme}://…"))
            .field("topic", &self.cfg.topic)
            .field("group", &self.cfg.group)
            .field("window", &self.cfg.window)
            .field("lease", &self.cfg.lease)
            .finish_non_exhaustive()
    }
}
