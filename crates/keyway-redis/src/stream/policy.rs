//! [`FailurePolicy`]: what happens to a key whose entry failed `max_attempts` times.

/// What a consumer does with an entry that failed
/// [`max_attempts`](crate::stream::StreamConsumerBuilder::max_attempts) times, and with its
/// key's later entries. Set with
/// [`failure_policy`](crate::stream::StreamConsumerBuilder::failure_policy).
///
/// ```
/// use keyway_redis::stream::{FailurePolicy, StreamConsumer, Topic};
/// let b = StreamConsumer::builder("redis://127.0.0.1", Topic::new("accounts", 4)?)
///     .failure_policy(FailurePolicy::Quarantine);
/// assert_eq!(FailurePolicy::default(), FailurePolicy::DeadLetter);
/// # Ok::<(), keyway_redis::stream::StreamError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// The entry is copied to its shard's dead-letter stream and acknowledged in one step,
    /// and its key's later entries run on (the default).
    #[default]
    DeadLetter,
    /// The key is **quarantined**: the entry and the key's later entries are held (not run,
    /// not acknowledged; they stay pending in Redis) until the key is released, through
    /// [`StreamConsumer::release`](crate::stream::StreamConsumer::release) or the
    /// `keyway-stream release` command. Other keys go on. The hold is stored in Redis under
    /// the same owner-and-epoch check as acks, so a member that takes the shard over keeps
    /// the key held. Once released, the held entries run in order, the failed one first with
    /// its attempts counted afresh. Needs key order.
    Quarantine,
}
