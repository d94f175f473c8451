//! The rate coordinator against a real `redis-server` (each test starts its own): bad settings
//! and unreachable servers are typed errors; shares among members in one process and in
//! separate processes; leaving and coming back; Redis killed, restarted empty or paused (the
//! outage rule, for shares and for a scheduler's tasks); a shared limit that holds in any
//! sliding second across three processes.
//!
//! One test binary (each file a module) so the suite builds and links few binaries. The
//! multi-process tests run this binary again as their members (its ignored
//! `processes::member_process` and `shared_window::window_member` tests).

#[path = "../common/mod.rs"]
mod common;

mod errors;
mod leaving;
mod outages;
mod processes;
mod scheduler_outages;
mod shared_window;
mod shares;
