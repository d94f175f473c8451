//! The systems of the `stream` scenario: consumers of a sharded Redis stream (a keyway-redis
//! [`Topic`]: each key in one shard, fields `k` and `p`), all in one consumer group, each
//! handing every message to [`StreamRun::handle`] and counting its acknowledgements with
//! [`StreamRun::acked`]. The hand-written ones (`naive`, `consumer-per-shard`, `raw`) share
//! the plumbing below: a connection, the group, parsing `XREADGROUP` replies, and their
//! threads.

pub mod batched;
pub mod floor;
pub mod keyway;
pub mod naive;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use keyway_redis::stream::Topic;
use redis::{Connection, Value};

use crate::work::stream::StreamRun;

/// The consumer group every system reads in.
pub const GROUP: &str = "bench";
/// How long a hand-written consumer's read waits for new entries when there are none.
pub const BLOCK_MS: u64 = 10;
/// How long connecting and each command may take.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A system of the `stream` scenario.
pub trait StreamSystem: Sized {
    /// The system's row name.
    const NAME: &'static str;
    /// Whether it runs each key's messages one at a time, in stream order (checked).
    const ORDERED: bool;

    /// Untimed: connects and builds what the run needs, without consuming yet.
    fn setup(url: &str, topic: &Topic, run: Arc<StreamRun>) -> Result<Self, String>;

    /// Starts consuming (returns at once; the run's latch says when all is acknowledged).
    fn start(&mut self) -> Result<(), String>;

    /// Waits until the system is consuming every shard (its threads reading, its leases
    /// held), for a run whose messages are appended after the start.
    fn wait_consuming(&self) -> Result<(), String> {
        Ok(())
    }

    /// Untimed: stops consuming and waits for the system's threads.
    fn teardown(self) -> Result<(), String>;
}

/// A connection with the I/O timeout.
pub fn connect(url: &str) -> Result<Connection, String> {
    let conn = redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(IO_TIMEOUT))
        .map_err(|e| format!("connecting to {url}: {e}"))?;
    conn.set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| conn.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    Ok(conn)
}

/// Creates [`GROUP`] on every shard's stream, from its start (it may exist already).
pub fn create_group(conn: &mut Connection, topic: &Topic) -> Result<(), String> {
    for s in 0..topic.shards() {
        let created: redis::RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(topic.shard_key(s))
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query(conn);
        match created {
            Ok(()) => {}
            Err(e) if e.code() == Some("BUSYGROUP") => {}
            Err(e) => return Err(format!("creating the group: {e}")),
        }
    }
    Ok(())
}

/// One entry read: its stream's index in the read's stream list, its id and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Which of the streams named in the read it came from.
    pub stream: usize,
    /// Its id (`ms-seq`), as Redis wrote it.
    pub id: Vec<u8>,
    /// Its `p` field.
    pub payload: Vec<u8>,
}

/// An `XREADGROUP … STREAMS s0 s1 … > > …` command for `streams`, at most `count` entries per
/// stream, waiting up to `block_ms` when given; with `noack`, the group keeps no pending entry
/// for what it delivers (nothing to acknowledge).
pub fn read_cmd(
    consumer: &str,
    streams: &[String],
    count: usize,
    block_ms: Option<u64>,
    noack: bool,
) -> redis::Cmd {
    let mut cmd = redis::cmd("XREADGROUP");
    cmd.arg("GROUP")
        .arg(GROUP)
        .arg(consumer)
        .arg("COUNT")
        .arg(count);
    if let Some(ms) = block_ms {
        cmd.arg("BLOCK").arg(ms);
    }
    if noack {
        cmd.arg("NOACK");
    }
    cmd.arg("STREAMS").arg(streams);
    for _ in streams {
        cmd.arg(">");
    }
    cmd
}

/// The entries of an `XREADGROUP` reply (nil when nothing came), in reply order.
pub fn parse_read(value: &Value, streams: &[String]) -> Result<Vec<Entry>, String> {
    let bad = || format!("unexpected XREADGROUP reply: {value:?}");
    let per_stream: Vec<(&Value, &Value)> = match value {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Array(pair) if pair.len() == 2 => Ok((&pair[0], &pair[1])),
                _ => Err(bad()),
            })
            .collect::<Result<_, _>>()?,
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        _ => return Err(bad()),
    };
    let mut out = Vec::new();
    for (name, entries) in per_stream {
        let Value::BulkString(name) = name else {
            return Err(bad());
        };
        let stream = streams
            .iter()
            .position(|s| s.as_bytes() == name.as_slice())
            .ok_or_else(bad)?;
        let Value::Array(entries) = entries else {
            return Err(bad());
        };
        for entry in entries {
            let Value::Array(parts) = entry else {
                return Err(bad());
            };
            let (Some(Value::BulkString(id)), Some(Value::Array(fields))) =
                (parts.first(), parts.get(1))
            else {
                return Err(bad());
            };
            let payload = fields
                .chunks(2)
                .find_map(|kv| match kv {
                    [Value::BulkString(k), Value::BulkString(v)] if k == b"p" => Some(v.clone()),
                    _ => None,
                })
                .ok_or_else(bad)?;
            out.push(Entry {
                stream,
                id: id.clone(),
                payload,
            });
        }
    }
    Ok(out)
}

/// `XACK stream GROUP ids…`.
pub fn ack_cmd<'a>(stream: &str, ids: impl IntoIterator<Item = &'a [u8]>) -> redis::Cmd {
    let mut cmd = redis::cmd("XACK");
    cmd.arg(stream).arg(GROUP);
    for id in ids {
        cmd.arg(id);
    }
    cmd
}

/// What a hand-written consumer holds: where Redis is, the shards' streams, the run and its
/// threads.
pub struct Plumbing {
    /// The Redis URL.
    pub url: String,
    /// Every shard's stream, in shard order.
    pub streams: Vec<String>,
    /// The run.
    pub run: Arc<StreamRun>,
    /// The consumer's threads.
    pub loops: Loops,
}

impl Plumbing {
    /// Creates the group on every shard and names the streams.
    pub fn setup(url: &str, topic: &Topic, run: Arc<StreamRun>) -> Result<Self, String> {
        create_group(&mut connect(url)?, topic)?;
        Ok(Self {
            url: url.to_owned(),
            streams: (0..topic.shards()).map(|s| topic.shard_key(s)).collect(),
            run,
            loops: Loops::default(),
        })
    }
}

/// The threads of a hand-written consumer: each runs its loop until the run is acknowledged
/// or it is told to stop; a loop's error fails the run at once.
#[derive(Debug, Default)]
pub struct Loops {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Result<(), String>>>,
}

impl Loops {
    /// Starts a thread running `body` round after round until the run is acknowledged or
    /// [`stop`](Self::stop) is called.
    pub fn spawn(
        &mut self,
        run: Arc<StreamRun>,
        mut body: impl FnMut() -> Result<(), String> + Send + 'static,
    ) -> Result<(), String> {
        let stop = Arc::clone(&self.stop);
        let thread = std::thread::Builder::new()
            .name("stream-consumer".into())
            .spawn(move || {
                while !stop.load(Ordering::Acquire) && run.done.remaining() > 0 {
                    if let Err(e) = body() {
                        run.done.fail(e.clone());
                        return Err(e);
                    }
                }
                Ok(())
            })
            .map_err(|e| format!("spawning a consumer thread: {e}"))?;
        self.threads.push(thread);
        Ok(())
    }

    /// Tells every loop to stop and waits for them; the first error, if any.
    pub fn stop(self) -> Result<(), String> {
        self.stop.store(true, Ordering::Release);
        let mut first = Ok(());
        for t in self.threads {
            let outcome = t
                .join()
                .unwrap_or_else(|_| Err("a consumer thread panicked".into()));
            if first.is_ok() {
                first = outcome;
            }
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_read_reply_gives_each_entry_with_its_stream() {
        let streams = vec!["a".to_string(), "b".to_string()];
        let entry = |id: &str, p: &str| {
            Value::Array(vec![
                bulk(id),
                Value::Array(vec![bulk("k"), bulk("key"), bulk("p"), bulk(p)]),
            ])
        };
        let reply = Value::Array(vec![Value::Array(vec![
            bulk("b"),
            Value::Array(vec![entry("1-0", "7"), entry("1-1", "8")]),
        ])]);
        let entries = parse_read(&reply, &streams).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].stream, 1);
        assert_eq!(entries[1].id, b"1-1");
        assert_eq!(entries[1].payload, b"8");
        assert!(parse_read(&Value::Nil, &streams).unwrap().is_empty());
        assert!(parse_read(&Value::Int(3), &streams).is_err());
    }
}
