//! Multi-key tasks (SPEC §4, Explorer): a task names several keys; tasks sharing any key never
//! overlap and run in submission order; the others run in parallel; nothing deadlocks.
//!
//! A keyed task is one [`MultiTask`] standing as an entry in the lane of each of its keys (the
//! very lanes `execute_sequential` uses). Rule 6 of `lane/README.md`:
//!
//! * **Submission** locks the shards of all its keys in ascending shard order, appends the entry
//!   to every lane, then unlocks (two-phase locking). Any two multi-key tasks sharing a key share
//!   that key's shard lock, so their order is the same on every key they share, and the orders
//!   of all conflicting tasks embed in one total order: no cycle, so no deadlock. Ascending lock
//!   order keeps the submitters themselves from deadlocking.
//! * **Arrival**: a lane whose head is the entry *parks*: its runner leaves (no thread is held,
//!   no job queued) and `scheduled` stays on so pushes do not restart it. Each lane arrives once.
//! * **Run**: the worker whose arrival is the last one runs the task, then pops the entry from
//!   every lane and restarts each that has more work.

#[cfg(test)]
mod test;

use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use smallvec::SmallVec;

use crate::error::SubmitError;
use crate::lane::{admit_then, plain, with_handle, ClosureEntry, Closures, LaneCore, LaneTable};
use crate::pool::registry::{Job, Registry};
use crate::pool::worker::WorkerCtx;
use crate::pool::Pool;
use crate::task::{Task, TaskHandle};

/// A task waiting at the head of several lanes.
pub(crate) struct MultiTask {
    task: Mutex<Option<Task>>,
    /// Lanes that have not yet reached this task.
    waiting: AtomicUsize,
    lanes: SmallVec<[Arc<LaneCore<Closures>>; 4]>,
}

impl MultiTask {
    /// One of the task's lanes reached it. The last arrival runs it and restarts the lanes.
    pub(crate) fn arrive(self: &Arc<Self>, worker: &WorkerCtx) {
        if self.waiting.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        if worker.registry.is_stopping() {
            return; // `shutdown_now` hands the task back from the lanes
        }
        if let Some(task) = self.take_task() {
            worker.run_one(|| task.run());
            worker.tasks_done(1);
        }
        for lane in &self.lanes {
            lane.pass_barrier(self, &worker.registry);
        }
    }

    /// The task, once: for the run, or for `shutdown_now` from whichever lane drains first.
    pub(crate) fn take_task(&self) -> Option<Task> {
        self.task.lock().take()
    }
}

/// Appends a multi-key task to the lanes of `keys` (two or more distinct keys).
fn submit_many<K>(
    table: &Arc<LaneTable<Closures>>,
    registry: &Arc<Registry>,
    keys: SmallVec<[K; 4]>,
    task: Task,
) where
    K: Hash + Eq + Send + Sync + 'static,
{
    let mut hashed: SmallVec<[(usize, u64, K); 4]> = keys
        .into_iter()
        .map(|k| {
            let h = table.hash(&k);
            (table.shard_index(h), h, k)
        })
        .collect();
    hashed.sort_by_key(|&(shard, ..)| shard);
    let mut guards = SmallVec::<[_; 4]>::new();
    for &(shard, ..) in &hashed {
        if guards.last().map(|&(s, _)| s) != Some(shard) {
            guards.push((shard, table.lock_shard(shard)));
        }
    }
    let mut lanes = SmallVec::new();
    let mut g = 0;
    for (shard, hash, key) in hashed {
        while guards[g].0 != shard {
            g += 1;
        }
        lanes.push(table.lane_in(&mut guards[g].1, hash, key).clone());
    }
    let multi = Arc::new(MultiTask {
        task: Mutex::new(Some(task)),
        waiting: AtomicUsize::new(lanes.len()),
        lanes,
    });
    let pushed: SmallVec<[_; 4]> = multi
        .lanes
        .iter()
        .map(|lane| lane.push(ClosureEntry::Many(multi.clone())))
        .collect();
    drop(guards);
    for p in pushed {
        table.after_push(registry, p);
    }
}

/// Multi-key tasks on the pool.
impl Pool {
    fn keyed_submit<K, F, T>(
        &self,
        keys: impl IntoIterator<Item = K>,
        f: F,
        wrap: impl FnOnce(F) -> (T, Task),
    ) -> Result<T, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        let mut distinct = SmallVec::<[K; 4]>::new();
        for key in keys {
            if !distinct.contains(&key) {
                distinct.push(key);
            }
        }
        let handle = &self.handle;
        let registry = &handle.registry;
        admit_then(self, f, false, wrap, |entry| match distinct.len() {
            0 => match entry {
                ClosureEntry::One { task, .. } => registry.schedule(Job::Task(task)),
                ClosureEntry::Many(_) => unreachable!("admit_then makes single entries"),
            },
            1 => {
                let key = distinct.pop().expect("one key");
                handle.lanes.submit(registry, key, entry)
            }
            _ => match entry {
                ClosureEntry::One { task, .. } => {
                    submit_many(&handle.lanes, registry, distinct, task)
                }
                ClosureEntry::Many(_) => unreachable!("admit_then makes single entries"),
            },
        })
    }

    /// Runs `f` holding every key in `keys`: two tasks sharing at least one key never overlap,
    /// and the one submitted first runs first; tasks with disjoint keys run in parallel.
    ///
    /// Duplicate keys count once; no keys makes a plain task; one key is exactly
    /// [`execute_sequential`](Pool::execute_sequential) on that key (same lane, same order). A
    /// task waiting for a busy key holds no thread.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = keyway::Pool::new().unwrap();
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// for (i, keys) in [vec!["alice", "bob"], vec!["bob"], vec!["bob", "carol"], vec!["alice"]]
    ///     .into_iter()
    ///     .enumerate()
    /// {
    ///     let log = log.clone();
    ///     pool.execute_keyed(keys, move || log.lock().unwrap().push(i)).unwrap();
    /// }
    /// pool.shutdown();
    /// let log = log.lock().unwrap();
    /// let pos = |i| log.iter().position(|&x| x == i).unwrap();
    /// // Everything touching "bob" ran in submission order; "alice" too.
    /// assert!(pos(0) < pos(1) && pos(1) < pos(2) && pos(0) < pos(3));
    /// ```
    pub fn execute_keyed<K, F>(
        &self,
        keys: impl IntoIterator<Item = K>,
        f: F,
    ) -> Result<(), SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() + Send + 'static,
    {
        self.keyed_submit(keys, f, plain)
    }

    /// Like [`execute_keyed`](Pool::execute_keyed), returning a [`TaskHandle`].
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let transfer = pool.submit_keyed(["acct-1", "acct-2"], || "moved 10").unwrap();
    /// assert_eq!(transfer.join().unwrap(), "moved 10");
    /// ```
    pub fn submit_keyed<K, F, T>(
        &self,
        keys: impl IntoIterator<Item = K>,
        f: F,
    ) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.keyed_submit(keys, f, with_handle)
    }
}
