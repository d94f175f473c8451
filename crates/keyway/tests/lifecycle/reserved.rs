//! Reserved threads and `try_execute`: never queues; hands the task
//! to another thread when a reserved thread is idle; reserved threads retire after the idle
//! timeout and come back on demand.

use crate::common;

use std::sync::mpsc::channel;
use std::time::Duration;

use common::{eventually, finishes, Gate, Latch, HANG};
use keyway::{Pool, TryExecuteError};

/// One core thread and one reserved thread.
fn one_reserved() -> keyway::Pool {
    keyway::Pool::builder()
        .core_threads(1)
        .reserved_threads(1)
        .build()
        .unwrap()
}

#[test]
fn try_execute_never_queues() {
    let pool = one_reserved();
    common::reserved_ready(&pool);
    let gate = Gate::new();
    let started = Latch::new(1);
    let (g, s) = (gate.clone(), started.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    pool.try_execute(move || {
        tx.send(std::thread::current().name().map(str::to_owned))
            .unwrap();
        s.count_down();
        g.wait_for(HANG);
    })
    .unwrap();
    started.wait();
    let name = rx.recv().unwrap().unwrap_or_default();
    assert!(
        name.contains("reserved"),
        "ran on {name:?}, not on a reserved thread"
    );
    // The only reserved thread is busy: refused at once, task handed back, nothing queued.
    let queued_before = pool.stats().unfinished_tasks();
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let r = ran.clone();
    let back = pool
        .try_execute(move || r.store(true, std::sync::atomic::Ordering::SeqCst))
        .unwrap_err();
    assert!(matches!(back, TryExecuteError::Busy(_)));
    assert_eq!(
        pool.stats().unfinished_tasks(),
        queued_before,
        "try_execute queued a task"
    );
    assert_eq!(
        pool.stats().reserved_threads,
        1,
        "more reserved threads than configured"
    );
    back.into_inner()();
    assert!(ran.load(std::sync::atomic::Ordering::SeqCst));
    gate.open();
    pool.shutdown();
}

#[test]
fn zero_reserved_threads_always_refuse() {
    let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
    for _ in 0..100 {
        assert!(matches!(
            pool.try_execute(|| ()),
            Err(TryExecuteError::Busy(_))
        ));
    }
    assert_eq!(pool.stats().reserved_threads, 0);
    pool.shutdown();
    assert!(matches!(
        pool.try_execute(|| ()),
        Err(TryExecuteError::Shutdown(_))
    ));
}

#[test]
fn reserved_threads_retire_after_idle_timeout_and_come_back() {
    let pool = keyway::Pool::builder()
        .reserved_threads(2)
        .reserved_idle_timeout(Duration::from_millis(20))
        .build()
        .unwrap();
    common::reserved_ready(&pool);
    let done = Latch::new(1);
    let d = done.clone();
    pool.try_execute(move || d.count_down()).unwrap();
    done.wait();
    eventually("reserved threads retire", || {
        pool.stats().reserved_threads == 0
    });
    common::reserved_ready(&pool); // back on demand
    let done = Latch::new(1);
    let d = done.clone();
    pool.try_execute(move || d.count_down()).unwrap();
    done.wait();
    pool.shutdown();
    assert_eq!(pool.stats().reserved_threads, 0);
}

#[test]
fn min_reserved_threads_stay() {
    let pool = keyway::Pool::builder()
        .reserved_threads(1)
        .min_reserved_threads(1)
        .reserved_idle_timeout(Duration::from_millis(1))
        .build()
        .unwrap();
    common::reserved_ready(&pool);
    // Time passing is the condition under test here (not synchronisation): fifty idle
    // timeouts of 1 ms expire, and the minimum keeps the thread.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(pool.stats().reserved_threads, 1);
    let done = Latch::new(1);
    let d = done.clone();
    pool.try_execute(move || d.count_down()).unwrap();
    done.wait();
    assert_eq!(pool.stats().reserved_threads, 1);
    pool.shutdown();
}

#[test]
fn bad_reserved_configuration_is_an_error() {
    let err = keyway::Pool::builder()
        .reserved_threads(1)
        .min_reserved_threads(2)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("min_reserved_threads"));
    let err = keyway::Pool::builder()
        .reserved_idle_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("reserved_idle_timeout"));
}

/// `shutdown` and `shutdown_now` called from a task on a reserved thread do not wait for that
/// thread itself.
#[test]
fn shutdown_from_a_reserved_thread_does_not_wait_for_itself() {
    for now in [false, true] {
        let pool = one_reserved();
        common::reserved_ready(&pool);
        let done = Latch::new(1);
        let (d, p) = (done.clone(), pool.clone());
        pool.try_execute(move || {
            if now {
                drop(p.shutdown_now());
            } else {
                p.shutdown();
            }
            d.count_down();
        })
        .unwrap();
        assert!(
            done.wait_for(HANG),
            "shutdown from a reserved thread hung (now: {now})"
        );
        pool.shutdown();
    }
}

/// `reserved_idle_timeout(Duration::MAX)`: the reserved thread must not die computing its
/// deadline, and a task handed to it must run.
#[test]
fn reserved_idle_timeout_max_runs_the_handed_task() {
    finishes("try_execute with reserved_idle_timeout(MAX)", || {
        let pool = Pool::builder()
            .core_threads(1)
            .reserved_threads(1)
            .reserved_idle_timeout(Duration::MAX)
            .build()
            .unwrap();
        common::reserved_ready(&pool);
        let (tx, rx) = channel();
        let mut task = move || tx.send(()).unwrap();
        while let Err(e) = pool.try_execute(task) {
            task = e.into_inner();
            std::thread::yield_now();
        }
        rx.recv_timeout(HANG)
            .expect("the task handed to the reserved thread never ran");
        pool.shutdown();
    });
}
