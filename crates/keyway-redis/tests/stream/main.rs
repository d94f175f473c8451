//! The stream consumer in one process against a real `redis-server` (each test starts its
//! own): the shard rule and a group's whole life, when acks go out, async handlers, user code
//! that panics or shuts its own consumer down, fencing of a member that lost its lease, and
//! recovery of its own pending entries after a Redis error, and the times it reports.
//!
//! One test binary (each file a module) so the suite builds and links few binaries.

#[path = "../common/mod.rs"]
mod common;

mod acks;
mod async_handlers;
mod consumer;
mod fencing;
mod recovery;
mod timing;
mod tokio_runtime;
mod user_code;
