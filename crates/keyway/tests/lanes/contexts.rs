//! Typed contexts (`Pool::contexts`), flushing one context, and what `shutdown_now` says of the
//! tasks it hands back (their context, their key, a typed lane's message).

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::{DropCount, Gate, Latch, Token};
use keyway::{KeyState, SubmitError, TaskError};

/// `Contexts<K>` is the very lanes of the untyped API called with a `K`: mixed submissions of one
/// key keep one order and never overlap, under contention from several producers.
#[test]
fn contexts_share_lanes_with_the_untyped_api() {
    const KEYS: u64 = 32;
    const PER_KEY: u64 = 2_000;
    let pool = keyway::Pool::builder().core_threads(4).build().unwrap();
    let accounts = pool.contexts::<u64>();
    let logs: Arc<Vec<Mutex<Vec<u64>>>> =
        Arc::new((0..KEYS).map(|_| Mutex::new(Vec::new())).collect());
    let busy: Arc<Vec<AtomicBool>> = Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
    let producers: Vec<_> = (0..4u64)
        .map(|p| {
            let (pool, accounts, logs, busy) =
                (pool.clone(), accounts.clone(), logs.clone(), busy.clone());
            std::thread::spawn(move || {
                // Each producer owns the keys `k % 4 == p`, so its submissions define their order.
                let keys: Vec<u64> = (0..KEYS).filter(|k| k % 4 == p).collect();
                let lanes: Vec<_> = keys.iter().map(|&k| accounts.lane(k)).collect();
                for seq in 0..PER_KEY {
                    for (i, &k) in keys.iter().enumerate() {
                        let (logs, busy) = (logs.clone(), busy.clone());
                        let task = move || {
                            let k = k as usize;
                            assert!(!busy[k].swap(true, Ordering::SeqCst), "key {k} overlapped");
                            logs[k].lock().unwrap().push(seq);
                            busy[k].store(false, Ordering::SeqCst);
                        };
                        match (seq + k) % 5 {
                            0 => accounts.execute_sequential(k, task).unwrap(),
                            1 => pool.execute_sequential(k, task).unwrap(),
                            2 => lanes[i].execute(task).unwrap(),
                            3 => pool.execute_keyed([k], task).unwrap(),
                            _ => accounts.execute_keyed([k, k], task).unwrap(),
                        }
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    for k in 0..KEYS {
        accounts.flush(k).unwrap().join().unwrap();
        let log = logs[k as usize].lock().unwrap();
        assert_eq!(
            *log,
            (0..PER_KEY).collect::<Vec<_>>(),
            "key {k} out of order"
        );
    }
    pool.shutdown();
}

/// The same, shown by the lane count: a task held in a `Contexts<u64>` lane and one queued with
/// the untyped API under the same `u64` are in one lane; a `u32` of the same value is another.
#[test]
fn one_lane_per_key_whichever_api_and_another_per_type() {
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let accounts = pool.contexts::<u64>();
    let (gate, started) = (Gate::new(), Latch::new(1));
    let held = common::held_task(&gate, &started);
    let first = accounts.submit_sequential(5, held).unwrap();
    started.wait();
    let ran_second = Arc::new(AtomicBool::new(false));
    let flag = ran_second.clone();
    let second = pool
        .submit_sequential(5u64, move || flag.store(true, Ordering::SeqCst))
        .unwrap();
    assert_eq!(pool.stats().live_lanes, 1);
    assert_eq!(accounts.context_hash(&5), pool.context_hash(&5u64));
    // Still queued behind the held task of its lane (no thread is held: it is in the queue).
    assert!(!ran_second.load(Ordering::SeqCst));
    let other_type = pool.submit_sequential(5u32, || ()).unwrap();
    other_type.join().unwrap(); // ran beside the held task: another lane
    assert!(!ran_second.load(Ordering::SeqCst));
    gate.open();
    assert!(first.join().unwrap());
    second.join().unwrap();
    pool.shutdown();
}

/// A flush completes once the tasks sent to its context before it have run, not later ones, and
/// while the pool keeps running; other contexts are not waited for.
#[test]
fn flush_waits_for_earlier_tasks_of_its_context_only() {
    let pool = keyway::Pool::builder().core_threads(3).build().unwrap();
    let ctx = pool.contexts::<&'static str>();
    let (gate, started) = (Gate::new(), Latch::new(1));
    let held = common::held_task(&gate, &started);
    ctx.execute_sequential("a", move || assert!(held()))
        .unwrap();
    started.wait();
    let before = Arc::new(AtomicU64::new(0));
    for _ in 0..100 {
        let before = before.clone();
        ctx.execute_sequential("a", move || {
            before.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    let flush = ctx.flush("a").unwrap();
    let (later_gate, later_started) = (Gate::new(), Latch::new(1));
    let later = common::held_task(&later_gate, &later_started);
    ctx.execute_sequential("a", move || assert!(later()))
        .unwrap();
    // Another context is not held up by "a", and its flush does not wait for "a".
    ctx.execute_sequential("b", || ()).unwrap();
    ctx.flush("b").unwrap().join().unwrap();
    assert!(!flush.is_finished());
    assert_eq!(before.load(Ordering::SeqCst), 0);
    gate.open();
    flush.join().unwrap();
    assert_eq!(before.load(Ordering::SeqCst), 100);
    // The task sent after the flush is still running: the flush did not wait for it.
    later_started.wait();
    assert!(!pool.is_shutdown());
    later_gate.open();
    // Every form of flush: the pool's deprecated alias (old code still compiles), lane, typed
    // lanes.
    #[allow(deprecated)]
    pool.flush("a").unwrap().join().unwrap();
    ctx.lane("a").flush().unwrap().join().unwrap();
    let seen = Arc::new(AtomicU64::new(0));
    let count = seen.clone();
    let typed = pool.typed_lanes(move |_: &u8, n: u64| {
        count.fetch_add(n, Ordering::SeqCst);
    });
    for n in 1..=100 {
        typed.send(1, n).unwrap();
    }
    typed.flush(1).unwrap().join().unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 5050);
    pool.shutdown();
    assert!(matches!(ctx.flush("a"), Err(SubmitError::Shutdown(()))));
    assert!(matches!(typed.flush(1), Err(SubmitError::Shutdown(()))));
}

/// A flush queued when `shutdown_now` stops the pool is handed back; dropped, its handle says
/// `Rejected`; run, it completes.
#[test]
fn flush_handed_back_by_shutdown_now() {
    let pool = common::fixed_pool(1);
    let gate = common::hold_workers(&pool, 1);
    let keys = pool.contexts::<u8>();
    let dropped = keys.flush(1).unwrap();
    let kept = keys.flush(2).unwrap();
    let mut pending = common::shutdown_now_while_held(&pool, &gate);
    assert_eq!(pending.len(), 2);
    pending.sort_by_key(|t| *t.context::<u8>().unwrap());
    let mut pending = pending.into_iter();
    drop(pending.next());
    assert!(matches!(dropped.join(), Err(TaskError::Rejected)));
    pending.next().unwrap().run().unwrap();
    kept.join().unwrap();
}

/// `shutdown_now` says which context each task handed back was queued in: its hash, its key by
/// type, every key of a multi-key task; a typed lane's message comes back as itself.
#[test]
fn pending_tasks_say_their_context_and_give_messages_back() {
    let pool = common::fixed_pool(1);
    let gate = common::hold_workers(&pool, 1);
    let drops = DropCount::default();
    let accounts = pool.contexts::<u64>();
    let handled = Arc::new(Mutex::new(Vec::new()));
    let log = handled.clone();
    let chat = pool.typed_lanes_with_state(
        KeyState::new(|_: &String| 0u32),
        move |user: &String, seen: &mut u32, (text, _t): (String, Token)| {
            *seen += 1;
            log.lock().unwrap().push((user.clone(), text, *seen));
        },
    );
    let t = drops.token();
    accounts.execute_sequential(7, move || drop(t)).unwrap();
    pool.execute_sequential("seven", || ()).unwrap();
    pool.execute(|| ()).unwrap();
    accounts.execute_keyed([1, 2, 3], || ()).unwrap();
    for text in ["a", "b", "c"] {
        chat.send("ann".to_string(), (text.to_string(), drops.token()))
            .unwrap();
    }
    let pending = common::shutdown_now_while_held(&pool, &gate);
    assert_eq!(pending.len(), 7);
    let mut messages = Vec::new();
    let mut others = Vec::new();
    for task in pending {
        match task.into_message::<(String, Token)>() {
            Ok(msg) => messages.push(msg),
            Err(task) => others.push(task),
        }
    }
    // The three messages came back as themselves, in send order (the first one is run below).
    let texts: Vec<&str> = messages.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(texts, ["a", "b", "c"]);
    assert_eq!(others.len(), 4);
    let by_u64: Vec<_> = others.iter().filter_map(|t| t.context::<u64>()).collect();
    assert_eq!(by_u64, [&7]);
    let task7 = others
        .iter()
        .find(|t| t.context::<u64>().is_some())
        .unwrap();
    assert_eq!(task7.context_hash(), Some(pool.context_hash(&7u64)));
    assert_eq!(task7.context::<u32>(), None);
    let seven = others
        .iter()
        .find(|t| t.context::<&str>().is_some())
        .unwrap();
    assert_eq!(seven.context::<&str>(), Some(&"seven"));
    assert_eq!(seven.context::<String>(), None); // another type: another context
    let plain = others
        .iter()
        .find(|t| t.context_hashes().next().is_none())
        .unwrap();
    assert_eq!(plain.context_hash(), None);
    let multi = others
        .iter()
        .find(|t| t.context_hashes().count() == 3)
        .unwrap();
    assert_eq!(multi.context_hash(), None);
    let mut keys: Vec<u64> = multi.keys::<u64>().copied().collect();
    keys.sort();
    assert_eq!(keys, [1, 2, 3]);
    let mut hashes: Vec<u64> = multi.context_hashes().collect();
    let mut expected: Vec<u64> = [1u64, 2, 3].iter().map(|k| pool.context_hash(k)).collect();
    hashes.sort();
    expected.sort();
    assert_eq!(hashes, expected);
    // A closure task is not a message: handed back unchanged, still runnable.
    let task7 = others.remove(
        others
            .iter()
            .position(|t| t.context::<u64>().is_some())
            .unwrap(),
    );
    let Err(task7) = task7.into_message::<(String, Token)>() else {
        panic!("a closure task came back as a message")
    };
    task7.run().unwrap();
    drop(others);
    drop(messages);
    assert_eq!(
        drops.live(),
        0,
        "a task or message leaked or was dropped twice"
    );
    assert!(handled.lock().unwrap().is_empty());
}

/// Messages of a typed lane handed back and then run go through the handler with the key's
/// state; a wrong message type hands the task back untouched.
#[test]
fn handed_back_messages_run_with_their_state() {
    let pool = common::fixed_pool(1);
    let gate = common::hold_workers(&pool, 1);
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Mutex::new(tx);
    let lanes = pool.typed_lanes_with_state(
        KeyState::new(|_: &u8| Vec::new()),
        move |key: &u8, seen: &mut Vec<u32>, n: u32| {
            seen.push(n);
            tx.lock().unwrap().send((*key, seen.clone())).unwrap();
        },
    );
    for n in 0..3 {
        lanes.send(9, n).unwrap();
    }
    let pending = common::shutdown_now_while_held(&pool, &gate);
    assert_eq!(pending.len(), 3);
    for task in pending {
        assert_eq!(task.context::<u8>(), Some(&9));
        let task = task.into_message::<u64>().unwrap_err(); // not the message type
        task.run().unwrap();
    }
    let seen: Vec<_> = rx.try_iter().collect();
    assert_eq!(seen.last(), Some(&(9, vec![0, 1, 2])));
}

/// A typed lane's flush handed back by `shutdown_now` says its key, is no message, and tells
/// its handle `Rejected` when dropped.
#[test]
fn typed_flush_handed_back_by_shutdown_now() {
    let pool = common::fixed_pool(1);
    let lanes = pool.typed_lanes(|_: &u16, _: u8| ());
    let gate = common::hold_workers(&pool, 1);
    lanes.send(4, 1).unwrap();
    let flush = lanes.flush(4).unwrap();
    let pending = common::shutdown_now_while_held(&pool, &gate);
    assert_eq!(pending.len(), 2);
    let mut pending = pending.into_iter();
    assert_eq!(pending.next().unwrap().into_message::<u8>().ok(), Some(1));
    let Err(flush_task) = pending.next().unwrap().into_message::<u8>() else {
        panic!("a flush came back as a message")
    };
    assert_eq!(flush_task.context::<u16>(), Some(&4));
    drop(flush_task);
    assert!(matches!(flush.join(), Err(TaskError::Rejected)));
}
