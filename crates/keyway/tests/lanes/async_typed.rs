//! Async typed lanes (`typed_lanes_async`) as one driver per lane activation handles them: the
//! messages a driver takes from its lane itself (not only the one a runner launched) keep every
//! guarantee — panics contained with the key going on, `shutdown_now` cancelling the started
//! message and handing back exactly the unstarted ones, idle lanes freed.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{fixed_pool, Gate, Latch};

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

/// `shutdown_now` racing drivers whose messages yield (each yield resumed in place by its
/// worker, up to its streak) on many keys, 20 seeds: every message is handled, cancelled at a
/// yield, or handed back, exactly one of the three; per key, the handled ones ran in order and the
/// handed-back ones are the key's last messages, in order; nothing stays unfinished.
#[test]
fn shutdown_now_racing_yielding_drivers_accounts_for_every_message_once() {
    use rand::{rngs::SmallRng, Rng, SeedableRng};
    use std::sync::atomic::{AtomicBool, Ordering};
    const KEYS: u32 = 64;
    const MESSAGES: u32 = 20_000;
    for seed in 0..20u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let pool = fixed_pool(2);
        // Per message: 0 not started, 1 handled, 2 cancelled at a yield.
        let fate: Arc<Vec<Mutex<u8>>> = Arc::new((0..MESSAGES).map(|_| Mutex::new(0)).collect());
        let order: Arc<Vec<Mutex<Vec<u32>>>> =
            Arc::new((0..KEYS).map(|_| Mutex::new(Vec::new())).collect());
        let handled = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let (f, o, h) = (fate.clone(), order.clone(), handled.clone());
        let lanes = pool.typed_lanes_async(move |key: &u32, n: u32| {
            let (fate, order, handled, key) = (f.clone(), o.clone(), h.clone(), *key);
            async move {
                /// Marks its message cancelled if its future is dropped before the end.
                struct Cancelled<'a>(&'a Mutex<u8>, AtomicBool);
                impl Drop for Cancelled<'_> {
                    fn drop(&mut self) {
                        if !self.1.load(Ordering::Relaxed) {
                            *self.0.lock().unwrap() = 2;
                        }
                    }
                }
                let guard = Cancelled(&fate[n as usize], AtomicBool::new(false));
                for _ in 0..n % 8 {
                    keyway::yield_now().await;
                }
                order[key as usize].lock().unwrap().push(n);
                *fate[n as usize].lock().unwrap() = 1;
                guard.1.store(true, Ordering::Relaxed);
                handled.fetch_add(1, Ordering::Relaxed);
            }
        });
        let stop_after = rng.gen_range(0..MESSAGES);
        let mut sent = Vec::new();
        for n in 0..MESSAGES {
            let key = rng.gen_range(0..KEYS);
            lanes.send(key, n).unwrap();
            sent.push(key);
            if n == stop_after {
                break;
            }
        }
        // Let the workers get some way into the lanes first (any way, by seed).
        let target = rng.gen_range(0..=sent.len() as u32 / 2);
        while handled.load(Ordering::Relaxed) < target {
            std::thread::yield_now();
        }
        let back: Vec<u32> = pool
            .shutdown_now()
            .into_iter()
            .map(|p| match p.into_message::<u32>() {
                Ok(n) => n,
                Err(_) => panic!("not a message of the lane"),
            })
            .collect();
        common::eventually("nothing unfinished", || {
            pool.stats().unfinished_tasks() == 0
        });
        for &n in &back {
            assert_eq!(
                *fate[n as usize].lock().unwrap(),
                0,
                "seed {seed}: {n} ran and came back"
            );
        }
        let handed_back: std::collections::HashSet<u32> = back.iter().copied().collect();
        assert_eq!(
            handed_back.len(),
            back.len(),
            "seed {seed}: a message came back twice"
        );
        for (n, &key) in sent.iter().enumerate() {
            let n = n as u32;
            let state = *fate[n as usize].lock().unwrap();
            assert!(
                (state != 0) != handed_back.contains(&n),
                "seed {seed}: message {n} (key {key}) is in state {state}, handed back: {}",
                handed_back.contains(&n)
            );
        }
        for key in 0..KEYS {
            let ran = order[key as usize].lock().unwrap();
            assert!(
                ran.windows(2).all(|w| w[0] < w[1]),
                "seed {seed}: key {key} out of order"
            );
            let mine: Vec<u32> = (0..sent.len() as u32)
                .filter(|&n| sent[n as usize] == key)
                .collect();
            let came_back: Vec<u32> = back
                .iter()
                .copied()
                .filter(|&n| sent[n as usize] == key)
                .collect();
            // The handed-back messages of a key are its last ones, in order.
            assert_eq!(
                came_back,
                mine[mine.len() - came_back.len()..],
                "seed {seed}: key {key}"
            );
        }
    }
}

/// Each key's log, as `on_idle` got it, and how many states `init` made.
type Logs = Arc<Mutex<std::collections::HashMap<u32, Vec<u32>>>>;

/// A state that logs its key's messages: counted when made, handed to `logs` when its lane goes.
fn logged_state(logs: &Logs, inits: &Arc<AtomicUsize>) -> keyway::KeyState<u32, Vec<u32>> {
    let (logs, inits) = (logs.clone(), inits.clone());
    keyway::KeyState::new(move |_: &u32| {
        inits.fetch_add(1, Ordering::SeqCst);
        Vec::new()
    })
    .on_idle(move |key: &u32, log| {
        logs.lock().unwrap().insert(*key, log);
    })
}

/// A driver carries its key's state from one message to the next: the state is back in the
/// key's slot before the lane turns idle or goes back to a runner (a flush next), so the key's
/// next activation finds it (one state per key, never made anew) and `on_idle` gets every
/// message's update.
#[test]
fn a_drivers_state_is_back_in_its_slot_before_the_lane_turns_idle() {
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .keep_idle(Duration::from_secs(600))
        .build()
        .unwrap();
    let (logs, inits) = (Logs::default(), Arc::new(AtomicUsize::new(0)));
    let lanes = pool.typed_lanes_async_with_state(
        logged_state(&logs, &inits),
        |_: &u32, mut log: Vec<u32>, n: u32| async move {
            if n % 3 == 0 {
                keyway::yield_now().await;
            }
            log.push(n);
            log
        },
    );
    for burst in 0..3 {
        for n in burst * 20..(burst + 1) * 20 {
            for key in 0..4 {
                lanes.send(key, n).unwrap();
                if n % 7 == 0 {
                    // A flush next: the driver hands the lane back to a runner.
                    drop(lanes.flush(key).unwrap());
                }
            }
        }
        pool.wait_idle(); // every lane idle: each activation let go of its lane
    }
    pool.shutdown();
    assert_eq!(inits.load(Ordering::SeqCst), 4, "one state per key");
    let logs = logs.lock().unwrap();
    for key in 0..4 {
        assert_eq!(logs[&key], (0..60).collect::<Vec<_>>(), "key {key}");
    }
}

/// `shutdown_now` called between two messages of a driver (from the earlier one's future): the
/// state the driver carries goes back to the key's slot, and `on_idle` gets it with every
/// message handled so far.
#[test]
fn shutdown_now_between_two_messages_hands_the_carried_state_to_on_idle() {
    let pool = fixed_pool(1);
    let (logs, inits) = (Logs::default(), Arc::new(AtomicUsize::new(0)));
    let stopper = Arc::new(Mutex::new(Some(pool.clone())));
    let stop = stopper.clone();
    let lanes = pool.typed_lanes_async_with_state(
        logged_state(&logs, &inits),
        move |_: &u32, mut log: Vec<u32>, n: u32| {
            let stop = stop.clone();
            async move {
                log.push(n);
                if n == 3 {
                    let pool = stop.lock().unwrap().take();
                    drop(pool.map(|pool| pool.shutdown_now()));
                }
                log
            }
        },
    );
    for n in 0..10 {
        lanes.send(7, n).unwrap();
    }
    common::eventually("the key's state handed to on_idle", || {
        logs.lock().unwrap().contains_key(&7)
    });
    assert_eq!(logs.lock().unwrap()[&7], vec![0, 1, 2, 3]);
    assert_eq!(inits.load(Ordering::SeqCst), 1);
    drop(stopper);
}

/// What the batch tests send: a gate that holds the lane until the test opens it (so that the
/// messages behind it queue up and the driver takes them together), a message whose future
/// blocks its thread until the test says so, or a plain one.
enum Step {
    Gate(futures::channel::oneshot::Receiver<()>),
    Hold(u32, Latch, Gate),
    N(u32),
}

/// The driver takes its lane's queued messages together: a coalescing message sent while one of
/// them runs replaces the lane's last pending coalescing message (kept in the lane, not taken
/// with the others), and one sent while a coalescing message runs (the very next, taken alone)
/// replaces nothing.
#[test]
fn a_coalescing_message_sent_while_a_drivers_batch_runs_replaces_only_a_pending_one() {
    let pool = fixed_pool(1);
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let lanes = pool.typed_lanes_async(move |_: &u32, step: Step| {
        let sink = sink.clone();
        async move {
            match step {
                Step::Gate(open) => drop(open.await),
                Step::Hold(n, started, go) => {
                    started.count_down();
                    go.wait();
                    sink.lock().unwrap().push(n);
                }
                Step::N(n) => sink.lock().unwrap().push(n),
            }
        }
    });
    let (open, gate) = futures::channel::oneshot::channel();
    lanes.send(1, Step::Gate(gate)).unwrap();
    let (started, go) = (Latch::new(1), Gate::new());
    lanes
        .send(1, Step::Hold(1, started.clone(), go.clone()))
        .ok()
        .unwrap();
    lanes.send(1, Step::N(2)).ok().unwrap();
    lanes.send_coalescing(1, Step::N(10)).ok().unwrap();
    open.send(()).unwrap();
    started.wait();
    // 1 runs, 2 was taken with it, 10 is pending: 11 replaces it, and 12 replaces 11.
    lanes.send_coalescing(1, Step::N(11)).ok().unwrap();
    let (started, again) = (Latch::new(1), Gate::new());
    lanes
        .send_coalescing(1, Step::Hold(12, started.clone(), again.clone()))
        .ok()
        .unwrap();
    go.open();
    // 12 runs (taken alone, the very next): 13 is queued behind it.
    started.wait();
    lanes.send_coalescing(1, Step::N(13)).ok().unwrap();
    again.open();
    lanes.flush(1).unwrap().join().unwrap();
    assert_eq!(*log.lock().unwrap(), vec![1, 2, 12, 13]);
    pool.shutdown();
}

/// `shutdown_now` called from a message's future while its driver holds the messages it took
/// with it: exactly those come back, in order, and none of them runs.
#[test]
fn shutdown_now_from_inside_a_drivers_batch_hands_back_the_messages_it_took() {
    let pool = fixed_pool(2);
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Mutex::new(Some(tx));
    let log = Arc::new(Mutex::new(Vec::new()));
    let (p, sink) = (pool.clone(), log.clone());
    let lanes = pool.typed_lanes_async(move |_: &u32, step: Step| {
        let (p, sink) = (p.clone(), sink.clone());
        let tx = match step {
            Step::N(3) => tx.lock().unwrap().take(),
            _ => None,
        };
        async move {
            match step {
                Step::Gate(open) => drop(open.await),
                Step::N(n) => {
                    if let Some(tx) = tx {
                        tx.send(p.shutdown_now()).unwrap();
                    }
                    sink.lock().unwrap().push(n);
                }
                Step::Hold(..) => unreachable!("not sent"),
            }
        }
    });
    let (open, gate) = futures::channel::oneshot::channel();
    lanes.send(1, Step::Gate(gate)).ok().unwrap();
    for n in 0..10 {
        lanes.send(1, Step::N(n)).ok().unwrap();
    }
    open.send(()).unwrap();
    let back: Vec<u32> = rx
        .recv_timeout(common::HANG)
        .expect("shutdown_now inside a driver's message hung")
        .into_iter()
        .map(|p| match p.into_message::<Step>() {
            Ok(Step::N(n)) => n,
            _ => panic!("not a plain message of the lane"),
        })
        .collect();
    assert_eq!(back, (4..10).collect::<Vec<_>>());
    common::eventually("the message that stopped the pool is done", || {
        log.lock().unwrap().len() == 4
    });
    assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3]);
}

/// Three producers send to four keys, with flushes between, while the drivers take their
/// lanes' messages together and some messages wait (woken from another thread) or yield, so
/// that drivers give back what they took while producers push: 20 seeds, each producer's
/// messages to a key are handled once each, in the order sent.
#[test]
fn a_keys_order_holds_while_drivers_take_batches_under_contention() {
    use rand::{rngs::SmallRng, Rng, SeedableRng};
    const KEYS: u32 = 4;
    const PRODUCERS: u32 = 3;
    const EACH: u32 = 2_000;
    /// Per key, the (producer, number) of each message handled, in order.
    type KeyLogs = Arc<Vec<Mutex<Vec<(u32, u32)>>>>;
    for seed in 0..20u64 {
        let pool = fixed_pool(2);
        let logs: KeyLogs = Arc::new((0..KEYS).map(|_| Mutex::new(Vec::new())).collect());
        // Wakes each waiting message from its own thread (until told to stop: `None`).
        type Wake = Option<futures::channel::oneshot::Sender<()>>;
        let (waker_tx, waker_rx) = std::sync::mpsc::channel::<Wake>();
        let waker = std::thread::spawn(move || {
            while let Ok(Some(wake)) = waker_rx.recv() {
                let _ = wake.send(());
            }
        });
        let stop = waker_tx.clone();
        let waker_tx = Mutex::new(waker_tx);
        let sink = logs.clone();
        let lanes = pool.typed_lanes_async(move |key: &u32, (producer, n, how): (u32, u32, u8)| {
            let (sink, key) = (sink.clone(), *key);
            let woken = (how == 2).then(|| {
                let (tx, rx) = futures::channel::oneshot::channel();
                waker_tx.lock().unwrap().send(Some(tx)).unwrap();
                rx
            });
            async move {
                match woken {
                    Some(rx) => drop(rx.await),
                    None if how == 1 => keyway::yield_now().await,
                    None => {}
                }
                sink[key as usize].lock().unwrap().push((producer, n));
            }
        });
        std::thread::scope(|s| {
            for producer in 0..PRODUCERS {
                let lanes = &lanes;
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed * 16 + u64::from(producer));
                    for n in 0..EACH {
                        let key = rng.gen_range(0..KEYS);
                        let how = [0, 0, 0, 0, 0, 1, 2][rng.gen_range(0..7)];
                        lanes.send(key, (producer, n, how)).unwrap();
                        if rng.gen_ratio(1, 50) {
                            drop(lanes.flush(key).unwrap());
                        }
                    }
                });
            }
        });
        for key in 0..KEYS {
            lanes.flush(key).unwrap().join().unwrap();
        }
        let mut total = 0;
        for (key, log) in logs.iter().enumerate() {
            let log = log.lock().unwrap();
            total += log.len();
            for producer in 0..PRODUCERS {
                let sent: Vec<u32> = log
                    .iter()
                    .filter(|(p, _)| *p == producer)
                    .map(|(_, n)| *n)
                    .collect();
                assert!(
                    sent.windows(2).all(|w| w[0] < w[1]),
                    "seed {seed}: key {key}, producer {producer} out of order"
                );
            }
        }
        assert_eq!(
            total,
            (PRODUCERS * EACH) as usize,
            "seed {seed}: a message lost or twice"
        );
        pool.shutdown();
        stop.send(None).unwrap();
        waker.join().unwrap();
    }
}
