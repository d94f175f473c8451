//! The background thread: heartbeats every joined executor, removes the ones left, learns each
//! one's share, and rides out Redis outages (reconnects with backoff, logs once per outage).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};
use redis::{Client, Connection, ErrorKind, RedisError, RedisResult};

use crate::script::{keys, Beat, Scripts};

/// The first retry after a failure comes this soon; each next one twice as late, up to one
/// heartbeat period.
const MIN_BACKOFF: Duration = Duration::from_millis(20);

/// What the coordinator's methods and the thread share.
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    pub(crate) wake: Condvar,
}

/// The coordinator's view, kept by the thread, read by `share`.
#[derive(Default)]
pub(crate) struct State {
    /// Joined executors.
    pub(crate) executors: HashMap<String, Entry>,
    /// Executors left but not yet removed from Redis.
    pub(crate) leaving: Vec<String>,
    /// Something changed (join, leave, shutdown): heartbeat now.
    pub(crate) dirty: bool,
    pub(crate) shutdown: bool,
    /// The last attempt to reach Redis succeeded.
    pub(crate) connected: bool,
    /// Outages seen so far (each one logged once).
    pub(crate) outages: u64,
    /// The thread has ended (its last leave done or given up); set even if it panicked.
    pub(crate) exited: bool,
}

/// One joined executor.
pub(crate) struct Entry {
    /// This process's fraction of the limit, `0.0..=1.0`.
    pub(crate) fraction: f64,
}

/// The thread's settings.
pub(crate) struct Config {
    pub(crate) namespace: String,
    pub(crate) member: String,
    pub(crate) heartbeat: Duration,
    pub(crate) ttl: Duration,
    /// Connect, read and write timeout.
    pub(crate) io_timeout: Duration,
    /// Added to the local clock (tests fake a wrong clock with it); only ever compared with
    /// Redis time for a diagnostic.
    pub(crate) clock_skew_us: f64,
}

/// Marks the thread ended when dropped, however it ends, and wakes the dropping coordinator.
struct Exited(Arc<Shared>);

impl Drop for Exited {
    fn drop(&mut self) {
        self.0.state.lock().exited = true;
        self.0.wake.notify_all();
    }
}

/// Opens a connection with the configured timeouts.
pub(crate) fn connect(client: &Client, timeout: Duration) -> RedisResult<Connection> {
    let conn = client.get_connection_with_timeout(timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    Ok(conn)
}

/// The heartbeat loop and its connection.
pub(crate) struct Heartbeat {
    pub(crate) shared: Arc<Shared>,
    pub(crate) client: Client,
    pub(crate) conn: Option<Connection>,
    pub(crate) config: Config,
    pub(crate) scripts: Scripts,
    pub(crate) skew_logged: bool,
}

impl Heartbeat {
    /// Runs until the coordinator is dropped; then removes this process from every executor
    /// it still had (one attempt: if Redis is down, the TTL drops it).
    pub(crate) fn run(mut self) {
        let _exit = Exited(Arc::clone(&self.shared));
        let mut backoff = MIN_BACKOFF;
        loop {
            let (leaving, executors, shutdown) = {
                let mut state = self.shared.state.lock();
                state.dirty = false;
                let names: Vec<String> = state.executors.keys().cloned().collect();
                (std::mem::take(&mut state.leaving), names, state.shutdown)
            };
            let next = match self.beat(&leaving, &executors) {
                Ok(beats) => {
                    backoff = MIN_BACKOFF;
                    self.learned(beats);
                    Instant::now() + self.config.heartbeat
                }
                Err(e) => {
                    self.conn = None;
                    self.failed(e, leaving, shutdown);
                    let wait = backoff;
                    backoff = (backoff * 2).min(self.config.heartbeat);
                    Instant::now() + wait
                }
            };
            if shutdown {
                return;
            }
            let mut state = self.shared.state.lock();
            while !state.dirty && !state.shutdown {
                if self.shared.wake.wait_until(&mut state, next).timed_out() {
                    break;
                }
            }
        }
    }

    /// Removes the `leaving` executors, then heartbeats every joined one.
    fn beat(
        &mut self,
        leaving: &[String],
        executors: &[String],
    ) -> RedisResult<Vec<(String, Beat)>> {
        if self.conn.is_none() {
            self.conn = Some(connect(&self.client, self.config.io_timeout)?);
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(RedisError::from((ErrorKind::IoError, "not connected")));
        };
        let cfg = &self.config;
        for executor in leaving {
            let [members, joined, _] = keys(&cfg.namespace, executor);
            self.scripts
                .leave
                .key(members)
                .key(joined)
                .arg(&cfg.member)
                .invoke::<i64>(conn)?;
        }
        let heartbeat_us = cfg.heartbeat.as_micros() as u64;
        let ttl_us = cfg.ttl.as_micros() as u64;
        // Keys outlive their last member by ten TTLs, then Redis drops them.
        let expiry_ms = (cfg.ttl.as_millis() as u64).saturating_mul(10).max(1_000);
        let mut beats = Vec::with_capacity(executors.len());
        for executor in executors {
            let reply: Vec<String> = self
                .scripts
                .heartbeat
                .key(&keys(&cfg.namespace, executor)[..])
                .arg(&cfg.member)
                .arg(heartbeat_us)
                .arg(ttl_us)
                .arg(expiry_ms)
                .invoke(conn)?;
            let beat = Beat::parse(&reply).ok_or_else(|| {
                RedisError::from((ErrorKind::TypeError, "unexpected heartbeat reply"))
            })?;
            beats.push((executor.clone(), beat));
        }
        Ok(beats)
    }

    /// Applies what the heartbeats learned.
    fn learned(&mut self, beats: Vec<(String, Beat)>) {
        if let Some((_, beat)) = beats.first() {
            self.check_clock(beat.redis_time_us);
        }
        let ttl_us = self.config.ttl.as_micros() as f64;
        let mut state = self.shared.state.lock();
        if !state.connected {
            state.connected = true;
            tracing::info!(member = %self.config.member, "Redis is reachable again; shares follow the live processes");
        }
        for (executor, beat) in beats {
            // An executor left while the heartbeat ran is not brought back.
            if let Some(entry) = state.executors.get_mut(&executor) {
                entry.fraction = beat.next_fraction(entry.fraction, ttl_us);
            }
        }
    }

    /// Notes a failure: logged once per outage; removals are retried.
    fn failed(&mut self, e: RedisError, leaving: Vec<String>, shutdown: bool) {
        let mut state = self.shared.state.lock();
        if shutdown {
            tracing::debug!(error = %e, "could not leave at shutdown; the TTL drops this process");
        } else {
            for executor in leaving {
                if !state.executors.contains_key(&executor) {
                    state.leaving.push(executor);
                }
            }
        }
        if state.connected {
            state.connected = false;
            state.outages += 1;
            tracing::warn!(
                member = %self.config.member,
                error = %e,
                "Redis unreachable; keeping the last shares and retrying with backoff"
            );
        }
    }

    /// Logs once when the local clock is far from Redis's (nothing depends on it).
    fn check_clock(&mut self, redis_time_us: f64) {
        let local_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_micros() as f64)
            + self.config.clock_skew_us;
        let skew_s = (local_us - redis_time_us) / 1e6;
        if !self.skew_logged && skew_s.abs() > 1.0 {
            self.skew_logged = true;
            tracing::debug!(
                skew_s,
                "local clock differs from Redis; membership uses Redis time only"
            );
        }
    }
}
