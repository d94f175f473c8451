//! [`StreamError`]: what the stream producer and consumer refuse or fail with.

use std::time::Duration;

/// Why a [`Topic`](crate::stream::Topic), [`Producer`](crate::stream::Producer) or
/// [`StreamConsumer`](crate::stream::StreamConsumer) call failed.
///
/// ```
/// use keyway_redis::stream::{StreamError, Topic};
/// assert!(matches!(Topic::new("t", 0), Err(StreamError::InvalidShards(0))));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The topic name is empty or contains `{` or `}`.
    #[error("invalid topic name {0:?}: it must be non-empty, without braces")]
    InvalidName(String),
    /// The shard count is zero or above [`MAX_SHARDS`](crate::stream::MAX_SHARDS).
    #[error("invalid shard count {0}: 1 to {max}", max = crate::stream::MAX_SHARDS)]
    InvalidShards(u32),
    /// A setting is out of range; the message says which and why.
    #[error("invalid setting: {0}")]
    InvalidConfig(String),
    /// A duration setting is out of range.
    #[error("invalid {name}: {value:?} ({why})")]
    InvalidDuration {
        /// The setting.
        name: &'static str,
        /// The value given.
        value: Duration,
        /// The rule it broke.
        why: &'static str,
    },
    /// A count setting is out of range.
    #[error("invalid {name}: {value} ({why})")]
    InvalidLimit {
        /// The setting.
        name: &'static str,
        /// The value given.
        value: usize,
        /// The rule it broke.
        why: &'static str,
    },
    /// The URL is not a Redis URL.
    #[error("invalid Redis URL: {0}")]
    InvalidUrl(#[source] redis::RedisError),
    /// Redis refused or failed a command, or could not be reached.
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// Redis answered something this crate does not understand.
    #[error("unexpected reply from Redis: {0}")]
    Protocol(String),
    /// A thread could not be started.
    #[error("could not start a thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The consumer is shut down.
    #[error("the consumer is shut down")]
    Shutdown,
}
