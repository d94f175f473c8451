//! A panicking task is reported (handle and hook), its worker survives, and the
//! next task of its context runs.

use std::sync::{Arc, Mutex};

use keyway::{PanicReport, TaskError};

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
