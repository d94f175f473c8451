//! How a lane of closures or messages runs on the pool: its turn takes a chunk of entries under
//! the lane lock and runs them, stopping at a multi-key task (rule 6) or an async entry (rule
//! 7), or when the lane is empty (rule 2) or the turn's batch is used up (fairness). The turn
//! itself (budget, count, holding record, end) is `turn.rs`; see `README.md` beside this file.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use super::table::{Barrier, LaneCore, LaneKind, LaneTable, Ran};
use super::turn::{Again, Holds, OnUnwind, Turn};
use crate::engine::{LaneJob, OnPool, Watched, WorkerCtx};

/// The largest buffer (in entries) a lane keeps as its spare: a queue that grew long in a burst
/// keeps its buffer, but the lane does not hold two of that size (measured with keyway-bench
/// `contexts --variant fine`, peak RSS: 37.6 and 40.5 MiB with spares kept whatever their size,
/// 20.9 and 28.5 MiB capped, 19.1 to 29.4 MiB before lanes had spares).
const SPARE_MAX: usize = 1024;

impl<S: LaneKind> super::table::LaneState<S> {
    /// Rule 5: the entries of a runner's `chunk` that did not run go back in front of the queue,
    /// in order, before every entry pushed since the chunk was taken; `chunk` is left empty.
    /// The shorter of the two is moved: a runner that took a long queue and ran its batch
    /// gives back its remainder by swapping buffers, copying only the few entries pushed
    /// meanwhile.
    pub(super) fn give_back(&mut self, chunk: &mut VecDeque<S::Entry>) {
        if chunk.len() >= self.queue.len() {
            chunk.append(&mut self.queue);
            std::mem::swap(&mut self.queue, chunk);
        } else {
            while let Some(entry) = chunk.pop_back() {
                self.queue.push_front(entry);
            }
        }
        self.held = 0;
    }

    /// Rule 5: `buf` (empty) goes back to the lane: as its queue's buffer if the queue has none
    /// (a lane that goes idle keeps one buffer where the next push needs it, also when the idle
    /// cache drops its spare), else as its spare, unless it has one already or `buf` is larger
    /// than `SPARE_MAX` (then it is freed).
    fn keep_spare(&mut self, buf: VecDeque<S::Entry>) {
        debug_assert!(buf.is_empty());
        if buf.capacity() == 0 {
            // Nothing to keep or free: skip the drop glue (an out-of-line call per lane turn).
            std::mem::forget(buf);
        } else if self.queue.capacity() == 0 {
            // The queue had no buffer (so no entry): nothing to drop.
            std::mem::forget(std::mem::replace(&mut self.queue, buf));
        } else if self.spare.capacity() == 0 && buf.capacity() <= SPARE_MAX {
            std::mem::forget(std::mem::replace(&mut self.spare, buf));
        }
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
    /// Takes the whole queue into `chunk` (empty) by swapping buffers: no entry is read or
    /// copied under the lock, which is what a producer pushing to this lane waits for. The
    /// runner runs at most `max` of them this turn and gives the rest back in front of the queue
    /// (`LaneState::give_back`). Rule 5: a coalescing entry last in the queue stays there unless
    /// it is the very next to run, so `push` sees every pending coalescing entry that could be
    /// replaced. Only the head is looked at for a barrier or an async entry; one further back
    /// is found by the runner, which puts it back with the rest (`Chunk::put_back_from`).
    /// Empty: the lane is turned off (rule 2). Whenever the runner leaves the lane (empty,
    /// barrier, launch), the chunk's buffer goes back to the lane as its spare.
    fn take_chunk(&self, max: usize, chunk: &mut VecDeque<S::Entry>) -> Taken<S> {
        debug_assert!(chunk.is_empty());
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if chunk.capacity() == 0 {
            std::mem::swap(chunk, &mut st.spare);
        }
        let len = st.queue.len();
        let Some(front) = st.queue.front() else {
            // Rule 2: only the lane's runner turns it idle, and only while it sees the queue
            // empty under the lane lock.
            st.keep_spare(std::mem::take(chunk));
            return Taken::Empty(st.turn_idle(self.pinned()));
        };
        if let Some(multi) = S::barrier(front) {
            // Rule 6: the lane parks at a multi-key task; it stays scheduled.
            let multi = multi.clone();
            st.keep_spare(std::mem::take(chunk));
            return Taken::Barrier(multi);
        }
        if self.kind.is_async(front) {
            st.keep_spare(std::mem::take(chunk));
            return match st.queue.pop_front() {
                Some(entry) => Taken::Launch(entry),
                None => unreachable!("the head was just seen"),
            };
        }
        std::mem::swap(&mut st.queue, chunk);
        if len > 1 && chunk.back().is_some_and(S::is_coalescing) {
            if let Some(last) = chunk.pop_back() {
                st.queue.push_back(last);
            }
        }
        st.held = chunk.len().saturating_sub(max);
        Taken::Entries
    }
}

/// A runner's lane and the chunk its turn took from it (oldest first).
pub(crate) struct Chunk<S: LaneKind> {
    pub(super) lane: Arc<LaneCore<S>>,
    pub(super) entries: RefCell<VecDeque<S::Entry>>,
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
            entries: RefCell::new(VecDeque::new()),
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
        // the chunk's buffer is the lane's spare again.
        pool.registry.watch.note(&lane);
        lane.end_turn(&pool, Again::Yield, |st| {
            st.give_back(&mut chunk);
            st.keep_spare(chunk);
            true
        });
    }

    /// Runs the chunk's entries while the batch lasts; false when `shutdown_now` began (the
    /// entries not started went back, in order, for the drain: shutdown step 2).
    fn run_chunk(&self) -> bool {
        let lane = &self.held.lane;
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
                    self.run(Some(lane.hash), || lane.kind.run(lane.key.get(), entry));
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
