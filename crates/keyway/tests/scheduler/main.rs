//! The rate-limited scheduler: scheduling, limits, timeouts, user code that panics in its
//! bookkeeping paths, shutting a pool with a scheduler down, and (ignored by default) a long
//! soak.
//!
//! One test binary (each file a module) so the suite builds and links few binaries.

#[path = "../common/mod.rs"]
mod common;

mod cancel_races;
mod panicking_user_code;
mod schedule;
mod schedule_limits;
mod schedule_soak;
mod shutdown;
