//! How a lane runs on the pool: a worker takes a chunk of entries under the lane lock, runs
//! them, and stops at a multi-key task (rule 6) or an async entry (rule 7), or when the lane is
//! empty (rule 2) or its batch is used up (fairness). See `README.md` beside this file.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;

use super::keyed::MultiTask;
use super::table::{LaneCore, LaneKind, LaneTable, Ran};
use crate::engine::holding::{self, Held};
use crate::engine::{LaneJob, Registry, Work, WorkerCtx};
use crate::future::Resume;

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
    fn give_back(&mut self, chunk: &mut VecDeque<S::Entry>) {
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

/// Runs its closure if dropped, that is if what it guards unwinds: the normal path ends with
/// [`disarm`](OnUnwind::disarm), which costs nothing.
struct OnUnwind<F: FnMut()>(F);

impl<F: FnMut()> OnUnwind<F> {
    #[inline]
    fn disarm(self) {
        std::mem::forget(self);
    }
}

impl<F: FnMut()> Drop for OnUnwind<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

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
    /// Takes the whole queue into `chunk` (empty) by swapping buffers: no entry is read or
    /// copied under the lock, which is what a producer pushing to this lane waits for. The
    /// runner runs at most `max` of them this turn and gives the rest back in front of the queue
    /// (`LaneState::give_back`). Rule 5: a coalescing entry last in the queue stays there unless
    /// it is the very next to run, so `push` sees every pending coalescing entry that could be
    /// replaced. Only the head is looked at for a barrier or an async entry; one further back
    /// is found by the runner, which puts it back with the rest (`Running::put_back_from`).
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

/// Rule 7: a lane suspended on a future, resumed by that future once it is done (completed,
/// panicked, cancelled). The lane is scheduled with no job; `resume` gives it back one (or turns
/// it idle if its queue is empty).
impl<S: LaneKind> Resume for LaneCore<S> {
    fn context_hash(&self) -> Option<u64> {
        Some(self.hash)
    }

    fn resume(self: Arc<Self>, registry: &Arc<Registry>) {
        let idle = {
            let mut st = self.state.lock();
            if st.table.is_none() {
                return; // drained by `shutdown_now`
            }
            if st.queue.is_empty() {
                // Turned idle: a pinned lane may keep its table reference (nothing to release).
                Some(st.turn_idle(self.pinned()))
            } else {
                None
            }
        };
        match idle {
            Some(Some(table)) => self.release(table),
            Some(None) => {}
            None => registry.schedule_next(Work::Lane(self)),
        }
    }
}

/// A runner's lane and the chunk it took from it (oldest first).
struct Running<S: LaneKind> {
    lane: Arc<LaneCore<S>>,
    chunk: RefCell<VecDeque<S::Entry>>,
    /// Entries of the chunk that ran and are not yet counted finished.
    ran: Cell<usize>,
}

impl<S: LaneKind> Running<S> {
    /// The next entry of the chunk (no borrow is held while it runs).
    fn next(&self) -> Option<S::Entry> {
        self.chunk.borrow_mut().pop_front()
    }

    /// The lane, once the runner leaves it with its chunk empty (most often with no buffer: it
    /// went back to the lane); an empty chunk with no buffer skips the drop glue, an out-of-line
    /// call on every lane turn.
    fn finish(self) -> Arc<LaneCore<S>> {
        let Running { lane, chunk, .. } = self;
        let chunk = chunk.into_inner();
        debug_assert!(chunk.is_empty());
        if chunk.capacity() == 0 {
            std::mem::forget(chunk);
        }
        lane
    }

    /// `first`, then the rest of the chunk, go back to the front of the lane, in order: a
    /// barrier or an async entry that was not at the head when the chunk was taken; the next
    /// `take_chunk` meets it at the head (rules 6 and 7).
    fn put_back_from(&self, first: S::Entry) {
        let mut chunk = self.chunk.borrow_mut();
        chunk.push_front(first);
        self.lane.state.lock().give_back(&mut chunk);
    }
}

impl<S: LaneKind> Held for Running<S> {
    /// Rule 5 under `shutdown_now`: the entries not started go back to the front, in order.
    fn put_back(&self) -> usize {
        let mut chunk = self.chunk.borrow_mut();
        if !chunk.is_empty() {
            self.lane.state.lock().give_back(&mut chunk);
        }
        self.ran.take()
    }
}

impl<S: LaneKind> LaneJob for LaneCore<S> {
    fn run_batch(self: Arc<Self>, worker: &WorkerCtx) {
        let running = Running {
            lane: self,
            chunk: RefCell::new(VecDeque::new()),
            ran: Cell::new(0),
        };
        let lane = &running.lane;
        let mut left = worker.registry.config.lane_batch;
        while left > 0 {
            let taken = {
                let mut chunk = running.chunk.borrow_mut();
                lane.take_chunk(left, &mut chunk)
            };
            match taken {
                Taken::Entries => {}
                Taken::Empty(table) => {
                    let lane = running.finish();
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
                    // Whatever unwinds out of the launch, the start is counted (below).
                    let unwound = OnUnwind(|| worker.registry.count_finished(1, Some(worker)));
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
                    unwound.disarm();
                    // The start counts as the task; a future still running holds one more
                    // admission until it is done (`Registry::extend_task`).
                    worker.registry.count_finished(1, Some(worker));
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
                let _held = holding::hold(&running);
                // Whatever unwinds out of an entry's run (user code in its bookkeeping), the
                // entries that ran are counted, that one included, the rest go back to the
                // front of the lane, and the lane is queued again: it never stays scheduled
                // with no job.
                let unwound = OnUnwind(|| {
                    let ran = running.put_back() + 1;
                    worker.registry.count_finished(ran, Some(worker));
                    if !worker.registry.is_stopping() {
                        worker.requeue_lane(Work::Lane(running.lane.clone()));
                    }
                });
                while let Some(entry) = running.next() {
                    if S::barrier(&entry).is_some() || lane.kind.is_async(&entry) {
                        running.put_back_from(entry);
                        break;
                    }
                    worker.run_one(|| {
                        (lane.kind.run(lane.key.get(), entry)).map_err(|r| r.in_context(lane.hash))
                    });
                    running.ran.set(running.ran.get() + 1);
                    if running.ran.get() == left || worker.registry.is_stopping() {
                        break;
                    }
                }
                unwound.disarm();
            }
            let ran = running.ran.take();
            left = left.saturating_sub(ran);
            worker.registry.count_finished(ran, Some(worker));
            if worker.registry.is_stopping() {
                // Shutdown step 2 (engine README): the untouched entries go back, in order, for
                // the drain (step 4, once this worker has exited).
                running.put_back();
                return;
            }
        }
        let idle = {
            let mut guard = lane.state.lock();
            let st = &mut *guard;
            // The batch is used up: what is left of the chunk goes back in front of the queue,
            // and the chunk's buffer is the lane's spare again.
            let mut chunk = running.chunk.take();
            st.give_back(&mut chunk);
            st.keep_spare(chunk);
            if st.queue.is_empty() {
                Some(st.turn_idle(lane.pinned()))
            } else {
                None
            }
        };
        let lane = running.finish();
        match idle {
            Some(Some(table)) => lane.release(table),
            Some(None) => {} // a pinned lane kept its table reference
            None => worker.requeue_lane(Work::Lane(lane)),
        }
    }
}
