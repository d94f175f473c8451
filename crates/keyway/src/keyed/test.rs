//! Unit tests of multi-key edge cases: duplicates, no keys, one key.

use std::sync::{Arc, Mutex};

use crate::Pool;

#[test]
fn duplicate_keys_count_once() {
    let pool = Pool::builder().core_threads(2).build().unwrap();
    let h = pool.submit_keyed(["a", "a", "b", "a"], || 1).unwrap();
    assert_eq!(h.join().unwrap(), 1);
    pool.shutdown();
    assert_eq!(pool.stats().live_lanes, 0);
}

#[test]
fn no_keys_is_a_plain_task() {
    let pool = Pool::builder().core_threads(1).build().unwrap();
    let h = pool.submit_keyed(Vec::<u32>::new(), || "plain").unwrap();
    assert_eq!(h.join().unwrap(), "plain");
    pool.shutdown();
}

#[test]
fn one_key_is_the_sequential_lane() {
    let pool = Pool::builder()
        .core_threads(2)
        .lane_batch(1)
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    for i in 0..200 {
        let log = log.clone();
        let push = move || log.lock().unwrap().push(i);
        if i % 2 == 0 {
            pool.execute_keyed([7u64], push).unwrap();
        } else {
            pool.execute_sequential(7u64, push).unwrap();
        }
    }
    pool.shutdown();
    assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
}
