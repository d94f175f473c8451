//! The systems of the `strategy` scenario: one producer thread makes tasks
//! that each carry a fresh 16 KiB buffer, and they are consumed
//!
//! - `keyway`: by keyway's adaptive strategy ([`keyway_adaptive`]);
//! - `pec`: always on a plain pool, produce-execute-consume ([`pec`]);
//! - `pc`: on the producing thread, one thread for everything ([`pc`]).

pub mod keyway_adaptive;
pub mod pc;
pub mod pec;

use keyway::ModeCounts;

use crate::work::strategy::StrategyRun;

/// A system for the `strategy` scenario.
pub trait StrategySystem: Sized {
    /// The system's row name.
    const NAME: &'static str;

    /// Untimed: builds the system's threads and pools for `run`, with
    /// `threads` = the machine's available parallelism where a pool size is
    /// needed.
    fn setup(run: &'static StrategyRun, threads: usize) -> Result<Self, String>;

    /// Timed: produces every task of `run` on the calling thread (each
    /// buffer written by [`fill`](crate::work::strategy::fill)) and has it
    /// consumed ([`consume`](crate::work::strategy::consume)). Completion is
    /// detected by `run.done`, not by this call returning.
    fn feed(&mut self) -> Result<(), String>;

    /// Untimed: stops the system and waits for its threads. Returns how many
    /// tasks went each way, for a system that has consume modes (keyway).
    fn teardown(self) -> Result<Option<ModeCounts>, String>;
}
