//! Context lanes in use: per-context order, coalescing, fairness, blocked workers, batches,
//! contexts and multi-key tasks, per-key state, requests with replies, the key hasher, handles
//! and abort, the ordered map's finish, async typed lanes (with state loaded and saved by
//! futures), tokio inside tasks, and wake-ups between workers.
//!
//! One test binary (each file a module) so the suite builds and links few binaries.

#[path = "../common/mod.rs"]
mod common;

mod abort;
mod ask;
mod async_state;
mod async_typed;
mod batch;
mod blocked;
mod coalescing;
mod contexts;
mod fairness;
mod future_chain;
mod handles;
mod hasher;
mod hot_lane;
mod keyed;
mod keyed_state;
mod ordered_map_finish;
mod ordering;
mod tokio_inside;
mod wakes;
