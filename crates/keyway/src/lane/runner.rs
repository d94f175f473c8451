//! How a lane runs on the pool: a worker takes a chunk of entries under the lane lock, runs
//! them, and stops at a multi-key task (rule 6) or an async entry (rule 7), or when the lane is
//! empty (rule 2) or its batch is used up (fairness). See `README.md` beside this file.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use smallvec::SmallVec;

use super::held::{self, Held};
use super::table::{LaneCore, LaneKind, LaneTable, Ran, Resume};
use crate::keyed::MultiTask;
use crate::pool::registry::{Job, LaneJob, Registry};
use crate::pool::worker::WorkerCtx;

/// Entries a runner takes from its lane per lock (one cache-line hand-over per chunk, not per
/// task).
const CHUNK: usize = 16;

/// What `take_chunk` found.
enum Taken<S: LaneKind> {
    Entries,
    /// The lane went idle; here is the table it held while scheduled.
    Empty(Option<Arc<LaneTable<S>>>),
    Barrier(Arc<MultiTask>),
    /// Rule 7: an async entry, taken out of the queue, to start alone.
    Launch(S::Entry),
}

impl<S: LaneKind> LaneCore<S> {
    /// Takes up to `max` entries from the front (rule 5: never a coalescing entry that is last in
    /// the queue unless it is the very next to run, so `push` sees every pending coalescing entry
    /// that could be replaced). Empty: the lane is turned off (rule 2).
    fn take_chunk(&self, max: usize, chunk: &mut SmallVec<[S::Entry; CHUNK]>) -> Taken<S> {
        let mut st = self.state.lock();
        let len = st.queue.len();
        let mut take = 0;
        while take < max.min(len) {
            let e = &st.queue[take];
            if let Some(multi) = S::barrier(e) {
                if take == 0 {
                    // Rule 6: the lane parks at a multi-key task; it stays scheduled.
                    return Taken::Barrier(multi.clone());
                }
                break;
            }
            if self.kind.is_async(e) {
                if take == 0 {
                    return match st.queue.pop_front() {
                        Some(entry) => Taken::Launch(entry),
                        None => unreachable!("the head was just seen"),
                    };
                }
                break;
            }
            if take > 0 && take == len - 1 && S::is_coalescing(e) {
                break;
            }
            take += 1;
        }
        if take == 0 {
            // Rule 2: only the lane's runner turns it idle, and only while it sees the queue
            // empty under the lane lock.
            return Taken::Empty(st.table.take());
        }
        // Reversed: the runner pops the next entry to run from the back.
        chunk.extend(st.queue.drain(..take).rev());
        Taken::Entries
    }
}

impl<S: LaneKind> Resume for LaneCore<S> {
    fn context_hash(&self) -> u64 {
        self.hash
    }

    fn resume(self: Arc<Self>, registry: &Arc<Registry>) {
        let idle = {
            let mut st = self.state.lock();
            if st.table.is_none() {
                return; // drained by `shutdown_now`
            }
            if st.queue.is_empty() {
                st.table.take()
            } else {
                None
            }
        };
        match idle {
            Some(table) => self.release(table),
            None => registry.schedule_next(Job::Lane(self)),
        }
    }
}

/// A runner's lane and the chunk it took from it (reversed: the next entry to run is last).
struct Running<S: LaneKind> {
    lane: Arc<LaneCore<S>>,
    chunk: RefCell<SmallVec<[S::Entry; CHUNK]>>,
    /// Entries of the chunk that ran and are not yet counted finished.
    ran: Cell<usize>,
}

impl<S: LaneKind> Running<S> {
    /// The next entry of the chunk (no borrow is held while it runs).
    fn next(&self) -> Option<S::Entry> {
        self.chunk.borrow_mut().pop()
    }
}

impl<S: LaneKind> Held for Running<S> {
    /// Rule 5 under `shutdown_now`: the entries not started go back to the front, in order.
    fn put_back(&self) -> usize {
        let mut chunk = self.chunk.borrow_mut();
        if !chunk.is_empty() {
            let mut st = self.lane.state.lock();
            for entry in chunk.drain(..) {
                st.queue.push_front(entry);
            }
        }
        self.ran.take()
    }
}

impl<S: LaneKind> LaneJob for LaneCore<S> {
    fn run_batch(self: Arc<Self>, worker: &WorkerCtx) {
        let running = Running {
            lane: self,
            chunk: RefCell::new(SmallVec::new()),
            ran: Cell::new(0),
        };
        let lane = &running.lane;
        let mut left = worker.registry.config.lane_batch;
        while left > 0 {
            let taken = {
                let mut chunk = running.chunk.borrow_mut();
                lane.take_chunk(left.min(CHUNK), &mut chunk)
            };
            match taken {
                Taken::Entries => {}
                Taken::Empty(table) => {
                    if let Some(table) = table {
                        lane.release(table);
                    }
                    return;
                }
                Taken::Barrier(multi) => {
                    multi.arrive(worker);
                    return;
                }
                Taken::Launch(entry) => {
                    let mut suspended = false;
                    worker.run_one(|| {
                        match lane
                            .kind
                            .launch(lane, lane.key.get(), &worker.registry, entry)
                        {
                            Ran::Suspended => {
                                suspended = true;
                                Ok(())
                            }
                            Ran::Done(outcome) => outcome.map_err(|r| r.in_context(lane.hash)),
                        }
                    });
                    // The start counts as the task; a future still running holds one more
                    // admission until it is done (`Registry::extend_task`).
                    worker.tasks_done(1);
                    if suspended || worker.registry.is_stopping() {
                        // Rule 7: the future owns the lane now; never touch it again here.
                        return;
                    }
                    left -= 1;
                    continue;
                }
            }
            {
                // A `shutdown_now` called by one of these entries finds the rest of the chunk.
                let _held = held::hold(&running);
                while let Some(entry) = running.next() {
                    worker.run_one(|| {
                        (lane.kind.run(lane.key.get(), entry)).map_err(|r| r.in_context(lane.hash))
                    });
                    running.ran.set(running.ran.get() + 1);
                    if worker.registry.is_stopping() {
                        break;
                    }
                }
            }
            let ran = running.ran.take();
            left = left.saturating_sub(ran);
            worker.tasks_done(ran);
            if worker.registry.is_stopping() {
                // `shutdown_now`: the untouched entries go back, in order, for the drain (which
                // runs once this worker has exited).
                running.put_back();
                return;
            }
        }
        let idle = {
            let mut st = lane.state.lock();
            if st.queue.is_empty() {
                st.table.take()
            } else {
                None
            }
        };
        match idle {
            Some(table) => lane.release(table),
            None => worker.requeue_lane(Job::Lane(running.lane)),
        }
    }
}
