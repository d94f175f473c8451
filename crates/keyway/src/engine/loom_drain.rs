//! The shutdown drain under loom: a submitter admits and pushes tasks while `shutdown_now` stops
//! the pool, waits for the worker to leave and drains. Every task submitted is, exactly once,
//! refused (handed back to its submitter), run by the worker, or handed back by the drain; none
//! is lost, and the drain's exit test terminates (a drain that never exits exceeds loom's branch
//! limit and fails the model).
//!
//! This is the protocol written out small, not the real `Registry`: the registry's counters are
//! `Striped` (`std` atomics behind a thread-local stripe) and its queues are crossbeam's, neither
//! of which runs under loom. What the model keeps from the real code, step by step:
//! * admission (`Registry::admit`): increment `accepted` (this thread's stripe), then read
//!   `closed`; if closed, take the increment back (`decr`) and hand the task back;
//! * the push (`Registry::schedule`) happens after admission, so it can come after the drain's
//!   first pass;
//! * the worker (`worker::run`): a job found after `stop_now` is put back and the worker exits;
//!   a job run counts `finished`;
//! * `shutdown_now` (`Pool::shutdown_now`): `stop` (sets `stop_now`, then `closed`), waits until
//!   no worker is live (`wait_for_exit`), then loops: take every queued job, count each
//!   `finished`, read `pending` (sum of `finished`'s stripes first, then `accepted`'s) and exit
//!   once `pending <= stopping pool threads` (0 here: the caller is outside the pool).
//!
//! `accepted` and `finished` have one stripe per model thread, as the real `Striped` would give
//! them, so the model also covers a sum that reads the stripes one at a time.
//!
//! loom treats `SeqCst` accesses as `AcqRel`, under which the admission argument (a total order
//! of the `SeqCst` accesses to `accepted` and `closed`) does not hold; as in `loom_sleep`, the
//! model reads `closed` and the stripes with read-modify-writes, which always see the latest
//! value: the order C11 gives the real `SeqCst` loads.

use crate::loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use crate::loom::sync::{Arc, Mutex};
use crate::loom::thread;

/// Stripes: the submitter's, the worker's, the `shutdown_now` caller's.
const SUBMITTER: usize = 0;
const WORKER: usize = 1;
const STOPPER: usize = 2;

struct Pool {
    accepted: [AtomicU64; 3],
    finished: [AtomicU64; 3],
    closed: AtomicBool,
    stop_now: AtomicBool,
    live: AtomicUsize,
    queue: Mutex<Vec<usize>>,
    ran: Mutex<Vec<usize>>,
}

fn sum(stripes: &[AtomicU64; 3]) -> u64 {
    stripes.iter().map(|s| s.fetch_add(0, SeqCst)).sum()
}

impl Pool {
    fn new() -> Self {
        Pool {
            accepted: Default::default(),
            finished: Default::default(),
            closed: AtomicBool::new(false),
            stop_now: AtomicBool::new(false),
            live: AtomicUsize::new(1),
            queue: Mutex::new(Vec::new()),
            ran: Mutex::new(Vec::new()),
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.fetch_or(false, SeqCst)
    }

    fn is_stopping(&self) -> bool {
        self.stop_now.fetch_or(false, SeqCst)
    }

    /// `Registry::pending`: `finished` first, then `accepted`.
    fn pending(&self) -> u64 {
        let finished = sum(&self.finished);
        sum(&self.accepted).saturating_sub(finished)
    }

    /// `Pool::execute`: `Registry::admit`, then `Registry::schedule`. `Err` hands the task back.
    fn submit(&self, task: usize) -> Result<(), usize> {
        self.accepted[SUBMITTER].fetch_add(1, SeqCst);
        if self.is_closed() {
            self.accepted[SUBMITTER].fetch_sub(1, SeqCst);
            return Err(task);
        }
        self.queue.lock().push(task);
        Ok(())
    }

    /// `worker::run` with `WorkerCtx::idle` reduced to its exit tests (no parking: the closer
    /// would wake it; `loom_sleep` checks that part).
    fn work(&self) {
        loop {
            let job = self.queue.lock().pop();
            match job {
                Some(task) => {
                    if self.is_stopping() {
                        // `shutdown_now` collects it from the deque.
                        self.queue.lock().push(task);
                        break;
                    }
                    self.ran.lock().push(task);
                    self.finished[WORKER].fetch_add(1, SeqCst);
                }
                None => {
                    if self.is_stopping() || (self.is_closed() && self.pending() == 0) {
                        break;
                    }
                    thread::yield_now();
                }
            }
        }
        self.live.fetch_sub(1, SeqCst);
    }

    /// `Pool::shutdown_now` from outside the pool: returns the tasks it handed back.
    fn shutdown_now(&self) -> Vec<usize> {
        // `Registry::stop`.
        self.stop_now.swap(true, SeqCst);
        self.closed.swap(true, SeqCst);
        // `Registry::wait_for_exit`.
        while self.live.load(SeqCst) > 0 {
            thread::yield_now();
        }
        let mut handed_back = Vec::new();
        loop {
            let before = handed_back.len();
            handed_back.append(&mut self.queue.lock());
            let taken = (handed_back.len() - before) as u64;
            self.finished[STOPPER].fetch_add(taken, SeqCst);
            if self.pending() == 0 {
                break;
            }
            thread::yield_now();
        }
        handed_back
    }
}

/// Every task of `0..tasks` ended in exactly one of the three places.
fn each_exactly_once(tasks: usize, refused: &[usize], ran: &[usize], handed_back: &[usize]) {
    let mut seen = vec![0; tasks];
    for &t in refused.iter().chain(ran).chain(handed_back) {
        seen[t] += 1;
    }
    assert!(
        seen.iter().all(|&n| n == 1),
        "tasks seen {seen:?} times: refused {refused:?}, ran {ran:?}, handed back {handed_back:?}"
    );
}

/// A submitter of two tasks and a worker race `shutdown_now`.
#[test]
fn loom_drain_hands_back_every_task_exactly_once() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let pool = Arc::new(Pool::new());
        let worker = {
            let pool = pool.clone();
            thread::spawn(move || pool.work())
        };
        let submitter = {
            let pool = pool.clone();
            thread::spawn(move || {
                (0..2)
                    .filter_map(|t| pool.submit(t).err())
                    .collect::<Vec<_>>()
            })
        };
        let handed_back = pool.shutdown_now();
        let refused = submitter.join().unwrap();
        worker.join().unwrap();
        let ran = pool.ran.lock().clone();
        each_exactly_once(2, &refused, &ran, &handed_back);
        assert!(pool.queue.lock().is_empty(), "a task was left in the queue");
        assert_eq!(pool.pending(), 0);
    });
}
