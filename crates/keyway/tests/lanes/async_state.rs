//! Async typed lanes whose key state loads and saves by futures (`AsyncKeyState`): the load
//! finishes before the key's first message, the save follows its last, a load waits for the save
//! of the same key still under way, failed loads and saves reach the messages (none is lost),
//! and a graceful shutdown waits for a load or a save under way.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{finishes, Latch, HANG};
use keyway::{AsyncKeyState, Pool, StateError};
use tokio::sync::Semaphore;

/// A shared store: each key's saved log of messages.
type Db = Arc<Mutex<HashMap<u32, Vec<u32>>>>;

/// An async gate: closed until `open`; a waiter holds no thread.
#[derive(Clone)]
struct AsyncGate(Arc<Semaphore>);

impl AsyncGate {
    fn new() -> Self {
        AsyncGate(Arc::new(Semaphore::new(0)))
    }
    fn open(&self) {
        self.0.add_permits(Semaphore::MAX_PERMITS / 2);
    }
    async fn pass(&self) {
        self.0.acquire().await.expect("never closed").forget();
    }
}

/// A reply from another thread: the future really waits (as a database call would).
async fn remote_reply() {
    let (tx, rx) = futures::channel::oneshot::channel();
    std::thread::spawn(move || tx.send(()).unwrap());
    rx.await.unwrap();
}

/// State that loads a key's log from `db` (after `gate`, counting `loads`) and saves it back.
fn log_state(
    db: &Db,
    loads: &Arc<AtomicUsize>,
    gate: &AsyncGate,
) -> AsyncKeyState<u32, Vec<u32>, String> {
    let (reader, writer, loads, gate) = (db.clone(), db.clone(), loads.clone(), gate.clone());
    AsyncKeyState::new(move |key: &u32| {
        let (reader, loads, gate, key) = (reader.clone(), loads.clone(), gate.clone(), *key);
        async move {
            loads.fetch_add(1, Ordering::SeqCst);
            gate.pass().await;
            remote_reply().await;
            Ok(reader
                .lock()
                .unwrap()
                .get(&key)
                .cloned()
                .unwrap_or_default())
        }
    })
    .on_idle(move |key: &u32, log: Vec<u32>| {
        let (writer, key) = (writer.clone(), *key);
        async move {
            remote_reply().await;
            writer.lock().unwrap().insert(key, log);
            Ok(())
        }
    })
}

#[test]
fn the_load_finishes_before_the_first_message_and_the_save_follows_the_last() {
    finishes("loaded state in order", || {
        let pool = Pool::builder().core_threads(2).build().unwrap();
        let db: Db = Arc::new(Mutex::new((0..8).map(|k| (k, vec![1000 + k])).collect()));
        let (loads, gate) = (Arc::new(AtomicUsize::new(0)), AsyncGate::new());
        let bad = Arc::new(AtomicUsize::new(0));
        let b = bad.clone();
        let lanes = pool.typed_lanes_async_loaded(
            log_state(&db, &loads, &gate),
            move |key: &u32, log: Result<Vec<u32>, StateError<String>>, msg: u32| {
                let (b, key) = (b.clone(), *key);
                async move {
                    remote_reply().await;
                    let Ok(mut log) = log else {
                        b.fetch_add(1, Ordering::SeqCst);
                        return None;
                    };
                    // Loaded first: the stored marker, then every earlier message, in order.
                    if log.first() != Some(&(1000 + key)) || log.len() != msg as usize + 1 {
                        b.fetch_add(1, Ordering::SeqCst);
                    }
                    log.push(msg);
                    Some(log)
                }
            },
        );
        for msg in 0..50 {
            for key in 0..8 {
                lanes.send(key, msg).unwrap();
            }
        }
        // Every key's first message waits for its load (held): one load per key.
        common::eventually("each key is loading", || loads.load(Ordering::SeqCst) == 8);
        gate.open();
        // Lanes kept idle are freed at shutdown: each key's log saved, and waited for.
        pool.shutdown();
        assert_eq!(bad.load(Ordering::SeqCst), 0);
        let db = db.lock().unwrap();
        for key in 0..8 {
            let expected: Vec<u32> = std::iter::once(1000 + key).chain(0..50).collect();
            assert_eq!(db[&key], expected, "key {key}");
        }
        assert_eq!(loads.load(Ordering::SeqCst), 8);
    });
}

#[test]
fn a_load_waits_for_the_save_of_the_same_key() {
    finishes("a load racing a save", || {
        // Lanes freed as soon as they are idle: each key's save starts at once.
        let pool = Pool::builder()
            .core_threads(2)
            .idle_lanes(0)
            .build()
            .unwrap();
        let db: Db = Arc::new(Mutex::new(HashMap::new()));
        let (saving, save_gate) = (Latch::new(1), AsyncGate::new());
        let loaded = Latch::new(2);
        let (reader, writer) = (db.clone(), db.clone());
        let (l, s, g) = (loaded.clone(), saving.clone(), save_gate.clone());
        let state = AsyncKeyState::new(move |key: &u32| {
            let stored = reader.lock().unwrap().get(key).cloned().unwrap_or_default();
            l.count_down();
            async move { Ok::<_, String>(stored) }
        })
        .on_idle(move |key: &u32, log: Vec<u32>| {
            let (writer, s, g, key) = (writer.clone(), s.clone(), g.clone(), *key);
            async move {
                s.count_down();
                g.pass().await; // held until the test opens it
                writer.lock().unwrap().insert(key, log);
                Ok(())
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let lanes = pool.typed_lanes_async_loaded(state, move |_: &u32, log, msg: u32| {
            let tx = tx.clone();
            async move {
                let mut log: Vec<u32> = log.ok()?;
                log.push(msg);
                tx.send(log.clone()).unwrap();
                Some(log)
            }
        });
        lanes.send(5, 1).unwrap();
        assert_eq!(rx.recv_timeout(HANG).unwrap(), vec![1]);
        saving.wait(); // the first lane was freed: its save is under way, held
        lanes.send(5, 2).unwrap();
        // The second load must not start while the save is held (a bounded look: a load that
        // started would have counted down at once).
        assert!(
            !loaded.wait_for(Duration::from_millis(200)),
            "loaded before the save"
        );
        save_gate.open();
        // The second message starts from what the save wrote.
        assert_eq!(rx.recv_timeout(HANG).unwrap(), vec![1, 2]);
        pool.shutdown();
        assert_eq!(db.lock().unwrap()[&5], vec![1, 2]);
    });
}

#[test]
fn a_failing_load_gives_each_message_the_error_and_the_next_loads_again() {
    finishes("failing loads", || {
        let pool = Pool::builder().core_threads(2).build().unwrap();
        let attempts = Arc::new(AtomicUsize::new(0));
        let a = attempts.clone();
        // The first three loads fail; the fourth succeeds.
        let state = AsyncKeyState::new(move |_: &u32| {
            let n = a.fetch_add(1, Ordering::SeqCst);
            async move {
                remote_reply().await;
                if n < 3 {
                    Err(format!("down {n}"))
                } else {
                    Ok(Vec::<u32>::new())
                }
            }
        });
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let lanes = pool.typed_lanes_async_loaded(state, move |_: &u32, log, msg: u32| {
            let s = s.clone();
            async move {
                match log {
                    Err(e) => {
                        s.lock().unwrap().push(Err((msg, e.to_string())));
                        None
                    }
                    Ok(mut log) => {
                        log.push(msg);
                        s.lock().unwrap().push(Ok(log.clone()));
                        Some(log)
                    }
                }
            }
        });
        for msg in 0..6 {
            lanes.send(1, msg).unwrap();
        }
        pool.shutdown();
        let seen = seen.lock().unwrap();
        let expected: Vec<Result<Vec<u32>, (u32, String)>> = vec![
            Err((0, "loading the key's state failed: down 0".into())),
            Err((1, "loading the key's state failed: down 1".into())),
            Err((2, "loading the key's state failed: down 2".into())),
            Ok(vec![3]),
            Ok(vec![3, 4]),
            Ok(vec![3, 4, 5]),
        ];
        assert_eq!(*seen, expected);
        assert_eq!(attempts.load(Ordering::SeqCst), 4);
    });
}

#[test]
fn a_failing_save_is_given_to_the_next_message_of_the_key() {
    finishes("a failing save", || {
        let pool = Pool::builder()
            .core_threads(2)
            .idle_lanes(0)
            .build()
            .unwrap();
        let saved = Latch::new(1);
        let s = saved.clone();
        let state = AsyncKeyState::new(|_: &u32| async { Ok::<u32, String>(0) }).on_idle(
            move |_: &u32, count: u32| {
                let s = s.clone();
                async move {
                    let failed = Err(format!("disk full at {count}"));
                    s.count_down();
                    failed
                }
            },
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let lanes = pool.typed_lanes_async_loaded(state, move |_: &u32, count, _msg: ()| {
            tx.send(count.clone().map_err(|e| e.to_string())).unwrap();
            async move { count.ok().map(|c| c + 1) }
        });
        lanes.send(3, ()).unwrap();
        assert_eq!(rx.recv_timeout(HANG).unwrap(), Ok(0));
        saved.wait();
        lanes.send(3, ()).unwrap();
        let told = rx.recv_timeout(HANG).unwrap();
        assert_eq!(
            told,
            Err("saving the key's previous state failed: disk full at 1".into())
        );
        // Reported once: the message after loads again.
        lanes.send(3, ()).unwrap();
        assert_eq!(rx.recv_timeout(HANG).unwrap(), Ok(0));
        pool.shutdown();
    });
}

#[test]
fn a_graceful_shutdown_waits_for_a_load_under_way() {
    finishes("shutdown during a load", || {
        let pool = Pool::builder().core_threads(2).build().unwrap();
        let db: Db = Arc::new(Mutex::new(HashMap::new()));
        let (loads, gate) = (Arc::new(AtomicUsize::new(0)), AsyncGate::new());
        let lanes = pool.typed_lanes_async_loaded(
            log_state(&db, &loads, &gate),
            |_, log, msg: u32| async move {
                let mut log = log.ok()?;
                log.push(msg);
                Some(log)
            },
        );
        lanes.send(4, 40).unwrap();
        common::eventually("the load started", || loads.load(Ordering::SeqCst) == 1);
        // Shutting down while the load is held: not done (a bounded look), the message pending.
        let err = pool.shutdown_timeout(Duration::from_millis(200));
        assert!(
            err.is_err_and(|e| e.pending_tasks() >= 1),
            "stopped during the load"
        );
        gate.open();
        futures::executor::block_on(pool.shutdown_async());
        assert_eq!(db.lock().unwrap()[&4], vec![40]);
    });
}

#[test]
fn a_graceful_shutdown_waits_for_a_save_under_way() {
    finishes("shutdown during a save", || {
        let pool = Pool::builder()
            .core_threads(2)
            .idle_lanes(0)
            .build()
            .unwrap();
        let db: Db = Arc::new(Mutex::new(HashMap::new()));
        let (saving, gate) = (Latch::new(1), AsyncGate::new());
        let (writer, s, g) = (db.clone(), saving.clone(), gate.clone());
        let state = AsyncKeyState::new(|_: &u32| async { Ok::<Vec<u32>, String>(Vec::new()) })
            .on_idle(move |key: &u32, log: Vec<u32>| {
                let (writer, s, g, key) = (writer.clone(), s.clone(), g.clone(), *key);
                async move {
                    s.count_down();
                    g.pass().await;
                    writer.lock().unwrap().insert(key, log);
                    Ok(())
                }
            });
        let lanes = pool.typed_lanes_async_loaded(state, |_, log, msg: u32| async move {
            let mut log = log.ok()?;
            log.push(msg);
            Some(log)
        });
        lanes.send(6, 60).unwrap();
        saving.wait();
        // Shutting down while the save is held: not done (a bounded look), the save pending.
        let err = pool.shutdown_timeout(Duration::from_millis(200));
        assert!(
            err.is_err_and(|e| e.pending_tasks() >= 1),
            "stopped during the save"
        );
        gate.open();
        futures::executor::block_on(pool.shutdown_async());
        assert_eq!(db.lock().unwrap()[&6], vec![60]);
    });
}
