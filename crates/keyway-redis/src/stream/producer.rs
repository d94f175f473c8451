//! [`Producer`]: appends `(key, payload)` entries to the shard of each key, one at a time or
//! pipelined in batches.

use std::time::Duration;

use redis::{Client, Connection};

use crate::stream::reply::entry_id;
use crate::stream::{shard_of, EntryId, StreamError, Topic};

/// Appends entries to a [`Topic`]: each key to its shard (rule v1, see
/// [`shard_of`]), so one key's entries stay in one stream, in the order this producer sent
/// them. Entries of one key sent by several producers at once are ordered as Redis receives
/// them.
///
/// ```no_run
/// use keyway_redis::stream::{Producer, Topic};
/// let mut producer = Producer::connect("redis://127.0.0.1:6379", Topic::new("orders", 8)?)?;
/// producer.send("alice", b"order 1")?;
/// producer.send_batch([("bob", &b"order 2"[..]), ("alice", &b"order 3"[..])])?; // one round trip
/// # Ok::<(), keyway_redis::stream::StreamError>(())
/// ```
pub struct Producer {
    client: Client,
    /// `None` after a connection error: the next send connects again.
    conn: Option<Connection>,
    topic: Topic,
    max_len: Option<u64>,
}

impl Producer {
    /// Connects to the Redis at `url` (timeout 2 s). A send that fails on a dropped
    /// connection returns the error (the entry may or may not have been appended); the next
    /// send connects again.
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{Producer, Topic};
    /// let producer = Producer::connect("redis://127.0.0.1", Topic::new("t", 4)?)?;
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn connect(url: &str, topic: Topic) -> Result<Self, StreamError> {
        if url.starts_with("rediss:") && rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = Client::open(url).map_err(StreamError::InvalidUrl)?;
        let conn = connect(&client)?;
        Ok(Self {
            client,
            conn: Some(conn),
            topic,
            max_len: None,
        })
    }

    /// Runs `f` on the connection (connecting again first if the last one failed); drops
    /// the connection when `f` fails on it.
    fn with_conn<T>(
        &mut self,
        f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T, StreamError> {
        let conn = match &mut self.conn {
            Some(c) => c,
            None => self.conn.insert(connect(&self.client)?),
        };
        let result = f(conn);
        if let Err(e) = &result {
            if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() {
                self.conn = None;
            }
        }
        Ok(result?)
    }

    /// Trims each shard to about `entries` entries as it appends (`XADD MAXLEN ~`). Pending
    /// entries trimmed before they were processed are reported by the consumers (see
    /// [`StreamStats::trimmed_while_pending`](crate::stream::StreamStats::trimmed_while_pending)),
    /// never silently skipped.
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{Producer, Topic};
    /// let producer = Producer::connect("redis://127.0.0.1", Topic::new("t", 4)?)?.max_len(100_000);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    #[must_use]
    pub fn max_len(mut self, entries: u64) -> Self {
        self.max_len = Some(entries);
        self
    }

    /// The topic.
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{Producer, Topic};
    /// let producer = Producer::connect("redis://127.0.0.1", Topic::new("t", 4)?)?;
    /// assert_eq!(producer.topic().shards(), 4);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    fn xadd(&self, key: &[u8], payload: &[u8]) -> redis::Cmd {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(self.topic.shard_key(shard_of(key, self.topic.shards())));
        if let Some(n) = self.max_len {
            cmd.arg("MAXLEN").arg("~").arg(n);
        }
        cmd.arg("*").arg("k").arg(key).arg("p").arg(payload);
        cmd
    }

    /// Appends one entry to its key's shard; returns its id there.
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{Producer, Topic};
    /// let mut producer = Producer::connect("redis://127.0.0.1", Topic::new("t", 4)?)?;
    /// let id = producer.send(b"key", b"payload")?;
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn send(
        &mut self,
        key: impl AsRef<[u8]>,
        payload: impl AsRef<[u8]>,
    ) -> Result<EntryId, StreamError> {
        let cmd = self.xadd(key.as_ref(), payload.as_ref());
        let v: redis::Value = self.with_conn(|c| cmd.query(c))?;
        entry_id(&v)
    }

    /// Appends many entries in one round trip (pipelined), each to its key's shard, in order;
    /// returns their ids.
    ///
    /// ```no_run
    /// # use keyway_redis::stream::{Producer, Topic};
    /// let mut producer = Producer::connect("redis://127.0.0.1", Topic::new("t", 4)?)?;
    /// let ids = producer.send_batch((0..100).map(|i| (format!("k{}", i % 10), i.to_string())))?;
    /// assert_eq!(ids.len(), 100);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn send_batch<K, P>(
        &mut self,
        entries: impl IntoIterator<Item = (K, P)>,
    ) -> Result<Vec<EntryId>, StreamError>
    where
        K: AsRef<[u8]>,
        P: AsRef<[u8]>,
    {
        let mut pipe = redis::pipe();
        let mut n = 0;
        for (k, p) in entries {
            pipe.add_command(self.xadd(k.as_ref(), p.as_ref()));
            n += 1;
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let values: Vec<redis::Value> = self.with_conn(|c| pipe.query(c))?;
        values.iter().map(entry_id).collect()
    }
}

/// A connection with the producer's timeouts (2 s).
fn connect(client: &Client) -> Result<Connection, StreamError> {
    let timeout = Duration::from_secs(2);
    let conn = client.get_connection_with_timeout(timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    Ok(conn)
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("topic", &self.topic)
            .field("max_len", &self.max_len)
            .finish_non_exhaustive()
    }
}
