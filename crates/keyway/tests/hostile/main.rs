//! User code that panics anywhere a pool thread touches it, and lanes under hostile use: each task,
//! hook, key and drop may panic; nothing is lost and no worker dies.
//!
//! One test binary (each file a module) so the suite builds and links few binaries.

#[path = "../common/mod.rs"]
mod common;

mod panic_stress;
mod panicking_keys;
mod panicking_wakers_and_drops;
mod panics;
