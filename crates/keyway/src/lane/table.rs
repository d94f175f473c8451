//! The lane table: one lane per context value, created on first use and freed when idle.
//!
//! See `README.md` beside this file for the lane protocol and why it cannot strand a task.

use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use hashbrown::hash_table::{Entry, HashTable};
use parking_lot::Mutex;
use smallvec::SmallVec;

use crate::keyed::MultiTask;
use crate::pool::registry::{Job, LaneJob, Registry};
use crate::pool::worker::WorkerCtx;
use crate::pool::LaneDepth;
use crate::task::{Abandon, PanicReport, PendingTask, Task};

/// What a lane holds and how it runs it: closures for context lanes, messages for typed lanes.
pub(crate) trait LaneKind: Send + Sync + Sized + 'static {
    type Entry: Send + 'static;
    fn is_coalescing(entry: &Self::Entry) -> bool;
    fn run(&self, key: &(dyn Any + Send + Sync), entry: Self::Entry) -> Result<(), PanicReport>;
    fn abandon(&self, entry: Self::Entry, why: Abandon);
    /// Packs an entry that `shutdown_now` hands back (`None`: already handed back through
    /// another lane, for a multi-key task).
    fn pending(lane: &Arc<LaneCore<Self>>, entry: Self::Entry) -> Option<Task>;
    /// The multi-key task this entry stands for in the lane, if it is one (rule 6).
    fn barrier(_entry: &Self::Entry) -> Option<&Arc<MultiTask>> {
        None
    }
}

/// What the pool needs from every lane table, whatever its kind.
pub(crate) trait TableOps: Send + Sync {
    /// Takes every queued entry of every lane (the workers have stopped).
    fn drain(&self, out: &mut Vec<PendingTask>);
    fn live_lanes(&self) -> usize;
    /// Frees every lane kept in the idle cache (rule 3).
    fn sweep_idle(&self);
    /// Adds the `n` deepest lanes to `out`.
    fn deepest(&self, n: usize, out: &mut Vec<LaneDepth>);
}

type Shard<S> = CachePadded<Mutex<ShardMap<S>>>;
pub(crate) type ShardGuard<'a, S> = parking_lot::MutexGuard<'a, ShardMap<S>>;

/// Rule 3 (idle cache): a shard keeps up to this many idle, unpinned lanes instead of freeing
/// them at once, so a context used again soon needs no new lane. The monitor frees them every
/// period (and `shutdown` does), so memory stays bounded and no lane outlives its use by more
/// than a period.
const IDLE_KEEP: usize = 8;

/// The lanes of one shard.
pub(crate) struct ShardMap<S: LaneKind> {
    lanes: HashTable<Arc<LaneCore<S>>>,
    /// Lanes kept idle in this shard (each with `cached` set).
    cached: usize,
}

pub(crate) struct LaneTable<S: LaneKind> {
    shards: Box<[Shard<S>]>,
    hasher: hashbrown::DefaultHashBuilder,
    pub(crate) kind: S,
    live: AtomicUsize,
}

/// One context's lane. Its state is guarded by `state`; its presence in the table by the shard
/// lock. Lock order: shard, then lane.
pub(crate) struct LaneCore<S: LaneKind> {
    table: Arc<LaneTable<S>>,
    hash: u64,
    pub(crate) key: Box<dyn Any + Send + Sync>,
    state: Mutex<LaneState<S::Entry>>,
    /// `Lane` handles holding this lane in the table; changed only under the shard lock when it
    /// goes to or from zero.
    pins: AtomicUsize,
    /// Kept idle in the shard's cache (changed only under the shard lock).
    cached: AtomicBool,
}

struct LaneState<E> {
    queue: VecDeque<E>,
    /// Rule 1: true iff a `Job::Lane` for this lane is queued or running.
    scheduled: bool,
}

/// What a push did.
pub(crate) struct Pushed<S: LaneKind> {
    /// The lane went from idle to scheduled: the pusher must queue it.
    schedule: Option<Arc<LaneCore<S>>>,
    /// A pending coalescing entry the new one replaced.
    replaced: Option<S::Entry>,
}

impl<S: LaneKind> LaneTable<S> {
    pub(crate) fn new(kind: S, threads: usize) -> Arc<Self> {
        let n = (threads * 16).next_power_of_two().clamp(64, 4096);
        Arc::new(LaneTable {
            shards: (0..n)
                .map(|_| {
                    CachePadded::new(Mutex::new(ShardMap {
                        lanes: HashTable::new(),
                        cached: 0,
                    }))
                })
                .collect(),
            hasher: Default::default(),
            kind,
            live: AtomicUsize::new(0),
        })
    }

    pub(crate) fn hash<K: Hash + 'static>(&self, key: &K) -> u64 {
        self.hasher.hash_one((TypeId::of::<K>(), key))
    }

    fn shard(&self, hash: u64) -> &Shard<S> {
        // The high bits pick the shard; hashbrown uses the low ones inside it.
        &self.shards[self.shard_index(hash)]
    }

    /// Runs `f` on the lane of `key`, created if missing, under its shard lock.
    fn with_lane<K, R>(self: &Arc<Self>, key: K, f: impl FnOnce(&Arc<LaneCore<S>>) -> R) -> R
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        let hash = self.hash(&key);
        let mut map = self.shard(hash).lock();
        f(self.lane_in(&mut map, hash, key))
    }

    #[cfg(test)]
    pub(crate) fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The shard a hash lives in.
    pub(crate) fn shard_index(&self, hash: u64) -> usize {
        (hash >> 40) as usize & (self.shards.len() - 1)
    }

    pub(crate) fn lock_shard(&self, index: usize) -> ShardGuard<'_, S> {
        self.shards[index].lock()
    }

    /// The lane of `key` in its (locked) shard `map`, created if missing.
    pub(crate) fn lane_in<'m, K>(
        self: &Arc<Self>,
        map: &'m mut ShardMap<S>,
        hash: u64,
        key: K,
    ) -> &'m Arc<LaneCore<S>>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        let ShardMap { lanes, cached } = map;
        let entry = lanes.entry(
            hash,
            |l| l.key.downcast_ref::<K>() == Some(&key),
            |l| l.hash,
        );
        let lane = match entry {
            Entry::Occupied(o) => {
                let lane = o.into_mut();
                if lane.cached.swap(false, Ordering::Relaxed) {
                    *cached -= 1; // back in use
                }
                lane
            }
            Entry::Vacant(v) => {
                self.live.fetch_add(1, Ordering::Relaxed);
                v.insert(Arc::new(LaneCore {
                    table: self.clone(),
                    hash,
                    key: Box::new(key),
                    state: Mutex::new(LaneState {
                        queue: VecDeque::new(),
                        scheduled: false,
                    }),
                    pins: AtomicUsize::new(0),
                    cached: AtomicBool::new(false),
                }))
                .into_mut()
            }
        };
        lane
    }

    /// Queues `entry` on the lane of `key` (the task was already admitted).
    pub(crate) fn submit<K>(self: &Arc<Self>, registry: &Arc<Registry>, key: K, entry: S::Entry)
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        let pushed = self.with_lane(key, |lane| lane.push(entry));
        self.after_push(registry, pushed);
    }

    /// Completes a push outside the locks: abandons what it replaced, queues the lane if it
    /// became scheduled.
    pub(crate) fn after_push(&self, registry: &Arc<Registry>, pushed: Pushed<S>) {
        if let Some(old) = pushed.replaced {
            self.kind.abandon(old, Abandon::Coalesced);
            registry.task_done();
        }
        if let Some(lane) = pushed.schedule {
            registry.schedule(Job::Lane(lane));
        }
    }

    /// The lane of `key`, pinned in the table until `unpin`.
    pub(crate) fn pin<K>(self: &Arc<Self>, key: K) -> Arc<LaneCore<S>>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        self.with_lane(key, |lane| {
            lane.pins.fetch_add(1, Ordering::AcqRel);
            lane.clone()
        })
    }

    fn shards(&self) -> impl Iterator<Item = &Shard<S>> {
        self.shards.iter()
    }
}

impl<S: LaneKind> LaneCore<S> {
    /// Appends `entry` (replacing a pending coalescing entry at the back if `entry` coalesces).
    pub(crate) fn push(self: &Arc<Self>, entry: S::Entry) -> Pushed<S> {
        let mut st = self.state.lock();
        let replaced = if S::is_coalescing(&entry) && st.queue.back().is_some_and(S::is_coalescing)
        {
            st.queue.pop_back()
        } else {
            None
        };
        st.queue.push_back(entry);
        let schedule = !st.scheduled;
        st.scheduled = true;
        drop(st);
        Pushed {
            schedule: schedule.then(|| self.clone()),
            replaced,
        }
    }

    /// Queues `entry` on a pinned lane (no table look-up: a pinned lane stays in the table).
    pub(crate) fn push_pinned(self: &Arc<Self>, registry: &Arc<Registry>, entry: S::Entry) {
        let pushed = self.push(entry);
        self.table.after_push(registry, pushed);
    }

    /// Another handle to a pinned lane.
    pub(crate) fn repin(self: &Arc<Self>) -> Arc<Self> {
        self.pins.fetch_add(1, Ordering::AcqRel);
        self.clone()
    }

    /// A `Lane` handle let go of the lane: it may now be freed when idle.
    pub(crate) fn unpin(self: &Arc<Self>) {
        let map = self.table.shard(self.hash).lock();
        if self.pins.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.remove_if_idle(map);
        }
    }

    /// Rule 3: an idle, unpinned lane leaves the table (under its shard lock).
    fn release(self: &Arc<Self>) {
        if self.pins.load(Ordering::Acquire) > 0 {
            return;
        }
        let map = self.table.shard(self.hash).lock();
        if self.pins.load(Ordering::Acquire) == 0 {
            self.remove_if_idle(map);
        }
    }

    fn remove_if_idle(self: &Arc<Self>, mut map: ShardGuard<'_, S>) {
        {
            let mut st = self.state.lock();
            if st.scheduled || !st.queue.is_empty() {
                return;
            }
            if map.cached < IDLE_KEEP && !self.cached.load(Ordering::Relaxed) {
                // Keep it for a while (idle cache); give back a large queue buffer now.
                st.queue.shrink_to(4);
                self.cached.store(true, Ordering::Relaxed);
                map.cached += 1;
                return;
            }
        }
        if self.cached.load(Ordering::Relaxed) {
            return; // already kept
        }
        if let Ok(entry) = map.lanes.find_entry(self.hash, |l| Arc::ptr_eq(l, self)) {
            entry.remove();
            self.table.live.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Runs one entry as the lane would (for entries handed back by `shutdown_now`).
    pub(crate) fn run_entry(&self, entry: S::Entry) -> Result<(), PanicReport> {
        self.table.kind.run(&*self.key, entry)
    }

    pub(crate) fn key<K: 'static>(&self) -> Option<&K> {
        self.key.downcast_ref::<K>()
    }
}

/// Entries a runner takes from its lane per lock (one cache-line hand-over per chunk, not per
/// task).
const CHUNK: usize = 16;

/// What `take_chunk` found.
enum Taken {
    Entries,
    Empty,
    Barrier(Arc<MultiTask>),
}

impl<S: LaneKind> LaneCore<S> {
    /// Takes up to `max` entries from the front (rule 5: never a coalescing entry that is last in
    /// the queue unless it is the very next to run, so `push` sees every pending coalescing entry
    /// that could be replaced). Empty: the lane is turned off (rule 2).
    fn take_chunk(&self, max: usize, chunk: &mut SmallVec<[S::Entry; CHUNK]>) -> Taken {
        let mut st = self.state.lock();
        while chunk.len() < max {
            match st.queue.front() {
                None => break,
                Some(e) if S::barrier(e).is_some() => {
                    if chunk.is_empty() {
                        // Rule 6: the lane parks at a multi-key task; `scheduled` stays on.
                        let multi = S::barrier(e).cloned();
                        return multi.map_or(Taken::Entries, Taken::Barrier);
                    }
                    break;
                }
                Some(e) if !chunk.is_empty() && st.queue.len() == 1 && S::is_coalescing(e) => break,
                Some(_) => chunk.extend(st.queue.pop_front()),
            }
        }
        if chunk.is_empty() {
            // Rule 2: only the lane's runner turns `scheduled` off, and only while it sees the
            // queue empty under the lane lock.
            st.scheduled = false;
            return Taken::Empty;
        }
        Taken::Entries
    }

    /// Rule 6: the multi-key task at this lane's head is done: pop it and restart the lane.
    pub(crate) fn pass_barrier(self: &Arc<Self>, multi: &Arc<MultiTask>, registry: &Arc<Registry>) {
        let more = {
            let mut st = self.state.lock();
            let head = st.queue.pop_front();
            debug_assert!(head
                .as_ref()
                .and_then(S::barrier)
                .is_some_and(|m| Arc::ptr_eq(m, multi)));
            st.scheduled = !st.queue.is_empty();
            st.scheduled
        };
        if more {
            registry.schedule(Job::Lane(self.clone()));
        } else {
            self.release();
        }
    }
}

impl<S: LaneKind> LaneJob for LaneCore<S> {
    fn run_batch(self: Arc<Self>, worker: &WorkerCtx) {
        let mut left = worker.registry.config.lane_batch;
        let mut chunk = SmallVec::<[S::Entry; CHUNK]>::new();
        while left > 0 {
            match self.take_chunk(left.min(CHUNK), &mut chunk) {
                Taken::Entries => {}
                Taken::Empty => {
                    self.release();
                    return;
                }
                Taken::Barrier(multi) => {
                    multi.arrive(worker);
                    return;
                }
            }
            left -= chunk.len();
            let mut ran = 0;
            let mut entries = chunk.drain(..);
            for entry in entries.by_ref() {
                worker.run_one(|| self.table.kind.run(&*self.key, entry));
                ran += 1;
                if worker.registry.is_stopping() {
                    break;
                }
            }
            let rest: SmallVec<[S::Entry; CHUNK]> = entries.collect();
            worker.tasks_done(ran);
            if !rest.is_empty() {
                // `shutdown_now`: put the untouched entries back, in order, for the drain.
                let mut st = self.state.lock();
                for entry in rest.into_iter().rev() {
                    st.queue.push_front(entry);
                }
                return;
            }
            if worker.registry.is_stopping() {
                return; // `shutdown_now` drains the rest of the lane
            }
        }
        let more = {
            let mut st = self.state.lock();
            st.scheduled = !st.queue.is_empty();
            st.scheduled
        };
        if more {
            worker.requeue_lane(Job::Lane(self));
        } else {
            self.release();
        }
    }
}

impl<S: LaneKind> TableOps for LaneTable<S> {
    fn drain(&self, out: &mut Vec<PendingTask>) {
        for shard in self.shards() {
            let mut map = shard.lock();
            for lane in map.lanes.iter() {
                let mut st = lane.state.lock();
                st.scheduled = false;
                for entry in st.queue.drain(..) {
                    out.extend(S::pending(lane, entry).map(PendingTask::new));
                }
            }
            let before = map.lanes.len();
            map.lanes.retain(|l| l.pins.load(Ordering::Acquire) > 0);
            map.cached = 0; // pinned lanes are never cached
            self.live
                .fetch_sub(before - map.lanes.len(), Ordering::Relaxed);
        }
    }

    fn sweep_idle(&self) {
        for shard in self.shards() {
            let mut map = shard.lock();
            if map.cached == 0 {
                continue;
            }
            let before = map.lanes.len();
            map.lanes.retain(|l| !l.cached.load(Ordering::Relaxed));
            map.cached = 0;
            self.live
                .fetch_sub(before - map.lanes.len(), Ordering::Relaxed);
        }
    }

    fn live_lanes(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    fn deepest(&self, n: usize, out: &mut Vec<LaneDepth>) {
        let start = out.len();
        for shard in self.shards() {
            for lane in shard.lock().lanes.iter() {
                let queued = lane.state.lock().queue.len();
                if queued > 0 {
                    out.push(LaneDepth {
                        context_hash: lane.hash,
                        queued,
                    });
                }
            }
            // Keep only the deepest `n` of this table as we go.
            if out.len() - start > 4 * n {
                out[start..].sort_by_key(|d| std::cmp::Reverse(d.queued));
                out.truncate(start + n);
            }
        }
    }
}
