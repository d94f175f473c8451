//! The lane table: one lane per context value, created on first use and freed when idle.
//!
//! See `README.md` beside this file for the lane protocol and why it cannot strand a task.

use std::any::{Any, TypeId};
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use hashbrown::hash_table::HashTable;
use parking_lot::Mutex;

use super::batch::Spare;
use super::key::{catch_key, KeyPanicked, LaneKey};
use super::queue::Queue;
use super::runner::Chunk;
use super::turn::Turn;
use crate::engine::{on_pool, Config, KeyHasher, Registry, Work, WorkerCtx};
use crate::task::{drop_quietly, Abandon, ContextOf, PanicReport, PendingTask};

/// What a lane holds and how it runs it: closures for context lanes, messages for typed lanes.
pub(crate) trait LaneKind: Send + Sync + Sized + 'static {
    type Entry: Send + 'static;
    fn is_coalescing(entry: &Self::Entry) -> bool;
    fn run(&self, key: &(dyn Any + Send + Sync), entry: Self::Entry) -> Result<(), PanicReport>;
    /// Drops an entry unrun (never unwinds); a panic of its drop comes back as a report.
    fn abandon(&self, entry: Self::Entry, why: Abandon) -> Result<(), PanicReport>;
    /// Packs an entry that `shutdown_now` hands back (`None`: already handed back through
    /// another lane, for a multi-key task).
    fn pending(lane: &Arc<LaneCore<Self>>, entry: Self::Entry) -> Option<PendingTask>;
    /// Hands back what `entry` holds to `shutdown_now`'s caller: one task, or each task not
    /// started of a batch (`batch.rs`).
    fn hand_back(lane: &Arc<LaneCore<Self>>, entry: Self::Entry, out: &mut Vec<PendingTask>) {
        out.extend(Self::pending(lane, entry));
    }
    /// Whether `entry` is a batch: the runner leaves it at the head of its chunk and lets
    /// [`run_batch`](LaneKind::run_batch) run its tasks (`batch.rs`).
    fn is_batch(_entry: &Self::Entry) -> bool {
        false
    }
    /// Runs tasks of the batch at the head of `turn`'s chunk while the turn's budget lasts and
    /// the pool is not stopping; the batch leaves the chunk with its last task.
    fn run_batch(_turn: &Turn<'_, Chunk<Self>>) {}
    /// The multi-key task this entry stands for in the lane, if it is one (rule 6).
    fn barrier(_entry: &Self::Entry) -> Option<&Arc<dyn Barrier>> {
        None
    }
    /// Rule 7: whether `entry` runs as a future, which may outlive the runner's call.
    fn is_async(&self, _entry: &Self::Entry) -> bool {
        false
    }
    /// Rule 7: starts an async entry (taken out of `lane`'s queue). `Suspended`: its future
    /// resumes the lane (`future::Resume`) once done; until then the lane stays scheduled with
    /// no job. `Done`: nothing was left running; the runner goes on with the lane.
    fn launch(
        &self,
        _lane: &Arc<LaneCore<Self>>,
        key: &(dyn Any + Send + Sync),
        _registry: &Arc<Registry>,
        entry: Self::Entry,
    ) -> Ran {
        Ran::Done(self.run(key, entry))
    }
    /// The key the user gave, from the key the table stores (a kind may store it wrapped).
    fn context_key(key: &(dyn Any + Send + Sync)) -> &(dyn Any + Send + Sync) {
        key
    }
    /// The type that identifies a context whose stored key is a `Q`: the user's key type, so a
    /// context hashes as [`Pool::context_hash`](crate::Pool::context_hash) says whichever way
    /// the kind wraps it (the wrapper must hash as the key does).
    fn context_type<Q: 'static>() -> TypeId {
        TypeId::of::<Q>()
    }
}

/// A task standing in several lanes at once (rule 6), as a lane sees it: one entry, at whose
/// head the lane parks until the task has run.
pub(crate) trait Barrier: Send + Sync + 'static {
    /// The lane's runner found it at the head: the lane arrives (and stays parked). The last
    /// arrival runs the task on this worker.
    fn arrive(self: Arc<Self>, worker: &WorkerCtx);
    /// `shutdown_now`: the task, once, from whichever of its lanes is drained first (`None`
    /// from the others).
    fn hand_back(&self) -> Option<PendingTask>;
    /// A lane whose previous multi-key task just finished arrives here (it stays parked): true
    /// if it was the last lane to arrive, and the caller (that lane's acting runner) then owns
    /// the run. A virtual call, not a downcast, on each such arrival.
    fn arrive_counted(&self) -> bool;
    /// The task itself, owned, once ready (for its own lanes' side of rule 6).
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// What starting an async entry did (rule 7).
pub(crate) enum Ran {
    /// Its future runs on; it resumes the lane when done.
    Suspended,
    /// It is over (e.g. the handler panicked before making its future).
    Done(Result<(), PanicReport>),
}

type Shard<S> = CachePadded<Mutex<ShardMap<S>>>;
pub(crate) type ShardGuard<'a, S> = parking_lot::MutexGuard<'a, ShardMap<S>>;

/// Rule 3 (idle cache): by default (`PoolBuilder::idle_lanes` unset, and no `keep_idle`) a table
/// keeps about this many idle, unpinned lanes in all (split evenly between its shards, at least
/// `IDLE_KEEP_MIN` each) instead of freeing them at once, so a context used again soon needs no
/// new lane. The monitor frees them every period by default (and `shutdown` does), so memory
/// stays bounded whatever the number of contexts ever seen, and no lane outlives its use by
/// more than a period. With 8 per shard (512 in all on 2 threads),
/// `throughput --keys 1` (tasks spread over 1,024 contexts, nearly all finding their lane idle)
/// freed half its idle lanes and allocated them again at their next task.
const IDLE_KEEP_TOTAL: usize = 4096;

/// Rule 3 (idle cache): the least a shard keeps, however many shards a table has.
const IDLE_KEEP_MIN: usize = 8;

/// Rule 3 (idle cache): the most entries of spare blocks a cached lane keeps (rule 9). A lane
/// that goes idle and busy again in a steady stream reuses its blocks as they are (measured, with
/// a `VecDeque` queue: shrinking its buffers to 4 entries at every idle turn, then growing them
/// back at the next pushes, cost ~200 instructions per activation); larger ones, linked in a
/// burst, are given back.
const CACHED_SPARE_MAX: usize = 32;

/// The lanes of one shard.
pub(crate) struct ShardMap<S: LaneKind> {
    pub(super) lanes: HashTable<Arc<LaneCore<S>>>,
    /// Lanes kept idle in this shard (each with `cached` set).
    pub(super) cached: usize,
    /// The oldest `cached` mark among them (the monitor skips a shard with none old enough).
    pub(super) oldest: u64,
}

pub(crate) struct LaneTable<S: LaneKind> {
    shards: Box<[Shard<S>]>,
    /// Rule 3: the idle lanes a shard may keep cached.
    idle_keep: usize,
    /// Rule 3: how many monitor looks (sweeps) a cached lane outlives (`keep_idle` in periods;
    /// `u64::MAX`: until shutdown).
    pub(super) keep_sweeps: u64,
    /// Rule 3: the monitor's looks so far; a lane cached now is marked with this count + 1.
    pub(super) sweeps: AtomicU64,
    hasher: KeyHasher,
    pub(crate) kind: Arc<S>,
    pub(super) live: AtomicUsize,
}

/// One context's lane. Its state is guarded by `state`; its presence in the table by the shard
/// lock. Lock order: shard, then lane.
///
/// A lane refers to its table only while it is scheduled (`LaneState::table`): the table holds
/// its lanes, so an idle lane holding the table would make a cycle that leaks both (rule 1).
pub(crate) struct LaneCore<S: LaneKind> {
    pub(super) kind: Arc<S>,
    pub(super) hash: u64,
    pub(super) key: LaneKey,
    pub(super) state: Mutex<LaneState<S>>,
    /// `Lane` handles holding this lane in the table; changed only under the shard lock when it
    /// goes to or from zero.
    pub(super) pins: AtomicUsize,
    /// Kept idle in the shard's cache since the table's sweep count was `cached - 1`; 0: not
    /// cached (changed only under the shard lock).
    pub(super) cached: AtomicU64,
    /// The buffer of the last batch its runner finished, for the next (`batch.rs`).
    pub(super) spare: Spare,
}

/// What a lane's mutex guards: its queue, its table references and what its runner holds.
///
/// `repr(C)`, in this order: what a one-entry activation reads and writes under the lock (the
/// table reference, the kept one, the queue's count and its first entry, rule 9) are the 64
/// bytes that start with the lock byte; the queue's block cursors and `held` follow. (Aligning
/// the lane so that these bytes are one cache line was measured and not kept: keyway's time on
/// `contexts --zipf 1.1` did not move, and each lane grew by 48 bytes.)
#[repr(C)]
pub(super) struct LaneState<S: LaneKind> {
    /// Rule 1: `Some` iff the lane is scheduled (a `Work::Lane` for it is queued or running, or it
    /// is parked). A scheduled lane keeps its table alive, so its tasks still run when every
    /// handle on the pool is gone; an idle lane does not (no `Arc` cycle).
    pub(super) table: Option<Arc<LaneTable<S>>>,
    /// *Ownership* (`README.md`): the table reference of a pinned lane that went idle, kept for
    /// its next activation, so activating a pinned lane touches no count on the table's shared
    /// `Arc` (measured: that count's increment was 14.6% of `push`'s samples, its line shared by
    /// the producer and every worker). Only a pinned lane keeps one: its `Lane` handle keeps
    /// the table alive anyway, so the cycle adds nothing, and it is cut when the last pin goes
    /// (`remove_if_idle`) or at the first idle turn after it.
    pub(super) kept: Option<Arc<LaneTable<S>>>,
    /// Rule 9: the pending entries, oldest first; the first in the state itself, the rest in
    /// blocks that are never copied to grow, with the lane's spare blocks.
    pub(super) queue: Queue<S::Entry>,
    /// Rule 5: entries the runner took with the whole queue beyond the batch it runs this turn
    /// (they go back in front of the queue when it leaves): counted in the lane's depth. Zero
    /// whenever no runner holds entries.
    pub(super) held: usize,
}

impl<S: LaneKind> LaneState<S> {
    /// Rule 1: the lane goes from idle to scheduled (its table reference: the kept one, or a new
    /// one).
    #[inline]
    pub(super) fn schedule(&mut self, table: &Arc<LaneTable<S>>) {
        self.table = Some(match self.kept.take() {
            Some(kept) => kept,
            None => table.clone(),
        });
    }

    /// Rule 2: the lane's runner turns it idle (it saw the queue empty under the lane lock).
    /// Returns the table reference the runner must release (rule 3), or `None` when the lane is
    /// `pinned` and keeps it for its next activation (`kept`). An unpinned lane keeps none: a
    /// reference kept while it was pinned goes too (not the table's last: the lane's own is
    /// still held).
    #[inline]
    pub(super) fn turn_idle(&mut self, pinned: bool) -> Option<Arc<LaneTable<S>>> {
        let table = self.table.take();
        if pinned && self.kept.is_none() {
            self.kept = table;
            return None;
        }
        if !pinned {
            self.kept = None;
        }
        table
    }
}

/// What a push did: the lane, when it went from idle to scheduled (the pusher must queue it). A
/// pending coalescing entry the new one replaced goes to the pusher's `replaced` slot instead:
/// it is rare, and a result holding an entry is copied at every return on the hot path (measured
/// with perf: stores of the result were 44% of `submit`'s samples in `throughput --keys 1`).
pub(crate) type Pushed<S> = Option<Arc<LaneCore<S>>>;

impl<S: LaneKind> LaneTable<S> {
    pub(crate) fn new(kind: S, config: &Config) -> Arc<Self> {
        let n = (config.max_threads * 16)
            .next_power_of_two()
            .clamp(64, 4096);
        // Set `keep_idle` alone, and the time bounds the cache, not a count.
        let idle_keep = match (config.idle_lanes, config.keep_idle) {
            (None, None) => (IDLE_KEEP_TOTAL / n).max(IDLE_KEEP_MIN),
            (None, Some(_)) => usize::MAX,
            (Some(total), _) => total.div_ceil(n),
        };
        let keep_sweeps = match config.keep_idle {
            None => 0,
            Some(keep) => {
                let period = config.monitor_period.as_nanos().max(1);
                u64::try_from(keep.as_nanos().div_ceil(period)).unwrap_or(u64::MAX)
            }
        };
        Arc::new(LaneTable {
            shards: (0..n)
                .map(|_| {
                    CachePadded::new(Mutex::new(ShardMap {
                        lanes: HashTable::new(),
                        cached: 0,
                        oldest: u64::MAX,
                    }))
                })
                .collect(),
            idle_keep,
            keep_sweeps,
            sweeps: AtomicU64::new(0),
            hasher: config.hasher.clone(),
            kind: Arc::new(kind),
            live: AtomicUsize::new(0),
        })
    }

    pub(crate) fn hash<K: Hash + 'static>(&self, key: &K) -> u64 {
        self.hasher.hash_one((S::context_type::<K>(), key))
    }

    fn shard(&self, hash: u64) -> &Shard<S> {
        &self.shards[self.shard_index(hash)]
    }

    /// Runs `f` on the lane of `key`, created if missing, under its shard lock. A panic of the
    /// key's `Hash`, `Eq` or `Drop` is contained: `f` is then not called.
    fn with_lane<K, R>(
        self: &Arc<Self>,
        key: K,
        f: impl FnOnce(&Arc<LaneCore<S>>) -> R,
    ) -> Result<R, KeyPanicked>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        let hash = match catch_key(|| self.hash(&key)) {
            Ok(hash) => hash,
            Err(e) => {
                drop_quietly(key);
                return Err(e);
            }
        };
        let mut map = self.shard(hash).lock();
        let map = &mut *map;
        let lane = catch_key(move || self.lane_in(map, hash, key))?;
        Ok(f(lane))
    }

    /// Rule 3: the most idle lanes the table keeps cached.
    #[cfg(test)]
    pub(crate) fn idle_cache_bound(&self) -> usize {
        self.idle_keep * self.shards.len()
    }

    /// The shard a hash lives in: the high bits of a folded multiply of all 64 bits, so the
    /// spread does not depend on which bits the key hasher mixes well (some foldhash seeds put
    /// 9 of 16 sequential integer keys into shared shards when bits 40–47 picked the shard).
    pub(crate) fn shard_index(&self, hash: u64) -> usize {
        const MIX: u64 = 0x9E37_79B9_7F4A_7C15;
        let wide = u128::from(hash) * u128::from(MIX);
        let folded = (wide as u64) ^ ((wide >> 64) as u64);
        // `shards.len()` is a power of two, at least 64: the shift is below 64.
        (folded >> (64 - self.shards.len().trailing_zeros())) as usize
    }

    /// How many shards the table has.
    #[cfg(test)]
    pub(crate) fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub(crate) fn lock_shard(&self, index: usize) -> ShardGuard<'_, S> {
        self.shards[index].lock()
    }

    /// The lane of `key` in its (locked) shard `map`, created if missing. Inlined into the
    /// look-ups: nearly every call finds its lane, and the call's own frame cost about as much
    /// as the probe.
    #[inline]
    pub(crate) fn lane_in<'m, K>(
        self: &Arc<Self>,
        map: &'m mut ShardMap<S>,
        hash: u64,
        key: K,
    ) -> &'m Arc<LaneCore<S>>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        let ShardMap { lanes, cached, .. } = map;
        // A plain probe first: the entry API reserves room and tracks an insert slot while it
        // probes, which a look-up of a lane already in the table (nearly every task) pays for
        // nothing.
        match lanes.find_entry(hash, |l| l.key::<K>() == Some(&key)) {
            Ok(found) => {
                let lane = found.into_mut();
                // Read first, written only when set (the shard lock is held, and only its
                // holder writes the mark): a look-up of a lane in use leaves the mark's line
                // shared instead of taking it exclusive with a swap on every task.
                if lane.cached.load(Ordering::Relaxed) != 0 {
                    lane.cached.store(0, Ordering::Relaxed);
                    *cached -= 1; // back in use
                }
                lane
            }
            Err(absent) => self.new_lane(absent.into_table(), hash, key),
        }
    }

    /// A new lane for `key`, not in the table (`lanes`) yet: inserted.
    #[cold]
    #[inline(never)]
    fn new_lane<'m, K>(
        &self,
        lanes: &'m mut HashTable<Arc<LaneCore<S>>>,
        hash: u64,
        key: K,
    ) -> &'m Arc<LaneCore<S>>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        self.live.fetch_add(1, Ordering::Relaxed);
        let lane = Arc::new(LaneCore {
            kind: self.kind.clone(),
            hash,
            key: LaneKey::new(key),
            state: Mutex::new(LaneState {
                queue: Queue::new(),
                table: None,
                kept: None,
                held: 0,
            }),
            pins: AtomicUsize::new(0),
            cached: AtomicU64::new(0),
            spare: Spare::new(),
        });
        lanes.insert_unique(hash, lane, |l| l.hash).into_mut()
    }

    /// Queues the entry `make` builds on the lane of `key` (the task was already admitted).
    /// `make` runs once the lane is found, under its shard lock; when the key's `Hash`, `Eq` or
    /// `Drop` panics it is not called, and the caller takes the admission back.
    pub(crate) fn submit<K, R>(
        self: &Arc<Self>,
        registry: &Arc<Registry>,
        key: K,
        make: impl FnOnce() -> (R, S::Entry),
    ) -> Result<R, KeyPanicked>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        let mut replaced = None;
        let (out, pushed) = self.with_lane(key, |lane| {
            let (out, entry) = make();
            (out, lane.push(self, entry, &mut replaced))
        })?;
        self.after_push(registry, pushed, &mut replaced);
        Ok(out)
    }

    /// Completes a push outside the locks: queues the lane if it became scheduled, abandons what
    /// it replaced (a panic of its `Drop` is reported, and the task still counts as finished).
    #[inline]
    pub(crate) fn after_push(
        &self,
        registry: &Arc<Registry>,
        pushed: Pushed<S>,
        replaced: &mut Option<S::Entry>,
    ) {
        if let Some(lane) = pushed {
            registry.schedule(Work::Lane(lane));
        }
        if replaced.is_some() {
            self.abandon_replaced(registry, replaced);
        }
    }

    /// A pending coalescing entry a push replaced is abandoned (`Coalesced`) and counted finished.
    #[cold]
    fn abandon_replaced(&self, registry: &Arc<Registry>, replaced: &mut Option<S::Entry>) {
        if let Some(old) = replaced.take() {
            if let Err(report) = self.kind.abandon(old, Abandon::Coalesced) {
                registry.report_panic(report);
            }
            on_pool(registry, |pool| pool.finished(1));
        }
    }

    /// The lane of `key`, pinned in the table until `unpin`.
    pub(crate) fn pin<K>(self: &Arc<Self>, key: K) -> Result<Arc<LaneCore<S>>, KeyPanicked>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        self.with_lane(key, |lane| {
            lane.pins.fetch_add(1, Ordering::AcqRel);
            lane.clone()
        })
    }

    /// Rule 3: an idle, unpinned `lane` leaves the table (or the idle cache keeps it). Called
    /// under the lane's shard lock (`map`).
    pub(crate) fn remove_if_idle(&self, map: &mut ShardMap<S>, lane: &Arc<LaneCore<S>>) {
        if lane.pins.load(Ordering::Acquire) > 0 {
            return;
        }
        let keeps = self.keeps(map, lane, &mut lane.state.lock());
        if !keeps {
            self.remove(map, lane);
        }
    }

    /// Whether `lane`, unpinned, stays in the table (`map`, its shard, locked): scheduled again,
    /// or kept in the idle cache (now, or already). Under the lane's lock (`st`).
    fn keeps(&self, map: &mut ShardMap<S>, lane: &LaneCore<S>, st: &mut LaneState<S>) -> bool {
        // Unpinned: no table reference is kept (not the last: the caller holds one).
        st.kept = None;
        if st.table.is_some() || !st.queue.is_empty() {
            return true;
        }
        if map.cached < self.idle_keep && lane.cached.load(Ordering::Relaxed) == 0 {
            // Keep it for a while (idle cache); give back blocks linked in a burst now.
            st.queue.trim_spare(CACHED_SPARE_MAX);
            let mark = self.sweeps.load(Ordering::Relaxed) + 1;
            lane.cached.store(mark, Ordering::Relaxed);
            map.cached += 1;
            map.oldest = map.oldest.min(mark);
            return true;
        }
        lane.cached.load(Ordering::Relaxed) != 0 // already kept
    }

    /// `lane` leaves the table (`map`, its shard, locked).
    fn remove(&self, map: &mut ShardMap<S>, lane: &Arc<LaneCore<S>>) {
        if let Ok(entry) = map.lanes.find_entry(lane.hash, |l| Arc::ptr_eq(l, lane)) {
            entry.remove();
            self.live.fetch_sub(1, Ordering::Relaxed);
            map.shrink();
        }
    }

    pub(super) fn shards(&self) -> impl Iterator<Item = &Shard<S>> {
        self.shards.iter()
    }
}

impl<S: LaneKind> LaneCore<S> {
    /// Appends `entry`. If `entry` coalesces and a pending coalescing entry is at the back, that
    /// one is replaced: it goes to `replaced` (empty), for the pusher to abandon outside the locks.
    ///
    /// Always inlined: left out of line in a closure lane's pinned push (`Lane::execute`), its
    /// call's frame cost the producer 15 instructions per task (callgrind, `contexts --contexts
    /// 16 --work 10`: 163.4 → 148.5 on the producer's thread).
    #[inline(always)]
    pub(crate) fn push(
        self: &Arc<Self>,
        table: &Arc<LaneTable<S>>,
        entry: S::Entry,
        replaced: &mut Option<S::Entry>,
    ) -> Pushed<S> {
        let mut st = self.state.lock();
        if S::is_coalescing(&entry) && st.queue.back().is_some_and(S::is_coalescing) {
            *replaced = st.queue.pop_back();
        }
        st.queue.push_back(entry);
        let schedule = st.table.is_none();
        if schedule {
            st.schedule(table);
        }
        drop(st);
        schedule.then(|| self.clone())
    }

    /// Appends every entry of `entries` (none coalescing) in order under one lane lock, and
    /// queues the lane once if it was idle: a batch pays one hand-over of the lane lock and at
    /// most one schedule and wake-up. Its entries are consecutive in `queue` (rule 4); it is a
    /// run of pushes no other push interleaves with, so rules 1 and 2 hold as for one push.
    pub(crate) fn push_all(
        self: &Arc<Self>,
        table: &Arc<LaneTable<S>>,
        registry: &Arc<Registry>,
        entries: &mut Vec<S::Entry>,
    ) {
        if entries.is_empty() {
            return;
        }
        debug_assert!(!entries.iter().any(S::is_coalescing));
        let mut st = self.state.lock();
        for entry in entries.drain(..) {
            st.queue.push_back(entry);
        }
        let schedule = st.table.is_none();
        if schedule {
            st.schedule(table);
        }
        drop(st);
        if schedule {
            registry.schedule(Work::Lane(self.clone()));
        }
    }

    /// Queues `entry` on a pinned lane of `table` (no look-up: a pinned lane stays in the table).
    pub(crate) fn push_pinned(
        self: &Arc<Self>,
        table: &Arc<LaneTable<S>>,
        registry: &Arc<Registry>,
        entry: S::Entry,
    ) {
        let mut replaced = None;
        let pushed = self.push(table, entry, &mut replaced);
        table.after_push(registry, pushed, &mut replaced);
    }

    /// Whether a `Lane` handle pins the lane (read under the lane lock by a runner turning it
    /// idle; see `LaneState::turn_idle`).
    #[inline]
    pub(super) fn pinned(&self) -> bool {
        self.pins.load(Ordering::Acquire) > 0
    }

    /// Another handle to a pinned lane.
    pub(crate) fn repin(self: &Arc<Self>) -> Arc<Self> {
        self.pins.fetch_add(1, Ordering::AcqRel);
        self.clone()
    }

    /// A `Lane` handle let go of the lane: it may now be freed when idle.
    pub(crate) fn unpin(self: &Arc<Self>, table: &LaneTable<S>) {
        let mut map = table.shard(self.hash).lock();
        if self.pins.fetch_sub(1, Ordering::AcqRel) == 1 {
            table.remove_if_idle(&mut map, self);
        }
    }

    /// Rule 3: the lane went idle (its runner took `table` out of its state): it leaves the table
    /// unless pinned. The table may be freed right here, if this lane held its last reference.
    pub(super) fn release(self: &Arc<Self>, table: Arc<LaneTable<S>>) {
        if self.pins.load(Ordering::Acquire) > 0 {
            return;
        }
        let mut map = table.shard(self.hash).lock();
        table.remove_if_idle(&mut map, self);
    }

    /// [`release`](Self::release) for a lane that went idle under this hold of its lock (`st`):
    /// done at once if its shard's lock is free (taken after the lane's, so only tried), with no
    /// second hold of the lane lock. False if that lock was busy: the caller calls `release`
    /// once it let go of the lane lock. The caller drops `table` with no lock held.
    pub(super) fn release_held(
        self: &Arc<Self>,
        st: &mut LaneState<S>,
        table: &Arc<LaneTable<S>>,
    ) -> bool {
        let Some(mut map) = table.shard(self.hash).try_lock() else {
            return false;
        };
        if self.pins.load(Ordering::Acquire) == 0 && !table.keeps(&mut map, self, st) {
            table.remove(&mut map, self);
        }
        true
    }

    /// Runs one entry as the lane would (for entries handed back by `shutdown_now`).
    pub(crate) fn run_entry(&self, entry: S::Entry) -> Result<(), PanicReport> {
        self.kind
            .run(self.key.get(), entry)
            .map_err(|r| r.in_context(self.hash))
    }

    pub(crate) fn key<K: 'static>(&self) -> Option<&K> {
        self.key.get().downcast_ref::<K>()
    }
}

impl<S: LaneKind> ShardMap<S> {
    /// Gives memory back after a burst: a table a quarter full halves (defect: a shard kept the
    /// size of its peak forever). Amortised O(1) per removal.
    pub(super) fn shrink(&mut self) {
        let len = self.lanes.len();
        if self.lanes.capacity() > 32 && len * 4 < self.lanes.capacity() {
            self.lanes.shrink_to(len * 2, |l| l.hash);
        }
    }
}

/// What a task handed back from this lane by `shutdown_now` says of its context.
impl<S: LaneKind> ContextOf for LaneCore<S> {
    fn context_hash(&self) -> u64 {
        self.hash
    }

    fn context_key(&self) -> &(dyn Any + Send + Sync) {
        S::context_key(self.key.get())
    }
}
