//! loom models of the strategy's lock-free state word (`README.md` beside this file).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --lib loom`. Each model has 2–4 threads:
//! callers of `produce()` / `dispatch()` and the threads a mock executor spawns for `execute`
//! (always) and `try_execute` (while it has a reserved slot left). The producer sits in loom's
//! `UnsafeCell`, so loom fails the model if two `produce` calls are not ordered by
//! happens-before (Rules 1–2); each model then checks that every item was consumed exactly once
//! (no lost wake-up, Rules 4–6) and that the state word is back to a clean `IDLE`.
//!
//! The non-blocking flag (Rule 8) is a loom thread-local under `--cfg loom`, so the `Either`
//! models see each model thread's own mode. The refusing-executor model has a blocking item that
//! waits for a later non-blocking one: loom reports a deadlock if a refused task ever runs while
//! its thread owns production (Rule 7d).

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
    /// `execute` calls still accepted (`usize::MAX`: all).
    executions: AtomicUsize,
    /// The model threads that called `try_execute`.
    try_callers: Mutex<Vec<thread::ThreadId>>,
    handles: Mutex<Vec<thread::JoinHandle<()>>>,
}

impl Spawner {
    fn new(reserved: usize) -> Self {
        Spawner::refusing(reserved, usize::MAX)
    }

    /// Accepts `executions` calls to `execute`, then refuses (a bounded pool that is full).
    fn refusing(reserved: usize, executions: usize) -> Self {
        Spawner(Arc::new(SpawnerState {
            reserved: AtomicUsize::new(reserved),
            executions: AtomicUsize::new(executions),
            try_callers: Mutex::new(Vec::new()),
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
        let accepted = self
            .0
            .executions
            .fetch_update(SeqCst, SeqCst, |n| match n {
                usize::MAX => Some(n),
                _ => n.checked_sub(1),
            })
            .is_ok();
        if !accepted {
            return Err(task);
        }
        self.spawn(task);
        Ok(())
    }

    fn try_execute(&self, task: Job) -> Result<(), Job> {
        self.0.try_callers.lock().push(thread::current().id());
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

/// An item that counts itself when consumed, and says where and how it ran.
struct Item {
    invocation_type: InvocationType,
    consumed: Arc<AtomicUsize>,
    runs: Arc<Mutex<Vec<Ran>>>,
    window: Arc<Window>,
}

/// Where an item ran: its type, the model thread, and whether in non-blocking mode.
#[derive(Clone, Copy, Debug)]
struct Ran {
    invocation_type: InvocationType,
    thread: thread::ThreadId,
    non_blocking: bool,
}

impl Invocable for Item {
    fn invocation_type(&self) -> InvocationType {
        self.invocation_type
    }

    fn run(self) {
        self.runs.lock().push(Ran {
            invocation_type: self.invocation_type,
            thread: thread::current().id(),
            non_blocking: super::is_non_blocking_invocation(),
        });
        self.window.item_runs(self.invocation_type);
        self.consumed.fetch_add(1, Relaxed);
    }
}

/// The HTTP/2 flow-control window, when a model uses it: a `Blocking` item waits until a
/// `NonBlocking` item (produced after it) opens the window.
struct Window {
    used: bool,
    open: loom::sync::Mutex<bool>,
    opened: loom::sync::Condvar,
}

impl Window {
    fn new(used: bool) -> Arc<Window> {
        Arc::new(Window {
            used,
            open: loom::sync::Mutex::new(false),
            opened: loom::sync::Condvar::new(),
        })
    }

    fn item_runs(&self, invocation_type: InvocationType) {
        if !self.used {
            return;
        }
        let mut open = self.open.lock().unwrap();
        match invocation_type {
            NonBlocking => {
                *open = true;
                self.opened.notify_all();
            }
            _ => {
                while !*open {
                    open = self.opened.wait(open).unwrap();
                }
            }
        }
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
    runs: Arc<Mutex<Vec<Ran>>>,
    window: Arc<Window>,
}

impl Source {
    fn new(items: &[InvocationType]) -> Self {
        Source::with_window(items, false)
    }

    /// A source whose `Blocking` items wait for a `NonBlocking` one (see [`Window`]).
    fn with_window(items: &[InvocationType], window: bool) -> Self {
        Source {
            queue: Arc::new(Mutex::new(items.iter().copied().collect())),
            consumed: Arc::new(AtomicUsize::new(0)),
            inside: Arc::new(AtomicBool::new(false)),
            runs: Arc::new(Mutex::new(Vec::new())),
            window: Window::new(window),
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
            runs: self.runs.clone(),
            window: self.window.clone(),
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

use InvocationType::{Blocking, Either, NonBlocking};

/// A thread calls `produce()` while this one pushes `pushed` and calls `produce()` too; then
/// every thread is joined.
fn two_producers(
    strategy: &AdaptiveStrategy<Source, Spawner>,
    source: &Source,
    exec: &Spawner,
    pushed: InvocationType,
) {
    let s = strategy.clone();
    let t = thread::spawn(move || {
        let _ = s.produce();
    });
    source.push(pushed);
    let _ = strategy.produce();
    t.join().unwrap();
    exec.join_all();
}

/// Rules 3–4: a second caller of `produce()` races the owner going idle. Either it takes
/// production itself, or the owner goes round again; the new item is consumed, and the two
/// never produce at once.
#[test]
fn loom_produce_vs_going_idle() {
    model(None, || {
        let source = Source::new(&[NonBlocking]);
        let exec = Spawner::new(0);
        let strategy = AdaptiveStrategy::new(source.clone(), exec.clone());
        two_producers(&strategy, &source, &exec, NonBlocking);
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
        two_producers(&strategy, &source, &exec, NonBlocking);
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

/// Rule 8: a strategy driven from a thread in non-blocking mode (a chained strategy inside an
/// `Either` task) races a caller in blocking mode. On the non-blocking thread a `Blocking` item
/// never runs in place, `try_execute` is never called, and whatever it consumes runs in
/// non-blocking mode. The blocking caller may hand off (EPC) as usual.
#[test]
fn loom_either_and_non_blocking_mode() {
    model(Some(2), || {
        let source = Source::new(&[Either, Blocking]);
        let exec = Spawner::new(1);
        let strategy = AdaptiveStrategy::new(source.clone(), exec.clone());
        let s = strategy.clone();
        let t = thread::spawn(move || {
            super::invoke_non_blocking(|| {
                let _ = s.produce();
            });
            thread::current().id()
        });
        source.push(Either);
        let _ = strategy.produce();
        let nb = t.join().unwrap();
        exec.join_all();
        assert_done(&strategy, &source, 3);
        for ran in source.runs.lock().iter() {
            if ran.thread == nb {
                assert!(ran.non_blocking, "Rule 8: left non-blocking mode: {ran:?}");
                assert_ne!(
                    ran.invocation_type, Blocking,
                    "Rule 8: blocked in place: {ran:?}"
                );
            }
        }
        assert!(
            !exec.0.try_callers.lock().contains(&nb),
            "Rule 8: a non-blocking thread offered production to a reserved thread"
        );
    });
}

/// Rule 7d: the executor refuses every task (a full pool) and has no reserved thread. The
/// `Blocking` item waits for the window that only the `NonBlocking` item produced after it
/// opens: it must be held, not run in place while its thread owns production (loom would report
/// the deadlock), and run once production is released. A second caller races the owner.
#[test]
fn loom_refusing_executor_never_blocks_production() {
    model(Some(3), || {
        let source = Source::with_window(&[Blocking, NonBlocking], true);
        let exec = Spawner::refusing(0, 0);
        let strategy = AdaptiveStrategy::new(source.clone(), exec.clone());
        two_producers(&strategy, &source, &exec, NonBlocking);
        assert_done(&strategy, &source, 3);
        assert_eq!(strategy.counts().refused, 1);
    });
}
