//! The rate-limited scheduler: scheduling, limits, timeouts, and (ignored by default) a long soak.
//!
//! One test binary (each file a module) so the suite builds and links few binaries.

#[path = "../common/mod.rs"]
mod common;

mod schedule;
mod schedule_limits;
mod schedule_soak;
