//! `shutdown_now` called from inside the pool, under loom: a worker calls it from inside a task,
//! another from inside a future's first poll, while a caller outside the pool races them both.
//! Each call returns, the task that was queued is handed back exactly once, and nothing is left
//! pending. A call that waited for its own thread, or for what its thread holds, would spin for
//! ever: the model then exceeds loom's branch limit and fails.
//!
//! Three models: each kind of inside caller racing an outside one, and both kinds inside at
//! once; loom explores every interleaving of two threads (three would spin each other out of its
//! branch limit).
//!
//! This is the protocol written out small, around the real [`Stoppers`] (the record of what the
//! callers inside `shutdown_now` hold, and step 4's exit test): the registry's counters are
//! `Striped` and its queues crossbeam's, neither of which runs under loom. What the model keeps
//! from the real code (`lifecycle.rs`), step by step:
//! * step 2, `stop`: sets `stop_now`, then `closed`;
//! * the caller comes in: [`Stoppers::enter`] with its thread's kind and the futures its thread
//!   is launching (`holding::launching_here`: 1 inside a future's first poll);
//! * step 3, `wait_for_exit_until`: waits until every live worker is inside `shutdown_now`;
//! * step 4: takes every queued job, counts each finished, and leaves once
//!   [`Stoppers::allow`] says that what is pending is held by the callers inside;
//! * the worker inside a task: its task (one admission) finishes after `shutdown_now` returns;
//! * the worker inside a future's first poll: the future's admission (`extend_task`) and its
//!   launcher's entry (two admissions) finish after `shutdown_now` returns: the future is
//!   cancelled at its await point, then the launch returns.
//!
//! The check that the model catches the breach: with `enter` given 0 instead of the launching
//! count, the worker inside the first poll waits for its own launching entry and the model fails
//! (`loom_shutdown_now_fails_when_launching_is_not_allowed_for` runs exactly that, and expects
//! the failure).

use super::stoppers::Stoppers;
use super::worker::OwnThread;
use crate::loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use crate::loom::sync::{Arc, Mutex};
use crate::loom::thread;

struct Pool {
    accepted: AtomicU64,
    finished: AtomicU64,
    closed: AtomicBool,
    stop_now: AtomicBool,
    /// Live workers.
    live: AtomicUsize,
    queue: Mutex<Vec<usize>>,
    stoppers: Stoppers,
}

impl Pool {
    /// Workers whose jobs hold `held` admissions (a task: 1; a future's first poll: 2), and
    /// one queued task (1 admission).
    fn new(held: &[u64]) -> Self {
        Pool {
            accepted: AtomicU64::new(held.iter().sum::<u64>() + 1),
            finished: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            stop_now: AtomicBool::new(false),
            live: AtomicUsize::new(held.len()),
            queue: Mutex::new(vec![7]),
            stoppers: Stoppers::new(),
        }
    }

    /// `Registry::pending`: `finished` first, then `accepted`.
    fn pending(&self) -> u64 {
        let finished = self.finished.fetch_add(0, SeqCst);
        self.accepted.fetch_add(0, SeqCst).saturating_sub(finished)
    }

    /// `Registry::shutdown_now` on a thread of kind `own` launching `launching` futures.
    fn shutdown_now(&self, own: OwnThread, launching: u64) -> Vec<usize> {
        self.stop_now.swap(true, SeqCst);
        self.closed.swap(true, SeqCst);
        let _inside = self.stoppers.enter(own, launching);
        while !self.stoppers.all_inside(self.live.fetch_add(0, SeqCst), 0) {
            thread::yield_now();
        }
        let mut handed_back = Vec::new();
        loop {
            let before = handed_back.len();
            handed_back.append(&mut self.queue.lock());
            let taken = (handed_back.len() - before) as u64;
            self.finished.fetch_add(taken, SeqCst);
            if self.stoppers.allow(self.pending()) {
                break;
            }
            thread::yield_now();
        }
        handed_back
    }

    /// A worker whose job holds `held` admissions calls `shutdown_now` (`launching`: inside a
    /// future's first poll); its job then ends and the worker exits.
    fn worker(&self, held: u64, launching: u64) -> Vec<usize> {
        let handed_back = self.shutdown_now(OwnThread::Worker, launching);
        self.finished.fetch_add(held, SeqCst);
        self.live.fetch_sub(1, SeqCst);
        handed_back
    }
}

/// A worker in a task (holding 1 admission, launching nothing) or in a future's first poll
/// (holding 2, launching 1; `launching` is what it tells `enter`).
#[derive(Clone, Copy)]
enum Inside {
    Task,
    FirstPoll { launching: u64 },
}

impl Inside {
    fn held(self) -> u64 {
        match self {
            Inside::Task => 1,
            Inside::FirstPoll { .. } => 2,
        }
    }

    fn launching(self) -> u64 {
        match self {
            Inside::Task => 0,
            Inside::FirstPoll { launching } => launching,
        }
    }
}

/// `workers` call `shutdown_now` from inside their jobs, each on its own thread, while (if
/// `outside`) a caller outside the pool races them.
fn race(workers: &'static [Inside], outside: bool) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(move || {
        let held: Vec<u64> = workers.iter().map(|w| w.held()).collect();
        let pool = Arc::new(Pool::new(&held));
        let mut threads: Vec<_> = workers
            .iter()
            .skip(usize::from(!outside))
            .map(|&w| {
                let pool = pool.clone();
                thread::spawn(move || pool.worker(w.held(), w.launching()))
            })
            .collect::<Vec<_>>();
        let mut handed_back = if outside {
            pool.shutdown_now(OwnThread::None, 0)
        } else {
            // No caller outside: the first worker is this thread.
            pool.worker(workers[0].held(), workers[0].launching())
        };
        for t in threads.drain(..) {
            handed_back.extend(t.join().unwrap());
        }
        assert_eq!(
            handed_back,
            [7],
            "the queued task is handed back exactly once"
        );
        assert_eq!(pool.pending(), 0, "an admission was left pending");
        assert_eq!(pool.live.fetch_add(0, SeqCst), 0);
    });
}

#[test]
fn loom_shutdown_now_from_inside_a_task_racing_an_outside_caller() {
    race(&[Inside::Task], true);
}

#[test]
fn loom_shutdown_now_from_inside_a_first_poll_racing_an_outside_caller() {
    race(&[Inside::FirstPoll { launching: 1 }], true);
}

#[test]
fn loom_shutdown_now_from_inside_a_task_and_a_first_poll_at_once() {
    race(&[Inside::Task, Inside::FirstPoll { launching: 1 }], false);
}

/// The breach the model must catch: the launching entry not allowed for, the caller inside the
/// first poll waits for itself.
#[test]
#[should_panic(expected = "Model exceeded maximum number of branches")]
fn loom_shutdown_now_fails_when_launching_is_not_allowed_for() {
    race(&[Inside::FirstPoll { launching: 0 }], true);
}
