//! One workload of `contexts`, and the named ones (`seed`, `fine`, `many`, `zipf`).

/// Seed workload: contexts.
pub(super) const SEED_CONTEXTS: usize = 16;
/// Seed workload: tasks per context.
const SEED_TASKS: u64 = 50_000;
/// Seed workload: atomic increments per task.
const SEED_WORK: u64 = 1_000;

/// One workload of the scenario.
#[derive(Debug, Clone, PartialEq)]
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
    /// Key popularity: `None` uniform (every context `tasks` tasks, round robin); `Some(s)`:
    /// the variant's `contexts × tasks` tasks drawn over the contexts with Zipf exponent `s`.
    pub zipf: Option<f64>,
}

/// Keys of a skewed variant (`--zipf` without `--contexts`).
pub(super) const ZIPF_KEYS: usize = 100_000;
/// The Zipf exponent of the standard skewed variant.
pub(super) const ZIPF_S: f64 = 1.1;
/// The standard skewed variant: 100,000 keys × 8 tasks on average (800,000 tasks, as `many`),
/// work 10, Zipf 1.1.
pub(super) const ZIPF: (&str, usize, u64, u64) = ("zipf", ZIPF_KEYS, 8, 10);

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
            zipf: None,
        }
    }

    /// The variant with its tasks drawn over the contexts with Zipf exponent `s` (named
    /// `zipf` when it is the standard one).
    pub fn skewed(self, s: f64) -> Self {
        let (name, c, t, w) = ZIPF;
        let standard = (self.contexts, self.tasks, self.work) == (c, t, w) && s == ZIPF_S;
        Self {
            name: if standard { name } else { "custom" },
            zipf: Some(s),
            ..self
        }
    }

    /// Total number of tasks.
    pub fn total(&self) -> u64 {
        self.contexts as u64 * self.tasks
    }
}
