//! loom models of the lane protocol (`lane/README.md`, rules 1, 2, 4, 6 and the coalescing rule),
//! on a miniature of the lane state: a queue and a `scheduled` flag under one lock per lane, a
//! multi-key task's arrival count, and the submission that parks a multi-key task's fresh lanes.
//! "Scheduling" a lane runs it later on the thread that scheduled it, so every interleaving of
//! runners, pushers and the last arrival is explored.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p keyway --lib loom`.
//!
//! Deliberate breaks tried when these models were written (applied together, every model
//! failed): parking every fresh lane instead of keeping one queued (the multi-key task never
//! runs), and a runner that turns its lane idle after letting go of the lock it saw the queue
//! empty under (an entry pushed in between is stranded).

use std::collections::VecDeque;

use crate::loom::sync::atomic::{AtomicUsize, Ordering};
use crate::loom::sync::{Arc, Mutex};
use crate::loom::thread;

/// A multi-key task on lanes 0 and 1 (rule 6).
struct Multi {
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
    /// Every run, in the order they happened: `(lane, id)`; the multi-key task logs `(9, 100)`.
    ran: Mutex<Vec<(usize, u32)>>,
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

    /// The last arrival runs the multi-key task, pops it from both lanes, restarts those with
    /// more work.
    fn arrive(&self, multi: &Arc<Multi>) {
        if multi.waiting.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        multi.runs.fetch_add(1, Ordering::Relaxed);
        self.ran.lock().push((9, MULTI_ID));
        let mut more = Vec::new();
        for lane in 0..2 {
            let mut st = self.lanes[lane].lock();
            match st.queue.pop_front() {
                Some(Entry::Many(m)) => assert!(Arc::ptr_eq(&m, multi), "wrong head"),
                _ => panic!("a lane's head was not its multi-key task"),
            }
            if st.queue.is_empty() {
                st.scheduled = false;
            } else {
                more.push(lane);
            }
        }
        for lane in more {
            self.run_lane(lane);
        }
    }

    /// `submit_many`: pushes the task on both lanes; of the lanes that were idle, one is queued
    /// and the others park at once (counted arrived before that job exists).
    fn submit_many(&self) -> Arc<Multi> {
        let multi = Arc::new(Multi {
            waiting: AtomicUsize::new(2),
            runs: AtomicUsize::new(0),
        });
        let fresh: Vec<usize> = (0..2)
            .filter(|&lane| self.push(lane, Entry::Many(multi.clone())))
            .collect();
        if let Some((&kept, parked)) = fresh.split_first() {
            if !parked.is_empty() {
                multi.waiting.fetch_sub(parked.len(), Ordering::AcqRel);
            }
            self.run_lane(kept);
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
        let multi = world.submit_many();
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

/// Rule 6, both lanes idle: one job, the other lane parked at submission; the task runs once.
#[test]
fn loom_multi_key_on_idle_lanes_parks_all_but_one() {
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
        let multi = world.submit_many();
        pusher.join().unwrap();
        assert_eq!(multi.runs.load(Ordering::Relaxed), 1);
        assert_eq!(world.ran().len(), 2);
        world.assert_quiet();
    });
}
