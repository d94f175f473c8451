//! The options of a run that every scenario takes: its size, counted runs,
//! timeout and progress output.

use std::time::Duration;

use super::Progress;

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
    /// Sized for `all`'s report (finishing within ~11 minutes on a 2-core
    /// machine): scenarios that would take longer shrink their task counts
    /// and say so in their parameters.
    pub report: bool,
}

impl RunOptions {
    /// Options for a quick or full run; `runs` defaults to 3 (quick) or 5.
    pub fn new(quick: bool, runs: Option<usize>) -> Self {
        Self {
            quick,
            runs: runs.unwrap_or(if quick { 3 } else { 5 }),
            timeout: Duration::from_secs(if quick { 60 } else { 600 }),
            progress: Progress::new(),
            report: false,
        }
    }
}

impl RunOptions {
    /// What a scenario divides its full task counts by: `quick` with
    /// `--quick`, `report` in `all`'s report, 1 otherwise.
    pub fn divisor(&self, quick: u64, report: u64) -> u64 {
        if self.quick {
            quick
        } else if self.report {
            report
        } else {
            1
        }
    }
}
