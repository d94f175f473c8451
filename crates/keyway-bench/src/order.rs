//! Per-context order recording: each context's tasks carry sequence numbers
//! 1, 2, 3, …; a task checks that it follows the previous one of its context.

use std::sync::atomic::{AtomicU64, Ordering};

/// The order record of one context. Only that context's tasks touch it, so the
/// check is a plain load and store (no read-modify-write); the cell is padded
/// to its own cache lines so contexts do not share lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct OrderCell {
    last: AtomicU64,
    broken: AtomicU64,
    first_bad: AtomicU64,
}

/// Packs a broken step (expected predecessor, seen) into one word for reporting.
fn pack(prev: u64, seq: u64) -> u64 {
    (prev.min(u32::MAX as u64) << 32) | seq.min(u32::MAX as u64)
}

impl OrderCell {
    /// Records that task `seq` of this context runs now; a task that does not
    /// directly follow the previous one marks the context broken.
    #[inline]
    pub fn record(&self, seq: u64) {
        let prev = self.last.load(Ordering::Relaxed);
        if prev + 1 != seq {
            self.mark_broken(prev, seq);
        }
        self.last.store(seq, Ordering::Relaxed);
    }

    /// Counts one task of this context where the system keeps no order (tasks may run at once):
    /// returns how many ran so far, this one included. The last one sees them all.
    #[inline]
    pub fn count(&self) -> u64 {
        self.last.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Forgets every task recorded (for a run's state used again).
    pub fn reset(&self) {
        self.last.store(0, Ordering::Relaxed);
        self.broken.store(0, Ordering::Relaxed);
        self.first_bad.store(0, Ordering::Relaxed);
    }

    #[cold]
    #[inline(never)]
    fn mark_broken(&self, prev: u64, seq: u64) {
        if self.broken.fetch_add(1, Ordering::Relaxed) == 0 {
            self.first_bad.store(pack(prev, seq), Ordering::Relaxed);
        }
    }

    /// Checks that exactly tasks 1..=`tasks` ran, in order.
    pub fn verify(&self, tasks: u64) -> Result<(), String> {
        let broken = self.broken.load(Ordering::Acquire);
        if broken > 0 {
            let bad = self.first_bad.load(Ordering::Acquire);
            return Err(format!(
                "order broken {broken} time(s); first: task {} ran right after task {}",
                bad & u64::from(u32::MAX),
                bad >> 32
            ));
        }
        let last = self.last.load(Ordering::Acquire);
        if last != tasks {
            return Err(format!(
                "only tasks 1..={last} of {tasks} ran (tasks missing)"
            ));
        }
        Ok(())
    }
}

/// Verifies every context's cell (context `c` ran `tasks(c)` tasks); the error names the
/// first bad context.
pub fn verify_all(cells: &[OrderCell], tasks: impl Fn(usize) -> u64) -> Result<(), String> {
    for (ctx, cell) in cells.iter().enumerate() {
        cell.verify(tasks(ctx))
            .map_err(|e| format!("context {ctx}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_passes() {
        let cell = OrderCell::default();
        (1..=5).for_each(|s| cell.record(s));
        assert!(cell.verify(5).is_ok());
    }

    #[test]
    fn swapped_tasks_are_detected() {
        let cell = OrderCell::default();
        for s in [1, 2, 4, 3, 5] {
            cell.record(s);
        }
        let err = cell.verify(5).unwrap_err();
        assert!(err.contains("task 4 ran right after task 2"), "{err}");
    }

    #[test]
    fn missing_task_is_detected() {
        let cell = OrderCell::default();
        for s in [1, 2, 4, 5] {
            cell.record(s);
        }
        assert!(cell.verify(5).is_err());
        let short = OrderCell::default();
        (1..=4).for_each(|s| short.record(s));
        let err = short.verify(5).unwrap_err();
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn verify_all_names_the_context() {
        let cells: Vec<OrderCell> = (0..3).map(|_| OrderCell::default()).collect();
        for cell in &cells {
            cell.record(1);
        }
        cells[2].record(1);
        let err = verify_all(&cells, |_| 1).unwrap_err();
        assert!(err.starts_with("context 2:"), "{err}");
    }
}
