//! Keyed state for typed lanes (`Pool::typed_lanes_with_state`): one state per key, made on the
//! key's first message, owned by the key's lane, dropped or handed to `on_idle` when the lane is
//! freed (idle, or at shutdown); panics of `init`, the handler, the state's `Drop` and `on_idle`
//! contained. Drop counters prove each state is released exactly once.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{DropCount, Gate, Latch, Token};
use keyway::KeyState;

/// A key's state: the messages it saw, and a token that counts live states.
struct Seen {
    key: u64,
    msgs: Vec<u64>,
    _live: Token,
}

/// A pool whose monitor never frees idle lanes (so lanes live until shutdown, unless the idle
/// cache is full).
fn no_sweep_pool(threads: usize) -> keyway::Pool {
    keyway::Pool::builder()
        .core_threads(threads)
        .monitor_period(Duration::MAX)
        .build()
        .unwrap()
}

/// Messages queued while a key's lane is busy all see one state, in send order.
#[test]
fn state_persists_across_the_messages_of_one_key() {
    let pool = no_sweep_pool(2);
    let inits = Arc::new(AtomicUsize::new(0));
    let (gate, started) = (Gate::new(), Latch::new(1));
    let made = inits.clone();
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    let (g, s) = (gate.clone(), started.clone());
    let lanes = pool.typed_lanes_with_state(
        KeyState::new(move |_: &u64| {
            made.fetch_add(1, Ordering::SeqCst);
            Vec::new()
        }),
        move |_: &u64, seen: &mut Vec<u64>, n: u64| {
            if n == 0 {
                s.count_down();
                g.wait();
            }
            seen.push(n);
            if n == 999 {
                sink.lock().unwrap().extend(seen.iter().copied());
            }
        },
    );
    lanes.send(1, 0).unwrap();
    started.wait();
    for n in 1..1000 {
        lanes.send(1, n).unwrap();
    }
    gate.open();
    lanes.flush(1).unwrap().join().unwrap();
    assert_eq!(*out.lock().unwrap(), (0..1000).collect::<Vec<_>>());
    assert_eq!(inits.load(Ordering::SeqCst), 1);
    // With the monitor not sweeping, the idle lane (and its state) stays cached: later
    // messages still find it.
    lanes.send(1, 1000).unwrap();
    lanes.flush(1).unwrap().join().unwrap();
    assert_eq!(inits.load(Ordering::SeqCst), 1);
    pool.shutdown();
}

/// Many keys, many producers: each state only ever sees its own key's messages, in order, and
/// every state is released exactly once (here: all of them handed to `on_idle`), while lanes are
/// freed and re-made under way (short monitor period).
#[test]
fn state_is_per_key_and_released_exactly_once() {
    const KEYS: u64 = 64;
    const PER_KEY: u64 = 1_000;
    for seed in 0..4u64 {
        let pool = keyway::Pool::builder()
            .core_threads(3)
            .monitor_period(Duration::from_millis(1))
            .build()
            .unwrap();
        let live = DropCount::default();
        let released: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (tokens, store) = (live.clone(), released.clone());
        let lanes = pool.typed_lanes_with_state(
            KeyState::new(move |key: &u64| Seen {
                key: *key,
                msgs: Vec::new(),
                _live: tokens.token(),
            })
            .on_idle(move |key: &u64, seen: Seen| {
                assert_eq!(seen.key, *key);
                store.lock().unwrap().push(seen);
            }),
            |key: &u64, seen: &mut Seen, (k, n): (u64, u64)| {
                assert_eq!(
                    (seen.key, *key),
                    (k, k),
                    "a state saw another key's message"
                );
                seen.msgs.push(n);
            },
        );
        let producers: Vec<_> = (0..4u64)
            .map(|p| {
                let lanes = lanes.clone();
                std::thread::spawn(move || {
                    for n in 0..PER_KEY {
                        for k in (0..KEYS).filter(|k| k % 4 == p) {
                            lanes.send(k, (k, n)).unwrap();
                            if (n + k + seed) % 97 == 0 {
                                std::thread::yield_now(); // let lanes go idle now and then
                            }
                        }
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        pool.shutdown();
        assert_eq!(live.live(), released.lock().unwrap().len());
        let released = std::mem::take(&mut *released.lock().unwrap());
        let mut per_key: HashMap<u64, Vec<u64>> = HashMap::new();
        for seen in released {
            // One incarnation of a key's state saw a run of its messages, in order.
            assert!(
                seen.msgs.windows(2).all(|w| w[1] == w[0] + 1),
                "seed {seed}"
            );
            per_key.entry(seen.key).or_default().extend(seen.msgs);
        }
        assert_eq!(per_key.len(), KEYS as usize);
        for (k, mut msgs) in per_key {
            msgs.sort();
            assert_eq!(
                msgs,
                (0..PER_KEY).collect::<Vec<_>>(),
                "key {k}, seed {seed}"
            );
        }
        assert_eq!(live.live(), 0, "a state leaked or was dropped twice");
        drop(lanes);
    }
}

/// Without `on_idle`, a state is dropped when its lane is freed: by the monitor while the pool
/// runs, and at shutdown for the lanes still alive.
#[test]
fn state_dropped_when_the_lane_is_freed_and_at_shutdown() {
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .monitor_period(Duration::from_millis(1))
        .build()
        .unwrap();
    let live = DropCount::default();
    let tokens = live.clone();
    let lanes = pool.typed_lanes_with_state(
        KeyState::new(move |_: &u32| tokens.token()),
        |_: &u32, _: &mut Token, _: ()| {},
    );
    for k in 0..100 {
        lanes.send(k, ()).unwrap();
    }
    for k in 0..100 {
        lanes.flush(k).unwrap().join().unwrap();
    }
    // Idle lanes are freed within a monitor period (polled: the pool does it on its own
    // schedule); the pool keeps running.
    common::eventually("idle lanes freed", || live.live() == 0);
    assert!(!pool.is_shutdown());

    let pool = no_sweep_pool(2);
    let tokens = live.clone();
    let lanes = pool.typed_lanes_with_state(
        KeyState::new(move |_: &u32| tokens.token()),
        |_: &u32, _: &mut Token, _: ()| {},
    );
    for k in 0..4 {
        lanes.send(k, ()).unwrap();
        lanes.flush(k).unwrap().join().unwrap();
    }
    assert_eq!(
        live.live(),
        4,
        "idle lanes are kept (cached) while the monitor does not sweep"
    );
    pool.shutdown();
    assert_eq!(
        live.live(),
        0,
        "shutdown frees every lane and drops its state"
    );
}

/// `shutdown_now`: lanes with no message left free their state at once; a lane whose messages
/// were handed back keeps its state until they are run or dropped.
#[test]
fn state_at_shutdown_now_lives_while_its_messages_are_pending() {
    let pool = common::fixed_pool(1);
    let live = DropCount::default();
    let tokens = live.clone();
    let count = Arc::new(AtomicUsize::new(0));
    let handled = count.clone();
    let lanes = pool.typed_lanes_with_state(
        KeyState::new(move |_: &u32| tokens.token()),
        move |_: &u32, _: &mut Token, _: ()| {
            handled.fetch_add(1, Ordering::SeqCst);
        },
    );
    lanes.send(1, ()).unwrap();
    lanes.flush(1).unwrap().join().unwrap();
    let gate = common::hold_workers(&pool, 1);
    lanes.send(1, ()).unwrap(); // queued behind the held worker; its state exists
    let pending = common::shutdown_now_while_held(&pool, &gate);
    assert_eq!(pending.len(), 1);
    assert_eq!(live.live(), 1);
    for task in pending {
        task.run().unwrap(); // with the key's state
    }
    assert_eq!(count.load(Ordering::SeqCst), 2);
    drop(lanes);
    assert_eq!(live.live(), 0);
}

/// After the handler panics, the key's state is dropped (not handed to `on_idle`) and the next
/// message makes a new one; a panicking `init` loses its message and is tried again; both go to
/// the panic hook; the pool and the other keys carry on.
#[test]
fn panics_of_init_and_handler_are_contained() {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let hook = reports.clone();
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .monitor_period(Duration::MAX)
        .panic_hook(move |r: &keyway::PanicReport| {
            hook.lock().unwrap().push(r.message().to_owned())
        })
        .build()
        .unwrap();
    let live = DropCount::default();
    let tokens = live.clone();
    let failed_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let idle = Arc::new(Mutex::new(Vec::new()));
    let store = idle.clone();
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    let lanes = pool.typed_lanes_with_state(
        KeyState::new(move |key: &u32| {
            if *key == 1 && !failed_once.swap(true, Ordering::SeqCst) {
                panic!("init failed");
            }
            (Vec::new(), tokens.token())
        })
        .on_idle(move |key: &u32, (seen, _t): (Vec<&'static str>, Token)| {
            store.lock().unwrap().push((*key, seen));
        }),
        move |key: &u32, (seen, _): &mut (Vec<&'static str>, Token), msg: &'static str| {
            seen.push(msg);
            if msg == "boom" {
                panic!("handler failed");
            }
            sink.lock().unwrap().push((*key, seen.clone()));
        },
    );
    for msg in ["lost", "one", "boom", "two", "three"] {
        lanes.send(1, msg).unwrap();
    }
    lanes.send(2, "other").unwrap();
    lanes.flush(1).unwrap().join().unwrap();
    lanes.flush(2).unwrap().join().unwrap();
    assert_eq!(
        *reports.lock().unwrap(),
        ["init failed", "handler failed"],
        "each panic reported once"
    );
    let out = out.lock().unwrap().clone();
    let key1: Vec<_> = out
        .iter()
        .filter(|(k, _)| *k == 1)
        .map(|(_, s)| s.clone())
        .collect();
    // "lost" went with the failed init; "boom" broke the first state; "two" started a new one.
    assert_eq!(key1, [vec!["one"], vec!["two"], vec!["two", "three"]]);
    assert_eq!(live.live(), 2, "the broken state was dropped at once");
    pool.shutdown();
    assert_eq!(live.live(), 0);
    let mut idle = idle.lock().unwrap().clone();
    idle.sort();
    // Only the live states went to on_idle, never the broken one.
    assert_eq!(idle, [(1, vec!["two", "three"]), (2, vec!["other"])]);
}

/// A panic in a state's `Drop` or in `on_idle` is contained wherever the lane is freed (here the
/// monitor and the shutdown caller), and `on_idle` may send to the very same key (no lock of the
/// pool is held while it runs: the key's shard is the one being swept).
#[test]
fn on_idle_may_panic_or_send_to_its_own_key() {
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .monitor_period(Duration::from_millis(1))
        .build()
        .unwrap();
    type Lanes = keyway::TypedLanes<u32, u32, u32>;
    let me: Arc<Mutex<Option<Lanes>>> = Arc::default();
    let goodbyes = Arc::new(AtomicUsize::new(0));
    let (me2, byes) = (me.clone(), goodbyes.clone());
    let lanes: Lanes = pool.typed_lanes_with_state(
        KeyState::new(|_: &u32| 0).on_idle(move |key: &u32, generation: u32| {
            if *key % 2 == 0 {
                panic!("on_idle failed");
            }
            if generation == 0 {
                // The first life of the key ends: say goodbye through the same key.
                if let Some(lanes) = me2.lock().unwrap().as_ref() {
                    let _ = lanes.send(*key, 1);
                }
            }
        }),
        move |_: &u32, generation: &mut u32, msg: u32| {
            *generation = msg;
            if msg == 1 {
                byes.fetch_add(1, Ordering::SeqCst);
            }
        },
    );
    *me.lock().unwrap() = Some(lanes.clone());
    for k in 0..100u32 {
        lanes.send(k * 2 + 1, 0).unwrap(); // odd keys: say goodbye
        lanes.send(k * 2, 0).unwrap(); // even keys: on_idle panics
    }
    common::eventually("every odd key said goodbye", || {
        goodbyes.load(Ordering::SeqCst) == 100
    });
    me.lock().unwrap().take(); // break the cycle lanes -> on_idle -> lanes
    pool.shutdown();
    assert_eq!(pool.stats().live_lanes, 0);
}

/// A handler that calls `shutdown_now` and runs what it gets back: a message of its own key
/// finds the state held by the handler itself and is refused (reported, not a deadlock);
/// another key's message runs with its own state.
#[test]
fn a_handler_running_its_own_keys_handed_back_message_is_refused_not_deadlocked() {
    let pool = common::fixed_pool(1);
    let gate = common::hold_workers(&pool, 1);
    let (stopper, done) = (pool.clone(), Latch::new(1));
    let finished = done.clone();
    let results = Arc::new(Mutex::new(Vec::new()));
    let out = results.clone();
    let lanes = pool.typed_lanes_with_state(
        KeyState::new(|_: &u32| 0u32),
        move |key: &u32, count: &mut u32, msg: &'static str| {
            *count += 1;
            if msg == "stop" {
                for task in stopper.shutdown_now() {
                    let k = *task.context::<u32>().unwrap();
                    let ran = task.run();
                    out.lock()
                        .unwrap()
                        .push((k, ran.map_err(|r| r.message().to_owned())));
                }
                finished.count_down();
            }
            assert_eq!(*key, if msg == "other" { 2 } else { 1 });
        },
    );
    lanes.send(1, "stop").unwrap();
    lanes.send(1, "mine").unwrap();
    lanes.send(2, "other").unwrap();
    gate.open();
    done.wait();
    let mut results = results.lock().unwrap().clone();
    results.sort_by_key(|(k, _)| *k);
    assert_eq!(results.len(), 2);
    assert!(results[0].1.as_ref().unwrap_err().contains("own handler"));
    assert_eq!(results[1], (2, Ok(())));
}
