//! Lanes are freed when idle, so memory does not grow with contexts ever used.

use crate::common;

use common::{eventually, Gate};

#[test]
fn a_million_contexts_used_once_leave_no_lanes() {
    let _serial = crate::serial();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    for i in 0..1_000_000u64 {
        pool.execute_sequential(i, || ()).unwrap();
    }
    eventually("every lane is freed", || {
        let s = pool.stats();
        s.unfinished_tasks() == 0 && s.live_lanes == 0
    });
    pool.shutdown();
    assert_eq!(pool.stats().live_lanes, 0);
}

#[test]
fn lane_handles_pin_their_lane_until_dropped() {
    let _serial = crate::serial();
    let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    let lane = pool.lane("pinned");
    lane.submit(|| ()).unwrap().join().unwrap();
    assert_eq!(pool.stats().live_lanes, 1);
    let again = lane.clone();
    drop(lane);
    assert_eq!(pool.stats().live_lanes, 1);
    drop(again);
    // Freed by the unpin if the lane is idle, else by its runner the moment it runs dry
    // (`join` returns when the task finished, possibly before the runner let go of the lane).
    eventually("unpinned idle lane freed", || pool.stats().live_lanes == 0);
    // A lane dropped while busy is freed once it runs dry.
    let gate = Gate::new();
    let lane = pool.lane("busy");
    let g = gate.clone();
    lane.execute(move || g.wait()).unwrap();
    drop(lane);
    gate.open();
    eventually("busy lane freed after its work", || {
        pool.stats().live_lanes == 0
    });
    pool.shutdown();
}
