//! [`RedisCoordinator`]: the [`Coordinator`] whose shares follow the processes alive in Redis.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use keyway::Coordinator;

use crate::heartbeat::{Entry, Shared};
use crate::RedisCoordinatorBuilder;

/// Shares each named executor's limit equally among the processes running it, through Redis.
///
/// Every process heartbeats into Redis from a background thread; [`share`](Coordinator::share)
/// answers at once from the last share learned. See the crate docs for the guarantees.
/// Dropping the coordinator leaves every executor it had joined: it waits for that at most the
/// [`leave_timeout`](crate::RedisCoordinatorBuilder::leave_timeout) (1 s by default), then lets
/// the leave finish in the background; if Redis is unreachable, the TTL drops this process
/// instead.
///
/// ```no_run
/// use keyway::Coordinator;
/// use keyway_redis::RedisCoordinator;
/// let coordinator = RedisCoordinator::builder("redis://127.0.0.1:6379").build()?;
/// coordinator.join("emails", 300.0);
/// // A moment later, with two other processes running "emails": about 100.0.
/// let share = coordinator.share("emails", 300.0);
/// assert!((0.0..=300.0).contains(&share));
/// # Ok::<(), keyway_redis::Error>(())
/// ```
pub struct RedisCoordinator {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    member: String,
    /// How long the drop waits for the thread's last leave.
    leave_timeout: Duration,
}

/// Whether a coordinator reaches Redis; see [`RedisCoordinator::status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// The last attempt to reach Redis succeeded.
    pub connected: bool,
    /// How many times Redis became unreachable since the coordinator was built (each outage is
    /// logged once, at `warn`).
    pub outages: u64,
}

impl RedisCoordinator {
    /// A builder for a coordinator on the Redis at `url`; see [`RedisCoordinatorBuilder`].
    ///
    /// ```
    /// let builder = keyway_redis::RedisCoordinator::builder("redis://127.0.0.1:6379");
    /// ```
    pub fn builder(url: impl Into<String>) -> RedisCoordinatorBuilder {
        RedisCoordinatorBuilder::new(url)
    }

    pub(crate) fn new(
        shared: Arc<Shared>,
        thread: JoinHandle<()>,
        member: String,
        leave_timeout: Duration,
    ) -> Self {
        Self {
            shared,
            thread: Some(thread),
            member,
            leave_timeout,
        }
    }

    /// This process's id in Redis (its pid and random bits), as stored in the member sets.
    ///
    /// ```no_run
    /// let coordinator = keyway_redis::RedisCoordinator::builder("redis://127.0.0.1").build()?;
    /// assert!(coordinator.member_id().starts_with(&std::process::id().to_string()));
    /// # Ok::<(), keyway_redis::Error>(())
    /// ```
    pub fn member_id(&self) -> &str {
        &self.member
    }

    /// Whether Redis answered the last heartbeat, and how many outages there were.
    ///
    /// ```no_run
    /// let coordinator = keyway_redis::RedisCoordinator::builder("redis://127.0.0.1").build()?;
    /// assert!(coordinator.status().connected);
    /// # Ok::<(), keyway_redis::Error>(())
    /// ```
    pub fn status(&self) -> Status {
        let state = self.shared.state.lock();
        Status {
            connected: state.connected,
            outages: state.outages,
        }
    }

    fn changed(&self) {
        // The condvar is shared with a dropping coordinator waiting for the thread's exit (it
        // cannot be waiting now: it holds `self`), so one wake-up reaches the thread.
        self.shared.wake.notify_all();
    }
}

impl Coordinator for RedisCoordinator {
    fn join(&self, executor: &str, _limit: f64) {
        let mut state = self.shared.state.lock();
        state.leaving.retain(|e| e != executor);
        if !state.executors.contains_key(executor) {
            // A new member starts at zero and takes its share once the others counted it.
            state
                .executors
                .insert(executor.to_owned(), Entry { fraction: 0.0 });
        }
        state.dirty = true;
        drop(state);
        self.changed();
    }

    fn leave(&self, executor: &str) {
        let mut state = self.shared.state.lock();
        if state.executors.remove(executor).is_some() {
            state.leaving.push(executor.to_owned());
            state.dirty = true;
        }
        drop(state);
        self.changed();
    }

    fn share(&self, executor: &str, limit: f64) -> f64 {
        if limit.is_nan() || limit <= 0.0 {
            return 0.0; // zero, negative or NaN
        }
        let state = self.shared.state.lock();
        state
            .executors
            .get(executor)
            .map_or(0.0, |e| (e.fraction * limit).clamp(0.0, limit))
    }
}

impl Drop for RedisCoordinator {
    fn drop(&mut self) {
        {
            let mut state = self.shared.state.lock();
            let joined: Vec<String> = state.executors.drain().map(|(name, _)| name).collect();
            state.leaving.extend(joined);
            state.shutdown = true;
        }
        self.changed();
        let Some(thread) = self.thread.take() else {
            return;
        };
        // Wait for the last leave at most `leave_timeout` (`None`: the deadline is past any
        // `Instant`, so wait until the thread ends).
        let deadline = Instant::now().checked_add(self.leave_timeout);
        let mut state = self.shared.state.lock();
        while !state.exited {
            match deadline {
                Some(at) => {
                    if self.shared.wake.wait_until(&mut state, at).timed_out() {
                        break;
                    }
                }
                None => self.shared.wake.wait(&mut state),
            }
        }
        let exited = state.exited;
        drop(state);
        if exited {
            let _ = thread.join();
        } else {
            tracing::debug!(
                member = %self.member,
                "Redis did not answer the leave within the leave timeout; it goes on in the background (or the TTL drops this process)"
            );
        }
    }
}

impl std::fmt::Debug for RedisCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCoordinator")
            .field("member", &self.member)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}
