//! The work every system runs. Each task body is one `#[inline(never)]`
//! function shared by all systems, so code generation cannot decide a
//! comparison (SPEC §9).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::latch::Completion;
use crate::order::{verify_all, OrderCell};

/// `work` atomic increments on a fresh local atomic; returns its final value.
#[inline(never)]
pub fn spin(work: u64) -> u64 {
    let local = AtomicU64::new(0);
    let local = black_box(&local);
    for _ in 0..work {
        local.fetch_add(1, Ordering::Relaxed);
    }
    local.load(Ordering::Relaxed)
}

/// The `throughput` task: one update of the shared completion counter (the
/// last update opens the latch).
#[inline(never)]
pub fn tick(done: &Completion) {
    done.count_down();
}

/// The shared state of one `contexts` run: one order cell per context and the
/// completion latch, which counts contexts whose last task has run.
#[derive(Debug)]
pub struct ContextsRun {
    /// One order record per context.
    pub cells: Box<[OrderCell]>,
    /// Tasks per context.
    pub tasks: u64,
    /// Atomic increments per task.
    pub work: u64,
    /// Opens when every context's last task has run.
    pub done: Completion,
}

impl ContextsRun {
    /// Fresh state for `contexts` contexts of `tasks` tasks of `work` increments.
    pub fn new(contexts: usize, tasks: u64, work: u64) -> Self {
        Self {
            cells: (0..contexts).map(|_| OrderCell::default()).collect(),
            tasks,
            work,
            done: Completion::new(if tasks == 0 { 0 } else { contexts }),
        }
    }

    /// Number of contexts.
    pub fn contexts(&self) -> usize {
        self.cells.len()
    }

    /// Calls `submit(ctx, seq)` for every task in the order a producer submits
    /// them: round robin over the contexts (messages of many clients
    /// interleaved), sequence numbers starting at 1. Stops at the first error.
    pub fn produce(
        &self,
        mut submit: impl FnMut(usize, u64) -> Result<(), String>,
    ) -> Result<(), String> {
        for seq in 1..=self.tasks {
            for ctx in 0..self.contexts() {
                submit(ctx, seq)?;
            }
        }
        Ok(())
    }

    /// Checks that every context ran all its tasks, in order.
    pub fn verify(&self) -> Result<(), String> {
        verify_all(&self.cells, self.tasks)
    }
}

/// The `contexts` task: `work` increments, then the order check of its
/// context; the context's last task counts the context as done.
#[inline(never)]
pub fn context_task(run: &ContextsRun, ctx: usize, seq: u64) {
    black_box(spin(run.work));
    run.cells[ctx].record(seq);
    if seq == run.tasks {
        run.done.count_down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn spin_counts() {
        assert_eq!(spin(0), 0);
        assert_eq!(spin(1000), 1000);
    }

    #[test]
    fn direct_run_verifies_and_completes() {
        let run = ContextsRun::new(3, 4, 2);
        run.produce(|c, s| {
            context_task(&run, c, s);
            Ok(())
        })
        .unwrap();
        run.verify().unwrap();
        run.done
            .wait_since(Instant::now(), Duration::from_secs(1))
            .unwrap();
    }

    #[test]
    fn reordered_run_fails_verification() {
        let run = ContextsRun::new(2, 3, 1);
        for (c, s) in [(0, 1), (1, 1), (0, 3), (0, 2), (1, 2), (1, 3)] {
            context_task(&run, c, s);
        }
        let err = run.verify().unwrap_err();
        assert!(err.starts_with("context 0:"), "{err}");
    }
}
