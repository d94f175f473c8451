//! # keyway-redis — keyway across processes, through Redis
//!
//! Two halves, each usable without the other:
//! - **A shared rate limit** ([`RedisCoordinator`], this page): when several processes run the
//!   same named keyway executor, each gets its share of the executor's limit.
//! - **Key-ordered consumption of Redis Streams** (the [`stream`] module, most of this crate):
//!   a consumer group over sharded streams whose members lease shards, run each entry in its
//!   key's lane on a keyway pool, and ack behind fences, so a key's entries run in order across
//!   processes, with retries, dead letters and takeover of a dead member's shards. Handlers
//!   are sync, or async: a waiting future holds no thread, so many keys wait at once.
//!
//! ## A shared rate limit
//!
//! [`RedisCoordinator`] (a [`keyway::Coordinator`]) gives each process its share of an
//! executor's limit: `limit / n` for `n` live processes, learned through Redis.
//!
//! ```no_run
//! use keyway::Coordinator;
//! use keyway_redis::RedisCoordinator;
//! let coordinator = RedisCoordinator::builder("redis://:password@127.0.0.1:6379")
//!     .namespace("shop")
//!     .build()?; // a bad URL, wrong password or unreachable Redis is an `Error` here
//! coordinator.join("payments", 3_000.0);
//! let per_second = coordinator.share("payments", 3_000.0); // never blocks
//! # Ok::<(), keyway_redis::Error>(())
//! ```
//!
//! The [`stream`] module builds on the same ideas (Redis-timed membership, outages ridden
//! out).
//!
//! ## How it works
//! - A background thread (keyway has no async runtime; the client is redis-rs's synchronous
//!   one) heartbeats every joined executor every [`heartbeat`](RedisCoordinatorBuilder::heartbeat)
//!   period with one Lua script, so each step is atomic: it removes the members whose last
//!   heartbeat is older than the [`ttl`](RedisCoordinatorBuilder::ttl), records this one and
//!   counts the live ones. Membership is a sorted set per executor, read by key (no `KEYS`, no
//!   `SCAN`); every key lives under the [`namespace`](RedisCoordinatorBuilder::namespace) and
//!   expires by itself ten TTLs after the last heartbeat.
//! - Times are Redis's own `TIME`, never a process's clock: processes whose clocks disagree get
//!   the same shares. While nobody can heartbeat (Redis paused or down) the members' ages stop
//!   too, so a pause of Redis does not expire everybody at once.
//! - **Shares sum to at most the limit** (up to floating-point rounding), also while processes
//!   come and go: a process lowers its share as soon as it sees more members, but raises it
//!   only once every other member has heartbeated since it joined (each has counted it and
//!   lowered its own share). So a new process starts at zero and gets its share within about
//!   one heartbeat; the very first process of an executor, and every process after Redis lost
//!   its data, waits one TTL before raising its share, so that all live processes are back in
//!   the count first.
//! - A process that stops cleanly ([`Coordinator::leave`](keyway::Coordinator::leave), or dropping the coordinator) is
//!   removed at once; the others take over its share at their next heartbeat. One that dies is
//!   dropped after the TTL. Dropping the coordinator waits for the removal at most the
//!   [`leave_timeout`](RedisCoordinatorBuilder::leave_timeout) (1 s by default), however long
//!   the connect timeout and whether or not Redis answers.
//! - **Redis unreachable**: each process keeps its last share, logs once per outage through
//!   `tracing` (`warn`, and `info` when Redis is back), retries with exponential backoff (20 ms
//!   up to one heartbeat) and recovers by itself, also when Redis restarted empty. A process
//!   cut off from Redis for longer than the TTL while the others are not is counted out by them
//!   while it still runs at its last share: for that time the cluster may exceed the limit by
//!   that share. When it reaches Redis again and finds itself counted out, it starts at zero,
//!   as a new process does, and takes its share back once the others have counted it.
//! - All processes running an executor must give it the same limit: each process's share is
//!   `limit / n` of the limit it was asked with.
//!
//! ## URLs, passwords, TLS
//! `redis://[user][:password@]host[:port][/db]`, `redis+unix:///path`, and `rediss://` for TLS
//! (rustls with the `ring` provider, which `build` installs as the process default if there is
//! none, and the webpki root certificates; `rediss://host/#insecure` skips verification only
//! if redis-rs's `tls-rustls-insecure` feature is enabled). A wrong password is
//! [`Error::Auth`]; an unreachable host [`Error::Unreachable`]; a malformed URL
//! [`Error::InvalidUrl`].
//!
//! ## Operating a consumer group
//! The [`admin`] module (and the `keyway-stream` command built on it, feature `cli`, on by
//! default) inspects a stream consumer group from outside — per shard owner, epoch, lease left,
//! lag, pending entries and dead letters; live members and consumers left with pending
//! entries — and replays, purges or cleans up safely. With the `metrics` feature,
//! `keyway_redis::metrics::publish` sends a consumer's numbers through the `metrics`
//! crate's facade (and turns on keyway's own `metrics` feature for the pool); the consumer
//! records the time from each entry's append to its handling itself
//! ([`StreamStats::append_to_handled`](stream::StreamStats::append_to_handled)).
//!
//! ## Tests and `redis-server`
//! The crate's tests start their own `redis-server` on a free loopback port, so that they can
//! kill, pause and restart it. Without a `redis-server` on `PATH` they print a note and pass,
//! unless `KEYWAY_REQUIRE_REDIS=1` (set by CI), which makes them fail instead. To get one:
//! `apt-get install redis-server` (Debian, Ubuntu), `brew install redis` (macOS),
//! `dnf install redis` (Fedora), or build it from <https://redis.io/download>
//! (`make`; the binary is `src/redis-server`).

pub mod admin;
mod builder;
mod coordinator;
mod error;
mod heartbeat;
#[cfg(feature = "metrics")]
pub mod metrics;
mod script;
pub mod stream;

pub use builder::{RedisCoordinatorBuilder, MAX_PERIOD};
pub use coordinator::{RedisCoordinator, Status};
pub use error::Error;
