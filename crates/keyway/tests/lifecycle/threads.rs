//! The pool's threads as the user configures them: `on_thread_start` / `on_thread_stop` and
//! `stack_size`.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use common::{Gate, Latch};
use keyway::Pool;

/// What the hooks and the tasks saw on one thread, stamped from one global sequence.
#[derive(Default, Debug)]
struct Seen {
    name: String,
    starts: Vec<usize>,
    stops: Vec<usize>,
    tasks: Vec<usize>,
}

#[derive(Clone, Default)]
struct Journal {
    seq: Arc<AtomicUsize>,
    threads: Arc<Mutex<HashMap<ThreadId, Seen>>>,
}

impl Journal {
    fn note(&self, what: fn(&mut Seen) -> &mut Vec<usize>) {
        let at = self.seq.fetch_add(1, Ordering::SeqCst);
        let me = std::thread::current();
        let mut threads = self.threads.lock().unwrap();
        let seen = threads.entry(me.id()).or_default();
        seen.name = me.name().unwrap_or("").to_owned();
        what(seen).push(at);
    }

    fn started_here(&self) -> bool {
        let threads = self.threads.lock().unwrap();
        threads
            .get(&std::thread::current().id())
            .is_some_and(|s| s.starts.len() == 1 && s.stops.is_empty())
    }
}

/// Every kind of task-running thread — core, auxiliary (added while the core is blocked),
/// reserved — calls `on_thread_start` once before its first task and `on_thread_stop` once after
/// its last; the monitor calls neither; `shutdown` returns after every stop hook.
#[test]
fn hooks_run_once_per_task_thread_around_its_tasks() {
    for round in 0..5 {
        let journal = Journal::default();
        let (on_start, on_stop) = (journal.clone(), journal.clone());
        let pool = Pool::builder()
            .core_threads(2)
            .max_threads(6)
            .thread_name(format!("hooks{round}"))
            .reserved_threads(2)
            .keep_alive(Duration::from_millis(5))
            .reserved_idle_timeout(Duration::from_millis(5))
            .on_thread_start(move || on_start.note(|s| &mut s.starts))
            .on_thread_stop(move || on_stop.note(|s| &mut s.stops))
            .build()
            .unwrap();
        let misplaced = Arc::new(AtomicUsize::new(0));
        let task = {
            let journal = journal.clone();
            let misplaced = misplaced.clone();
            move || {
                if !journal.started_here() {
                    misplaced.fetch_add(1, Ordering::SeqCst);
                }
                journal.note(|s| &mut s.tasks);
            }
        };

        // Both core workers block (declared), so the pool adds auxiliary threads for the rest.
        let gate = Gate::new();
        let blocked = Latch::new(2);
        for _ in 0..2 {
            let (gate, blocked, task) = (gate.clone(), blocked.clone(), task.clone());
            pool.execute(move || {
                task();
                blocked.count_down();
                keyway::blocking(|| gate.wait());
            })
            .unwrap();
        }
        blocked.wait();
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let task = task.clone();
                pool.submit_sequential(i % 4, task).unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        // A reserved thread (the first attempts may find none started yet).
        let ran = Latch::new(1);
        let done = ran.clone();
        let t = task.clone();
        let mut on_reserved = move || {
            t();
            done.count_down();
        };
        while let Err(e) = pool.try_execute(on_reserved) {
            on_reserved = e.into_inner();
            std::thread::yield_now();
        }
        ran.wait();
        gate.open();
        pool.shutdown();

        assert_eq!(
            misplaced.load(Ordering::SeqCst),
            0,
            "a task ran before its thread's start hook"
        );
        let threads = journal.threads.lock().unwrap();
        let prefix = format!("hooks{round}-");
        let mut reserved = 0;
        let mut workers = 0;
        for (id, seen) in threads.iter() {
            assert!(
                seen.name.starts_with(&prefix),
                "{id:?}: {seen:?} is not a pool thread"
            );
            assert!(
                !seen.name.ends_with("-monitor"),
                "the monitor ran a hook: {seen:?}"
            );
            assert_eq!(seen.starts.len(), 1, "{seen:?}");
            assert_eq!(seen.stops.len(), 1, "{seen:?}");
            let (start, stop) = (seen.starts[0], seen.stops[0]);
            assert!(
                seen.tasks.iter().all(|&t| start < t && t < stop),
                "{seen:?}"
            );
            if seen.name.contains("-reserved-") {
                reserved += 1;
            } else {
                workers += 1;
            }
        }
        assert!(reserved >= 1, "no reserved thread ran hooks: {threads:?}");
        assert!(workers >= 3, "no auxiliary thread ran hooks: {threads:?}");
        let ran_tasks: usize = threads.values().map(|s| s.tasks.len()).sum();
        assert_eq!(ran_tasks, 2 + 20 + 1);
    }
}

/// Idle auxiliary threads retire; each calls its stop hook as it goes, and a new thread later
/// calls its start hook again: starts and stops stay paired.
#[test]
fn retiring_threads_call_the_stop_hook() {
    let (starts, stops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, t) = (starts.clone(), stops.clone());
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(4)
        .reserved_threads(0)
        .keep_alive(Duration::from_millis(1))
        .on_thread_start(move || {
            s.fetch_add(1, Ordering::SeqCst);
        })
        .on_thread_stop(move || {
            t.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    for _ in 0..3 {
        let gate = Gate::new();
        let g = gate.clone();
        let blocked = Latch::new(1);
        let b = blocked.clone();
        pool.execute(move || {
            b.count_down();
            keyway::blocking(|| g.wait());
        })
        .unwrap();
        blocked.wait();
        // Runs on an auxiliary thread: the only core thread is blocked.
        pool.submit(|| ()).unwrap().join().unwrap();
        gate.open();
        common::eventually("the auxiliary thread retired", || {
            pool.stats().auxiliary_threads == 0
        });
        common::eventually("the retired thread called its stop hook", || {
            stops.load(Ordering::SeqCst) + 1 == starts.load(Ordering::SeqCst)
        });
    }
    assert!(
        starts.load(Ordering::SeqCst) >= 4,
        "no auxiliary thread was started"
    );
    pool.shutdown();
    assert_eq!(starts.load(Ordering::SeqCst), stops.load(Ordering::SeqCst));
}

/// A hook that panics is reported to the panic hook, and the thread still serves tasks and still
/// calls its stop hook.
#[test]
fn panicking_hooks_are_reported_and_threads_go_on() {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let log = reports.clone();
    let (starts, stops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, t) = (starts.clone(), stops.clone());
    let pool = Pool::builder()
        .core_threads(2)
        .reserved_threads(0)
        .on_thread_start(move || {
            s.fetch_add(1, Ordering::SeqCst);
            panic!("start hook boom");
        })
        .on_thread_stop(move || {
            t.fetch_add(1, Ordering::SeqCst);
            std::panic::panic_any(7u8); // not a string
        })
        .panic_hook(move |r| log.lock().unwrap().push(r.message().to_owned()))
        .build()
        .unwrap();
    let handles: Vec<_> = (0..100u64)
        .map(|i| pool.submit(move || i * 2).unwrap())
        .collect();
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 99 * 100);
    pool.shutdown();
    let reports = reports.lock().unwrap();
    let started = starts.load(Ordering::SeqCst);
    assert!(started >= 2);
    assert_eq!(stops.load(Ordering::SeqCst), started);
    let count = |text: &str| reports.iter().filter(|m| m.as_str() == text).count();
    assert_eq!(count("on_thread_start panicked: start hook boom"), started);
    assert_eq!(
        count("on_thread_stop panicked: <non-string panic payload>"),
        started
    );
    assert_eq!(reports.len(), 2 * started);
    assert_eq!(pool.stats().panicked_tasks, 0, "a hook is not a task");
}

/// Deep recursion that needs far more than the default 2 MiB stack, on every kind of thread
/// that runs tasks.
#[test]
fn stack_size_is_honoured_by_deep_recursion() {
    #[inline(never)]
    fn depth(n: u32) -> u64 {
        // 1 KiB per frame the optimiser cannot remove: 32,768 frames need over 32 MiB.
        let frame = std::hint::black_box([n as u8; 1024]);
        if n == 0 {
            return 0;
        }
        let below = depth(n - 1);
        // Used after the call, so the frame is live through the recursion.
        std::hint::black_box(&frame);
        below + 1
    }
    const DEEP: u32 = 1 << 15;
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .stack_size(256 << 20)
        .build()
        .unwrap();
    assert_eq!(
        pool.submit(|| depth(DEEP)).unwrap().join().unwrap(),
        DEEP as u64
    );
    let lane = pool.submit_sequential("deep", || depth(DEEP)).unwrap();
    assert_eq!(lane.join().unwrap(), DEEP as u64);
    let keyed = pool.submit_keyed([1, 2], || depth(DEEP)).unwrap();
    assert_eq!(keyed.join().unwrap(), DEEP as u64);
    let (tx, rx) = std::sync::mpsc::channel();
    let mut task = move || tx.send(depth(DEEP)).unwrap();
    while let Err(e) = pool.try_execute(task) {
        task = e.into_inner();
        std::thread::yield_now();
    }
    assert_eq!(rx.recv().unwrap(), DEEP as u64);
    pool.shutdown();
}

#[test]
fn stack_sizes_out_of_range_are_typed_errors() {
    for bytes in [
        0,
        1,
        4096,
        64 * 1024 - 1,
        (1 << 30) + 1,
        usize::MAX / 2,
        usize::MAX,
    ] {
        let err = Pool::builder().stack_size(bytes).build().unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("stack_size"), "{bytes}: {msg}");
        assert!(msg.contains(&bytes.to_string()), "{bytes}: {msg}");
    }
}

/// The bounds themselves are accepted, and the smallest stack is enough for every path of
/// keyway's own code: plain tasks, lanes, multi-key tasks, handles, reserved threads.
#[test]
fn stack_size_bounds_are_accepted() {
    for bytes in [64 * 1024, 1 << 30] {
        let pool = Pool::builder()
            .core_threads(2)
            .max_threads(2)
            .stack_size(bytes)
            .build()
            .unwrap();
        let mut handles = Vec::new();
        for i in 0..200u64 {
            handles.push(pool.submit_sequential(i % 7, move || i).unwrap());
            handles.push(pool.submit_keyed([i % 5, i % 3 + 10], move || i).unwrap());
            handles.push(pool.submit_coalescing(1000 + i % 2, move || i).unwrap());
        }
        let lanes = pool.typed_lanes(|_: &u8, m: u64| {
            std::hint::black_box(m);
        });
        for m in 0..100 {
            lanes.send(m as u8 % 4, m).unwrap();
        }
        for h in handles {
            // Coalesced ones are replaced; everything else runs.
            if let Err(e) = h.join() {
                assert!(matches!(e, keyway::TaskError::Coalesced), "{bytes}: {e}");
            }
        }
        let mut task = || ();
        while let Err(e) = pool.try_execute(task) {
            task = e.into_inner();
            std::thread::yield_now();
        }
        drop(lanes);
        pool.shutdown();
        assert_eq!(pool.stats().panicked_tasks, 0);
    }
}
