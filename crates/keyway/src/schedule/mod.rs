//! Rate-limited scheduling (SPEC §7): tasks scheduled for a time, run at no more than a limit
//! per second per named executor, best first when more are due than the limit allows.
//!
//! * `coordinator` — how a process learns its share of a limit shared by a cluster.

mod coordinator;

#[allow(unused_imports)] // used by the scheduler
pub(crate) use coordinator::clamp_share;
pub use coordinator::{Coordinator, LocalCoordinator};
