//! `mutex-per-key`: the `crossbeam-pool` peer (available-parallelism threads
//! on one crossbeam-channel MPMC channel) where each keyed task locks one
//! `std::sync::Mutex` per key, in ascending key order (so overlapping key sets
//! cannot deadlock), runs, and unlocks. Exclusion, but no order promise.

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use super::crossbeam_pool::CrossbeamPool;
use super::{KeyedPool, TaskPool};
use crate::keys::{TaskKeys, MAX_KEY_SPACE};

/// One key's lock, on its own cache lines (as a careful striped-lock table
/// would pad them), so neighbouring keys do not share a line.
#[derive(Debug, Default)]
#[repr(align(128))]
struct KeyLock(Mutex<()>);

impl KeyLock {
    fn lock(&self) -> MutexGuard<'_, ()> {
        // A panicking task cannot leave the unit value inconsistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The lock table, one per process, one lock for every key of the largest
/// key space (8 MiB, allocated before the first run is timed): every run's tasks have released every
/// lock before the pool is shut down, so runs can share it, and tasks reach
/// it without a reference count.
fn locks() -> &'static [KeyLock] {
    static LOCKS: OnceLock<Box<[KeyLock]>> = OnceLock::new();
    LOCKS.get_or_init(|| (0..MAX_KEY_SPACE).map(|_| KeyLock::default()).collect())
}

/// A crossbeam pool whose tasks take a mutex per key.
#[derive(Debug)]
pub struct MutexPerKey {
    pool: CrossbeamPool,
    locks: &'static [KeyLock],
}

impl KeyedPool for MutexPerKey {
    const NAME: &'static str = "mutex-per-key";
    const ORDERED: bool = false;

    fn build(threads: usize) -> Result<Self, String> {
        Ok(Self {
            pool: CrossbeamPool::build(threads)?,
            locks: locks(),
        })
    }

    fn submit_keyed<F: FnOnce() + Send + 'static>(
        &self,
        keys: TaskKeys,
        task: F,
    ) -> Result<(), String> {
        let locks = self.locks;
        self.pool.submit(move || {
            // `as_slice` is ascending: the lock order every task agrees on.
            let (first, rest) = keys
                .as_slice()
                .split_first()
                .expect("a keyed task names at least one key");
            let _first = locks[*first as usize].lock();
            let _second = rest.first().map(|&k| locks[k as usize].lock());
            task();
        })
    }

    fn shutdown(self) {
        self.pool.shutdown();
    }
}
