//! The scenarios this command implements.

pub mod contexts;
pub mod distributed;
pub mod hotkey;
pub mod latency;
pub mod ordered;
pub mod schedule;
pub mod strategy;
pub mod stream;
pub mod tax;
pub mod throughput;

#[cfg(test)]
use crate::harness::options::RunOptions;
use crate::harness::VariantReport;

/// Receives each variant's report as soon as it is measured.
pub type Emit<'a> = dyn FnMut(&VariantReport) + 'a;

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
