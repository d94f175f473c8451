//! [`AdminError`]: what an operator's action on a consumer group fails with.

/// Why an [`Admin`](crate::admin::Admin) call failed.
///
/// ```
/// use keyway_redis::admin::{Admin, AdminError};
/// use keyway_redis::stream::Topic;
/// let err = Admin::connect("nonsense://", Topic::new("t", 1)?, "keyway").unwrap_err();
/// assert!(matches!(err, AdminError::InvalidUrl(_)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The URL is not a Redis URL.
    #[error("invalid Redis URL: {0}")]
    InvalidUrl(#[source] redis::RedisError),
    /// Redis refused or failed a command, or could not be reached.
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The shard is not one of the topic's.
    #[error("no shard {shard}: the topic has shards 0 to {}", shards.saturating_sub(1))]
    NoSuchShard {
        /// The shard asked for.
        shard: u32,
        /// The topic's shard count.
        shards: u32,
    },
    /// No dead letter with this id in this shard.
    #[error("no dead letter {id} in shard {shard}")]
    NoSuchDeadLetter {
        /// The shard.
        shard: u32,
        /// The dead letter's id (in the dead-letter stream).
        id: String,
    },
    /// A dead letter lacks a field it must have (`k` or `p`).
    #[error("dead letter {id} in shard {shard} has no field {field:?}")]
    Malformed {
        /// The shard.
        shard: u32,
        /// The dead letter's id.
        id: String,
        /// The missing field.
        field: &'static str,
    },
}
