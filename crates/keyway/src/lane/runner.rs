//! How a lane of closures or messages runs on the pool: its turn takes a chunk of entries under
//! the lane lock and runs them, stopping at a multi-key task (rule 6) or an async entry (rule
//! 7), or when the lane is empty (rule 2) or the turn's batch is used up (fairness). The turn
//! itself (budget, count, holding record, end) is `turn.rs`; see `README.md` beside this file.

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use super::queue::Queue;
use super::table::{Barrier, LaneCore, LaneKind, LaneState, LaneTable, Ran};
use super::turn::{Again, Holds, OnUnwind, Turn};
use crate::engine::{LaneJob, OnPool, Watched, WorkerCtx};

impl<S: LaneKind> super::table::LaneState<S> {
    /// Rule 5: the entries of a runner's `chunk` that did not run go back in front of the queue,
    /// in order, before every entry pushed since the chunk was taken; `chunk` is left empty. The
    /// chains are linked (rule 9): nothing is copied but the queue's first entry.
    pub(super) fn give_back(&mut self, chunk: &mut Queue<S::Entry>) {
        self.queue.give_back(chunk);
        self.held = 0;
    }
}

/// What `take_chunk` found.
enum Taken<S: LaneKind> {
    Entries,
    /// The lane went idle; here is the table it held while scheduled.
    Empty(Option<Arc<LaneTable<S>>>),
    Barrier(Arc<dyn Barrier>),
    /// Rule 7: an async entry, taken out of the queue, to start alone.
    Launch(S::Entry),
}

impl<S: LaneKind> LaneCore<S> {
    /// Takes the whole queue into `chunk` (empty) in O(1), or with a backlog the whole blocks
    /// from its front that hold `max` entries, the producer's tail block left to it (rule 9): no
    /// entry is read or copied under the lock, which is what a producer pushing to this lane
    /// waits for. The runner runs at most `max` of them this turn and gives the rest back in
    /// front of the queue (`LaneState::give_back`). Rule 5: a coalescing entry last in the queue
    /// (taken only with the whole queue) stays there unless it is the very next to run, so
    /// `push` sees every pending coalescing entry that could be replaced. Only the head is
    /// looked at for a barrier or an async entry; one further back is found by the runner, which
    /// puts it back with the rest (`Chunk::put_back_from`).
    /// Empty: the lane is turned off (rule 2). The blocks the chunk emptied go back to the lane
    /// first, where the producer's next block comes from.
    fn take_chunk(&self, max: usize, chunk: &mut Queue<S::Entry>) -> Taken<S> {
        debug_assert!(chunk.is_empty());
        let mut guard = self.state.lock();
        let st = &mut *guard;
        st.queue.reclaim(chunk);
        let Some(front) = st.queue.front() else {
            // Rule 2: only the lane's runner turns it idle, and only while it sees the queue
            // empty under the lane lock.
            return Taken::Empty(st.turn_idle(self.pinned()));
        };
        if let Some(multi) = S::barrier(front) {
            // Rule 6: the lane parks at a multi-key task; it stays scheduled.
            return Taken::Barrier(multi.clone());
        }
        if self.kind.is_async(front) {
            return match st.queue.pop_front() {
                Some(entry) => Taken::Launch(entry),
                None => unreachable!("the head was just seen"),
            };
        }
        st.take_batch(chunk, max);
        Taken::Entries
    }
}

impl<S: LaneKind> LaneState<S> {
    /// Rule 5: takes the queue's entries into `chunk` (empty) for a turn of at most `max` (the
    /// whole queue, or with a backlog the whole blocks from its front that hold `max`), leaving a
    /// trailing coalescing entry in the queue unless it is the very next to run; what the turn
    /// holds past its batch still counts in the lane's length (`held`). The head is an entry to
    /// run (the caller looked). A runner's turn and an async typed driver's both take this way.
    pub(super) fn take_batch(&mut self, chunk: &mut Queue<S::Entry>, max: usize) {
        self.queue.take_into(chunk, max);
        if self.queue.is_empty() && chunk.len() > 1 && chunk.back().is_some_and(S::is_coalescing) {
            if let Some(last) = chunk.pop_back() {
                self.queue.push_back(last);
            }
        }
        // Written only when the turn holds more than its batch (zero otherwise), so a short
        // activation leaves the line of `held` alone.
        debug_assert_eq!(self.held, 0);
        if chunk.len() > max {
            self.held = chunk.len() - max;
        }
    }
}

/// A runner's lane and the chunk its turn took from it (oldest first).
pub(crate) struct Chunk<S: LaneKind> {
    pub(super) lane: Arc<LaneCore<S>>,
    pub(super) entries: RefCell<Queue<S::Entry>>,
}

impl<S: LaneKind> Chunk<S> {
    /// The next entry of the chunk (no borrow is held while it runs).
    #[inline]
    fn next(&self) -> Option<S::Entry> {
        self.entries.borrow_mut().pop_front()
    }

    /// `first`, then the rest of the chunk, go back to the front of the lane, in order: a
    /// barrier or an async entry that was not at the head when the chunk was taken; the next
    /// `take_chunk` meets it at the head (rules 6 and 7).
    fn put_back_from(&self, first: S::Entry) {
        let mut chunk = self.entries.borrow_mut();
        chunk.push_front(first);
        self.lane.state.lock().give_back(&mut chunk);
    }
}

impl<S: LaneKind> Holds for Chunk<S> {
    /// Rule 5 under `shutdown_now`: the entries not started go back to the front, in order.
    fn put_back(&self) {
        let mut chunk = self.entries.borrow_mut();
        if !chunk.is_empty() {
            self.lane.state.lock().give_back(&mut chunk);
        }
    }

    /// The lane is queued again (its entries that did not run are back in front): it never
    /// stays scheduled with no job.
    fn unwound(&self, pool: &OnPool<'_>) {
        if !pool.stopping() {
            self.lane.clone().run_again(pool, Again::Yield);
        }
    }

    fn context_hash(&self) -> Option<u64> {
        Some(self.lane.hash)
    }

    fn lane(&self) -> Option<Weak<dyn Watched>> {
        Some(Arc::downgrade(&self.lane) as Weak<dyn Watched>)
    }
}

impl<S: LaneKind> LaneJob for LaneCore<S> {
    fn run_batch(self: Arc<Self>, worker: &WorkerCtx) {
        let chunk = Chunk {
            lane: self,
            entries: RefCell::new(Queue::new()),
        };
        Turn::new(OnPool::worker(worker), chunk).run_lane();
    }
}

impl<S: LaneKind> Turn<'_, Chunk<S>> {
    /// The turn: chunks until the lane is empty (idle), parks at a multi-key task, is handed to
    /// a future, or the batch is used up (then what is left goes back and the lane is queued
    /// again).
    fn run_lane(self) {
        while !self.used_up() {
            let taken = {
                let mut chunk = self.held.entries.borrow_mut();
                self.held.lane.take_chunk(self.left(), &mut chunk)
            };
            match taken {
                Taken::Entries => {
                    if !self.run_chunk() {
                        return;
                    }
                }
                Taken::Empty(table) => {
                    self.flush();
                    return self.held.lane.let_go(table);
                }
                Taken::Barrier(barrier) => {
                    self.flush();
                    if let Some(worker) = self.pool.worker {
                        barrier.arrive(worker);
                    }
                    return;
                }
                Taken::Launch(entry) => {
                    if !self.launch(entry) {
                        return;
                    }
                }
            }
        }
        self.flush();
        let pool = self.pool;
        let Chunk { lane, entries } = self.held;
        let mut chunk = entries.into_inner();
        // The batch is used up: what is left of the chunk goes back in front of the queue, and
        // the blocks the chunk emptied go back to the lane.
        pool.registry.watch.note(&lane);
        lane.end_turn(&pool, Again::Yield, |st| {
            st.give_back(&mut chunk);
            st.queue.reclaim(&mut chunk);
            true
        });
    }

    /// Runs the chunk's entries while the batch lasts; false when `shutdown_now` began (the
    /// entries not started went back, in order, for the drain: shutdown step 2).
    fn run_chunk(&self) -> bool {
        let lane = &self.held.lane;
        // Read once per chunk, not per entry: the key does not change while the lane lives.
        let key = lane.key.get();
        self.holding(|| {
            while let Some(entry) = self.held.next() {
                if S::barrier(&entry).is_some() || lane.kind.is_async(&entry) {
                    self.held.put_back_from(entry);
                    break;
                }
                if S::is_batch(&entry) {
                    // A batch runs from the head of the chunk (`batch.rs`).
                    self.held.entries.borrow_mut().push_front(entry);
                    S::run_batch(self);
                } else {
                    self.run(
                        Some(lane.hash),
                        #[inline(always)]
                        || lane.kind.run(key, entry),
                    );
                }
                if self.used_up() || self.stopping() {
                    break;
                }
            }
        });
        if self.stopping() {
            self.held.put_back();
            self.flush();
            return false;
        }
        true
    }

    /// Rule 7: starts an async entry alone; false when the runner must leave the lane (the
    /// future runs on and owns it, or the pool is stopping). The start counts as the task; a
    /// future still running holds one more admission until it is done (`extend_task`).
    fn launch(&self, entry: S::Entry) -> bool {
        let lane = &self.held.lane;
        self.flush();
        // Whatever unwinds out of the launch, the start is counted (and the lane is not queued
        // again: the future may own it).
        let unwound = OnUnwind(|| self.flush());
        let mut suspended = false;
        self.run(Some(lane.hash), || {
            match lane
                .kind
                .launch(lane, lane.key.get(), self.registry(), entry)
            {
                Ran::Suspended => {
                    suspended = true;
                    Ok(())
                }
                Ran::Done(outcome) => outcome,
            }
        });
        unwound.disarm();
        if suspended || self.stopping() {
            // Rule 7: the future owns the lane now; never touch it again here.
            self.flush();
            return false;
        }
        true
    }
}
