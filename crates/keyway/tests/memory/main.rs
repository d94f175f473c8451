//! Memory: no allocation per task on the hot paths (allocation budgets), nothing of a pool left
//! once it is dropped, lanes and per-key state freed when idle.
//!
//! One test binary (each file a module) with one counting global allocator: it counts every
//! allocation in the process, so every test here takes [`serial`] and they run one at a time.

#[path = "../common/mod.rs"]
mod common;

mod allocations;
mod async_allocations;
mod batch_allocations;
mod idle_lanes;
mod inline_futures;
mod keyed_allocations;
mod leaks;
mod table_lifetime;

use std::sync::{Mutex, MutexGuard};

#[global_allocator]
static ALLOC: common::counting::Counting = common::counting::Counting;

/// Held by every test of this binary while it runs: the allocator's counts are process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

/// Takes [`SERIAL`] (a test that panicked while holding it does not poison the others).
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The least of `rounds` runs of `round` (an allocation count): noise on a loaded machine only
/// adds allocations (a submitter that ran ahead of the workers finds no recycled cell at hand).
fn least_of(rounds: usize, mut round: impl FnMut() -> u64) -> u64 {
    (0..rounds).map(|_| round()).min().unwrap_or(u64::MAX)
}
