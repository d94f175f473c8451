//! The started futures of a pool that wait to be woken, so that `shutdown_now` can cancel them
//! at their await point instead of waiting for a wake-up that may never come.
//!
//! A future enters when it first returns `Pending` and leaves when it is done. Sharded by id, so
//! futures suspending and completing on different workers rarely meet on one lock. hashbrown's
//! default hasher, not std's SipHash: callgrind put SipHash at ~200 of the ~480 instructions the
//! set cost per future in `contexts --async`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Waker;

use crossbeam_utils::CachePadded;
use hashbrown::HashMap;
use parking_lot::Mutex;

const SHARDS: usize = 32;

/// Waiting futures, by id: the waker that reschedules each.
pub(crate) struct Live {
    next: AtomicU64,
    shards: [CachePadded<Mutex<HashMap<u64, Waker>>>; SHARDS],
}

impl Live {
    pub(crate) fn new() -> Self {
        Live {
            next: AtomicU64::new(0),
            shards: std::array::from_fn(|_| CachePadded::new(Mutex::new(HashMap::default()))),
        }
    }

    fn shard(&self, id: u64) -> &Mutex<HashMap<u64, Waker>> {
        &self.shards[(id % SHARDS as u64) as usize]
    }

    /// Registers a waiting future; returns its id.
    pub(crate) fn insert(&self, waker: Waker) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.shard(id).lock().insert(id, waker);
        id
    }

    pub(crate) fn remove(&self, id: u64) {
        let waker = self.shard(id).lock().remove(&id);
        // Dropped outside the lock: it may hold the last reference to the task.
        drop(waker);
    }

    /// Wakes every waiting future (the pool is stopping, so each is dropped instead of polled).
    pub(crate) fn cancel_all(&self) {
        for shard in &self.shards {
            let wakers = std::mem::take(&mut *shard.lock());
            // Outside the lock: a cancelled future removes itself from this very set.
            for (_, waker) in wakers {
                waker.wake();
            }
        }
    }
}
