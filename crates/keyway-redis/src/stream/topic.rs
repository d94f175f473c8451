//! [`Topic`]: a sharded stream's name, namespace and shard count, and the Redis keys they
//! give (part of the wire format).

use crate::stream::StreamError;

/// The most shards a topic may have.
pub const MAX_SHARDS: u32 = 4096;

/// A sharded stream: `shards` Redis streams that producers and consumers agree on.
///
/// Keys (all in one cluster hash slot, `{NAME}`):
/// - `NAMESPACE:{NAME}:shard:I` — shard `I`'s stream (`0 <= I < shards`); each entry has the
///   fields `k` (the key's bytes) and `p` (the payload);
/// - `NAMESPACE:{NAME}:dead:I` — shard `I`'s dead letters;
/// - `NAMESPACE:{NAME}:GROUP:lease:I`, `…:GROUP:members`, `…:GROUP:clock` — a consumer
///   group's leases, live members and clock.
///
/// Producers and consumers must use the same name, namespace and shard count: changing the
/// shard count moves keys between shards (see [`shard_of`](crate::stream::shard_of)).
///
/// ```
/// use keyway_redis::stream::Topic;
/// let topic = Topic::new("orders", 8)?.namespace("shop");
/// assert_eq!(topic.shard_key(3), "shop:{orders}:shard:3");
/// assert!(Topic::new("orders", 0).is_err());
/// # Ok::<(), keyway_redis::stream::StreamError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    name: String,
    namespace: String,
    shards: u32,
}

impl Topic {
    /// A topic of `shards` shards (1 to [`MAX_SHARDS`]) in namespace `keyway`.
    ///
    /// ```
    /// assert_eq!(keyway_redis::stream::Topic::new("t", 4)?.shards(), 4);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn new(name: impl Into<String>, shards: u32) -> Result<Self, StreamError> {
        let name = name.into();
        if name.is_empty() || name.contains(['{', '}']) {
            return Err(StreamError::InvalidName(name));
        }
        if shards == 0 || shards > MAX_SHARDS {
            return Err(StreamError::InvalidShards(shards));
        }
        Ok(Self {
            name,
            namespace: "keyway".to_owned(),
            shards,
        })
    }

    /// The prefix of every key (default `keyway`).
    ///
    /// ```
    /// let t = keyway_redis::stream::Topic::new("t", 1)?.namespace("app");
    /// assert_eq!(t.dead_letter_key(0), "app:{t}:dead:0");
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// The number of shards.
    ///
    /// ```
    /// assert_eq!(keyway_redis::stream::Topic::new("t", 2)?.shards(), 2);
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// The topic's name.
    ///
    /// ```
    /// assert_eq!(keyway_redis::stream::Topic::new("t", 2)?.name(), "t");
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    fn prefix(&self) -> String {
        format!("{}:{{{}}}", self.namespace, self.name)
    }

    /// The Redis stream of shard `shard`.
    ///
    /// ```
    /// let t = keyway_redis::stream::Topic::new("t", 2)?;
    /// assert_eq!(t.shard_key(1), "keyway:{t}:shard:1");
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn shard_key(&self, shard: u32) -> String {
        format!("{}:shard:{shard}", self.prefix())
    }

    /// The dead-letter stream of shard `shard`: entries that failed `max_attempts` times, with
    /// the fields `k`, `p`, `id` (the original entry id), `attempts`, `reason` and `epoch`.
    ///
    /// ```
    /// let t = keyway_redis::stream::Topic::new("t", 2)?;
    /// assert_eq!(t.dead_letter_key(1), "keyway:{t}:dead:1");
    /// # Ok::<(), keyway_redis::stream::StreamError>(())
    /// ```
    pub fn dead_letter_key(&self, shard: u32) -> String {
        format!("{}:dead:{shard}", self.prefix())
    }

    pub(crate) fn lease_key(&self, group: &str, shard: u32) -> String {
        format!("{}:{group}:lease:{shard}", self.prefix())
    }

    /// The hash of quarantined keys of `group` on `shard`: key → the id of the entry that
    /// exhausted its attempts.
    pub(crate) fn held_key(&self, group: &str, shard: u32) -> String {
        format!("{}:{group}:held:{shard}", self.prefix())
    }

    pub(crate) fn members_key(&self, group: &str) -> String {
        format!("{}:{group}:members", self.prefix())
    }

    pub(crate) fn clock_key(&self, group: &str) -> String {
        format!("{}:{group}:clock", self.prefix())
    }
}
