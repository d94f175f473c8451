//! The stream consumer in one process against a real `redis-server`: the shard rule, the
//! group's whole life (all consumed, in order per key, nothing pending), the window bound
//! pausing only its shard, trimmed pending entries reported, the stall detector, rate-limited
//! consumption, fenced acks of a former owner, and bad settings. The whole life and the
//! fenced acks run for both kinds of handler (sync, and async).

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use std::time::Duration;

use common::journal::{check, Journal, Rules};
use common::kinds::{self, Kind};
use common::local::*;
use common::*;
use keyway::{ExecutorConfig, LocalCoordinator, Scheduler};
use keyway_redis::stream::{shard_of, FailurePolicy, Producer, StreamConsumer, StreamError, Topic};
use parking_lot::Mutex;

#[test]
fn producer_appends_each_key_to_its_shard() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("shardrule", 4).unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    let ids = producer
        .send_batch((0..40).map(|i| (format!("k{}", i % 7), i.to_string())))
        .unwrap();
    assert_eq!(ids.len(), 40);
    producer.send("k1", "last").unwrap();
    let mut conn = server.connection();
    for k in 0..7 {
        let key = format!("k{k}");
        let shard = shard_of(key.as_bytes(), 4);
        let entries: Vec<(String, HashMap<String, String>)> = redis::cmd("XRANGE")
            .arg(topic.shard_key(shard))
            .arg("-")
            .arg("+")
            .query(&mut conn)
            .unwrap();
        let mine: Vec<&str> = entries
            .iter()
            .filter(|(_, f)| f["k"] == key)
            .map(|(_, f)| f["p"].as_str())
            .collect();
        let expected: Vec<String> = (0..40)
            .filter(|i| i % 7 == k)
            .map(|i| i.to_string())
            .collect();
        assert_eq!(
            &mine[..expected.len()],
            expected,
            "key {key}: in order, in its shard"
        );
    }
}

/// Two consumers in one process share the shards; every message runs once, in order per
/// key; nothing stays pending; the stats see the owners.
#[test]
fn two_consumers_consume_everything_in_order_per_key() {
    consume_everything_in_order_per_key(Kind::Sync);
}

#[test]
fn two_async_consumers_consume_everything_in_order_per_key() {
    consume_everything_in_order_per_key(Kind::Async);
}

fn consume_everything_in_order_per_key(kind: Kind) {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("basic", 6).unwrap();
    let dir = std::env::temp_dir().join(format!(
        "keyway-stream-basic-{kind:?}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let pool = keyway::Pool::builder().core_threads(4).build().unwrap();
    let mut consumers = Vec::new();
    let mut journals = Vec::new();
    for m in ["a", "b"] {
        let path = dir.join(format!("{m}.log"));
        let journal = Arc::new(Journal::create(&path));
        journals.push(path);
        let acks = Arc::clone(&journal);
        let b = builder(&server, &topic)
            .member_id(m)
            .window(20)
            .on_ack(move |a| acks.acked(a));
        let c = kinds::build(b, &pool, kind, move |d, payload| {
            let seq: u64 = std::str::from_utf8(payload)?.parse()?;
            journal.start(d, seq);
            std::thread::sleep(Duration::from_micros(seq % 300));
            journal.finish(d, seq, "ok");
            Ok(())
        })
        .unwrap();
        consumers.push(c);
    }
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    let mut produced: HashMap<String, u64> = HashMap::new();
    for round in 0..10 {
        let batch: Vec<(String, String)> = (0..100)
            .map(|i| {
                let key = format!("k{}", (round * 100 + i) % 12);
                let seq = produced.entry(key.clone()).or_insert(0);
                *seq += 1;
                (key, (*seq - 1).to_string())
            })
            .collect();
        producer.send_batch(batch).unwrap();
    }
    wait_for("everything acknowledged", || {
        consumers
            .iter()
            .map(|c| c.stats().unwrap().acked)
            .sum::<u64>()
            == 1_000
    });
    assert_eq!(pending(&server, &topic), 0);
    let stats = consumers[0].stats().unwrap();
    assert_eq!(stats.shards.len(), 6);
    for s in &stats.shards {
        assert!(matches!(s.owner.as_deref(), Some("a" | "b")), "{s:?}");
        assert!(s.epoch > 0);
        assert_eq!((s.pending, s.lag), (0, Some(0)));
    }
    let owned: usize = consumers.iter().map(|c| c.owned_shards().len()).sum();
    assert_eq!(owned, 6, "each shard has one owner");
    drop(consumers);
    let report = check(
        &journals,
        &produced,
        &Rules {
            clean: true,
            ..Rules::default()
        },
    );
    assert_eq!(report.starts, 1_000, "nothing ran twice");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A full window pauses its shard only: with the handlers of one shard's keys blocked, that
/// shard has exactly `window` entries delivered and pending, and the other shard goes on.
#[test]
fn a_full_window_pauses_only_its_shard() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("window", 2).unwrap();
    let blocked_keys = keys_in(0, 2, 20);
    let free_keys = keys_in(1, 2, 5);
    let latch = Arc::new(Latch::default());
    let latch_handler = Arc::clone(&latch);
    let ran0 = Arc::new(AtomicUsize::new(0));
    let ran0_handler = Arc::clone(&ran0);
    let free_done = Arc::new(AtomicUsize::new(0));
    let free_handler = Arc::clone(&free_done);
    let pool = keyway::Pool::builder().core_threads(8).build().unwrap();
    let consumer = builder(&server, &topic)
        .window(5)
        .build(&pool, move |d, _| {
            if d.shard == 0 {
                latch_handler.wait();
                ran0_handler.fetch_add(1, Ordering::SeqCst);
            } else {
                free_handler.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        })
        .unwrap();
    let _open = OpenOnDrop(Arc::clone(&latch));
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer
        .send_batch(blocked_keys.iter().map(|k| (k.as_str(), "x")))
        .unwrap();
    wait_for("shard 0 to fill its window", || {
        let s = consumer.stats().unwrap();
        s.shards[0].window == 5 && s.shards[0].pending == 5
    });
    producer
        .send_batch(free_keys.iter().map(|k| (k.as_str(), "y")))
        .unwrap();
    wait_for("shard 1 to go on", || free_done.load(Ordering::SeqCst) == 5);
    let s = consumer.stats().unwrap();
    assert_eq!(
        s.shards[0].pending, 5,
        "never more than the window delivered"
    );
    assert_eq!(s.shards[0].lag, Some(15));
    latch.open();
    wait_for("shard 0 to drain", || {
        pending(&server, &topic) == 0 && ran0.load(Ordering::SeqCst) == 20
    });
    assert_eq!(consumer.stats().unwrap().shards[0].lag, Some(0));
}

/// Without key order, one key's entries run in parallel: four entries of one key are all
/// running at once (with key order the second would wait for the first, which waits for the
/// latch), then all are acknowledged and nothing stays pending.
#[test]
fn without_key_order_a_keys_entries_run_in_parallel() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("unordered", 2).unwrap();
    let latch = Arc::new(Latch::default());
    let latch_handler = Arc::clone(&latch);
    let running = Arc::new(AtomicUsize::new(0));
    let running_handler = Arc::clone(&running);
    let pool = keyway::Pool::builder().core_threads(4).build().unwrap();
    let consumer = builder(&server, &topic)
        .key_order(false)
        .build(&pool, move |_, _| {
            running_handler.fetch_add(1, Ordering::SeqCst);
            latch_handler.wait();
            Ok(())
        })
        .unwrap();
    let _open = OpenOnDrop(Arc::clone(&latch));
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer
        .send_batch((0..4).map(|i| ("one-key", i.to_string())))
        .unwrap();
    wait_for("the key's four entries to run at once", || {
        running.load(Ordering::SeqCst) == 4
    });
    latch.open();
    wait_for("everything acknowledged", || {
        consumer.stats().unwrap().acked == 4
    });
    assert_eq!(pending(&server, &topic), 0);
}

/// Entries trimmed from the stream while pending are reported when a new owner replays the
/// pending list, not skipped silently.
#[test]
fn entries_trimmed_while_pending_are_reported() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("trim", 1).unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    let ids = producer
        .send_batch((0..10).map(|i| ("k", i.to_string())))
        .unwrap();
    // A former member read them all and died; then the first three were deleted.
    let mut conn = server.connection();
    let stream = topic.shard_key(0);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&stream)
        .arg("keyway")
        .arg("0")
        .query(&mut conn)
        .unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("keyway")
        .arg("ghost")
        .arg("STREAMS")
        .arg(&stream)
        .arg(">")
        .query(&mut conn)
        .unwrap();
    let _: i64 = redis::cmd("XDEL")
        .arg(&stream)
        .arg(ids[0].to_string())
        .arg(ids[1].to_string())
        .arg(ids[2].to_string())
        .query(&mut conn)
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_handler = Arc::clone(&seen);
    let pool = keyway::Pool::new().unwrap();
    let consumer = builder(&server, &topic)
        .build(&pool, move |d, p| {
            seen_handler
                .lock()
                .push((d.attempt, String::from_utf8_lossy(p).into_owned()));
            Ok(())
        })
        .unwrap();
    wait_for("the rest to be replayed", || seen.lock().len() == 7);
    let stats = consumer.stats().unwrap();
    assert_eq!(stats.trimmed_while_pending, 3);
    assert_eq!(stats.redeliveries, 7, "claimed from the former member");
    let seen = seen.lock().clone();
    let expected: Vec<(u32, String)> = (3..10).map(|i| (2, i.to_string())).collect();
    assert_eq!(seen, expected, "replayed in order, second delivery each");
    wait_for("acks", || pending(&server, &topic) == 0);
}

/// A shard with entries in its window and no progress is reported as stalled.
#[test]
fn the_stall_detector_reports_a_stuck_shard() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("stall", 1).unwrap();
    let gate = Arc::new(Barrier::new(2));
    let gate_handler = Arc::clone(&gate);
    let pool = keyway::Pool::new().unwrap();
    let consumer = builder(&server, &topic)
        .stall_after(Duration::from_millis(300))
        .build(&pool, move |_, _| {
            gate_handler.wait();
            Ok(())
        })
        .unwrap();
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "stuck")
        .unwrap();
    wait_for("a stall report", || consumer.stats().unwrap().stalls == 1);
    gate.wait();
    // The local count moves after Redis acked: wait for the count itself.
    wait_for("the ack counted", || consumer.stats().unwrap().acked == 1);
    assert_eq!(pending(&server, &topic), 0);
    assert_eq!(
        consumer.stats().unwrap().stalls,
        1,
        "one stall, reported once"
    );
}

/// Rate-limited consumption: every entry takes a slot of the scheduler's executor before it
/// runs, and still runs in order per key.
#[test]
fn rate_limited_consumption_takes_a_slot_per_entry() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("rate", 2).unwrap();
    let pool = keyway::Pool::new().unwrap();
    let scheduler = Scheduler::builder(&pool)
        .interval(Duration::from_millis(20))
        .executor("stream", ExecutorConfig::with_tps(2_000.0))
        .coordinator(LocalCoordinator)
        .build()
        .unwrap();
    let order = Arc::new(Mutex::new(HashMap::<String, Vec<u32>>::new()));
    let order_handler = Arc::clone(&order);
    let consumer = builder(&server, &topic)
        .rate_limit(scheduler.clone(), "stream")
        .build(&pool, move |d, p| {
            let n: u32 = std::str::from_utf8(p)?.parse()?;
            order_handler
                .lock()
                .entry(String::from_utf8_lossy(&d.key).into_owned())
                .or_default()
                .push(n);
            Ok(())
        })
        .unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer
        .send_batch((0..60).map(|i| (format!("k{}", i % 3), i.to_string())))
        .unwrap();
    wait_for("all 60", || {
        order.lock().values().map(Vec::len).sum::<usize>() == 60
    });
    for (k, seqs) in order.lock().iter() {
        let mut sorted = seqs.clone();
        sorted.sort();
        assert_eq!(seqs, &sorted, "key {k} in order");
    }
    assert!(scheduler.stats("stream").unwrap().ran >= 60);
    drop(consumer);
}

/// A shard whose lease another member holds is not consumed; once released, it is acquired
/// at a higher epoch (not counted as a takeover).
#[test]
fn a_shard_leased_by_another_member_is_left_alone() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("fence", 1).unwrap();
    let mut conn = server.connection();
    // Someone else holds the lease at a higher epoch.
    let lease = "keyway:{fence}:keyway:lease:0";
    let _: () = redis::cmd("HSET")
        .arg(lease)
        .arg("owner")
        .arg("other")
        .arg("epoch")
        .arg("99999999999999")
        .arg("expires")
        .arg("99999999999999999")
        .query(&mut conn)
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let runs_handler = Arc::clone(&runs);
    let pool = keyway::Pool::new().unwrap();
    let consumer = builder(&server, &topic)
        .build(&pool, move |_, _| {
            runs_handler.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "v")
        .unwrap();
    let_time_pass(Duration::from_millis(300));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "the lease is another member's"
    );
    assert!(consumer.owned_shards().is_empty());
    let stats = consumer.stats().unwrap();
    assert_eq!(stats.shards[0].owner.as_deref(), Some("other"));
    // The holder releases: the consumer takes the shard at a higher epoch and runs it.
    let _: () = redis::cmd("HSET")
        .arg(lease)
        .arg("owner")
        .arg("")
        .query(&mut conn)
        .unwrap();
    wait_for("the entry to run", || runs.load(Ordering::SeqCst) == 1);
    wait_for("its ack", || pending(&server, &topic) == 0);
    assert!(consumer.stats().unwrap().shards[0].epoch > 99999999999999);
    assert_eq!(
        consumer.stats().unwrap().takeovers,
        0,
        "released, not taken over"
    );
}

#[test]
fn bad_settings_are_typed_errors() {
    let pool = keyway::Pool::new().unwrap();
    let topic = Topic::new("t", 2).unwrap();
    let b = || StreamConsumer::builder("redis://127.0.0.1:1", topic.clone());
    let ok = |_: &keyway_redis::stream::Delivery, _: &[u8]| Ok(());
    assert!(matches!(
        Topic::new("", 1),
        Err(StreamError::InvalidName(_))
    ));
    assert!(matches!(
        Topic::new("a{b}", 1),
        Err(StreamError::InvalidName(_))
    ));
    assert!(matches!(
        Topic::new("t", 5000),
        Err(StreamError::InvalidShards(5000))
    ));
    assert!(matches!(
        b().window(0).build(&pool, ok),
        Err(StreamError::InvalidConfig(_))
    ));
    assert!(matches!(
        b().max_attempts(0).build(&pool, ok),
        Err(StreamError::InvalidConfig(_))
    ));
    assert!(matches!(
        b().group("").build(&pool, ok),
        Err(StreamError::InvalidConfig(_))
    ));
    assert!(matches!(
        b().lease(Duration::from_secs(1))
            .heartbeat(Duration::from_millis(500))
            .build(&pool, ok),
        Err(StreamError::InvalidDuration {
            name: "heartbeat",
            ..
        })
    ));
    assert!(matches!(
        b().lease(Duration::MAX).build(&pool, ok),
        Err(StreamError::InvalidDuration { name: "lease", .. })
    ));
    assert!(matches!(
        b().backoff(Duration::from_secs(2), Duration::from_secs(1))
            .build(&pool, ok),
        Err(StreamError::InvalidDuration {
            name: "backoff",
            ..
        })
    ));
    assert!(matches!(
        StreamConsumer::builder("http://x", topic.clone()).build(&pool, ok),
        Err(StreamError::InvalidUrl(_))
    ));
    assert!(matches!(
        b().window(usize::MAX).build(&pool, ok),
        Err(StreamError::InvalidConfig(_))
    ));
    assert!(matches!(
        b().max_in_flight(0).build(&pool, ok),
        Err(StreamError::InvalidLimit {
            name: "max_in_flight",
            value: 0,
            ..
        })
    ));
    assert!(matches!(
        b().max_held(0).build(&pool, ok),
        Err(StreamError::InvalidLimit {
            name: "max_held",
            ..
        })
    ));
    assert!(matches!(
        b().failure_policy(FailurePolicy::Quarantine)
            .key_order(false)
            .build(&pool, ok),
        Err(StreamError::InvalidConfig(_))
    ));
    // Nothing listens on port 1: the settings passed, connecting failed. usize::MAX is no
    // cap (in flight) and no limit (held).
    assert!(matches!(b().build(&pool, ok), Err(StreamError::Redis(_))));
    assert!(matches!(
        b().max_in_flight(usize::MAX)
            .max_held(usize::MAX)
            .failure_policy(FailurePolicy::Quarantine)
            .build(&pool, ok),
        Err(StreamError::Redis(_))
    ));
    assert!(matches!(
        b().max_in_flight(1).max_held(1).build(&pool, ok),
        Err(StreamError::Redis(_))
    ));
}

/// A member whose lease was taken while its handler ran: its ack is refused by the fence and
/// counted, the entry stays pending for the new owner, and it starts nothing more there.
#[test]
fn acks_of_a_former_owner_are_refused() {
    former_owners_acks_are_refused(Kind::Sync);
}

#[test]
fn acks_of_a_former_owner_are_refused_async() {
    former_owners_acks_are_refused(Kind::Async);
}

fn former_owners_acks_are_refused(kind: Kind) {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("refused", 1).unwrap();
    let latch = Arc::new(Latch::default());
    let latch_handler = Arc::clone(&latch);
    let runs = Arc::new(AtomicUsize::new(0));
    let runs_handler = Arc::clone(&runs);
    let pool = keyway::Pool::new().unwrap();
    let consumer = kinds::build(builder(&server, &topic), &pool, kind, move |_, _| {
        runs_handler.fetch_add(1, Ordering::SeqCst);
        latch_handler.wait();
        Ok(())
    })
    .unwrap();
    let _open = OpenOnDrop(Arc::clone(&latch));
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer.send("k", "1").unwrap();
    producer.send("k", "2").unwrap();
    wait_for("the handler to start", || runs.load(Ordering::SeqCst) == 1);
    // Another member takes the lease (as after this one paused past it).
    steal(&server, "keyway:{refused}:keyway:lease:0");
    latch.open();
    wait_for("the refusal", || {
        consumer.stats().unwrap().refused_acks >= 1
    });
    wait_for("the loss to be known", || {
        consumer.owned_shards().is_empty()
    });
    let s = consumer.stats().unwrap();
    assert!(s.leases_lost >= 1);
    assert_eq!(s.acked, 0);
    let ran = runs.load(Ordering::SeqCst);
    assert_eq!(
        s.shards[0].pending, 2,
        "both stay pending for the new owner"
    );
    producer.send("k", "3").unwrap();
    let_time_pass(Duration::from_millis(300));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        ran,
        "nothing new started after the loss"
    );
}

/// Shutting down while Redis is unreachable ends (within about a lease) instead of waiting
/// for Redis forever.
#[test]
fn shutdown_ends_while_redis_is_down() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("down", 2).unwrap();
    let pool = keyway::Pool::new().unwrap();
    let consumer = builder(&server, &topic)
        .build(&pool, |_, _| Ok(()))
        .unwrap();
    wait_for("the shards", || consumer.owned_shards().len() == 2);
    server.kill();
    consumer.shutdown(); // returns: the test would hang otherwise
    assert!(consumer.owned_shards().is_empty());
}
