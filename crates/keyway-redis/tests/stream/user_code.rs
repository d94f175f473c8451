//! What user code and the pool do to the stream consumer: a panicking `on_ack` hook, a
//! handler's panic payload that panics when dropped, a handler that shuts its own consumer
//! down or drops its last handle, two `shutdown` calls at once, a rate-limited consumer shut
//! down mid-batch, and a pool whose capacity is reached.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::local::*;
use common::*;
use keyway::{ExecutorConfig, LocalCoordinator, Scheduler};
use keyway_redis::stream::{Producer, StreamConsumer, Topic};
use parking_lot::Mutex;

/// An `on_ack` hook that panics once: the panic is contained, and every later batch is still
/// acknowledged (partial batches, which only the ack timer sends).
#[test]
fn a_panicking_ack_hook_stops_no_acks() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("hookpanic", 1).unwrap();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let hook_calls = Arc::clone(&calls);
    let consumer = builder(&server, &topic)
        .ack_batch(1_000, Duration::from_millis(20))
        .on_ack(move |_| {
            if hook_calls.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("the hook fails once");
            }
        })
        .build(&pool, |_, _| Ok(()))
        .unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer.send("k", "first").unwrap();
    wait_for("the first batch and its panicking hook", || {
        calls.load(Ordering::SeqCst) >= 1
    });
    producer
        .send_batch((0..5).map(|i| ("k", i.to_string())))
        .unwrap();
    wait_for("the later entries acknowledged", || {
        pending(&server, &topic) == 0 && consumer.stats().unwrap().acked == 6
    });
    assert!(
        calls.load(Ordering::SeqCst) >= 2,
        "the hook is called again"
    );
}

/// Panics when dropped.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the payload's drop panics too");
    }
}

/// A handler panics with a payload whose `Drop` panics: contained like any handler panic (the
/// entry is retried, then acknowledged), and the key's later entries run.
#[test]
fn a_panic_payload_that_panics_when_dropped_is_contained() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("bomb", 1).unwrap();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let thrown = Arc::new(AtomicBool::new(false));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (thrown_h, ran_h) = (Arc::clone(&thrown), Arc::clone(&ran));
    let consumer = builder(&server, &topic)
        .build(&pool, move |d, p| {
            if !thrown_h.swap(true, Ordering::SeqCst) {
                std::panic::panic_any(Bomb);
            }
            ran_h
                .lock()
                .push((d.attempt, String::from_utf8_lossy(p).into_owned()));
            Ok(())
        })
        .unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer.send("k", "0").unwrap();
    producer.send("k", "1").unwrap();
    wait_for("both entries acknowledged", || {
        consumer.stats().unwrap().acked == 2 && pending(&server, &topic) == 0
    });
    assert_eq!(
        *ran.lock(),
        [(2, "0".to_owned()), (1, "1".to_owned())],
        "the first entry retried once, then the second ran"
    );
    assert_eq!(consumer.stats().unwrap().handler_panics, 1);
}

/// The consumer a handler may reach: a slot filled after `build`.
type Slot = Arc<OnceLock<StreamConsumer>>;

/// A handler calls `shutdown` on its own consumer: the call returns (it cannot wait for the
/// handler that makes it), and the consumer still hands its shard off and leaves.
#[test]
fn a_handler_may_shut_its_own_consumer_down() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("selfstop", 1).unwrap();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let slot: Slot = Arc::default();
    let (tx, returned) = channel();
    let tx = Mutex::new(tx);
    let handler_slot = Arc::clone(&slot);
    let consumer = builder(&server, &topic)
        .member_id("self")
        .build(&pool, move |_, p| {
            if p == b"stop" {
                handler_slot.get().expect("set").shutdown();
                let _ = tx.lock().send(());
            }
            Ok(())
        })
        .unwrap();
    assert!(slot.set(consumer).is_ok());
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "stop")
        .unwrap();
    returned
        .recv_timeout(PATIENCE)
        .expect("shutdown() called by a handler returned");
    let mut conn = server.connection();
    wait_for("the lease released and the member gone", || {
        let owner: Option<String> = redis::cmd("HGET")
            .arg("keyway:{selfstop}:keyway:lease:0")
            .arg("owner")
            .query(&mut conn)
            .unwrap();
        let members: Vec<String> = redis::cmd("ZRANGE")
            .arg("keyway:{selfstop}:keyway:members")
            .arg(0)
            .arg(-1)
            .query(&mut conn)
            .unwrap();
        owner.as_deref() == Some("") && members.is_empty()
    });
    wait_for("the entry acknowledged by the hand-off", || {
        pending(&server, &topic) == 0
    });
}

/// A handler drops the last handle of its consumer: the drop returns, and the consumer hands
/// its shard off.
#[test]
fn a_handler_may_drop_the_last_handle() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("selfdrop", 1).unwrap();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let slot: Arc<Mutex<Option<StreamConsumer>>> = Arc::default();
    let (tx, returned) = channel();
    let tx = Mutex::new(tx);
    let handler_slot = Arc::clone(&slot);
    let consumer = builder(&server, &topic)
        .build(&pool, move |_, _| {
            let last = handler_slot.lock().take();
            drop(last);
            let _ = tx.lock().send(());
            Ok(())
        })
        .unwrap();
    *slot.lock() = Some(consumer);
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "v")
        .unwrap();
    returned
        .recv_timeout(PATIENCE)
        .expect("dropping the consumer in its handler returned");
    let mut conn = server.connection();
    wait_for("the lease released", || {
        let owner: Option<String> = redis::cmd("HGET")
            .arg("keyway:{selfdrop}:keyway:lease:0")
            .arg("owner")
            .query(&mut conn)
            .unwrap();
        owner.as_deref() == Some("")
    });
}

/// Two threads call `shutdown` at once while a handler runs: neither returns before the
/// hand-off is complete (the handler finished, its ack sent, the lease released).
#[test]
fn a_second_shutdown_waits_for_the_first() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("twostops", 1).unwrap();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let held = Held::default();
    let consumer = Arc::new(
        builder(&server, &topic)
            .build(&pool, held.handler())
            .unwrap(),
    );
    let _open = held.opener(); // dropped before the consumer
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "v")
        .unwrap();
    held.wait_started();
    let done = Arc::new(AtomicUsize::new(0));
    let stoppers: Vec<_> = (0..2)
        .map(|_| {
            let (c, done) = (Arc::clone(&consumer), Arc::clone(&done));
            std::thread::spawn(move || {
                c.shutdown();
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    wait_for("the hand-off to begin", || {
        consumer.owned_shards().is_empty()
    });
    let_time_pass(Duration::from_millis(300)); // both callers are in shutdown meanwhile
    assert_eq!(
        done.load(Ordering::SeqCst),
        0,
        "a shutdown returned while the handler still runs"
    );
    held.latch.open();
    for s in stoppers {
        s.join().unwrap();
    }
    assert_eq!(pending(&server, &topic), 0, "the hand-off sent the ack");
}

/// A consumer limited to 4 entries a second is shut down while a read batch of 100 waits for
/// its slots: it takes no slot for the entries the release left pending.
#[test]
fn a_rate_limited_shutdown_takes_no_slots_for_entries_left_pending() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("slowrate", 1).unwrap();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let scheduler = Scheduler::builder(&pool)
        .interval(Duration::from_millis(250))
        .executor("stream", ExecutorConfig::with_tps(4.0))
        .coordinator(LocalCoordinator)
        .build()
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let runs_h = Arc::clone(&runs);
    let consumer = builder(&server, &topic)
        .rate_limit(scheduler.clone(), "stream")
        .build(&pool, move |_, _| {
            runs_h.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send_batch((0..100).map(|i| (format!("k{}", i % 4), i.to_string())))
        .unwrap();
    wait_for("two entries to run", || runs.load(Ordering::SeqCst) >= 2);
    consumer.shutdown();
    let runs = runs.load(Ordering::SeqCst);
    let slots = scheduler.stats("stream").unwrap().ran;
    // At most the slot the reader waited for as the release began, and one for an entry
    // released between its dispatch and its start.
    assert!(
        slots <= runs as u64 + 2,
        "{slots} rate slots taken for {runs} runs"
    );
    assert_eq!(
        pending(&server, &topic),
        100 - runs as u64,
        "the rest left pending"
    );
    assert_eq!(
        consumer.stats().unwrap().delivered,
        runs as u64,
        "entries handed back unstarted are not counted as delivered"
    );
}

/// A pool whose capacity is reached makes the reader wait for room: every entry of the key
/// runs, in order, and nothing stays pending.
#[test]
fn a_full_pool_makes_the_reader_wait() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("fullpool", 1).unwrap();
    let pool = keyway::Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .capacity(2)
        .build()
        .unwrap();
    let order = Arc::new(Mutex::new(HashMap::<String, Vec<u64>>::new()));
    let order_h = Arc::clone(&order);
    let consumer = builder(&server, &topic)
        .window(64)
        .build(&pool, move |d, p| {
            let n: u64 = std::str::from_utf8(p)?.parse()?;
            std::thread::sleep(Duration::from_micros(200)); // work
            order_h
                .lock()
                .entry(String::from_utf8_lossy(&d.key).into_owned())
                .or_default()
                .push(n);
            Ok(())
        })
        .unwrap();
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send_batch((0..60).map(|i| ("one-key", i.to_string())))
        .unwrap();
    wait_for("all 60 run and acknowledged", || {
        order.lock().values().map(Vec::len).sum::<usize>() == 60 && pending(&server, &topic) == 0
    });
    assert_eq!(
        order.lock()["one-key"],
        (0..60).collect::<Vec<u64>>(),
        "in order"
    );
    drop(consumer);
}
