//! [`StreamStats`]: what a consumer reports about its group's shards and its own work.

use std::time::Duration;

/// One shard as seen by [`StreamConsumer::stats`](crate::stream::StreamConsumer::stats).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardStats {
    /// The shard.
    pub shard: u32,
    /// The member holding its lease (`None` when free or never taken).
    pub owner: Option<String>,
    /// The lease's epoch (fencing number): how many times it was acquired.
    pub epoch: u64,
    /// Entries in the stream not yet delivered to the group (Redis's group lag; `None` when
    /// Redis cannot tell, e.g. after entries were deleted).
    pub lag: Option<u64>,
    /// Entries delivered and not yet acknowledged, by any member.
    pub pending: u64,
    /// How long ago the oldest pending entry was last delivered.
    pub oldest_pending_age: Option<Duration>,
    /// Entries of this shard in this member's window (0 unless it holds the shard).
    pub window: usize,
    /// The window's limit.
    pub window_limit: usize,
    /// Entries of quarantined keys this member holds for the shard (not in the window).
    pub held: usize,
    /// The shard's quarantined keys, as stored in Redis (whichever member holds the shard),
    /// sorted.
    pub quarantined: Vec<Vec<u8>>,
}

/// A consumer's view of its group: per shard, and this member's totals since it started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StreamStats {
    /// Every shard of the topic, in order.
    pub shards: Vec<ShardStats>,
    /// Entries this member started (once per delivery, retries not counted); an entry a
    /// release handed back unstarted is not counted.
    pub delivered: u64,
    /// Of those, entries delivered before (replayed after a takeover or a restart).
    pub redeliveries: u64,
    /// Attempts after a failure (in place, with backoff).
    pub retries: u64,
    /// Handler panics (each counts as a failure).
    pub handler_panics: u64,
    /// Entries acknowledged after success, as Redis counted them (an entry acknowledged by
    /// someone else meanwhile is not counted).
    pub acked: u64,
    /// Entries moved to the dead letters (and acknowledged).
    pub dead_lettered: u64,
    /// Keys this member quarantined (an entry exhausted its attempts under
    /// [`FailurePolicy::Quarantine`](crate::stream::FailurePolicy::Quarantine)).
    pub quarantined: u64,
    /// Quarantined keys whose release this member saw, and whose held entries it ran again.
    pub released: u64,
    /// Acks and dead letters refused because the lease had moved to another member (by Redis,
    /// or here, for entries finished after the loss was known).
    pub refused_acks: u64,
    /// Leases acquired.
    pub acquisitions: u64,
    /// Of those, leases taken over from a member whose lease had expired.
    pub takeovers: u64,
    /// Shards handed off cleanly.
    pub releases: u64,
    /// Leases found lost (renewal or acks refused).
    pub leases_lost: u64,
    /// Pending entries found trimmed from their stream before they were processed.
    pub trimmed_while_pending: u64,
    /// Times the consumer group had vanished (Redis lost its data) and was recreated.
    pub groups_recreated: u64,
    /// Stalls reported (a shard with entries in its window and no progress).
    pub stalls: u64,
    /// For each entry this member handled (its handler returned success), the time from its
    /// append to Redis (the milliseconds of its id, by the Redis server's clock) to the end of
    /// its successful attempt (by this host's clock; a clock behind Redis's counts 0).
    /// Retries and the queue wait behind the key's earlier entries are in it; the ack, sent
    /// after, is not.
    pub append_to_handled: keyway::Histogram,
}
