//! One workload of `throughput`: producers, tasks, and the keys each task names.

/// One workload of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Producer threads.
    pub producers: usize,
    /// Tasks per run, all producers together.
    pub tasks: u64,
    /// Keys per task (0: plain tasks).
    pub keys: u32,
    /// Keys the keyed tasks draw from (unused for plain tasks).
    pub key_space: u32,
}
