//! One scheduled task as it waits in a bucket ([`Entry`]: the job, its due time, priority and
//! scheduling order), and the order in which an executor releases entries ([`better`]).

use super::config::PriorityOrder;
use super::scheduled_job::InlineJob;

/// One scheduled task waiting for its interval: 72 bytes, a task of up to four words
/// included (a larger one is boxed).
pub(crate) struct Entry {
    pub(crate) job: InlineJob,
    /// Nanoseconds since the scheduler's epoch ([`NEVER`](super::clock::NEVER) if never due).
    pub(crate) due: u64,
    /// Not run if it cannot start by then ([`NEVER`](super::clock::NEVER): no deadline).
    pub(crate) deadline: u64,
    pub(crate) priority: i64,
    /// Scheduling order within the executor: ties of priority and due time go first-come.
    pub(crate) seq: u64,
}

/// Is `a` better than `b` in `order` (ties: the earlier due, then the earlier scheduled)?
pub(crate) fn better(order: PriorityOrder, a: &Entry, b: &Entry) -> std::cmp::Ordering {
    let by_priority = match order {
        PriorityOrder::HighestFirst => b.priority.cmp(&a.priority),
        PriorityOrder::LowestFirst => a.priority.cmp(&b.priority),
    };
    by_priority.then(a.due.cmp(&b.due)).then(a.seq.cmp(&b.seq))
}
