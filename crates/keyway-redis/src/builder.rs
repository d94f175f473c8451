//! [`RedisCoordinatorBuilder`]: the settings of a [`RedisCoordinator`], checked at `build`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::heartbeat::{connect, Config, Heartbeat, Shared, State};
use crate::script::Scripts;
use crate::{Error, RedisCoordinator};

/// The longest heartbeat period, TTL or connect timeout a builder accepts: one hour.
pub const MAX_PERIOD: Duration = Duration::from_secs(3600);

/// Settings of a [`RedisCoordinator`]; [`build`](Self::build) checks them and connects.
///
/// ```no_run
/// use std::time::Duration;
/// use keyway_redis::RedisCoordinator;
/// let coordinator = RedisCoordinator::builder("redis://:secret@127.0.0.1:6379/0")
///     .namespace("shop:keyway")
///     .heartbeat(Duration::from_millis(250))
///     .ttl(Duration::from_secs(1))
///     .connect_timeout(Duration::from_secs(1))
///     .build()?;
/// # Ok::<(), keyway_redis::Error>(())
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct RedisCoordinatorBuilder {
    url: String,
    namespace: String,
    heartbeat: Duration,
    ttl: Duration,
    connect_timeout: Duration,
    leave_timeout: Duration,
    clock_skew_us: f64,
}

impl RedisCoordinatorBuilder {
    /// Settings for the Redis at `url` (`redis://[user][:password@]host[:port][/db]`,
    /// `rediss://…` for TLS, or `redis+unix:///path`), with the defaults: namespace
    /// `keyway`, heartbeat every 500 ms, TTL 2 s, connect timeout 2 s, leave timeout 1 s.
    ///
    /// ```
    /// let builder = keyway_redis::RedisCoordinatorBuilder::new("rediss://:pw@redis.example:6380");
    /// ```
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            namespace: "keyway".to_owned(),
            heartbeat: Duration::from_millis(500),
            ttl: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
            leave_timeout: Duration::from_secs(1),
            clock_skew_us: 0.0,
        }
    }

    /// The prefix of every key this coordinator writes (`NAMESPACE:{executor}:…`). Processes
    /// share a limit only when they use the same namespace and executor name.
    ///
    /// ```
    /// let builder = keyway_redis::RedisCoordinator::builder("redis://127.0.0.1").namespace("billing");
    /// ```
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// How often this process tells Redis it is alive and learns its share (default 500 ms).
    /// Shares change within one heartbeat when a process joins or leaves.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = keyway_redis::RedisCoordinator::builder("redis://127.0.0.1")
    ///     .heartbeat(Duration::from_millis(100));
    /// ```
    pub fn heartbeat(mut self, period: Duration) -> Self {
        self.heartbeat = period;
        self
    }

    /// How long a process that stopped heartbeating (it died) still counts (default 2 s; at
    /// least three heartbeats). Its share goes to the others after that.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = keyway_redis::RedisCoordinator::builder("redis://127.0.0.1")
    ///     .ttl(Duration::from_secs(5));
    /// ```
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long connecting, and each command, may take before Redis counts as unreachable
    /// (default 2 s).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = keyway_redis::RedisCoordinator::builder("redis://127.0.0.1")
    ///     .connect_timeout(Duration::from_millis(500));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long dropping the coordinator waits for this process to leave its executors in Redis
    /// (default 1 s). Past it the drop returns and the leave goes on in the background thread
    /// (until the connect timeout, or the end of the process); the others take this process's
    /// share at once if the leave got through, else after the TTL. Any value is accepted:
    /// `Duration::ZERO` never waits, `Duration::MAX` waits until the leave succeeded or failed.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = keyway_redis::RedisCoordinator::builder("redis://127.0.0.1")
    ///     .leave_timeout(Duration::from_millis(100));
    /// ```
    pub fn leave_timeout(mut self, timeout: Duration) -> Self {
        self.leave_timeout = timeout;
        self
    }

    /// Tests only: pretend the local clock is off by `seconds`. The coordinator never uses the
    /// local clock for membership, so this changes nothing but a diagnostic.
    #[doc(hidden)]
    pub fn local_clock_skew(mut self, seconds: f64) -> Self {
        self.clock_skew_us = if seconds.is_finite() {
            seconds * 1e6
        } else {
            0.0
        };
        self
    }

    fn check(&self) -> Result<(), Error> {
        if self.namespace.is_empty() {
            return Err(Error::EmptyNamespace);
        }
        if self.heartbeat.is_zero() || self.heartbeat > MAX_PERIOD {
            return Err(Error::InvalidHeartbeat(self.heartbeat));
        }
        let min_ttl = self.heartbeat.checked_mul(3).unwrap_or(Duration::MAX);
        if self.ttl < min_ttl || self.ttl > MAX_PERIOD {
            return Err(Error::InvalidTtl {
                ttl: self.ttl,
                heartbeat: self.heartbeat,
            });
        }
        if self.connect_timeout.is_zero() || self.connect_timeout > MAX_PERIOD {
            return Err(Error::InvalidConnectTimeout(self.connect_timeout));
        }
        Ok(())
    }

    /// Checks the settings, connects to Redis (so a bad URL, a wrong password or an
    /// unreachable host is an error now, not later), loads the scripts and starts the
    /// background heartbeat thread.
    ///
    /// ```
    /// use std::time::Duration;
    /// use keyway_redis::{Error, RedisCoordinator};
    /// let err = RedisCoordinator::builder("redis://127.0.0.1")
    ///     .heartbeat(Duration::ZERO)
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, Error::InvalidHeartbeat(_)));
    /// ```
    pub fn build(self) -> Result<RedisCoordinator, Error> {
        self.check()?;
        if self.url.starts_with("rediss:")
            && rustls::crypto::CryptoProvider::get_default().is_none()
        {
            // Another part of the process may have installed one meanwhile: either is fine.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = redis::Client::open(self.url.as_str()).map_err(Error::InvalidUrl)?;
        let mut conn = connect(&client, self.connect_timeout).map_err(Error::from_connect)?;
        let scripts = Scripts::new();
        for script in [&scripts.heartbeat, &scripts.leave] {
            script
                .prepare_invoke()
                .load(&mut conn)
                .map_err(Error::from_connect)?;
        }
        let member = member_id();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                connected: true,
                ..State::default()
            }),
            wake: Condvar::new(),
        });
        let heartbeat = Heartbeat {
            shared: Arc::clone(&shared),
            client,
            conn: Some(conn),
            config: Config {
                namespace: self.namespace,
                member: member.clone(),
                heartbeat: self.heartbeat,
                ttl: self.ttl,
                io_timeout: self.connect_timeout,
                clock_skew_us: self.clock_skew_us,
            },
            scripts,
            skew_logged: false,
        };
        let thread = std::thread::Builder::new()
            .name("keyway-redis".to_owned())
            .spawn(move || heartbeat.run())
            .map_err(Error::Thread)?;
        Ok(RedisCoordinator::new(
            shared,
            thread,
            member,
            self.leave_timeout,
        ))
    }
}

impl std::fmt::Debug for RedisCoordinatorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: show only its scheme.
        let scheme = self.url.split("://").next().unwrap_or_default();
        f.debug_struct("RedisCoordinatorBuilder")
            .field("url", &format_args!("{scheme}://…"))
            .field("namespace", &self.namespace)
            .field("heartbeat", &self.heartbeat)
            .field("ttl", &self.ttl)
            .field("connect_timeout", &self.connect_timeout)
            .field("leave_timeout", &self.leave_timeout)
            .finish_non_exhaustive()
    }
}

/// A member id unique across processes and hosts: the pid and 64 random bits.
pub(crate) fn member_id() -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{}-{:016x}", std::process::id(), hasher.finish())
}
