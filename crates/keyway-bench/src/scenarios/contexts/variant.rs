//! One workload of `contexts`, and the named ones (`seed`, `fine`, `many`).

/// Seed workload: contexts.
pub(super) const SEED_CONTEXTS: usize = 16;
/// Seed workload: tasks per context.
const SEED_TASKS: u64 = 50_000;
/// Seed workload: atomic increments per task.
const SEED_WORK: u64 = 1_000;

/// One workload of the scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// `seed`, `fine`, `many` or `custom`.
    pub name: &'static str,
    /// Number of contexts.
    pub contexts: usize,
    /// Tasks per context.
    pub tasks: u64,
    /// Atomic increments per task.
    pub work: u64,
    /// Consecutive tasks of a context the producer hands over at once (`--batch`; 1: none).
    pub batch: u64,
}

/// The named variants: (name, contexts, tasks per context, work).
pub(super) const NAMED: [(&str, usize, u64, u64); 3] = [
    ("seed", SEED_CONTEXTS, SEED_TASKS, SEED_WORK),
    ("fine", SEED_CONTEXTS, SEED_TASKS, 10),
    ("many", 1_024, 781, 10),
];

impl Variant {
    /// The variant with these parameters, named if it is a standard one.
    pub fn full(contexts: usize, tasks: u64, work: u64) -> Self {
        let name = NAMED
            .iter()
            .find(|&&(_, c, t, w)| (c, t, w) == (contexts, tasks, work))
            .map_or("custom", |&(name, ..)| name);
        Self {
            name,
            contexts,
            tasks,
            work,
            batch: 1,
        }
    }

    /// Total number of tasks.
    pub fn total(&self) -> u64 {
        self.contexts as u64 * self.tasks
    }
}
