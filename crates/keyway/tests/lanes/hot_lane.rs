//! A hot lane (a context whose task holds its worker for a long time) does not hold light lanes
//! behind it: light lanes queued on the hot worker's own deque run on the other worker while the
//! hot task still runs.
//!
//! The pool has exactly two threads and no monitor help (the monitor never takes a worker for
//! blocked), so only the idle worker taking the queued lanes from the hot one can run them. The
//! hot task waits on a gate that only the last light task opens: were the light lanes held
//! behind it, the gate would time out and the test fail (no wall-clock assertion).

use crate::common;

use std::time::Duration;

use common::{Gate, Latch, HANG};

/// Two threads, no auxiliary thread, no monitor taking a worker for blocked.
fn two_workers() -> keyway::Pool {
    keyway::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .monitor_period(Duration::MAX)
        .blocked_after(Duration::MAX)
        .build()
        .unwrap()
}

const LIGHT: usize = 200;

/// `LIGHT` light tasks, one lane each, the last to run opening `all_ran`.
fn light_tasks(pool: &keyway::Pool, all_ran: &Gate) {
    let left = Latch::new(LIGHT);
    for i in 0..LIGHT {
        let (left, all_ran) = (left.clone(), all_ran.clone());
        pool.execute_sequential(("light", i), move || {
            left.count_down();
            if left.count() == 0 {
                all_ran.open();
            }
        })
        .unwrap();
    }
}

/// The hot task queues the light lanes on its own worker's deque, then holds that worker until
/// they all ran: the other worker must take them from it.
#[test]
fn light_lanes_queued_behind_a_hot_task_run_on_the_other_worker() {
    let pool = two_workers();
    let p = pool.clone();
    let hot = pool
        .submit_sequential("hot", move || {
            let all_ran = Gate::new();
            light_tasks(&p, &all_ran);
            all_ran.wait_for(HANG)
        })
        .unwrap();
    assert!(
        hot.join().unwrap(),
        "the light lanes waited behind the hot task"
    );
    pool.shutdown();
}
