//! [`Delivery`]: what a handler learns about the entry it processes, and the handler's type.

use std::future::Future;
use std::pin::Pin;

use crate::stream::EntryId;

/// One delivery of one stream entry to a handler (the payload is passed beside it).
///
/// - `epoch` is the **fencing number** of the shard's lease under which this delivery runs: it
///   grows at every acquisition of the shard, by any member. A handler whose side effects go
///   to a store that can compare numbers should send it along and have the store refuse a
///   write carrying a lower epoch than one it has seen for the shard: then a member that lost
///   its lease (paused, cut off) cannot overwrite the work of the member that took over.
/// - `attempt` counts from 1 and includes Redis's delivery count: an entry redelivered after a
///   takeover continues the count of its former owner (a delivery it may have started counts,
///   even if it had not). A clean hand-off gives back the counts of the entries it had not
///   started, so rebalancing does not use up attempts.
///
/// Delivery is **at least once**: an entry may run again after a crash, a pause past the lease
/// or a lost ack (but not after a clean hand-off). Entries of one key run one at a time, in
/// stream order; entries of different keys run in parallel, in no particular order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivery {
    /// The entry's key (the bytes the producer sent).
    pub key: Vec<u8>,
    /// The shard the key belongs to.
    pub shard: u32,
    /// The entry's id in the shard's stream.
    pub id: EntryId,
    /// The fencing number of the lease this delivery runs under.
    pub epoch: u64,
    /// Which attempt this is, from 1, counting earlier deliveries by other owners.
    pub attempt: u32,
}

/// The error a handler returns to have its entry retried (and dead-lettered after
/// `max_attempts`).
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// A handler that returns when its entry is done.
pub(crate) type SyncHandler = dyn Fn(&Delivery, &[u8]) -> Result<(), HandlerError> + Send + Sync;

/// The future an async handler returns, boxed.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send>>;

/// A handler whose entry is done when the future it returns is.
pub(crate) type AsyncHandler = dyn Fn(Delivery, Vec<u8>) -> HandlerFuture + Send + Sync;

/// The handler a [`StreamConsumer`](crate::stream::StreamConsumer) runs for each entry: one
/// dispatch, two kinds of handler.
pub(crate) enum Handler {
    /// Runs on a pool thread until it returns (built with `build`).
    Sync(Box<SyncHandler>),
    /// Its future is polled in the key's lane; a waiting future holds no thread (built with
    /// `build_async`).
    Async(Box<AsyncHandler>),
}

/// What the consumer reports after a batch of entries was acknowledged in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Acked {
    /// The shard.
    pub shard: u32,
    /// The lease epoch the acks were fenced with.
    pub epoch: u64,
    /// The entries acknowledged after their handler succeeded.
    pub succeeded: Vec<EntryId>,
    /// The entries dead-lettered (copied to the dead-letter stream and acknowledged in one
    /// step).
    pub dead_lettered: Vec<EntryId>,
}

/// The hook called after each acknowledged batch.
pub(crate) type AckHook = dyn Fn(&Acked) + Send + Sync;
