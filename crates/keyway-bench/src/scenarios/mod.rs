//! The scenarios of SPEC §9 that this command implements.

pub mod contexts;
pub mod distributed;
pub mod ordered;
pub mod strategy;
pub mod throughput;

use std::time::Duration;

use crate::harness::{Progress, VariantReport};

/// Options shared by every scenario.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Shrink the workloads to run in seconds (CI smoke).
    pub quick: bool,
    /// Runs per system per variant.
    pub runs: usize,
    /// How long a run may take before its tasks count as missing.
    pub timeout: Duration,
    /// Where progress goes.
    pub progress: Progress,
}

impl RunOptions {
    /// Options for a quick or full run; `runs` defaults to 3 (quick) or 5.
    pub fn new(quick: bool, runs: Option<usize>) -> Self {
        Self {
            quick,
            runs: runs.unwrap_or(if quick { 3 } else { 5 }),
            timeout: Duration::from_secs(if quick { 60 } else { 600 }),
            progress: Progress::new(),
        }
    }
}

/// Receives each variant's report as soon as it is measured.
pub type Emit<'a> = dyn FnMut(&VariantReport) + 'a;

/// The number of worker threads pools get: the machine's available parallelism.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
