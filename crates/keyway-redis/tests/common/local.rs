//! Helpers for the stream tests that run their consumers in the test's own process: the
//! builder with the test settings, the group's pending count, keys of one shard, a latch the
//! handlers wait on, killing the consumers' connections, and a lease taken by another member.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keyway_redis::stream::{
    shard_of, Delivery, HandlerError, StreamConsumer, StreamConsumerBuilder, Topic,
};

use super::{wait_for, RedisServer};

/// Lease 1 s, heartbeat 100 ms, acks every 16 entries or 5 ms, backoff 5 ms to 20 ms, I/O
/// timeout 500 ms.
pub fn builder(server: &RedisServer, topic: &Topic) -> StreamConsumerBuilder {
    builder_at(&server.url(), topic)
}

/// [`builder`] for a URL (another user, a proxy).
pub fn builder_at(url: &str, topic: &Topic) -> StreamConsumerBuilder {
    StreamConsumer::builder(url, topic.clone())
        .lease(Duration::from_secs(1))
        .heartbeat(Duration::from_millis(100))
        .ack_batch(16, Duration::from_millis(5))
        .backoff(Duration::from_millis(5), Duration::from_millis(20))
        .io_timeout(Duration::from_millis(500))
}

/// Entries pending in the group `keyway`, over all shards of `topic`.
pub fn pending(server: &RedisServer, topic: &Topic) -> u64 {
    let mut conn = server.connection();
    (0..topic.shards())
        .map(|s| {
            let v: redis::Value = redis::cmd("XPENDING")
                .arg(topic.shard_key(s))
                .arg("keyway")
                .query(&mut conn)
                .unwrap_or(redis::Value::Nil);
            match v {
                redis::Value::Array(a) => match a.first() {
                    Some(redis::Value::Int(n)) => *n as u64,
                    _ => 0,
                },
                _ => 0,
            }
        })
        .sum()
}

/// `(id, consumer, delivery count)` of every entry pending in shard `shard`.
pub fn pending_entries(
    server: &RedisServer,
    topic: &Topic,
    shard: u32,
) -> Vec<(String, String, u64)> {
    let rows: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
        .arg(topic.shard_key(shard))
        .arg("keyway")
        .arg("-")
        .arg("+")
        .arg(10_000)
        .query(&mut server.connection())
        .unwrap_or_default();
    rows.into_iter().map(|(id, c, _, n)| (id, c, n)).collect()
}

/// Keys that fall in `shard` of `shards`.
pub fn keys_in(shard: u32, shards: u32, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("key-{i}"))
        .filter(|k| shard_of(k.as_bytes(), shards) == shard)
        .take(n)
        .collect()
}

/// A latch the handlers wait on; opened by the test, or when dropped (a failing test must not
/// leave handlers blocked, or dropping the consumer would wait for them forever).
#[derive(Default)]
pub struct Latch {
    open: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Latch {
    pub fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }

    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

/// Opens its latch when dropped.
pub struct OpenOnDrop(pub Arc<Latch>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// A handler held at a latch: [`Held::run`] marks it started and waits until the test opens
/// the latch. Take [`Held::opener`] after the consumer is built, so that it is dropped before
/// the consumer: a failing test leaves no handler blocked.
#[derive(Clone, Default)]
pub struct Held {
    pub latch: Arc<Latch>,
    started: Arc<AtomicBool>,
}

impl Held {
    /// In a handler: marks it started, then waits for the latch.
    pub fn run(&self) {
        self.started.store(true, Ordering::SeqCst);
        self.latch.wait();
    }

    /// A sync handler that only runs [`Held::run`].
    pub fn handler(
        &self,
    ) -> impl Fn(&Delivery, &[u8]) -> Result<(), HandlerError> + Send + Sync + 'static {
        let held = self.clone();
        move |_, _| {
            held.run();
            Ok(())
        }
    }

    /// Opens the latch when dropped.
    pub fn opener(&self) -> OpenOnDrop {
        OpenOnDrop(Arc::clone(&self.latch))
    }

    /// Waits until a handler runs [`Held::run`].
    pub fn wait_started(&self) {
        wait_for("the handler to start", || {
            self.started.load(Ordering::SeqCst)
        });
    }
}

/// Kills every client connection but the caller's own (`CLIENT KILL TYPE normal SKIPME yes`):
/// every connection of the consumers in the test drops. Returns how many were killed.
pub fn kill_connections(server: &RedisServer) -> u64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(&mut server.connection())
        .unwrap_or(0)
}

/// Connections Redis accepted since it started (`INFO stats`).
pub fn connections_received(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut server.connection())
        .expect("INFO stats");
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_connections_received")
}

/// Kills the connections of the consumers' shard readers only: those named `…:read`, or
/// (consumers that do not name their connections) whose last command reads or claims.
/// Returns how many were killed.
pub fn kill_readers(server: &RedisServer) -> usize {
    let mut conn = server.connection();
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut conn)
        .expect("CLIENT LIST");
    let mut killed = 0;
    for line in list.lines() {
        let field = |name: &str| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
                .unwrap_or("")
        };
        let reader = field("name").ends_with(":read")
            || matches!(field("cmd"), "xreadgroup" | "xautoclaim" | "xpending");
        if reader {
            let ok: redis::RedisResult<u64> = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(field("id"))
                .query(&mut conn);
            killed += ok.unwrap_or(0) as usize;
        }
    }
    killed
}

/// Makes `thief` the holder of `lease` at the next epoch, as a member that took it over;
/// returns the thief's epoch.
pub fn steal(server: &RedisServer, lease: &str) -> u64 {
    let mut conn = server.connection();
    let epoch: u64 = redis::cmd("HGET")
        .arg(lease)
        .arg("epoch")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(lease)
        .arg("owner")
        .arg("thief")
        .arg("epoch")
        .arg(epoch + 1)
        .arg("expires")
        .arg("99999999999999999")
        .query(&mut conn)
        .unwrap();
    epoch + 1
}
