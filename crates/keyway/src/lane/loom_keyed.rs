//! loom models of the lane protocol (`lane/README.md`, rules 1, 2, 4, 6 and the coalescing rule),
//! on a miniature of the lane state: a queue and a `scheduled` flag under one lock per lane, a
//! multi-key task's arrival count, the submission that parks a multi-key task's fresh lanes,
//! and the completion that arrives at once at the next multi-key task of each lane it pops.
//! "Scheduling" a lane or a ready task runs it later on the thread that scheduled it, so every
//! interleaving of runners, pushers, submitters and the last arrival is explored.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p keyway --lib loom`.
//!
//! Deliberate breaks tried when these models were written: a completion that leaves a lane
//! parked at the next multi-key task without counting its arrival made
//! `loom_multi_key_completion_arrives_at_next` fail (that task never ran); with that, a
//! submitter that completes the count but never queues the ready task made every multi-key
//! model fail. An earlier version was checked against a runner that turns its lane idle after
//! letting go of the lock it saw the queue empty under (an entry pushed in between is
//! stranded).

use std::collections::VecDeque;

use crate::loom::sync::atomic::{AtomicUsize, Ordering};
use crate::loom::sync::{Arc, Mutex};
use crate::loom::thread;

/// A multi-key task on lanes 0 and 1 (rule 6).
struct Multi {
    id: u32,
    waiting: AtomicUsize,
    runs: AtomicUsize,
}

#[derive(Clone)]
enum Entry {
    One { id: u32, coalescing: bool },
    Many(Arc<Multi>),
}

struct LaneSt {
    queue: VecDeque<Entry>,
    scheduled: bool,
}

struct World {
    lanes: [Mutex<LaneSt>; 2],
    /// Every run, in the order they happened: `(lane, id)`; a multi-key task logs `(9, id)`.
    ran: Mutex<Vec<(usize, u32)>>,
    /// The shard locks a multi-key submission holds across its pushes (two-phase locking).
    shards: Mutex<()>,
}

const MULTI_ID: u32 = 100;

impl World {
    fn new() -> Arc<World> {
        let lane = || {
            Mutex::new(LaneSt {
                queue: VecDeque::new(),
                scheduled: false,
            })
        };
        Arc::new(World {
            lanes: [lane(), lane()],
            ran: Mutex::new(Vec::new()),
            shards: Mutex::new(()),
        })
    }

    /// Appends `entry` (a coalescing entry replaces a coalescing back); true if the lane went
    /// from idle to scheduled: the caller then "queues" it (runs it later on its thread).
    fn push(&self, lane: usize, entry: Entry) -> bool {
        let mut st = self.lanes[lane].lock();
        let coalescing = matches!(
            entry,
            Entry::One {
                coalescing: true,
                ..
            }
        );
        if coalescing
            && matches!(
                st.queue.back(),
                Some(Entry::One {
                    coalescing: true,
                    ..
                })
            )
        {
            st.queue.pop_back(); // abandoned: never runs
        }
        st.queue.push_back(entry);
        let was_idle = !st.scheduled;
        st.scheduled = true;
        was_idle
    }

    /// A lane's runner: entries one at a time; idle only when it sees the queue empty under the
    /// lock (rule 2); parks at a multi-key task (rule 6).
    fn run_lane(&self, lane: usize) {
        loop {
            let mut st = self.lanes[lane].lock();
            match st.queue.front() {
                None => {
                    st.scheduled = false;
                    return;
                }
                Some(Entry::Many(multi)) => {
                    let multi = multi.clone();
                    drop(st);
                    self.arrive(&multi);
                    return;
                }
                Some(Entry::One { .. }) => {
                    let Some(Entry::One { id, .. }) = st.queue.pop_front() else {
                        unreachable!()
                    };
                    drop(st);
                    self.ran.lock().push((lane, id));
                }
            }
        }
    }

    /// One lane reached `multi`; the last arrival runs it.
    fn arrive(&self, multi: &Arc<Multi>) {
        if multi.waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.run_ready(multi.clone());
        }
    }

    /// `run_ready`: runs a task every lane arrived at, pops it from both lanes, and lets each go
    /// on as its runner would: idle if empty, an arrival if its next head is another multi-key
    /// task (no job: the lane stays parked; a task that becomes ready runs next), else
    /// restarted.
    fn run_ready(&self, first: Arc<Multi>) {
        let mut next = Some(first);
        while let Some(multi) = next.take() {
            multi.runs.fetch_add(1, Ordering::Relaxed);
            self.ran.lock().push((9, multi.id));
            let mut restart = Vec::new();
            for lane in 0..2 {
                let mut st = self.lanes[lane].lock();
                match st.queue.pop_front() {
                    Some(Entry::Many(m)) => assert!(Arc::ptr_eq(&m, &multi), "wrong head"),
                    _ => panic!("a lane's head was not its multi-key task"),
                }
                match st.queue.front() {
                    None => st.scheduled = false,
                    Some(Entry::Many(m)) => {
                        // Counted under the lane lock, as `pass_multi` does.
                        if m.waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
                            let m = m.clone();
                            drop(st);
                            assert!(next.is_none(), "two tasks ready on two lanes of one task");
                            next = Some(m);
                        }
                    }
                    Some(Entry::One { .. }) => restart.push(lane),
                }
            }
            for lane in restart {
                self.run_lane(lane);
            }
        }
    }

    /// `submit_many`: pushes the task on both lanes; every lane that was idle parks at it at
    /// once, its arrival counted by the submitter after both pushes; if that completes the
    /// count, the submitter queues the ready task itself.
    fn submit_many(&self, id: u32) -> Arc<Multi> {
        let multi = Arc::new(Multi {
            id,
            waiting: AtomicUsize::new(2),
            runs: AtomicUsize::new(0),
        });
        let shards = self.shards.lock();
        let fresh = (0..2)
            .filter(|&lane| self.push(lane, Entry::Many(multi.clone())))
            .count();
        drop(shards);
        if fresh > 0 && multi.waiting.fetch_sub(fresh, Ordering::AcqRel) == fresh {
            self.run_ready(multi.clone());
        }
        multi
    }

    /// After every thread joined: every lane idle and empty (nothing stranded, no lane left
    /// scheduled without a runner).
    fn assert_quiet(&self) {
        for lane in &self.lanes {
            let st = lane.lock();
            assert!(st.queue.is_empty(), "an entry was stranded");
            assert!(!st.scheduled, "a lane stayed scheduled with no runner");
        }
    }

    fn ran(&self) -> Vec<(usize, u32)> {
        self.ran.lock().clone()
    }
}

fn one(id: u32) -> Entry {
    Entry::One {
        id,
        coalescing: false,
    }
}

/// Rules 1, 2, 4: a push races the runner draining its lane to empty. Each entry runs exactly
/// once, in order, and the lane ends idle (no stranded entry, no second runner).
#[test]
fn loom_push_vs_drain_to_empty() {
    crate::loom::model(|| {
        let world = World::new();
        assert!(world.push(0, one(0)));
        let runner = {
            let world = world.clone();
            thread::spawn(move || world.run_lane(0))
        };
        if world.push(0, one(1)) {
            world.run_lane(0);
        }
        runner.join().unwrap();
        assert_eq!(world.ran(), vec![(0, 0), (0, 1)]);
        world.assert_quiet();
    });
}

/// Coalescing: a coalescing push races the runner taking the pending coalescing entry. The
/// newest always runs; the older runs at most once, and only before the newest.
#[test]
fn loom_coalescing_replace_vs_runner_take() {
    crate::loom::model(|| {
        let world = World::new();
        let c = |id| Entry::One {
            id,
            coalescing: true,
        };
        assert!(world.push(0, c(0)));
        let runner = {
            let world = world.clone();
            thread::spawn(move || world.run_lane(0))
        };
        if world.push(0, c(1)) {
            world.run_lane(0);
        }
        runner.join().unwrap();
        let ran = world.ran();
        assert!(
            ran == vec![(0, 1)] || ran == vec![(0, 0), (0, 1)],
            "newest lost, or a task ran twice or out of order: {ran:?}"
        );
        world.assert_quiet();
    });
}

/// Rule 6: a multi-key task is submitted on lanes 0 (busy with a task) and 1 (idle), while a
/// sequential task is pushed on lane 1 and lane 0's runner drains towards the barrier. The
/// task runs exactly once, after lane 0's earlier task; every lane ends idle and empty.
#[test]
fn loom_multi_key_arrival_vs_release() {
    crate::loom::model(|| {
        let world = World::new();
        assert!(world.push(0, one(0)));
        let runner = {
            let world = world.clone();
            thread::spawn(move || world.run_lane(0))
        };
        let pusher = {
            let world = world.clone();
            thread::spawn(move || {
                if world.push(1, one(2)) {
                    world.run_lane(1);
                }
            })
        };
        let multi = world.submit_many(MULTI_ID);
        runner.join().unwrap();
        pusher.join().unwrap();
        assert_eq!(multi.runs.load(Ordering::Relaxed), 1, "ran once");
        let ran = world.ran();
        let pos = |e| ran.iter().position(|&x| x == e);
        assert!(pos((0, 0)) < pos((9, MULTI_ID)), "lane 0's order: {ran:?}");
        assert_eq!(ran.len(), 3, "{ran:?}");
        world.assert_quiet();
    });
}

/// Rule 6, both lanes idle (unless the pusher's task got there first): both park at
/// submission and the task is queued ready by its submitter; it runs once.
#[test]
fn loom_multi_key_on_idle_lanes_parks_all() {
    crate::loom::model(|| {
        let world = World::new();
        let pusher = {
            let world = world.clone();
            thread::spawn(move || {
                if world.push(0, one(5)) {
                    world.run_lane(0);
                }
            })
        };
        let multi = world.submit_many(MULTI_ID);
        pusher.join().unwrap();
        assert_eq!(multi.runs.load(Ordering::Relaxed), 1);
        assert_eq!(world.ran().len(), 2);
        world.assert_quiet();
    });
}

/// Rule 6, completion arriving for the next task: two multi-key tasks on both lanes from two
/// submitters, racing a sequential task on lane 0. Whichever task is first on a lane runs
/// first; the later one is reached by the earlier one's completion (no lane job) or by the
/// sequential task's runner. Each runs once, in the same order on both lanes, nothing is
/// stranded.
#[test]
fn loom_multi_key_completion_arrives_at_next() {
    crate::loom::model(|| {
        let world = World::new();
        let other = {
            let world = world.clone();
            thread::spawn(move || world.submit_many(MULTI_ID + 1))
        };
        let pusher = {
            let world = world.clone();
            thread::spawn(move || {
                if world.push(0, one(7)) {
                    world.run_lane(0);
                }
            })
        };
        let first = world.submit_many(MULTI_ID);
        let second = other.join().unwrap();
        pusher.join().unwrap();
        assert_eq!(first.runs.load(Ordering::Relaxed), 1);
        assert_eq!(second.runs.load(Ordering::Relaxed), 1);
        assert_eq!(world.ran().len(), 3, "{:?}", world.ran());
        world.assert_quiet();
    });
}
