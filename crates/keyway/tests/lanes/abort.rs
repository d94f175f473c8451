//! `AbortHandle`: cancels a queued task whose `TaskHandle` is somewhere else (being awaited, on
//! another thread, handed back by `shutdown_now`); never a task that started.

use crate::common;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use common::Gate;
use keyway::{Pool, TaskError};

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// A minimal executor: polls `fut` on this thread, parking between polls, and says on `pending`
/// each time a poll returned `Pending` (so the test knows the future is being awaited).
fn block_on<F: Future>(fut: F, pending: mpsc::Sender<()>) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => {
                let _ = pending.send(());
                std::thread::park();
            }
        }
    }
}

#[test]
fn abort_cancels_a_queued_task_being_awaited_elsewhere() {
    let pool = Pool::builder().core_threads(2).build().unwrap();
    let gate = Gate::new();
    let g = gate.clone();
    pool.execute_sequential("busy", move || g.wait()).unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let handle = pool
        .submit_sequential("busy", move || r.store(true, Ordering::SeqCst))
        .unwrap();
    let abort = handle.abort_handle();
    let (pending_tx, pending_rx) = mpsc::channel();
    // The handle is moved into an `.await` on another thread: only the abort handle is left.
    let awaiting = std::thread::spawn(move || {
        block_on(
            async move {
                let outcome = handle.await;
                outcome.map(|_| "ran")
            },
            pending_tx,
        )
    });
    pending_rx.recv().unwrap(); // it is parked in the await
    assert!(!abort.is_finished());
    assert!(abort.clone().abort());
    assert!(abort.is_finished());
    assert!(matches!(
        awaiting.join().unwrap(),
        Err(TaskError::Cancelled)
    ));
    gate.open();
    pool.shutdown();
    assert!(!ran.load(Ordering::SeqCst), "an aborted task ran");
    assert!(!abort.abort(), "a second abort reported success");
}

/// Aborts race with the task starting, from several threads at once: each task either ran (and
/// every abort failed) or did not run (and exactly one abort succeeded, and its handle says
/// `Cancelled`).
#[test]
fn aborts_racing_the_start_decide_exactly_once() {
    let pool = Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .build()
        .unwrap();
    let (mut cancelled, mut ran_anyway) = (0, 0);
    for seed in 0..20usize {
        const TASKS: usize = 400;
        let runs: Arc<Vec<AtomicUsize>> =
            Arc::new((0..TASKS).map(|_| AtomicUsize::new(0)).collect());
        let mut handles = Vec::new();
        let mut aborts = Vec::new();
        for i in 0..TASKS {
            let runs = runs.clone();
            let task = move || {
                runs[i].fetch_add(1, Ordering::SeqCst);
                common::spin((i % 3) as u32 * 100);
            };
            let handle = match (i + seed) % 3 {
                0 => pool.submit(task).unwrap(),
                1 => pool.submit_sequential(i % 5, task).unwrap(),
                _ => pool.submit_keyed([i % 4, 4 + i % 3], task).unwrap(),
            };
            aborts.push(handle.abort_handle());
            handles.push(handle);
        }
        let aborts = Arc::new(aborts);
        let aborters: Vec<_> = (0..3)
            .map(|t| {
                let aborts = aborts.clone();
                std::thread::spawn(move || {
                    // A third of the tasks each (and every seventh by all), from the back, so
                    // that aborts meet tasks just starting.
                    (0..TASKS)
                        .rev()
                        .filter(|i| (i + t + seed) % 3 == 0 || i % 7 == 0)
                        .map(|i| (i, aborts[i].abort()))
                        .filter(|&(_, won)| won)
                        .map(|(i, _)| i)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut won = vec![0usize; TASKS];
        for a in aborters {
            for i in a.join().unwrap() {
                won[i] += 1;
            }
        }
        for (i, h) in handles.into_iter().enumerate() {
            let outcome = h.join();
            let ran = runs[i].load(Ordering::SeqCst);
            match won[i] {
                0 => {
                    assert!(outcome.is_ok(), "seed {seed} task {i}: {outcome:?}");
                    assert_eq!(ran, 1, "seed {seed} task {i}");
                    ran_anyway += 1; // every task is some aborter's target
                }
                1 => {
                    cancelled += 1;
                    assert!(
                        matches!(outcome, Err(TaskError::Cancelled)),
                        "seed {seed} task {i}"
                    );
                    assert_eq!(ran, 0, "seed {seed} task {i}: aborted yet ran");
                }
                n => panic!("seed {seed} task {i}: {n} aborts succeeded"),
            }
            assert!(aborts[i].is_finished());
        }
    }
    // Both sides of the race were seen, so the checks above were not vacuous.
    assert!(
        cancelled > 0 && ran_anyway > 0,
        "{cancelled} cancelled, {ran_anyway} ran anyway"
    );
    pool.shutdown();
}

/// A task handed back by `shutdown_now` can still be aborted: running it then does nothing.
#[test]
fn abort_reaches_a_task_handed_back_at_shutdown() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .build()
        .unwrap();
    let gate = Gate::new();
    let g = gate.clone();
    let started = common::Latch::new(1);
    let s = started.clone();
    pool.execute(move || {
        s.count_down();
        g.wait();
    })
    .unwrap();
    started.wait();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let handle = pool
        .submit(move || r.store(true, Ordering::SeqCst))
        .unwrap();
    let abort = handle.abort_handle();
    let stopper = {
        let pool = pool.clone();
        std::thread::spawn(move || pool.shutdown_now())
    };
    // `shutdown_now` has stopped the workers taking tasks (it flags that before closing).
    common::eventually("shutdown_now began", || pool.is_shutdown());
    gate.open();
    let pending = stopper.join().unwrap();
    assert_eq!(pending.len(), 1);
    assert!(abort.abort());
    for task in pending {
        task.run().unwrap();
    }
    assert!(!ran.load(Ordering::SeqCst));
    assert!(matches!(handle.join(), Err(TaskError::Cancelled)));
}

/// Too late: a task that ran, panicked or was coalesced away cannot be aborted.
#[test]
fn abort_after_the_outcome_changes_nothing() {
    let pool = Pool::builder().core_threads(1).build().unwrap();
    let ok = pool.submit(|| 1).unwrap();
    let ok_abort = ok.abort_handle();
    assert_eq!(ok.join().unwrap(), 1);
    assert!(!ok_abort.abort());

    let panicked = pool.submit(|| -> u8 { panic!("boom") }).unwrap();
    let panicked_abort = panicked.abort_handle();
    assert!(panicked.join().unwrap_err().is_panic());
    assert!(!panicked_abort.abort());

    let gate = Gate::new();
    let g = gate.clone();
    pool.execute_sequential("c", move || g.wait()).unwrap();
    let old = pool.submit_coalescing("c", || 1).unwrap();
    let old_abort = old.abort_handle();
    let new = pool.submit_coalescing("c", || 2).unwrap();
    assert!(matches!(old.join(), Err(TaskError::Coalesced)));
    assert!(!old_abort.abort());
    gate.open();
    assert_eq!(new.join().unwrap(), 2);
    pool.shutdown();
}
