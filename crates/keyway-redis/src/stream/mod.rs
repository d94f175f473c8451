//! # Key-ordered parallel consumption of Redis Streams
//!
//! A [`Producer`] appends `(key, payload)` entries to one of `N` shard streams of a
//! [`Topic`], chosen by a fixed hash of the key ([`shard_of`], rule v1), so one key lives in
//! one shard. [`StreamConsumer`]s form a consumer group: each shard has one owner at a time,
//! and each owner runs every entry in its key's sequential lane on a keyway
//! [`Pool`](keyway::Pool) — entries of one key one at a time, in stream order; many keys in
//! parallel, up to the pool's threads, whatever the number of shards.
//!
//! ```no_run
//! use keyway_redis::stream::{Producer, StreamConsumer, Topic};
//! let topic = Topic::new("orders", 8)?;
//! let mut producer = Producer::connect("redis://127.0.0.1:6379", topic.clone())?;
//! producer.send("alice", b"pay 10")?;
//!
//! let pool = keyway::Pool::new()?;
//! let consumer = StreamConsumer::builder("redis://127.0.0.1:6379", topic)
//!     .build(&pool, |delivery, payload| {
//!         // At least once, in order per key; `delivery.epoch` fences side effects.
//!         println!("{:?}: {:?}", delivery.key, payload);
//!         Ok(())
//!     })?;
//! // ... later: hand the shards off cleanly.
//! consumer.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Handlers that wait
//! A handler built with [`build`](StreamConsumerBuilder::build) is **sync**: it holds a pool
//! thread until it returns, so a handler that waits 10 ms for a database holds its thread
//! for 10 ms, and the pool's threads bound how many entries are in flight. A handler built
//! with [`build_async`](StreamConsumerBuilder::build_async) returns a **future**: each
//! entry's future runs in its key's lane (the next entry of the key starts once it has
//! completed), and a future that waits holds no thread, so many keys' entries wait at once
//! on a few threads. Everything else is the same for both: the window, retries with backoff
//! (a panic while the future is polled is a failure), dead letters, fenced acks, takeover
//! and hand-off. A future dropped because its pool was shut down under it leaves its entry
//! pending for the next owner; a future that completes after its lease was lost has its ack
//! refused, and the new owner runs the entry again: give side effects the epoch.
//!
//! ```no_run
//! use keyway_redis::stream::{StreamConsumer, Topic};
//! # async fn write_to_the_store(_: &[u8], _: u64, _: &[u8]) -> Result<(), std::io::Error> { Ok(()) }
//! let pool = keyway::Pool::builder().max_threads(4).build()?;
//! let consumer = StreamConsumer::builder("redis://127.0.0.1:6379", Topic::new("orders", 8)?)
//!     .build_async(&pool, |delivery, payload| async move {
//!         // Awaiting holds no pool thread; this key's next entry waits for this one.
//!         write_to_the_store(&delivery.key, delivery.epoch, &payload).await?;
//!         Ok(())
//!     })?;
//! consumer.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The futures are polled on the pool's threads. With the `tokio` feature, a consumer given a
//! runtime ([`runtime`](StreamConsumerBuilder::runtime)), or built with `build_async` from
//! inside one, calls its handler and polls the futures with that runtime entered, so they
//! may await its timers and sockets (`tokio::time::sleep`, `tokio::net`); a runtime of one
//! worker thread is enough to drive them. Otherwise no runtime is entered: await what
//! completes through a waker (channels, a runtime's handles that do not need to be entered).
//! Retry backoffs, and the waits while a lease is not confirmed, still hold a pool thread
//! (marked [`keyway::blocking`], so the pool may add one).
//!
//! **The in-flight cap.** With async handlers nothing but the window bounds how many entries
//! wait at once, so a slow dependency would build up entries in memory. Two caps bound the
//! entries read from Redis and not yet finished and acknowledged:
//! [`window`](StreamConsumerBuilder::window) per shard (default 1,000) and
//! [`max_in_flight`](StreamConsumerBuilder::max_in_flight) over all of a consumer's shards
//! (default no cap beyond the windows). A full cap pauses reading — the entries wait in
//! Redis, where they cost this process nothing — and reading resumes as entries finish.
//!
//! **Failure policies.** An entry that fails [`max_attempts`](StreamConsumerBuilder::max_attempts)
//! times is, by default, dead-lettered, and its key's later entries run on
//! ([`FailurePolicy::DeadLetter`]). Where a key's order matters more than its progress (an
//! account's events), [`FailurePolicy::Quarantine`] holds the key instead: the entry and the
//! key's later entries are kept, not run and not acknowledged, until an operator releases the
//! key ([`StreamConsumer::release`], or `keyway-stream release KEY`); the key's entries then
//! run in order, the failed one first with its attempts counted afresh. Other keys go on.
//! Held entries leave the window (a quarantined key does not stall its shard), and count
//! toward [`max_held`](StreamConsumerBuilder::max_held) per shard (default 1,000): a shard
//! holding that many stops reading until a key is released. The hold is stored in Redis under
//! the lease's owner-and-epoch check, like an ack, so a member that takes the shard over
//! (after a crash too) keeps the key held; [`StreamConsumer::stats`] and `keyway-stream
//! inspect` list the quarantined keys of each shard.
//!
//! The settings are checked before anything connects (this example runs as it is):
//!
//! ```
//! use keyway_redis::stream::{FailurePolicy, StreamConsumer, StreamError, Topic};
//! let pool = keyway::Pool::builder().max_threads(4).build()?;
//! let accounts = || {
//!     StreamConsumer::builder("redis://127.0.0.1:6379", Topic::new("accounts", 8).unwrap())
//!         .window(200) // per shard
//!         .max_in_flight(1_000) // per consumer: beyond, entries wait in Redis
//!         .max_attempts(3)
//!         .failure_policy(FailurePolicy::Quarantine)
//!         .max_held(10_000)
//! };
//! // A cap of zero could never read anything: refused, with the setting named.
//! let err = accounts()
//!     .max_in_flight(0)
//!     .build_async(&pool, |_, _| async { Ok(()) })
//!     .unwrap_err();
//! assert!(matches!(err, StreamError::InvalidLimit { name: "max_in_flight", .. }));
//! // Quarantine keeps a key's order, so it needs key order.
//! let err = accounts()
//!     .key_order(false)
//!     .build_async(&pool, |_, _| async { Ok(()) })
//!     .unwrap_err();
//! assert!(matches!(err, StreamError::InvalidConfig(_)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! And with a Redis to talk to, a consumer that waits on a store and quarantines what keeps
//! failing, and an operator's release once the cause is fixed:
//!
//! ```no_run
//! use keyway_redis::stream::{FailurePolicy, StreamConsumer, Topic};
//! # async fn apply(_: &[u8], _: u64, _: &[u8]) -> Result<(), std::io::Error> { Ok(()) }
//! let pool = keyway::Pool::builder().max_threads(4).build()?;
//! let consumer = StreamConsumer::builder("redis://127.0.0.1:6379", Topic::new("accounts", 8)?)
//!     .max_in_flight(1_000)
//!     .failure_policy(FailurePolicy::Quarantine)
//!     .build_async(&pool, |delivery, payload| async move {
//!         apply(&delivery.key, delivery.epoch, &payload).await?;
//!         Ok(())
//!     })?;
//! for shard in consumer.stats()?.shards {
//!     for key in &shard.quarantined {
//!         println!("shard {}: {} is held", shard.shard, String::from_utf8_lossy(key));
//!     }
//! }
//! consumer.release(b"account-42")?; // after fixing what made its entry fail
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## How it works
//! - **Membership**: every member heartbeats a sorted set with one script; ages are measured
//!   in the group's time (Redis `TIME`, stopped while nobody reaches Redis), never by the
//!   members' clocks. A member silent for one lease is dropped. No `KEYS`, no `SCAN`.
//! - **Assignment**: rendezvous hashing over the live members: a member joining or leaving
//!   moves only about `shards / members` shards.
//! - **Leases**: a shard is owned under a lease renewed every heartbeat. Each acquisition
//!   increments the shard's **epoch** (its fencing number). Acks and dead letters go through
//!   scripts that check the owner and the epoch, so a former owner can never ack.
//! - **Window**: at most `window` entries per shard are delivered and not acknowledged in a
//!   member (default 1,000); a full window pauses reading that shard only. With
//!   `max_in_flight`, the windows of all the member's shards together stay under that cap
//!   too (each reader reserves its read under the cap before reading).
//! - **Acks** are sent in batches (every `ack_batch` entries, or at most the ack interval after
//!   the first of a batch finished, whether or not more entries come), only after the handler
//!   succeeded, or after the entry was dead-lettered.
//! - **Failures** retry in place with exponential backoff while the key's later entries wait
//!   (other keys go on). After `max_attempts` attempts, counting Redis's delivery count, the
//!   entry is copied to the shard's dead-letter stream and acknowledged in one script, and the
//!   key moves on; or, under the quarantine policy, the key is held (the hold written by a
//!   fenced script, the entry not acknowledged) until it is released. A panicking handler
//!   counts as a failure.
//! - **Takeover**: a new owner first claims the shard's pending entries, whoever they were
//!   delivered to, in id order (from the start of the pending list), and replays them before
//!   reading new ones; so a key's order holds across failover. A member restarted with the
//!   same id does the same with its own pending entries. Pending entries trimmed from the
//!   stream meanwhile are reported (a `warn` event and
//!   [`trimmed_while_pending`](StreamStats::trimmed_while_pending)), never skipped silently
//!   — by the new owner, or by a releasing owner that finds them when it gives entries back.
//! - **Release** (rebalance, shutdown): stop reading the shard, leave the unstarted entries
//!   pending for the next owner, wait for the running ones, flush the acks, free the lease.
//!   A clean hand-off runs nothing twice.
//!
//! ## Protocol rules
//! The code cites these rules by their letter.
//! - **F — fencing.** A member acts on a shard only while it can confirm its lease: the
//!   lease is held at the member's epoch and was renewed less than nine tenths of a lease ago
//!   (by the member's clock, measured from when the renewal was sent). Reading, starting an
//!   entry, retrying a failed one and dispatching one to its lane (or waiting for a rate slot
//!   for it) are all checked against that one condition; a member that cannot confirm its
//!   lease (Redis unreachable, renewals failing) waits, and once the lease is known lost it
//!   gives the entries up (they stay pending for the next owner). What reaches Redis is
//!   checked there too, atomically, by the same owner-and-epoch test: reads and claims go
//!   through scripts, so a read delayed past a takeover delivers nothing; acks and dead
//!   letters likewise, so a former owner's late acks are refused. A refusal loses the lease
//!   at that epoch only (an older epoch's late batch, or the answer to the member's own
//!   release, is no loss), and a loss is counted once.
//! - **R — recovery of the member's own pending entries.** After a Redis error the reader
//!   may have lost a reply that delivered entries to it (a read or a claim). It recovers
//!   them before reading on: it lists the entries pending for itself and claims again those
//!   that are not in its window, with their delivery counts unchanged. Every claim sets the
//!   count it means (`XCLAIM … RETRYCOUNT`), and a claim sent again after a lost reply
//!   sets the same count again; the takeover replay counts one delivery per entry, once. So
//!   reconnecting spends no delivery counts. Every scan of the pending list holds the shard's
//!   ack lock until what it found is in the window: no ack is in flight meanwhile, so an
//!   entry found pending and not in the window was never run at this epoch, and an entry
//!   already acknowledged is never run again.
//! - **H — user code is contained.** The handler and the [`on_ack`](StreamConsumerBuilder::on_ack)
//!   hook may panic (and so may the drop of a panic's payload): the panic is caught where
//!   the code is called, counted or logged, and the thread goes on with its work (a
//!   handler's panic is a failure of its entry; a hook's panic loses only that call).
//!   [`StreamConsumer::shutdown`], or dropping the consumer, called by its own handler or
//!   hook starts the hand-off and returns without waiting for the code that called it.
//! - **B — backpressure.** On a pool with a [`capacity`](keyway::PoolBuilder::capacity), a
//!   reader whose entry does not fit waits for room (as the scheduler does) and keeps its
//!   entries in order; only a pool that is shut down refuses, and then the entry and the
//!   rest of its batch stay pending.
//!
//! - **Rate limit** (optional, [`rate_limit`](StreamConsumerBuilder::rate_limit)): each entry
//!   waits for a slot of a keyway [`Scheduler`](keyway::Scheduler) executor before it goes to
//!   its lane; with a [`RedisCoordinator`](crate::RedisCoordinator) the executor's limit is
//!   shared by all the members. An entry a release left pending takes no slot.
//! - **Visibility**: [`StreamConsumer::stats`] (per shard: owner, epoch, lag, pending entries,
//!   age of the oldest, window use; totals: redeliveries, takeovers, dead letters, refused acks,
//!   stalls…), an [`on_ack`](StreamConsumerBuilder::on_ack) hook, and `tracing` events:
//!   membership changes, acquisitions, takeovers, hand-offs and lost leases (`info`/`warn`),
//!   dead letters, trimmed pending entries, a recreated group and stalls (`warn`), Redis
//!   outages (`warn` once, `info` when back), handler failures (`debug`). A **stall detector**
//!   reports a shard that has entries in its window and made no progress for
//!   [`stall_after`](StreamConsumerBuilder::stall_after).
//!
//! ## What is promised, and what is not
//! - **At least once**: every entry's handler runs to success (or the entry is
//!   dead-lettered) before it is acknowledged; an entry may run more than once after a crash,
//!   a pause past the lease, or lost acks — at most about one window per affected shard.
//! - **Order per key**: a key's entries start one at a time, in stream order. After a
//!   takeover the unacknowledged ones are replayed in order first, so a key may see an entry
//!   again, but never a later entry before an earlier one that is still unacknowledged.
//!   A consumer built with [`key_order(false)`](StreamConsumerBuilder::key_order) gives this
//!   up for entries that are independent: every entry goes straight to the pool.
//! - **Fencing**: every delivery carries the lease's `epoch`. A member paused past its lease
//!   may still be finishing a handler while the new owner runs the same key: give side
//!   effects the epoch and have the store refuse lower epochs to rule that out.
//! - **Not promised**: exactly once; any order across keys; the order of one key's entries
//!   when several producers append that key at the same time (Redis's arrival order wins).
//!
//! ## Failures
//!
//! | Failure | What happens |
//! |---|---|
//! | A member is killed | Its leases expire after the lease time; the rendezvous owners take its shards, replay their pending entries in order, then read on. Up to a window per shard runs again. |
//! | A member restarts with the same id | It takes its shards back at once (new epoch) and replays its own pending entries first. |
//! | A member pauses past its lease | Another takes its shards over. When it wakes it starts nothing new there: its renewal and its late acks are refused (counted in [`refused_acks`](StreamStats::refused_acks)); a handler it was running may finish — fence its effects with the epoch. |
//! | A member is cut off from Redis, or its packets are delayed | Once it cannot confirm its lease it starts, retries and reads nothing (rule F); a read that reaches Redis after the lease moved delivers nothing. |
//! | A member's connections drop | It reconnects and recovers what a lost reply delivered (rule R): nothing acknowledged runs again, no delivery count is spent. |
//! | Members join or leave | Few shards move; each is handed off cleanly: no entry runs twice. |
//! | A handler fails or panics | Retried in place with backoff; after `max_attempts` dead-lettered and acked atomically (or, under the quarantine policy, its key held until released); other keys are unaffected. |
//! | A member holding quarantined keys dies | The holds are in Redis: the next owner loads them before it replays the shard, and keeps those keys' entries held. |
//! | Handlers are slow | The in-flight cap (`window`, `max_in_flight`) pauses reading; entries wait in Redis. |
//! | Redis paused or unreachable | Members keep their shards and stop starting entries once their lease is not confirmed; the group's clock stops, so when Redis is back nobody expired: no takeover storm. |
//! | Redis restarts with its data | Nothing lost; leases and pending entries continue. |
//! | Redis restarts empty | Entries not yet consumed are gone with Redis. The consumers recreate their group (a `warn` event and [`groups_recreated`](StreamStats::groups_recreated)) and consume what is produced after, at once, even while a handler of the former epoch still runs (its key's later entries wait for it in the key's lane). |
//! | The pool is full | The reader waits for room (rule B). |
//! | Entries trimmed while pending | Reported ([`trimmed_while_pending`](StreamStats::trimmed_while_pending) and a `warn` event with their ids). |
//! | A shard makes no progress | The stall detector reports it ([`stalls`](StreamStats::stalls), a `warn` event). |

mod ack_timer;
mod acks;
mod config;
mod consumer;
mod contain;
mod context;
mod control;
mod delivery;
mod driver;
mod error;
mod handled;
mod hash;
mod id;
#[cfg(feature = "tokio")]
mod in_runtime;
mod policy;
mod producer;
mod rate;
mod reply;
mod scripts;
mod state;
mod stats;
mod task;
mod topic;

#[cfg(all(test, loom))]
mod loom_state;

pub use config::{StreamConsumerBuilder, MAX_DURATION};
pub use consumer::StreamConsumer;
pub(crate) use consumer::{as_int, group_lag, oldest_idle, pending_count};
pub use delivery::{Acked, Delivery, HandlerError};
pub use error::StreamError;
pub use hash::{fnv1a64, shard_of, SHARD_RULE};
pub use id::{BadEntryId, EntryId};
pub use policy::FailurePolicy;
pub use producer::Producer;
pub(crate) use scripts::RELEASE_HOLD;
pub use stats::{ShardStats, StreamStats};
pub use topic::{Topic, MAX_SHARDS};
