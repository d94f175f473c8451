//! Context lanes: tasks of one context run one at a time, in submission order; contexts run in
//! parallel; a coalescing task replaces its context's older pending one; a multi-key task holds
//! the lanes of all its keys. Below the public face, above the future machinery and the engine:
//! the public handles (`Pool`, `Lane`, `Contexts`, `TypedLanes`, `TypedLane`) call down here.
//!
//! * `table` — one lane per context value, created on first use, freed when idle; the lane
//!   itself (`LaneCore`, and the `LaneState` its mutex guards: queue, table reference, pins);
//!   pushing onto a lane — the protocol is in `README.md` beside this file (a typed lane's state
//!   per key is `typed/state.rs`);
//! * `queue` — a lane's queue: its first entry in the lane's state, the rest in linked blocks
//!   that are never copied to grow, taken and given back whole in O(1);
//! * `turn` — one activation of a lane: its budget, its stop check, what it holds, its finish
//!   count and its end, for every kind of lane;
//! * `runner` — how a lane of closures or messages runs its turn: chunks, and where it stops
//!   (multi-key and async entries);
//! * `sweep` — what the pool asks of a table: the drain of `shutdown_now`, the monitor's sweeps
//!   of the idle cache, the counts `Stats` reads;
//! * `closures` — lanes of closures, and how a task is admitted and queued in them;
//! * `batch` — a batch of closures (`execute_all`) as one entry: its admission, its run;
//! * `spawn` — futures onto lanes;
//! * `keyed/` — multi-key tasks: submission, their run, the lane side, recycled task cells;
//! * `typed/` — lanes of messages for one handler, sync and async, with state per key
//!   ([`KeyState`]);
//! * `pool_handle` — what a `Pool` handle shares: the registry and the closure lanes;
//! * `key` — a lane's key, with panics of its `Hash`, `Eq` and `Drop` contained;
//! * `loom_lane`, `loom_keyed`, `loom_pins` — loom models of a runner against pushers, of
//!   multi-key tasks, and of pinned lanes' table references.

mod activation;
pub(crate) mod batch;
pub(crate) mod closures;
mod entry;
mod key;
pub(crate) mod keyed;
mod pool_handle;
mod queue;
mod runner;
pub(crate) mod spawn;
mod sweep;
mod table;
mod turn;
pub(crate) mod typed;
mod watched;

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
/// The multi-key task cells' counts, for the lane tests.
#[cfg(test)]
use keyed::cells;
pub(crate) use pool_handle::PoolHandle;
pub(crate) use table::LaneCore;
pub(crate) use typed::split_loaded;
pub use typed::{AsyncKeyState, KeyState, Loaded};
