//! Keyed tasks: which keys a task names, and the per-key checker that proves
//! no two tasks sharing a key overlapped (and, where the system promises it,
//! that a key's tasks ran in submission order).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Number of distinct keys the keyed `throughput` variants draw from by
/// default.
pub const KEY_SPACE: u32 = 1_024;
/// The high-contention key space: 2-key tasks over 16 keys, where a lock
/// per key blocks threads.
pub const SMALL_KEY_SPACE: u32 = 16;
/// The largest key space `--key-space` accepts.
pub const MAX_KEY_SPACE: u32 = 65_536;

/// SplitMix64: a cheap, well-mixed hash of a task index.
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The keys one task names: 1 or 2 distinct keys of [`KEY_SPACE`], in
/// ascending order (the order the mutex peer locks them in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskKeys {
    keys: [u32; 2],
    len: u8,
}

impl TaskKeys {
    /// The keys of task `index` (0-based over the whole run) when every task
    /// names `count` keys (1 or 2): pseudo-random, deterministic per index.
    #[cfg(test)]
    #[inline]
    pub fn for_task(index: u64, count: u32) -> Self {
        Self::for_task_in(index, count, KEY_SPACE)
    }

    /// The keys of task `index` drawn from `space` keys (2 ..=
    /// [`MAX_KEY_SPACE`]) instead of [`KEY_SPACE`].
    #[inline]
    pub fn for_task_in(index: u64, count: u32, space: u32) -> Self {
        debug_assert!(count == 1 || count == 2, "1 or 2 keys per task");
        debug_assert!((2..=MAX_KEY_SPACE).contains(&space), "key space {space}");
        let h = splitmix64(index);
        let a = (h % u64::from(space)) as u32;
        if count == 1 {
            return Self {
                keys: [a, a],
                len: 1,
            };
        }
        // A second key different from the first: a non-zero offset from it.
        let offset = 1 + ((h >> 32) % u64::from(space - 1)) as u32;
        let b = (a + offset) % space;
        Self {
            keys: [a.min(b), a.max(b)],
            len: 2,
        }
    }

    /// The keys, ascending.
    #[inline]
    pub fn as_slice(&self) -> &[u32] {
        &self.keys[..usize::from(self.len)]
    }
}

/// The checker state of one key, padded to its own cache lines. Only tasks
/// naming the key touch it, and for a correct system they do so one at a
/// time, so the order and run records are plain loads and stores.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct KeyCell {
    /// Set while a task naming this key runs.
    busy: AtomicBool,
    /// Tasks naming this key that ran.
    runs: AtomicU64,
    /// Sequence number of the last task that ran on this key (0: none yet).
    last: AtomicU64,
    /// Times a task entered while another was running on this key.
    overlaps: AtomicU64,
    /// Times a task ran after a task submitted later than it.
    inversions: AtomicU64,
    /// The first inversion, packed as (previous, seen).
    first_inversion: AtomicU64,
}

/// Packs (previous, seen) sequence numbers into one word for reporting.
fn pack(prev: u64, seq: u64) -> u64 {
    (prev.min(u64::from(u32::MAX)) << 32) | seq.min(u64::from(u32::MAX))
}

impl KeyCell {
    /// A task with sequence number `seq` (> 0, increasing in submission
    /// order) starts running on this key.
    #[inline]
    pub fn enter(&self, seq: u64) {
        if self.busy.swap(true, Ordering::Acquire) {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        let prev = self.last.load(Ordering::Relaxed);
        if seq <= prev {
            self.mark_inversion(prev, seq);
        }
        self.last.store(seq, Ordering::Relaxed);
        self.runs
            .store(self.runs.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// The task that entered last leaves this key.
    #[inline]
    pub fn exit(&self) {
        self.busy.store(false, Ordering::Release);
    }

    #[cold]
    #[inline(never)]
    fn mark_inversion(&self, prev: u64, seq: u64) {
        if self.inversions.fetch_add(1, Ordering::Relaxed) == 0 {
            self.first_inversion
                .store(pack(prev, seq), Ordering::Relaxed);
        }
    }

    /// Checks this key: no overlap, `expected_runs` tasks ran, and (when
    /// `ordered`) in submission order.
    pub fn verify(&self, expected_runs: u64, ordered: bool) -> Result<(), String> {
        let overlaps = self.overlaps.load(Ordering::Acquire);
        if overlaps > 0 {
            return Err(format!(
                "exclusion broken: {overlaps} task(s) ran while another task on the key was running"
            ));
        }
        if ordered {
            let inversions = self.inversions.load(Ordering::Acquire);
            if inversions > 0 {
                let bad = self.first_inversion.load(Ordering::Acquire);
                return Err(format!(
                    "order broken {inversions} time(s); first: task {} ran after task {}",
                    bad & u64::from(u32::MAX),
                    bad >> 32
                ));
            }
        }
        let runs = self.runs.load(Ordering::Acquire);
        if runs != expected_runs {
            return Err(format!(
                "{runs} task(s) ran, {expected_runs} were submitted"
            ));
        }
        Ok(())
    }
}

/// Verifies every key (`expected[k]` tasks name key `k`); the error names the
/// first bad key.
pub fn verify_keys(cells: &[KeyCell], expected: &[u64], ordered: bool) -> Result<(), String> {
    if cells.len() != expected.len() {
        return Err(format!(
            "{} key cells for {} keys",
            cells.len(),
            expected.len()
        ));
    }
    for (key, (cell, &runs)) in cells.iter().zip(expected).enumerate() {
        cell.verify(runs, ordered)
            .map_err(|e| format!("key {key}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_sorted_and_in_range() {
        for i in 0..100_000 {
            let one = TaskKeys::for_task(i, 1);
            assert_eq!(one.as_slice().len(), 1);
            assert!(one.as_slice()[0] < KEY_SPACE);
            let two = TaskKeys::for_task(i, 2);
            let [a, b] = two.as_slice() else {
                panic!("two keys")
            };
            assert!(a < b && *b < KEY_SPACE, "{two:?}");
        }
    }

    #[test]
    fn small_key_spaces_stay_in_range() {
        for i in 0..10_000 {
            let [a, b] = *TaskKeys::for_task_in(i, 2, SMALL_KEY_SPACE).as_slice() else {
                panic!("two keys")
            };
            assert!(a < b && b < SMALL_KEY_SPACE);
            let [a, b] = *TaskKeys::for_task_in(i, 2, 2).as_slice() else {
                panic!("two keys")
            };
            assert_eq!((a, b), (0, 1));
        }
        assert_eq!(
            TaskKeys::for_task(9, 2),
            TaskKeys::for_task_in(9, 2, KEY_SPACE)
        );
    }

    #[test]
    fn keys_are_deterministic_and_spread() {
        assert_eq!(TaskKeys::for_task(42, 2), TaskKeys::for_task(42, 2));
        let mut seen = vec![0u32; KEY_SPACE as usize];
        for i in 0..102_400 {
            seen[TaskKeys::for_task(i, 1).as_slice()[0] as usize] += 1;
        }
        // ~100 per key; a poor spread would leave keys nearly empty.
        assert!(seen.iter().all(|&n| (50..200).contains(&n)), "{seen:?}");
    }

    #[test]
    fn serial_in_order_runs_pass() {
        let cell = KeyCell::default();
        for seq in [1, 3, 7] {
            cell.enter(seq);
            cell.exit();
        }
        cell.verify(3, true).unwrap();
    }

    #[test]
    fn overlapping_tasks_are_caught() {
        let cell = KeyCell::default();
        cell.enter(1);
        cell.enter(2); // before task 1 left
        cell.exit();
        cell.exit();
        let err = cell.verify(2, false).unwrap_err();
        assert!(err.contains("exclusion broken: 1 task"), "{err}");
        let cells = [KeyCell::default(), KeyCell::default()];
        cells[1].enter(1);
        cells[1].enter(2);
        let err = verify_keys(&cells, &[0, 2], false).unwrap_err();
        assert!(err.starts_with("key 1: exclusion broken"), "{err}");
    }

    #[test]
    fn overlapping_threads_are_caught() {
        // Two threads using one key without a lock collide sooner or later.
        let cell = KeyCell::default();
        let gate = std::sync::Barrier::new(2);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (cell, gate) = (&cell, &gate);
                s.spawn(move || {
                    gate.wait();
                    let mut seq = t + 1;
                    while cell.overlaps.load(Ordering::Relaxed) == 0
                        && std::time::Instant::now() < deadline
                    {
                        for _ in 0..1_000 {
                            cell.enter(seq);
                            std::hint::spin_loop();
                            cell.exit();
                            seq += 2;
                        }
                    }
                });
            }
        });
        let runs = cell.runs.load(Ordering::Relaxed);
        let err = cell.verify(runs, false).unwrap_err();
        assert!(err.contains("exclusion broken"), "{err}");
    }

    #[test]
    fn broken_order_is_caught_only_where_promised() {
        let cell = KeyCell::default();
        for seq in [1, 4, 2, 5] {
            cell.enter(seq);
            cell.exit();
        }
        let err = cell.verify(4, true).unwrap_err();
        assert!(err.contains("task 2 ran after task 4"), "{err}");
        cell.verify(4, false).unwrap();
    }

    #[test]
    fn missing_or_extra_tasks_are_caught() {
        let cell = KeyCell::default();
        cell.enter(1);
        cell.exit();
        let err = cell.verify(2, true).unwrap_err();
        assert!(err.contains("1 task(s) ran, 2 were submitted"), "{err}");
        assert!(verify_keys(&[KeyCell::default()], &[0, 0], true).is_err());
    }
}
