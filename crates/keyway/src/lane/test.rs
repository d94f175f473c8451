//! Unit tests of the lane table: rule 3 (who frees a lane) and the coalescing push.

use std::sync::Arc;

use super::table::TableOps;
use super::Closures;
use crate::Pool;

fn pool() -> Pool {
    Pool::builder().core_threads(1).build().unwrap()
}

#[test]
fn idle_lane_leaves_the_table_pinned_one_stays() {
    let pool = pool();
    let table: Arc<super::LaneTable<Closures>> = pool.handle.lanes.clone();
    pool.submit_sequential(1u8, || ()).unwrap().join().unwrap();
    crate::pool::test_support::quiesce(&pool);
    assert_eq!(table.live_lanes(), 0);
    let lane = pool.lane(2u8);
    lane.submit(|| ()).unwrap().join().unwrap();
    crate::pool::test_support::quiesce(&pool);
    assert_eq!(table.live_lanes(), 1);
    drop(lane);
    assert_eq!(table.live_lanes(), 0);
    pool.shutdown();
}

#[test]
fn equal_keys_of_different_types_are_different_lanes() {
    let pool = pool();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    // Lane 1u8 is held busy; lane 1u16 must still run.
    pool.execute_sequential(1u8, move || rx.recv().unwrap())
        .unwrap();
    let other = pool.submit_sequential(1u16, || "ran").unwrap();
    assert_eq!(other.join().unwrap(), "ran");
    assert_ne!(pool.context_hash(&1u8), pool.context_hash(&1u16));
    tx.send(()).unwrap();
    pool.shutdown();
}
