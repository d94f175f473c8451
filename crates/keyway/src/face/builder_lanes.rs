//! `PoolBuilder`'s lane and admission settings: a lane's batch, the pool's capacity, how many
//! idle lanes are kept and for how long, and the hasher for context keys.

use std::hash::BuildHasher;
use std::time::Duration;

use super::builder::PoolBuilder;
use crate::engine::KeyHasher;

impl PoolBuilder {
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

    /// The most idle lanes kept, per kind of lanes (the pool's context lanes, and each
    /// [`TypedLanes`](crate::TypedLanes)), so that a context used again finds its lane — and a
    /// typed lane its key's state ([`KeyState`](crate::KeyState)) — instead of making a new one.
    /// They are split evenly between the table's shards (a shard keeps `n / shards`, rounded
    /// up), so with a bound below the number of idle keys a few more than the bound may be
    /// freed. Default: 4,096, or no bound once [`keep_idle`](PoolBuilder::keep_idle) is set (the
    /// time then bounds them). `0`: an idle lane is freed at once; `usize::MAX`: no bound.
    ///
    /// Memory: an idle typed lane with a `u32` key and a `u32` state costs about 280 bytes
    /// (measured: 1,000,000 idle keys, 282 MB), its message buffer included; add what a larger
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
}
