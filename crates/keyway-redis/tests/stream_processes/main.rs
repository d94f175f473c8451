//! The stream consumer with separate member processes (this test binary run again as its
//! ignored `stream_member` test, steered through environment, stdin and stdout): faults
//! (`faults`: kill -9, SIGSTOP, Redis restarts, poison messages), a randomised fault loop over
//! seeds (`fault_loop`), and the `keyway-stream` operator command (`operator`).
//!
//! The tests take [`ONE_AT_A_TIME`]: each shares two cores with its member processes.
//! `KW_STREAM_HANDLER=async` (inherited by the members) runs them with async handlers; CI runs
//! the `faults` group a second time that way: `cargo test --test stream_processes -- faults::`.

#[path = "../common/mod.rs"]
mod common;

mod fault_loop;
mod faults;
mod operator;

use parking_lot::Mutex;

/// Held by every test of this binary while it runs: one multi-process test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A member process, started by the tests through `common::cluster::Cluster`.
#[test]
#[ignore = "run as a child process by the other tests of this binary"]
fn stream_member() {
    common::member::run();
}
