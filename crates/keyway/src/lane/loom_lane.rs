//! loom models of a runner taking its lane's queue in chunks (`README.md`, rules 1, 2, 4, 5, 9
//! and the coalescing rule), on a miniature of `LaneState`: the lane's real queue (`queue.rs`,
//! under loom with blocks of one to a few entries and two entries of spares, so a few entries
//! cross the home and several blocks, and blocks are recycled and freed) and a `scheduled` flag
//! under one lock. The runner hands the blocks its chunk emptied back to the lane, takes the
//! whole queue in O(1) into its empty chunk, gives back a coalescing last entry that is not
//! alone, runs at most its batch, gives the rest back in front of whatever was pushed meanwhile
//! (the chains linked), and turns the lane idle only when it sees the queue empty under the lock.
//! "Scheduling" a lane runs it later on the thread that scheduled it, so every interleaving of
//! the runner and the pushers is explored.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p keyway --lib loom`.
//!
//! A batch (`push_all`) appends its entries in one hold of the lock: breaking it into one lock
//! per entry fails `loom_batches_vs_chunked_drain` (the other thread's batch lands inside it).
//!
//! Deliberate breaks of the queue (rule 9) tried when the models moved onto it: a take that left
//! the home entry live in the lane as well as in the chunk crashed the models (SIGSEGV: an entry
//! owned twice); a give-back that appended the chunk's remainder behind the entries pushed
//! meanwhile failed `loom_push_vs_chunked_drain_to_empty` and `loom_batches_vs_chunked_drain`
//! (order); a chunk's spare block handed to the lane without being unlinked from the chunk's
//! spare stack aborted them (double free). The turn's end is the runner's take that finds the
//! queue empty and turns the lane idle under the same lock (rule 2). Breaks of the take that
//! leaves the producer's tail block (a backlog's take of whole blocks, rule 9): leaving the
//! queue's read cursor on the blocks the chunk took crashed the models (SIGSEGV); moving a
//! coalescing last entry of a partial take to the back of the queue failed
//! `loom_a_partial_take_keeps_a_coalescing_entry_in_place` (`[0, 2, 3, 4, 1]`).
//!
//! Deliberate breaks tried when these models were written: keeping a coalescing last entry in
//! the swapped chunk failed the coalescing model (the entry that was pending behind entry 0 when
//! a newer one was pushed ran: `[0, 1, 2]`), and turning the lane idle under a second lock, after
//! letting go of the one the runner saw the queue empty under, failed both models (a pusher
//! started a second runner while the first was still on the lane). Giving a runner's remainder
//! back behind the entries pushed meanwhile, instead of in front of them, failed
//! `loom_push_vs_chunked_drain_to_empty` and `loom_batches_vs_chunked_drain`.

use super::queue::Queue;
use crate::loom::sync::atomic::{AtomicUsize, Ordering};
use crate::loom::sync::{Arc, Mutex};
use crate::loom::thread;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    id: u32,
    coalescing: bool,
}

struct LaneSt {
    queue: Queue<Entry>,
    scheduled: bool,
}

struct World {
    lane: Mutex<LaneSt>,
    /// Runners inside `run_lane` right now (rule 1: never more than one).
    runners: AtomicUsize,
    /// Every run, in order.
    ran: Mutex<Vec<u32>>,
    /// Batch of the runner: entries it runs per turn.
    max: usize,
}

impl World {
    fn new(max: usize) -> Arc<World> {
        Arc::new(World {
            lane: Mutex::new(LaneSt {
                queue: Queue::new(),
                scheduled: false,
            }),
            runners: AtomicUsize::new(0),
            ran: Mutex::new(Vec::new()),
            max,
        })
    }

    /// `LaneCore::push`: appends (a coalescing entry replaces a coalescing back); true if the
    /// lane went from idle to scheduled: the caller then runs it.
    fn push(&self, entry: Entry) -> bool {
        self.push_noting(entry).0
    }

    /// `push`, also giving how many entries had started running when it took the lock.
    fn push_noting(&self, entry: Entry) -> (bool, usize) {
        let mut st = self.lane.lock();
        let started = self.ran.lock().len();
        if entry.coalescing && st.queue.back().is_some_and(|e| e.coalescing) {
            st.queue.pop_back(); // abandoned: never runs
        }
        st.queue.push_back(entry);
        let was_idle = !st.scheduled;
        st.scheduled = true;
        (was_idle, started)
    }

    /// `LaneCore::push_all`: appends every entry (none coalescing) under one lock; true if the
    /// lane went from idle to scheduled: the caller then runs it.
    fn push_all(&self, entries: &[Entry]) -> bool {
        let mut st = self.lane.lock();
        for entry in entries {
            st.queue.push_back(*entry);
        }
        let was_idle = !st.scheduled;
        st.scheduled = true;
        was_idle
    }

    /// `take_chunk`: false when the lane went idle.
    fn take(&self, chunk: &mut Queue<Entry>) -> bool {
        let mut guard = self.lane.lock();
        let st = &mut *guard;
        st.queue.reclaim(chunk);
        if st.queue.is_empty() {
            st.scheduled = false;
            // Leaves the lane under the lock it turned the lane idle under (after it, a push
            // may start the next runner at once).
            self.runners.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        st.queue.take_into(chunk, self.max);
        if st.queue.is_empty() && chunk.len() > 1 && chunk.back().is_some_and(|e| e.coalescing) {
            if let Some(last) = chunk.pop_back() {
                st.queue.push_back(last);
            }
        }
        true
    }

    /// `LaneState::give_back`: the chunk's remainder goes in front of what was pushed since;
    /// the blocks the chunk emptied go back to the lane (the runner's end of turn).
    fn give_back(&self, chunk: &mut Queue<Entry>) {
        let mut st = self.lane.lock();
        st.queue.give_back(chunk);
        st.queue.reclaim(chunk);
    }

    /// `run_batch`: takes the queue, runs at most `max` entries, gives the rest back (the real
    /// runner then requeues the lane; here it goes on at once, as the lane's only runner), until
    /// it sees the lane empty.
    fn run_lane(&self) {
        assert_eq!(
            self.runners.fetch_add(1, Ordering::AcqRel),
            0,
            "two runners on one lane"
        );
        let mut chunk = Queue::new();
        while self.take(&mut chunk) {
            for _ in 0..self.max {
                let Some(entry) = chunk.pop_front() else {
                    break;
                };
                self.ran.lock().push(entry.id);
            }
            if !chunk.is_empty() {
                self.give_back(&mut chunk);
            }
        }
    }

    fn assert_quiet(&self) {
        let st = self.lane.lock();
        assert!(st.queue.is_empty(), "an entry was stranded");
        assert!(!st.scheduled, "the lane stayed scheduled with no runner");
    }

    fn ran(&self) -> Vec<u32> {
        self.ran.lock().clone()
    }
}

fn seq(id: u32) -> Entry {
    Entry {
        id,
        coalescing: false,
    }
}

fn coal(id: u32) -> Entry {
    Entry {
        id,
        coalescing: true,
    }
}

/// Rules 1, 2, 4, 5: pushes race a runner that takes the whole queue, runs two entries a turn
/// and gives the rest back, until it drains the lane to empty. Each entry runs exactly once, in
/// order; the lane ends idle; never two runners.
#[test]
fn loom_push_vs_chunked_drain_to_empty() {
    crate::loom::model(|| {
        let world = World::new(2);
        assert!(world.push(seq(0)));
        let runner = {
            let world = world.clone();
            thread::spawn(move || world.run_lane())
        };
        for id in 1..4 {
            if world.push(seq(id)) {
                world.run_lane();
            }
        }
        runner.join().unwrap();
        assert_eq!(world.ran(), vec![0, 1, 2, 3]);
        world.assert_quiet();
    });
}

/// The coalescing rule under rule 5: coalescing pushes race a runner that swaps the queue out.
/// The newest coalescing entry always runs, last; nothing runs twice; and a coalescing entry
/// that was pending behind another when a newer one was pushed (entry 0 had not started) is
/// replaced, never run.
#[test]
fn loom_coalescing_replace_vs_swap_take() {
    crate::loom::model(|| {
        let world = World::new(4);
        assert!(world.push(seq(0)));
        let runner = {
            let world = world.clone();
            thread::spawn(move || world.run_lane())
        };
        if world.push(coal(1)) {
            world.run_lane();
        }
        let (idle, started) = world.push_noting(coal(2));
        if idle {
            world.run_lane();
        }
        runner.join().unwrap();
        let ran = world.ran();
        if started == 0 {
            assert_eq!(ran, [0, 2], "a pending coalescing entry was not replaced");
        }
        assert_eq!(ran.first(), Some(&0), "{ran:?}");
        assert_eq!(ran.last(), Some(&2), "the newest did not run last: {ran:?}");
        assert!(
            ran == [0, 2] || ran == [0, 1, 2],
            "a coalescing entry ran twice or out of order: {ran:?}"
        );
        world.assert_quiet();
    });
}

/// A batch (`Lane::execute_all`) under rules 1, 2, 4 and 5: a batch and single pushes from one
/// thread race another thread's batch and a runner running two entries a turn. Each entry runs once;
/// each thread's entries run in its order; a batch's entries run back to back (no entry of the
/// other thread between them); never two runners; the lane ends idle.
#[test]
fn loom_batches_vs_chunked_drain() {
    crate::loom::model(|| {
        let world = World::new(2);
        assert!(world.push(seq(0)));
        let runner = {
            let world = world.clone();
            thread::spawn(move || world.run_lane())
        };
        let other = {
            let world = world.clone();
            thread::spawn(move || {
                if world.push_all(&[seq(10), seq(11), seq(12)]) {
                    world.run_lane();
                }
            })
        };
        if world.push_all(&[seq(1), seq(2)]) {
            world.run_lane();
        }
        if world.push(seq(3)) {
            world.run_lane();
        }
        runner.join().unwrap();
        other.join().unwrap();
        let ran = world.ran();
        let mine: Vec<u32> = ran.iter().copied().filter(|&id| id < 10).collect();
        assert_eq!(mine, [0, 1, 2, 3], "{ran:?}");
        let at = ran
            .iter()
            .position(|&id| id == 10)
            .expect("the other batch ran");
        assert_eq!(ran[at..at + 3], [10, 11, 12], "a batch was split: {ran:?}");
        assert_eq!(ran.len(), 7, "{ran:?}");
        world.assert_quiet();
    });
}

/// Rule 9 with the coalescing rule: a take that leaves the tail with the queue (a backlog past
/// the runner's batch) never moves a coalescing entry it took to the back of the queue (only a
/// take of the whole queue does, for its last entry): a coalescing entry with newer entries
/// behind it runs in its place. Two entries of a block before the tail hold the batch of one
/// here, so the take is partial. (Moving it back after a partial take as after a whole one ran
/// `[0, 2, 3, 4, 1]`.)
#[test]
fn loom_a_partial_take_keeps_a_coalescing_entry_in_place() {
    crate::loom::model(|| {
        let world = World::new(1);
        assert!(world.push(seq(0)));
        for entry in [coal(1), seq(2), seq(3)] {
            assert!(!world.push(entry));
        }
        let runner = {
            let world = world.clone();
            thread::spawn(move || world.run_lane())
        };
        if world.push(coal(4)) {
            world.run_lane();
        }
        runner.join().unwrap();
        assert_eq!(world.ran(), [0, 1, 2, 3, 4]);
        world.assert_quiet();
    });
}
