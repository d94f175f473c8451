//! The `strategy` work: a producer writes a fresh 16 KiB buffer per task
//! ([`fill`]); consuming a task checksums its buffer ([`checksum`]) and
//! records the checksum in the task's slot ([`consume`]). Every system calls
//! these same `#[inline(never)]` functions.
//!
//! Kept in a file of its own (a child of `work`) so that it could be written
//! while `work.rs` was being changed for other scenarios.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::latch::Completion;

/// Bytes of the buffer each task carries.
pub const BUFFER_BYTES: usize = 16 * 1_024;
/// The buffer in 64-bit words.
pub const BUFFER_WORDS: usize = BUFFER_BYTES / 8;
/// How long a blocking task sleeps after its checksum.
pub const BLOCKING_SLEEP: Duration = Duration::from_micros(50);

/// Weyl-sequence increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// A task's buffer: [`BUFFER_BYTES`] bytes, freshly written by the producer.
pub type Buffer = Box<[u64]>;

/// The producer's work: allocates and writes task `task`'s 16 KiB buffer
/// from a cheap generator seeded by the task number (a Weyl sequence
/// through an xorshift: one pass of stores, as a protocol parser filling a
/// buffer would).
#[inline(never)]
pub fn fill(task: u64) -> Buffer {
    let seed = crate::keys::splitmix64(task);
    (0..BUFFER_WORDS as u64)
        .map(|i| {
            let z = seed.wrapping_add(i.wrapping_mul(GAMMA));
            z ^ (z >> 29)
        })
        .collect()
}

/// The consumer's work: a position-sensitive checksum of every word of the
/// buffer (Fletcher-style running sums).
#[inline(never)]
pub fn checksum(buf: &[u64]) -> u64 {
    let (mut a, mut b) = (0u64, 0u64);
    for &w in buf {
        a = a.wrapping_add(w);
        b = b.wrapping_add(a);
    }
    black_box(b ^ a.rotate_left(32))
}

/// Which tasks of a run are blocking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// None: every task only checksums its buffer.
    NonBlocking,
    /// Every task: declared blocking, sleeps [`BLOCKING_SLEEP`] after its checksum.
    Blocking,
    /// Every odd-numbered task is blocking, the even ones are not.
    Mixed,
}

impl Mix {
    /// Whether task `task` is blocking.
    #[inline]
    pub fn blocks(self, task: u64) -> bool {
        match self {
            Mix::NonBlocking => false,
            Mix::Blocking => true,
            Mix::Mixed => task % 2 == 1,
        }
    }

    /// The variant's name.
    pub fn name(self) -> &'static str {
        match self {
            Mix::NonBlocking => "non-blocking",
            Mix::Blocking => "blocking",
            Mix::Mixed => "mixed",
        }
    }
}

/// The shared state of one `strategy` run: the checksum slot of every task
/// and the latch that counts consumed tasks.
#[derive(Debug)]
pub struct StrategyRun {
    /// Tasks in the run, numbered `0..tasks`.
    pub tasks: u64,
    /// Which tasks are declared blocking and sleep [`BLOCKING_SLEEP`].
    pub mix: Mix,
    /// Each task's checksum is added into its slot: a slot equals the
    /// expected checksum only if the task was consumed exactly once.
    pub slots: &'static [AtomicU64],
    /// Opens when every task has been consumed.
    pub done: Completion,
}

impl StrategyRun {
    /// Fresh state for a run over `slots` (one per task, reset here to 0).
    pub fn new(slots: &'static [AtomicU64], mix: Mix) -> Self {
        for slot in slots {
            slot.store(0, Ordering::Relaxed);
        }
        Self {
            tasks: slots.len() as u64,
            mix,
            slots,
            done: Completion::new(slots.len()),
        }
    }

    /// `n` zeroed slots for the runs of one variant (leaked once per
    /// variant, not per run).
    pub fn leak_slots(n: u64) -> &'static [AtomicU64] {
        Box::leak((0..n).map(|_| AtomicU64::new(0)).collect())
    }

    /// The checksum of every task of a correct run, computed untimed on
    /// `threads` threads.
    pub fn expected(tasks: u64, threads: usize) -> Vec<u64> {
        let threads = threads.max(1) as u64;
        let chunk = tasks.div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let range = (t * chunk).min(tasks)..((t + 1) * chunk).min(tasks);
                    s.spawn(move || range.map(|i| checksum(&fill(i))).collect::<Vec<u64>>())
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("an expected-checksum thread panicked"))
                .collect()
        })
    }

    /// Checks that every task was consumed exactly once with the right
    /// checksum; names the first bad task and counts each kind of error.
    pub fn verify(&self, expected: &[u64]) -> Result<(), String> {
        if expected.len() as u64 != self.tasks {
            return Err(format!(
                "{} expected checksums for {} tasks",
                expected.len(),
                self.tasks
            ));
        }
        let (mut missing, mut repeated, mut wrong) = (0u64, 0u64, 0u64);
        let mut first: Option<String> = None;
        for (task, (slot, &want)) in self.slots.iter().zip(expected).enumerate() {
            let got = slot.load(Ordering::Acquire);
            if got == want {
                continue;
            }
            let what = if got == 0 {
                missing += 1;
                "not consumed"
            } else if (2..=8).any(|k| got == want.wrapping_mul(k)) {
                repeated += 1;
                "consumed more than once"
            } else {
                wrong += 1;
                "wrong checksum"
            };
            first.get_or_insert_with(|| format!("task {task} {what}"));
        }
        match first {
            None if self.done.remaining() == 0 => Ok(()),
            None => Err(format!(
                "{} tasks did not count down",
                self.done.remaining()
            )),
            Some(first) => Err(format!(
                "{missing} tasks not consumed, {repeated} consumed more than once, \
                 {wrong} with a wrong checksum (first: {first})"
            )),
        }
    }
}

/// Consumes task `task`: checksums its buffer, records the checksum in the
/// task's slot, sleeps [`BLOCKING_SLEEP`] if the task is blocking,
/// and counts the task done. The buffer is freed by the caller (the task's
/// owner) afterwards.
#[inline(never)]
pub fn consume(run: &StrategyRun, task: u64, buf: &[u64]) {
    let sum = checksum(buf);
    run.slots[task as usize].fetch_add(sum, Ordering::Relaxed);
    if run.mix.blocks(task) {
        std::thread::sleep(BLOCKING_SLEEP);
    }
    run.done.count_down();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_16_kib_and_task_dependent() {
        let a = fill(1);
        assert_eq!(a.len() * 8, BUFFER_BYTES);
        assert_eq!(a, fill(1));
        assert_ne!(checksum(&a), checksum(&fill(2)));
        // Position-sensitive: swapping two words changes the checksum.
        let mut b = a.clone();
        b.swap(3, 4);
        assert_ne!(checksum(&a), checksum(&b));
    }

    #[test]
    fn expected_matches_a_serial_computation() {
        let expected = StrategyRun::expected(101, 3);
        let serial: Vec<u64> = (0..101).map(|i| checksum(&fill(i))).collect();
        assert_eq!(expected, serial);
    }

    #[test]
    fn checker_accepts_a_correct_run() {
        let n = 50;
        let expected = StrategyRun::expected(n, 2);
        let run = StrategyRun::new(StrategyRun::leak_slots(n), Mix::NonBlocking);
        for i in (0..n).rev() {
            consume(&run, i, &fill(i));
        }
        run.verify(&expected).unwrap();
    }

    #[test]
    fn checker_catches_a_missing_task_and_slots_reset() {
        let n = 50;
        let expected = StrategyRun::expected(n, 2);
        let slots = StrategyRun::leak_slots(n);
        let run = StrategyRun::new(slots, Mix::NonBlocking);
        for i in 1..n {
            consume(&run, i, &fill(i));
        }
        let err = run.verify(&expected).unwrap_err();
        assert!(err.contains("1 tasks not consumed"), "{err}");
        assert!(err.contains("first: task 0 not consumed"), "{err}");

        // A new run resets the slots.
        let run = StrategyRun::new(slots, Mix::NonBlocking);
        for i in 0..n {
            consume(&run, i, &fill(i));
        }
        run.verify(&expected).unwrap();
    }

    #[test]
    fn checker_reports_each_kind_of_error() {
        let n = 50;
        let expected = StrategyRun::expected(n, 2);
        let run = StrategyRun::new(StrategyRun::leak_slots(n), Mix::NonBlocking);
        for i in 0..n {
            if i == 3 {
                continue;
            }
            let buf = fill(if i == 9 { 8 } else { i });
            consume(&run, i, &buf);
        }
        let err = run.verify(&expected).unwrap_err();
        assert!(err.contains("1 tasks not consumed"), "{err}");
        assert!(err.contains("1 with a wrong checksum"), "{err}");
        assert!(err.contains("first: task 3 not consumed"), "{err}");
        consume(&run, 3, &fill(3));
        consume(&run, 7, &fill(7));
        let err = run.verify(&expected).unwrap_err();
        assert!(
            err.contains("0 tasks not consumed, 1 consumed more than once, 1 with"),
            "{err}"
        );
        assert!(
            err.contains("first: task 7 consumed more than once"),
            "{err}"
        );
    }

    #[test]
    fn mixed_runs_block_every_other_task() {
        assert!(!Mix::Mixed.blocks(0) && Mix::Mixed.blocks(1) && !Mix::Mixed.blocks(2));
        assert!((0..4).all(|t| Mix::Blocking.blocks(t) && !Mix::NonBlocking.blocks(t)));
    }

    #[test]
    fn blocking_tasks_sleep() {
        let run = StrategyRun::new(StrategyRun::leak_slots(1), Mix::Blocking);
        let start = std::time::Instant::now();
        consume(&run, 0, &fill(0));
        assert!(start.elapsed() >= BLOCKING_SLEEP);
    }
}
