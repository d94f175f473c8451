//! What can go wrong when a [`RedisCoordinator`](crate::RedisCoordinator) is built.

use std::time::Duration;

/// Why [`RedisCoordinatorBuilder::build`](crate::RedisCoordinatorBuilder::build) refused.
///
/// Once built, a coordinator never fails: it rides out Redis outages on its own (see the crate
/// docs), so only construction returns errors.
///
/// ```
/// use keyway_redis::{Error, RedisCoordinator};
/// let err = RedisCoordinator::builder("http://localhost").build().unwrap_err();
/// assert!(matches!(err, Error::InvalidUrl(_)));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL is not a Redis URL (`redis://`, `rediss://` or `redis+unix://`), or says
    /// something the client cannot do.
    #[error("invalid Redis URL: {0}")]
    InvalidUrl(#[source] redis::RedisError),
    /// The namespace is empty.
    #[error("the namespace must not be empty")]
    EmptyNamespace,
    /// The heartbeat period is zero or longer than [`MAX_PERIOD`](crate::MAX_PERIOD).
    #[error("heartbeat period {0:?} must be above zero and at most {max:?}", max = crate::MAX_PERIOD)]
    InvalidHeartbeat(Duration),
    /// The TTL is shorter than three heartbeats or longer than
    /// [`MAX_PERIOD`](crate::MAX_PERIOD).
    #[error("TTL {ttl:?} must be at least three heartbeats ({heartbeat:?} each) and at most {max:?}", max = crate::MAX_PERIOD)]
    InvalidTtl {
        /// The TTL asked for.
        ttl: Duration,
        /// The heartbeat period it was checked against.
        heartbeat: Duration,
    },
    /// The connect timeout is zero or longer than [`MAX_PERIOD`](crate::MAX_PERIOD).
    #[error("connect timeout {0:?} must be above zero and at most {max:?}", max = crate::MAX_PERIOD)]
    InvalidConnectTimeout(Duration),
    /// Redis refused the credentials (wrong password or user), or wants some and got none.
    #[error("Redis refused the credentials: {0}")]
    Auth(#[source] redis::RedisError),
    /// No Redis answered at that address in time (refused, unreachable, timed out, TLS failed).
    #[error("Redis is unreachable: {0}")]
    Unreachable(#[source] redis::RedisError),
    /// Redis answered but refused what the coordinator needs (e.g. Lua scripting).
    #[error("Redis refused a command: {0}")]
    Redis(#[source] redis::RedisError),
    /// The background heartbeat thread could not be started.
    #[error("could not start the heartbeat thread: {0}")]
    Thread(#[source] std::io::Error),
}

impl Error {
    /// Sorts a failure to connect or to run the first command.
    pub(crate) fn from_connect(e: redis::RedisError) -> Self {
        use redis::ErrorKind;
        match e.kind() {
            ErrorKind::AuthenticationFailed => Self::Auth(e),
            ErrorKind::InvalidClientConfig => Self::InvalidUrl(e),
            _ if matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM")) => Self::Auth(e),
            _ if e.is_io_error() || e.is_timeout() || e.is_connection_refusal() => {
                Self::Unreachable(e)
            }
            _ if e.is_connection_dropped() => Self::Unreachable(e),
            _ => Self::Redis(e),
        }
    }
}
