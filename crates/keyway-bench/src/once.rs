//! Exactly-once accounting for `throughput`: one bit per task index. A task
//! sets its bit when it runs; a bit found already set is a task that ran
//! twice, and fails the run at once (before it could open the completion
//! latch early); a bit still clear afterwards is a task that never ran.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::latch::Completion;

/// One bit per task of a run, reusable from run to run.
#[derive(Debug)]
pub struct TaskSet {
    bits: Box<[AtomicU64]>,
    tasks: u64,
}

impl TaskSet {
    /// A set for tasks `0..tasks`, all clear.
    pub fn new(tasks: u64) -> Self {
        Self {
            bits: (0..tasks.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            tasks,
        }
    }

    /// A set leaked for `'static` tasks (once per variant, reset per run).
    pub fn leak(tasks: u64) -> &'static Self {
        Box::leak(Box::new(Self::new(tasks)))
    }

    /// Clears every bit; only between runs, when no task of the last run
    /// can still be running (its pool was shut down).
    pub fn reset(&self) {
        for word in self.bits.iter() {
            word.store(0, Ordering::Relaxed);
        }
    }

    /// Marks task `index` as run; `false` if it had run already.
    #[inline]
    pub fn mark(&self, index: u64) -> bool {
        let bit = 1u64 << (index % 64);
        self.bits[(index / 64) as usize].fetch_or(bit, Ordering::Relaxed) & bit == 0
    }

    /// Checks that every task ran; names the first that did not.
    pub fn verify(&self) -> Result<(), String> {
        let mut missing = 0u64;
        let mut first = None;
        for index in 0..self.tasks {
            let word = self.bits[(index / 64) as usize].load(Ordering::Acquire);
            if word & (1 << (index % 64)) == 0 {
                missing += 1;
                first.get_or_insert(index);
            }
        }
        match first {
            None => Ok(()),
            Some(first) => Err(format!(
                "{missing} of {} tasks did not run (first: task {first})",
                self.tasks
            )),
        }
    }
}

/// Task `index` has run: marks it in `set` and counts it down on `done`, or
/// fails `done` if the task had already run.
#[inline]
pub fn ran(set: &TaskSet, done: &Completion, index: u64) {
    if set.mark(index) {
        done.count_down();
    } else {
        ran_twice(done, index);
    }
}

#[cold]
#[inline(never)]
fn ran_twice(done: &Completion, index: u64) {
    done.fail(format!("task {index} ran more than once"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn every_task_once_passes() {
        let set = TaskSet::new(130);
        let done = Completion::new(130);
        for i in (0..130).rev() {
            ran(&set, &done, i);
        }
        set.verify().unwrap();
        done.wait_since(Instant::now(), Duration::from_secs(1))
            .unwrap();
    }

    #[test]
    fn a_duplicate_fails_at_once_and_a_lost_task_is_named() {
        let set = TaskSet::new(100);
        let done = Completion::new(100);
        // Task 7 lost, task 3 run twice: the count alone would balance.
        for i in (0..100).filter(|&i| i != 7).chain([3]) {
            ran(&set, &done, i);
        }
        let err = done
            .wait_since(Instant::now(), Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(err, "task 3 ran more than once");
        let err = set.verify().unwrap_err();
        assert_eq!(err, "1 of 100 tasks did not run (first: task 7)");
        set.reset();
        assert!(set.verify().unwrap_err().starts_with("100 of 100"));
    }
}
