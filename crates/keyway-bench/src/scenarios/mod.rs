//! The scenarios of SPEC §9 that this command implements.

pub mod contexts;
pub mod contexts_async;
pub mod distributed;
pub mod ordered;
pub mod schedule;
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
    /// Sized for `all`'s report (finishing within ~10 minutes on a 2-core
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

/// Receives each variant's report as soon as it is measured.
pub type Emit<'a> = dyn FnMut(&VariantReport) + 'a;

/// The number of worker threads pools get: the machine's available parallelism.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Every system of every scenario's standard contender list goes through
/// the harness's readiness step, a warm-up run and the rotation: measures
/// one small variant and checks each row (tests only).
#[cfg(test)]
pub fn assert_every_system_ready(report: &VariantReport, systems: &[&str]) {
    let names: Vec<_> = report.results.iter().map(|r| r.system).collect();
    assert_eq!(names, systems, "every system measured");
    for r in &report.results {
        assert!(r.ready, "{} skipped the readiness step", r.system);
        assert_eq!(r.times_s.len(), 2, "{}: two counted runs", r.system);
    }
}

/// Options for those tests: quick, two counted runs.
#[cfg(test)]
pub fn test_options() -> RunOptions {
    RunOptions::new(true, Some(2))
}
