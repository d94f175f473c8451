//! Context lanes (SPEC §3): tasks of one context run one at a time, in submission order;
//! contexts run in parallel; a coalescing task replaces its context's older pending one.
//!
//! * `table` — one lane per context value, created on first use, freed when idle; pushing onto
//!   a lane — the protocol is in `README.md` beside this file;
//! * `runner` — how a lane runs on the pool: chunks, batches, multi-key and async entries;
//! * `multi` — the lane side of multi-key tasks: their push, and their pop once done;
//! * `closures` — lanes of closures: `execute_sequential`, `execute_coalescing`, [`Lane`];
//! * `contexts` — the same lanes with the key type fixed once: [`Contexts`];
//! * `typed` — lanes of messages for one handler: [`TypedLanes`];
//! * `typed_async` — the same with an async handler (`Pool::typed_lanes_async`);
//! * `typed_lane` — one key's typed lane held open: [`TypedLane`];
//! * `state` — a typed lane's state per key, owned by the key's lane: [`KeyState`];
//! * `loom_lane` — loom models of a runner taking its queue in chunks against pushers;
//! * `held` — the chunk a runner holds, visible to `shutdown_now` called from inside it;
//! * `key` — a lane's key, with panics of its `Hash`, `Eq` and `Drop` contained.

mod closures;
mod contexts;
mod held;
mod key;
mod multi;
mod runner;
mod state;
mod table;
mod typed;
mod typed_async;
mod typed_lane;

#[cfg(all(test, loom))]
mod loom_lane;
#[cfg(test)]
mod test;

pub use closures::Lane;
pub(crate) use closures::{
    admit_entry_then, plain, with_handle, ClosureEntry, Closures, MakeEntry,
};
pub use contexts::Contexts;
pub(crate) use key::{catch_key, drop_quietly, KeyPanicked};
pub(crate) use multi::Passed;
pub use state::KeyState;
pub(crate) use table::{LaneCore, LaneTable, Resume, TableOps};
pub use typed::TypedLanes;
pub use typed_lane::TypedLane;
