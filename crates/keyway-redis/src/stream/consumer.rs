//! [`StreamConsumer`]: a member of a consumer group, running each entry in its key's lane.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use keyway::Pool;
use parking_lot::{Condvar, Mutex};
use redis::{Client, Value};

use crate::stream::ack_timer::{AckTimer, AckTimerThread};
use crate::stream::config::Config;
use crate::stream::context::{Ctx, Shard, Totals};
use crate::stream::control::Control;
use crate::stream::delivery::Handler;
use crate::stream::handled::Handled;
use crate::stream::scripts::Scripts;
use crate::stream::state::ShardState;
use crate::stream::{ShardStats, StreamConsumerBuilder, StreamError, StreamStats, Topic};

/// Tells consumers of one process apart (their lanes never mix).
static INSTANCES: AtomicU64 = AtomicU64::new(1);

/// A member of a consumer group of a sharded stream ([`Topic`]): it owns some shards (one
/// owner per shard at a time, under a lease with a fencing number) and runs each entry of
/// them in its key's sequential lane on a keyway [`Pool`]. See the [module
/// docs](crate::stream) for the guarantees and the failure table.
///
/// Dropping it (or [`shutdown`](Self::shutdown)) hands its shards off cleanly: it stops
/// reading, leaves the unstarted entries pending for the next owner, waits for the running
/// handlers, flushes the acks, releases the leases and leaves the group.
pub struct StreamConsumer {
    ctx: Arc<Ctx>,
    control: Mutex<Option<JoinHandle<()>>>,
    /// Stopped once the control thread has handed every shard off (and flushed its acks).
    ack_timer: Mutex<Option<AckTimerThread>>,
}

impl StreamConsumer {
    /// A builder for a consumer of `topic` on the Redis at `url`; see
    /// [`StreamConsumerBuilder`].
    ///
    /// ```
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let builder = StreamConsumer::builder("redis://127.0.0.1:6379", Topic::new("orders", 8)?);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn builder(url: impl Into<String>, topic: Topic) -> StreamConsumerBuilder {
        StreamConsumerBuilder::new(url, topic)
    }

    pub(crate) fn start(
        cfg: Config,
        pool: &Pool,
        handler: Arc<Handler>,
    ) -> Result<Self, StreamError> {
        if cfg.url.starts_with("rediss:") && rustls::crypto::CryptoProvider::get_default().is_none()
        {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = Client::open(cfg.url.as_str()).map_err(StreamError::InvalidUrl)?;
        let member = cfg.member.clone().unwrap_or_else(crate::builder::member_id);
        let topic = &cfg.topic;
        let shards = (0..topic.shards())
            .map(|i| {
                Arc::new(Shard {
                    index: i,
                    stream: topic.shard_key(i),
                    lease: topic.lease_key(&cfg.group, i),
                    dead: topic.dead_letter_key(i),
                    held: topic.held_key(&cfg.group, i),
                    state: Mutex::new(ShardState::with_held_limit(cfg.window, cfg.max_held)),
                    check_holds: AtomicBool::new(false),
                    cv: Condvar::new(),
                    progress: AtomicU64::new(0),
                    group_seen: AtomicBool::new(false),
                    acks: Mutex::new(None),
                })
            })
            .collect();
        let ctx = Arc::new(Ctx {
            member,
            client,
            scripts: Scripts::new(),
            lanes: pool.contexts(),
            pool: pool.clone(),
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            handler,
            totals: Totals::default(),
            handled: Handled::new(cfg.topic.name(), &cfg.group),
            shards,
            stopping: Mutex::new(false),
            stop_cv: Condvar::new(),
            stopped: AtomicBool::new(false),
            ack_timer: AckTimer::default(),
            reserved: Mutex::new(0),
            cfg,
        });
        let conn = ctx.connect("control")?;
        let ack_timer = AckTimerThread::start(&ctx)?;
        let control = Control::new(Arc::clone(&ctx), conn);
        let thread = std::thread::Builder::new()
            .name("keyway-stream-control".to_owned())
            .spawn(move || control.run())
            .map_err(StreamError::Thread)?;
        Ok(Self {
            ctx,
            control: Mutex::new(Some(thread)),
            ack_timer: Mutex::new(Some(ack_timer)),
        })
    }

    /// This member's id in the group.
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let pool = keyway::Pool::new()?;
    /// let c = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 2)?)
    ///     .member_id("a")
    ///     .build(&pool, |_, _| Ok(()))?;
    /// assert_eq!(c.member_id(), "a");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn member_id(&self) -> &str {
        &self.ctx.member
    }

    /// The shards this member holds now.
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let pool = keyway::Pool::new()?;
    /// let c = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 2)?)
    ///     .build(&pool, |_, _| Ok(()))?;
    /// assert!(c.owned_shards().len() <= 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn owned_shards(&self) -> Vec<u32> {
        use crate::stream::state::Phase;
        self.ctx
            .shards
            .iter()
            .filter(|s| s.state.lock().phase() == Phase::Active)
            .map(|s| s.index)
            .collect()
    }

    /// The group's shards as Redis sees them (owner, epoch, lag, pending entries and the age
    /// of the oldest) with this member's window use and totals. Asks Redis (a few commands
    /// per shard, on a connection of its own).
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let pool = keyway::Pool::new()?;
    /// let c = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 2)?)
    ///     .build(&pool, |_, _| Ok(()))?;
    /// let stats = c.stats()?;
    /// println!("{} redeliveries, {} dead-lettered", stats.redeliveries, stats.dead_lettered);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Result<StreamStats, StreamError> {
        let ctx = &self.ctx;
        let t = &ctx.totals;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut stats = StreamStats {
            shards: Vec::with_capacity(ctx.shards.len()),
            delivered: get(&t.delivered),
            redeliveries: get(&t.redeliveries),
            retries: get(&t.retries),
            handler_panics: get(&t.panics),
            acked: get(&t.acked),
            dead_lettered: get(&t.dead_lettered),
            quarantined: get(&t.quarantined),
            released: get(&t.released_keys),
            refused_acks: get(&t.refused_acks),
            acquisitions: get(&t.acquisitions),
            takeovers: get(&t.takeovers),
            releases: get(&t.releases),
            leases_lost: get(&t.leases_lost),
            trimmed_while_pending: get(&t.trimmed),
            groups_recreated: get(&t.groups_recreated),
            stalls: get(&t.stalls),
            append_to_handled: ctx.handled.snapshot(),
        };
        let mut conn = ctx.connect("stats")?;
        for shard in &ctx.shards {
            let (owner, epoch): (Option<String>, Option<u64>) = redis::cmd("HMGET")
                .arg(&shard.lease)
                .arg("owner")
                .arg("epoch")
                .query(&mut conn)?;
            let pending: Value = redis::cmd("XPENDING")
                .arg(&shard.stream)
                .arg(ctx.group())
                .arg("-")
                .arg("+")
                .arg(1)
                .query(&mut conn)
                .unwrap_or(Value::Nil);
            let summary: Value = redis::cmd("XPENDING")
                .arg(&shard.stream)
                .arg(ctx.group())
                .query(&mut conn)
                .unwrap_or(Value::Nil);
            let groups: Value = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(&shard.stream)
                .query(&mut conn)
                .unwrap_or(Value::Nil);
            let mut quarantined: Vec<Vec<u8>> =
                redis::cmd("HKEYS").arg(&shard.held).query(&mut conn)?;
            quarantined.sort();
            let (window, held) = {
                let st = shard.state.lock();
                (st.window(), st.held())
            };
            stats.shards.push(ShardStats {
                shard: shard.index,
                owner: owner.filter(|o| !o.is_empty()),
                epoch: epoch.unwrap_or(0),
                lag: group_lag(&groups, ctx.group()),
                pending: pending_count(&summary),
                oldest_pending_age: oldest_idle(&pending),
                window,
                window_limit: ctx.cfg.window,
                held,
                quarantined,
            });
        }
        Ok(stats)
    }

    /// Releases a quarantined key (see
    /// [`FailurePolicy::Quarantine`](crate::stream::FailurePolicy::Quarantine)): deletes its
    /// hold in Redis and gives the entry that exhausted its attempts its attempts back. The
    /// member holding the key's shard — this one or another, it sees the release within a
    /// heartbeat — runs the key's held entries in order, that entry first, then the key's
    /// later ones. True if the key was quarantined. Any member, or the `keyway-stream
    /// release` command, may release any key of the topic.
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{FailurePolicy, StreamConsumer, Topic};
    /// let pool = keyway::Pool::new()?;
    /// let c = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 2)?)
    ///     .failure_policy(FailurePolicy::Quarantine)
    ///     .build(&pool, |_, _| Ok(()))?;
    /// // ... the cause of the failure was fixed:
    /// let was_held = c.release(b"account-42")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(&self, key: &[u8]) -> Result<bool, StreamError> {
        let ctx = &self.ctx;
        let index = crate::stream::shard_of(key, ctx.cfg.topic.shards());
        let shard = ctx
            .shards
            .get(index as usize)
            .ok_or_else(|| StreamError::Protocol("no such shard".into()))?;
        let mut conn = ctx.connect("release")?;
        let keys = [shard.held.as_str(), shard.stream.as_str()];
        let mut cmd = crate::stream::context::evalsha(&ctx.scripts.release_hold, &keys);
        cmd.arg(ctx.group()).arg(key);
        let released: i64 = cmd.query(&mut conn)?;
        shard.check_holds.store(true, Ordering::Relaxed);
        shard.cv.notify_all();
        Ok(released == 1)
    }

    /// Hands every shard off cleanly and leaves the group (see [`StreamConsumer`]); waits for
    /// the running handlers. Called by `drop`. Called from several threads at once, each call
    /// returns once the hand-off is complete; called again after, it does nothing.
    ///
    /// Called by this consumer's own handler or `on_ack` hook (or dropping the last handle
    /// there), it cannot wait for the code that calls it: it starts the hand-off and returns
    /// at once; the hand-off completes once that handler has returned.
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{StreamConsumer, Topic};
    /// let pool = keyway::Pool::new()?;
    /// let c = StreamConsumer::builder("redis://127.0.0.1", Topic::new("t", 2)?)
    ///     .build(&pool, |_, _| Ok(()))?;
    /// c.shutdown();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown(&self) {
        *self.ctx.stopping.lock() = true;
        self.ctx.stop_cv.notify_all();
        if crate::stream::contain::inside(self.ctx.instance) {
            // The hand-off waits for the running handlers, this caller among them: let the
            // threads finish by themselves (the control thread stops the ack timer). This
            // thread may be the timer's own (a hook): never wait for it here.
            if let Some(mut timer) = self.ack_timer.try_lock() {
                if let Some(timer) = timer.take() {
                    timer.detach();
                }
            }
            return;
        }
        // Held while joining: a second caller waits here until the first is done.
        let mut control = self.control.lock();
        if let Some(thread) = control.take() {
            let _ = thread.join();
        }
        // The hand-offs flushed their acks; the timer has nothing left to send.
        let timer = self.ack_timer.lock().take();
        drop(timer);
        drop(control);
    }
}

impl Drop for StreamConsumer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for StreamConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamConsumer")
            .field("member", &self.ctx.member)
            .field("topic", &self.ctx.cfg.topic)
            .field("group", &self.ctx.cfg.group)
            .finish_non_exhaustive()
    }
}

pub(crate) fn as_int(v: &Value) -> Option<u64> {
    match v {
        Value::Int(n) => u64::try_from(*n).ok(),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// `XPENDING key group`: `[count, min, max, consumers]`.
pub(crate) fn pending_count(v: &Value) -> u64 {
    match v {
        Value::Array(a) => a.first().and_then(as_int).unwrap_or(0),
        _ => 0,
    }
}

/// `XPENDING key group - + 1`: the oldest entry's idle time.
pub(crate) fn oldest_idle(v: &Value) -> Option<Duration> {
    let Value::Array(rows) = v else { return None };
    let Value::Array(row) = rows.first()? else {
        return None;
    };
    row.get(2).and_then(as_int).map(Duration::from_millis)
}

/// `XINFO GROUPS key`: the `lag` of `group`.
pub(crate) fn group_lag(v: &Value, group: &str) -> Option<u64> {
    let Value::Array(groups) = v else { return None };
    for g in groups {
        let fields: Vec<(&Value, &Value)> = match g {
            Value::Array(a) => a
                .chunks(2)
                .filter_map(|c| Some((c.first()?, c.get(1)?)))
                .collect(),
            Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
            _ => continue,
        };
        let field = |name: &str| {
            fields.iter().find_map(|(k, v)| match k {
                Value::BulkString(b) if b == name.as_bytes() => Some(*v),
                Value::SimpleString(s) if s == name => Some(*v),
                _ => None,
            })
        };
        let is_ours = matches!(field("name"), Some(Value::BulkString(b)) if b == group.as_bytes());
        if is_ours {
            return field("lag").and_then(as_int);
        }
    }
    None
}
