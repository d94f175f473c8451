//! Async typed lanes (`typed_lanes_async`) as one driver per lane activation handles them: the
//! messages a driver takes from its lane itself (not only the one a runner launched) keep every
//! guarantee — panics contained with the key going on, `shutdown_now` cancelling the started
//! message and handing back exactly the unstarted ones, idle lanes freed.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{fixed_pool, Latch};

enum Msg {
    /// Holds the lane until the test opens it, so the messages behind it queue up and one
    /// driver takes them one after another.
    Gate(futures::channel::oneshot::Receiver<()>),
    N(u32),
}

/// A handler that panics before making its future, and a future that panics after an await,
/// in the middle of a run of queued messages: each is reported once, in its key's context, and
/// the key's other messages still run, in order (ready ones and yielding ones).
#[test]
fn panics_inside_a_drivers_run_are_contained_and_the_key_goes_on() {
    let hashes = Arc::new(Mutex::new(Vec::new()));
    let seen = hashes.clone();
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .panic_hook(move |r| seen.lock().unwrap().push(r.context_hash()))
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let lanes = pool.typed_lanes_async(move |_: &u32, msg: Msg| {
        assert!(!matches!(msg, Msg::N(3)), "the handler panics on 3");
        let sink = sink.clone();
        async move {
            match msg {
                Msg::Gate(open) => drop(open.await),
                Msg::N(n) => {
                    if n % 2 == 0 {
                        keyway::yield_now().await;
                    }
                    assert!(n != 6, "the future panics on 6");
                    sink.lock().unwrap().push(n);
                }
            }
        }
    });
    let (open, gate) = futures::channel::oneshot::channel();
    lanes.send(7, Msg::Gate(gate)).unwrap();
    for n in 0..200 {
        lanes.send(7, Msg::N(n)).unwrap();
    }
    open.send(()).unwrap();
    lanes.flush(7).unwrap().join().unwrap();
    let want: Vec<u32> = (0..200).filter(|n| *n != 3 && *n != 6).collect();
    assert_eq!(*log.lock().unwrap(), want);
    assert_eq!(pool.stats().panicked_tasks, 2);
    let key = pool.context_hash(&7u32);
    assert_eq!(*hashes.lock().unwrap(), vec![Some(key), Some(key)]);
    pool.shutdown();
}

/// `shutdown_now` while a driver waits in the middle of its lane: the messages it already
/// handled stay handled, the started one is cancelled at its await (its future dropped), and
/// exactly the unstarted ones come back, in order, as messages.
#[test]
fn shutdown_now_cancels_a_drivers_message_and_hands_back_the_rest() {
    let pool = fixed_pool(1);
    let (started, dropped) = (Latch::new(1), Latch::new(1));
    let log = Arc::new(Mutex::new(Vec::new()));
    let (sink, s, d) = (log.clone(), started.clone(), dropped.clone());
    struct OnDrop(Latch);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.count_down();
        }
    }
    let lanes = pool.typed_lanes_async(move |_: &u32, n: u32| {
        let (sink, s, d) = (sink.clone(), s.clone(), d.clone());
        async move {
            keyway::yield_now().await;
            if n == 3 {
                let _guard = OnDrop(d);
                s.count_down();
                std::future::pending::<()>().await;
            }
            sink.lock().unwrap().push(n);
        }
    });
    for n in 0..10 {
        lanes.send(1, n).unwrap();
    }
    started.wait();
    let pending = pool.shutdown_now();
    assert!(
        dropped.wait_for(common::HANG),
        "the started message was cancelled"
    );
    let back: Vec<u32> = pending
        .into_iter()
        .map(|p| match p.into_message::<u32>() {
            Ok(n) => n,
            Err(_) => panic!("not a message of the lane"),
        })
        .collect();
    assert_eq!(back, (4..10).collect::<Vec<_>>());
    assert_eq!(*log.lock().unwrap(), vec![0, 1, 2]);
    // The cancelled message is counted finished right after its future's drop.
    common::eventually("nothing unfinished", || {
        pool.stats().unfinished_tasks() == 0
    });
}

/// Two fixed threads and a monitor that frees idle lanes every 10 ms.
fn quick_monitor_pool() -> keyway::Pool {
    keyway::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .monitor_period(Duration::from_millis(10))
        .build()
        .unwrap()
}

/// A driver that found its lane empty lets the lane go: idle lanes are freed (rule 3), and a
/// key used again gets a lane that runs.
#[test]
fn async_typed_lanes_are_freed_when_idle() {
    let pool = quick_monitor_pool();
    let done = Arc::new(Mutex::new(0u32));
    let count = done.clone();
    let lanes = pool.typed_lanes_async(move |_: &u32, _: ()| {
        let count = count.clone();
        async move {
            keyway::yield_now().await;
            *count.lock().unwrap() += 1;
        }
    });
    for round in 1..=2 {
        for key in 0..300 {
            lanes.send(key, ()).unwrap();
        }
        common::eventually("every message handled", || {
            *done.lock().unwrap() == 300 * round
        });
        common::eventually("every idle lane freed", || pool.stats().live_lanes == 0);
    }
    pool.shutdown();
}

/// A `TypedLane` handle and `TypedLanes::send` with the same key share one lane and one order;
/// the handle keeps its lane in the table while it exists (pinned), and the lane is freed once
/// the last handle is dropped.
#[test]
fn a_typed_lane_handle_shares_its_keys_order_and_pins_the_lane() {
    let pool = quick_monitor_pool();
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let lanes = pool.typed_lanes_async(move |key: &u32, n: u32| {
        let (sink, key) = (sink.clone(), *key);
        async move {
            keyway::yield_now().await;
            sink.lock().unwrap().push((key, n));
        }
    });
    let lane = lanes.lane(5);
    let other = lane.clone();
    assert_eq!(*other.key(), 5);
    for n in 0..300 {
        match n % 3 {
            0 => lane.send(n).unwrap(),
            1 => other.send(n).unwrap(),
            _ => lanes.send(5, n).unwrap(),
        }
    }
    lanes.flush(5).unwrap().join().unwrap();
    let want: Vec<(u32, u32)> = (0..300).map(|n| (5, n)).collect();
    assert_eq!(*log.lock().unwrap(), want);
    // Idle but pinned: kept (the monitor frees unpinned idle lanes within a period or two).
    lanes.send(6, 0).unwrap();
    common::eventually("the unpinned lane freed", || pool.stats().live_lanes == 1);
    drop(lane);
    assert_eq!(pool.stats().live_lanes, 1, "still pinned by the clone");
    drop(other);
    common::eventually("the lane freed after its last handle", || {
        pool.stats().live_lanes == 0
    });
    pool.shutdown();
}
