//! Context lanes: tasks of one context run one at a time, in submission order; contexts run in
//! parallel; a coalescing task replaces its context's older pending one; a multi-key task holds
//! the lanes of all its keys. Below the public face, above the future machinery and the engine:
//! the public handles (`Pool`, `Lane`, `Contexts`, `TypedLanes`, `TypedLane`) call down here.
//!
//! * `table` — one lane per context value, created on first use, freed when idle; pushing onto
//!   a lane — the protocol is in `README.md` beside this file;
//! * `sweep` — what the pool asks of a table: the drain of `shutdown_now`, the monitor's sweeps
//!   of the idle cache, the counts `Stats` reads;
//! * `runner` — how a lane runs on the pool: chunks, batches, multi-key and async entries;
//! * `closures` — lanes of closures, and how a task is admitted and queued in them;
//! * `spawn` — futures onto lanes;
//! * `keyed`, `cells`, `multi` — multi-key tasks: submission and run, recycled task cells, and
//!   the lane side (their push, and their pop once done);
//! * `typed`, `typed_async` — lanes of messages for one handler, sync and async;
//! * `state` — a typed lane's state per key, owned by the key's lane: [`KeyState`];
//! * `pool_handle` — what a `Pool` handle shares: the registry and the closure lanes;
//! * `key` — a lane's key, with panics of its `Hash`, `Eq` and `Drop` contained;
//! * `loom_lane`, `loom_keyed` — loom models of a runner against pushers, and of multi-key tasks.

mod cells;
pub(crate) mod closures;
mod key;
pub(crate) mod keyed;
mod multi;
mod pool_handle;
mod runner;
pub(crate) mod spawn;
mod state;
mod sweep;
mod table;
pub(crate) mod typed;
pub(crate) mod typed_async;

#[cfg(all(test, loom))]
mod loom_keyed;
#[cfg(all(test, loom))]
mod loom_lane;
#[cfg(all(test, loom))]
mod loom_pins;
#[cfg(test)]
mod test;
#[cfg(test)]
mod test_keyed;

pub(crate) use key::KeyPanicked;
pub(crate) use pool_handle::PoolHandle;
pub use state::KeyState;
pub(crate) use table::LaneCore;
