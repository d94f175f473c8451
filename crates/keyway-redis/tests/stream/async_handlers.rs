//! Async handlers against a real `redis-server`: each key's futures one at a time and in
//! order while many keys' futures wait at once on two threads; a panicking future retried
//! (and dead-lettered after its attempts) like a sync handler; a future dropped by a pool
//! shut down under it leaves its entry pending for the next owner; a future awaiting past
//! its lease has its ack refused, and the new owner runs its entry again.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::kinds::{woken_from_another_thread, AsyncLatch, OpenAsyncOnDrop};
use common::local::*;
use common::*;
use keyway_redis::stream::{Producer, StreamConsumer, Topic};
use parking_lot::Mutex;

/// 16 keys × 20 entries on a pool of two threads: the first entry of every key waits until
/// all 16 are waiting at once (which two threads can only reach if a waiting future holds
/// none); the later ones await wake-ups from other threads between their start and their
/// end. No key ever has two entries in flight, and each key's entries ran in order.
#[test]
fn async_handlers_keep_key_order_with_interleaved_awaits() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    const KEYS: usize = 16;
    const PER_KEY: u64 = 20;
    let topic = Topic::new("async-order", 4).unwrap();
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .build()
        .unwrap();
    let all_first = Arc::new(AsyncLatch::default());
    let _open = OpenAsyncOnDrop(Arc::clone(&all_first));
    let in_flight = Arc::new(Mutex::new(HashSet::<Vec<u8>>::new()));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let log = Arc::new(Mutex::new(HashMap::<Vec<u8>, Vec<u64>>::new()));
    let (latch, flight, over, seen) = (
        Arc::clone(&all_first),
        Arc::clone(&in_flight),
        Arc::clone(&overlaps),
        Arc::clone(&log),
    );
    let consumer = builder(&server, &topic)
        .build_async(&pool, move |d, payload| {
            let (latch, flight, over, seen) = (
                Arc::clone(&latch),
                Arc::clone(&flight),
                Arc::clone(&over),
                Arc::clone(&seen),
            );
            async move {
                let seq: u64 = std::str::from_utf8(&payload)?.parse()?;
                if !flight.lock().insert(d.key.clone()) {
                    over.fetch_add(1, Ordering::SeqCst);
                }
                seen.lock().entry(d.key.clone()).or_default().push(seq);
                if seq == 0 {
                    latch.wait(KEYS).await;
                } else {
                    for _ in 0..seq % 3 + 1 {
                        woken_from_another_thread().await;
                    }
                }
                flight.lock().remove(&d.key);
                Ok(())
            }
        })
        .unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    for seq in 0..PER_KEY {
        let batch: Vec<(String, String)> = (0..KEYS)
            .map(|k| (format!("key-{k}"), seq.to_string()))
            .collect();
        producer.send_batch(batch).unwrap();
    }
    let total = KEYS as u64 * PER_KEY;
    wait_for("everything acknowledged", || {
        consumer.stats().unwrap().acked == total
    });
    assert_eq!(
        all_first.arrived(),
        KEYS,
        "every key's first entry waited at once"
    );
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "a key had two entries in flight"
    );
    let log = log.lock();
    assert_eq!(log.len(), KEYS);
    for (key, seqs) in log.iter() {
        let expected: Vec<u64> = (0..PER_KEY).collect();
        assert_eq!(seqs, &expected, "order of {}", String::from_utf8_lossy(key));
    }
    assert_eq!(pending(&server, &topic), 0);
    drop(consumer);
}

/// A future that panics while polled (after an await), and a handler that panics before it
/// returns its future, are failures of their entries: retried with backoff, the key's later
/// entries waiting; an entry that always panics is dead-lettered after `max_attempts`.
#[test]
fn a_panicking_async_handler_is_retried_then_dead_lettered() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("async-panics", 2).unwrap();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let log = Arc::new(Mutex::new(Vec::<(String, String, u32)>::new()));
    let seen = Arc::clone(&log);
    let consumer = builder(&server, &topic)
        .max_attempts(3)
        .build_async(&pool, move |d, payload| {
            let key = String::from_utf8(d.key.clone()).unwrap();
            let body = String::from_utf8(payload).unwrap();
            if body == "panic-at-call" && d.attempt == 1 {
                panic!("before the future");
            }
            let seen = Arc::clone(&seen);
            async move {
                woken_from_another_thread().await;
                seen.lock().push((key, body.clone(), d.attempt));
                if body == "always" || (body == "panic-in-poll" && d.attempt < 3) {
                    panic!("while polled");
                }
                Ok(())
            }
        })
        .unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer.send("a", "panic-in-poll").unwrap();
    producer.send("a", "after").unwrap();
    producer.send("b", "panic-at-call").unwrap();
    producer.send("b", "after").unwrap();
    producer.send("c", "always").unwrap();
    producer.send("c", "after").unwrap();
    wait_for("everything settled", || {
        let s = consumer.stats().unwrap();
        s.acked + s.dead_lettered == 6
    });
    let s = consumer.stats().unwrap();
    assert_eq!(s.dead_lettered, 1, "{s:?}");
    assert_eq!(s.handler_panics, 2 + 1 + 3, "{s:?}");
    assert_eq!(s.retries, 2 + 1 + 2, "{s:?}");
    let log = log.lock();
    let of = |k: &str| -> Vec<(String, u32)> {
        log.iter()
            .filter(|(key, _, _)| key == k)
            .map(|(_, body, attempt)| (body.clone(), *attempt))
            .collect()
    };
    let s = |b: &str, a: u32| (b.to_owned(), a);
    assert_eq!(
        of("a"),
        [
            s("panic-in-poll", 1),
            s("panic-in-poll", 2),
            s("panic-in-poll", 3),
            s("after", 1)
        ]
    );
    assert_eq!(of("b"), [s("panic-at-call", 2), s("after", 1)]);
    assert_eq!(
        of("c"),
        [
            s("always", 1),
            s("always", 2),
            s("always", 3),
            s("after", 1)
        ]
    );
    assert_eq!(pending(&server, &topic), 0);
}

/// Member `first`, whose futures wait at `latch` until it opens.
fn waiting_member(
    server: &RedisServer,
    topic: &Topic,
    pool: &keyway::Pool,
    latch: &Arc<AsyncLatch>,
) -> StreamConsumer {
    let waits = Arc::clone(latch);
    builder(server, topic)
        .member_id("first")
        .build_async(pool, move |_, _| {
            let waits = Arc::clone(&waits);
            async move {
                waits.wait(usize::MAX).await;
                Ok(())
            }
        })
        .unwrap()
}

/// A pool shut down under a waiting future drops it: its entry leaves the window
/// unacknowledged, the consumer's hand-off completes (it does not wait for a future that
/// will never run again), and the next owner runs the entry: nothing is lost.
#[test]
fn an_async_handler_dropped_at_shutdown_hands_its_entry_back() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("async-dropped", 1).unwrap();
    let first_pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let never = Arc::new(AsyncLatch::default());
    let _open = OpenAsyncOnDrop(Arc::clone(&never));
    let first = waiting_member(&server, &topic, &first_pool, &never);
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer.send("k", "1").unwrap();
    producer.send("k", "2").unwrap();
    wait_for("the first entry to wait", || never.arrived() == 1);
    let handed_back = first_pool.shutdown_now();
    drop(handed_back); // the second entry's future, not started: it stays pending too
    first.shutdown(); // returns: the dropped future does not hold the hand-off
    let s = first.stats().unwrap();
    assert_eq!((s.acked, s.dead_lettered), (0, 0));
    assert_eq!(s.shards[0].pending, 2, "both entries stay pending");
    assert_eq!(never.arrived(), 1, "the second entry never started");
    drop(first);

    let second_pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&ran);
    let second = builder(&server, &topic)
        .member_id("second")
        .build_async(&second_pool, move |_, payload| {
            let log = Arc::clone(&log);
            async move {
                woken_from_another_thread().await;
                log.lock().push(String::from_utf8(payload).unwrap());
                Ok(())
            }
        })
        .unwrap();
    wait_for("both acknowledged", || second.stats().unwrap().acked == 2);
    assert_eq!(*ran.lock(), ["1", "2"]);
    assert_eq!(pending(&server, &topic), 0);
}

/// A future still waiting when its member's lease is taken: when it completes its ack is
/// refused (the fence) and counted, and once the lease is free again the next owner runs
/// the entry (and the one after it) at a higher epoch.
#[test]
fn an_async_handler_awaiting_past_its_lease_is_refused_and_rerun() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("async-lease", 1).unwrap();
    let lease = "keyway:{async-lease}:keyway:lease:0";
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let latch = Arc::new(AsyncLatch::default());
    let _open = OpenAsyncOnDrop(Arc::clone(&latch));
    let first = waiting_member(&server, &topic, &pool, &latch);
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer.send("k", "1").unwrap();
    producer.send("k", "2").unwrap();
    wait_for("the handler to wait", || latch.arrived() == 1);
    // Another member takes the lease (as after this one paused past it).
    let stolen = steal(&server, lease);
    wait_for("the loss to be known", || first.owned_shards().is_empty());
    latch.open();
    wait_for("the refusal", || first.stats().unwrap().refused_acks >= 1);
    first.shutdown();
    let s = first.stats().unwrap();
    assert_eq!(s.acked, 0);
    assert_eq!(
        s.shards[0].pending, 2,
        "both stay pending for the next owner"
    );
    assert_eq!(latch.arrived(), 1, "nothing else started after the loss");
    drop(first);

    // The thief's lease ends: the next owner takes the shard at a higher epoch.
    let mut conn = server.connection();
    let _: () = redis::cmd("HSET")
        .arg(lease)
        .arg("owner")
        .arg("")
        .arg("expires")
        .arg("0")
        .query(&mut conn)
        .unwrap();
    let second_pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&ran);
    let second = builder(&server, &topic)
        .member_id("second")
        .build_async(&second_pool, move |d, payload| {
            let log = Arc::clone(&log);
            async move {
                woken_from_another_thread().await;
                log.lock()
                    .push((String::from_utf8(payload).unwrap(), d.epoch));
                Ok(())
            }
        })
        .unwrap();
    wait_for("both acknowledged", || second.stats().unwrap().acked == 2);
    let ran = ran.lock();
    assert_eq!(ran.len(), 2);
    assert_eq!((ran[0].0.as_str(), ran[1].0.as_str()), ("1", "2"));
    assert!(ran.iter().all(|(_, e)| *e > stolen), "{ran:?}");
    assert_eq!(pending(&server, &topic), 0);
}
