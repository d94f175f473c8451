//! loom models of the strategy's lock-free state word (`README.md` beside this file).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --lib loom`. Each model has 2–4 threads:
//! callers of `produce()` / `dispatch()` and the threads a mock executor spawns for `execute`
//! (always) and `try_execute` (while it has a reserved slot left). The producer sits in loom's
//! `UnsafeCell`, so loom fails the model if two `produce` calls are not ordered by
//! happens-before (Rules 1–2); each model then checks that every item was consumed exactly once
//! (no lost wake-up, Rules 4–6) and that the state word is back to a clean `IDLE`.
//!
//! The models use no `Either` task: loom runs its threads on one OS thread, so the thread-local
//! non-blocking flag (Rule 8) would be shared between them.

use std::collections::VecDeque;

use super::state::IDLE;
use super::{AdaptiveStrategy, Executor, Invocable, InvocationType, Producer};
use crate::loom::sync::atomic::Ordering::{Relaxed, SeqCst};
use crate::loom::sync::atomic::{AtomicBool, AtomicUsize};
use crate::loom::sync::{Arc, Mutex};
use crate::loom::thread;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Runs `f` under loom, exploring every interleaving if `preemption_bound` is `None`, or those
/// with at most that many preemptions. `LOOM_MAX_PREEMPTIONS`, when set, overrides the bound.
fn model<F>(preemption_bound: Option<usize>, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        builder.preemption_bound = preemption_bound;
    }
    builder.check(f);
}

/// An executor whose every task is a new loom thread; `try_execute` succeeds while reserved
/// slots are left (each is used once, which keeps the models small).
#[derive(Clone)]
struct Spawner(Arc<SpawnerState>);

struct SpawnerState {
    reserved: AtomicUsize,
    handles: Mutex<Vec<thread::JoinHandle<()>>>,
}

impl Spawner {
    fn new(reserved: usize) -> Self {
        Spawner(Arc::new(SpawnerState {
            reserved: AtomicUsize::new(reserved),
            handles: Mutex::new(Vec::new()),
        }))
    }

    fn spawn(&self, task: Job) {
        let handle = thread::spawn(task);
        self.0.handles.lock().push(handle);
    }

    /// Joins every spawned thread, including those spawned by spawned threads.
    fn join_all(&self) {
        loop {
            let next = self.0.handles.lock().pop();
            match next {
                Some(handle) => handle.join().unwrap(),
                None => return,
            }
        }
    }
}

impl Executor for Spawner {
    fn execute(&self, task: Job) -> Result<(), Job> {
        self.spawn(task);
        Ok(())
    }

    fn try_execute(&self, task: Job) -> Result<(), Job> {
        let took = self
            .0
            .reserved
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if took {
            self.spawn(task);
            Ok(())
        } else {
            Err(task)
        }
    }
}

/// An item that counts itself when consumed.
struct Item {
    invocation_type: InvocationType,
    consumed: Arc<AtomicUsize>,
}

impl Invocable for Item {
    fn invocation_type(&self) -> InvocationType {
        self.invocation_type
    }

    fn run(self) {
        self.consumed.fetch_add(1, Relaxed);
    }
}

/// A producer over a queue the model threads push to ("new data arrived"). It also checks that
/// no two `produce` calls overlap in time (loom's cell check sees unordered accesses, this sees
/// overlapping ones).
#[derive(Clone)]
struct Source {
    queue: Arc<Mutex<VecDeque<InvocationType>>>,
    consumed: Arc<AtomicUsize>,
    inside: Arc<AtomicBool>,
}

impl Source {
    fn new(items: &[InvocationType]) -> Self {
        Source {
            queue: Arc::new(Mutex::new(items.iter().copied().collect())),
            consumed: Arc::new(AtomicUsize::new(0)),
            inside: Arc::new(AtomicBool::new(false)),
        }
    }

    fn push(&self, invocation_type: InvocationType) {
        self.queue.lock().push_back(invocation_type);
    }
}

impl Producer for Source {
    type Task = Item;

    fn produce(&mut self) -> Option<Item> {
        assert!(
            !self.inside.swap(true, SeqCst),
            "Rule 1: two produce() calls overlap"
        );
        let next = self.queue.lock().pop_front();
        assert!(
            self.inside.swap(false, SeqCst),
            "Rule 1: two produce() calls overlap"
        );
        Some(Item {
            invocation_type: next?,
            consumed: self.consumed.clone(),
        })
    }
}

/// After every thread joined: all `expected` items consumed, nothing left, state clean.
fn assert_done(strategy: &AdaptiveStrategy<Source, Spawner>, source: &Source, expected: usize) {
    assert_eq!(source.consumed.load(SeqCst), expected, "an item was lost");
    assert!(source.queue.lock().is_empty(), "an item was never produced");
    assert_eq!(
        strategy.inner.state.load(),
        IDLE,
        "Rules 4-6: a clean IDLE at rest"
    );
}

use InvocationType::{Blocking, NonBlocking};

/// Rules 3–4: a second caller of `produce()` races the owner going idle. Either it takes
/// production itself, or the owner goes round again; the new item is consumed, and the two
/// never produce at once.
#[test]
fn loom_produce_vs_going_idle() {
    model(None, || {
        let source = Source::new(&[NonBlocking]);
        let exec = Spawner::new(0);
        let strategy = AdaptiveStrategy::new(source.clone(), exec.clone());
        let s = strategy.clone();
        let t = thread::spawn(move || {
            let _ = s.produce();
        });
        source.push(NonBlocking);
        let _ = strategy.produce();
        t.join().unwrap();
        exec.join_all();
        assert_done(&strategy, &source, 2);
    });
}

/// Rules 4 and 6: `dispatch()` races the owner going idle: it signals the owner or queues a run
/// (which may find production taken); the new item is consumed either way.
#[test]
fn loom_dispatch_vs_going_idle() {
    model(None, || {
        let source = Source::new(&[NonBlocking]);
        let exec = Spawner::new(0);
        let strategy = AdaptiveStrategy::new(source.clone(), exec.clone());
        let s = strategy.clone();
        let t = thread::spawn(move || {
            let _ = s.produce();
        });
        source.push(NonBlocking);
        strategy.dispatch().unwrap();
        t.join().unwrap();
        exec.join_all();
        assert_done(&strategy, &source, 2);
    });
}

/// Rule 6: a run queued by `dispatch()` races a caller of `produce()` that takes production
/// first; the run is superseded or produces, `QUEUED` is cleared, nothing is lost.
#[test]
fn loom_queued_run_vs_produce() {
    model(None, || {
        let source = Source::new(&[NonBlocking]);
        let exec = Spawner::new(0);
        let strategy = AdaptiveStrategy::new(source.clone(), exec.clone());
        let s = strategy.clone();
        let src = source.clone();
        let t = thread::spawn(move || {
            src.push(NonBlocking);
            let _ = s.produce();
        });
        strategy.dispatch().unwrap();
        t.join().unwrap();
        exec.join_all();
        assert_done(&strategy, &source, 2);
    });
}

/// Rule 5: an EPC hand-off to a reserved thread (which then produces) races a caller of
/// `produce()` with new data; the owner consumes its blocking item and may retake production.
#[test]
fn loom_handover_vs_produce() {
    model(Some(4), || {
        let source = Source::new(&[Blocking, NonBlocking]);
        let exec = Spawner::new(1);
        let strategy = AdaptiveStrategy::new(source.clone(), exec.clone());
        let s = strategy.clone();
        let t = thread::spawn(move || {
            let _ = s.produce();
        });
        source.push(NonBlocking);
        let _ = strategy.produce();
        t.join().unwrap();
        exec.join_all();
        assert_done(&strategy, &source, 3);
        assert_eq!(strategy.counts().total(), 3);
    });
}

/// Rule 5: a refused hand-off (no reserved slot) is reclaimed by the owner, which then gives the
/// blocking item to the executor (PEC), while `dispatch()` races it.
#[test]
fn loom_refused_handover_vs_dispatch() {
    model(Some(3), || {
        let source = Source::new(&[Blocking]);
        let exec = Spawner::new(0);
        let strategy = AdaptiveStrategy::new(source.clone(), exec.clone());
        let s = strategy.clone();
        let t = thread::spawn(move || {
            let _ = s.produce();
        });
        source.push(NonBlocking);
        strategy.dispatch().unwrap();
        t.join().unwrap();
        exec.join_all();
        assert_done(&strategy, &source, 2);
        assert_eq!(strategy.counts().execute_produce_consume, 0);
    });
}
