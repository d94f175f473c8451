//! A panicking task is reported (handle and hook), its worker survives, and the
//! next task of its context runs.

use crate::common;

use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use common::{finishes, PanicOnDrop, HANG};
use keyway::{PanicReport, Pool, TaskError};

#[test]
fn panic_is_reported_and_the_context_goes_on() {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let r = reports.clone();
    let pool = keyway::Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .panic_hook(move |p: &PanicReport| r.lock().unwrap().push(p.message().to_owned()))
        .build()
        .unwrap();
    let worker = pool
        .submit(|| std::thread::current().id())
        .unwrap()
        .join()
        .unwrap();
    let bad = pool
        .submit_sequential("ctx", || -> u32 { panic!("bad input 17") })
        .unwrap();
    let next = pool
        .submit_sequential("ctx", || std::thread::current().id())
        .unwrap();
    pool.execute_sequential("ctx", || panic!("no handle"))
        .unwrap();
    let after = pool.submit_sequential("ctx", || 5).unwrap();
    match bad.join() {
        Err(TaskError::Panicked(mut p)) => {
            assert_eq!(p.get_mut().downcast_ref::<&str>(), Some(&"bad input 17"))
        }
        other => panic!("expected a panic, got {other:?}"),
    }
    assert_eq!(
        next.join().unwrap(),
        worker,
        "the worker thread did not survive"
    );
    assert_eq!(after.join().unwrap(), 5);
    pool.shutdown();
    assert_eq!(*reports.lock().unwrap(), vec!["bad input 17", "no handle"]);
    assert_eq!(pool.stats().panicked_tasks, 2);
}

#[test]
fn a_panicking_hook_is_contained() {
    let pool = keyway::Pool::builder()
        .core_threads(1)
        .panic_hook(|_: &PanicReport| panic!("hook fails too"))
        .build()
        .unwrap();
    pool.execute(|| panic!("task fails")).unwrap();
    assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1);
    pool.shutdown();
}

#[test]
fn typed_lane_panics_do_not_stall_the_key() {
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let lanes = pool.typed_lanes(move |_k: &u8, m: u32| {
        if m % 3 == 0 {
            panic!("multiple of three");
        }
        s.lock().unwrap().push(m);
    });
    for m in 1..=30 {
        lanes.send(7, m).unwrap();
    }
    drop(lanes);
    pool.shutdown();
    let expected: Vec<u32> = (1..=30).filter(|m| m % 3 != 0).collect();
    assert_eq!(*seen.lock().unwrap(), expected);
    assert_eq!(pool.stats().panicked_tasks, 10);
}

/// The pool (whose only worker met a panicking drop) still runs plain and lane work.
fn still_runs_plain_and_lane_work(pool: &Pool) {
    assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1);
    assert_eq!(
        pool.submit_sequential("ctx", || 2).unwrap().join().unwrap(),
        2
    );
}

/// A result whose `Drop` panics, dropped on the worker (its handle is gone): the worker lives on.
#[test]
fn result_drop_panic_does_not_kill_the_worker() {
    finishes("pool after a panicking result drop", || {
        let pool = common::fixed_pool(1);
        let gate = common::hold_workers(&pool, 1);
        drop(pool.submit(|| PanicOnDrop).unwrap());
        drop(pool.submit_sequential("ctx", || PanicOnDrop).unwrap());
        gate.open();
        still_runs_plain_and_lane_work(&pool);
        pool.shutdown();
    });
}

/// A cancelled task whose capture panics when dropped (the worker drops it unrun).
#[test]
fn capture_drop_panic_on_the_cancelled_path_does_not_kill_the_worker() {
    finishes("pool after a panicking capture drop", || {
        let pool = common::fixed_pool(1);
        let gate = common::hold_workers(&pool, 1);
        let bomb = PanicOnDrop;
        let plain = pool
            .submit(move || {
                let _keep = &bomb;
            })
            .unwrap();
        assert!(plain.cancel());
        let bomb = PanicOnDrop;
        let laned = pool
            .submit_sequential("ctx", move || {
                let _keep = &bomb;
            })
            .unwrap();
        assert!(laned.cancel());
        gate.open();
        still_runs_plain_and_lane_work(&pool);
        pool.shutdown();
    });
}

/// The same on a reserved thread: a result drop that panics does not kill it.
#[test]
fn result_drop_panic_on_a_reserved_thread_is_contained() {
    finishes("reserved thread after a panicking capture drop", || {
        let pool = Pool::builder()
            .core_threads(1)
            .reserved_threads(1)
            .min_reserved_threads(1)
            .build()
            .unwrap();
        for round in 0..2 {
            common::reserved_ready(&pool);
            let (tx, rx) = channel();
            let bomb = PanicOnDrop;
            let mut task: Box<dyn FnOnce() + Send> = Box::new(move || {
                let _keep = bomb;
                tx.send(round).unwrap();
            });
            while let Err(e) = pool.try_execute(task) {
                task = e.into_inner();
                std::thread::yield_now();
            }
            assert_eq!(rx.recv_timeout(HANG).unwrap(), round);
        }
        pool.shutdown();
    });
}
