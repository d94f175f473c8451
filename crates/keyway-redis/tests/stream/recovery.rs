//! How the stream consumer recovers its own pending entries after a Redis error, with no lease
//! change: a dropped reader connection reruns nothing acknowledged and spends no delivery
//! counts, a short I/O timeout does not make the idle reader reconnect, entries trimmed while
//! pending are reported at a clean release, and Redis losing its data while a handler runs
//! stops no other key.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::journal::{check, Journal, Rules};
use common::local::*;
use common::*;
use keyway_redis::stream::{Producer, Topic};

/// The reader's connection drops again and again (killed 32 times) while a shard is
/// consumed: no lease moves, so nothing acknowledged runs again, nothing runs twice and
/// every key runs in order.
#[test]
fn dropped_connections_rerun_nothing() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("drops", 1).unwrap();
    let dir = std::env::temp_dir().join(format!("keyway-stream-drops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.log");
    let journal = Arc::new(Journal::create(&path));
    let acks = Arc::clone(&journal);
    let pool = keyway::Pool::builder().core_threads(4).build().unwrap();
    // A wide window and acks that wait for the timer: many finished entries wait for their
    // ack when the connection drops.
    let consumer = builder(&server, &topic)
        .window(256)
        .ack_batch(1_000, Duration::from_millis(20))
        .on_ack(move |a| acks.acked(a))
        .build(&pool, move |d, payload| {
            let seq: u64 = std::str::from_utf8(payload)?.parse()?;
            journal.start(d, seq);
            std::thread::sleep(Duration::from_micros(1_000 + seq % 1_000)); // work
            journal.finish(d, seq, "ok");
            Ok(())
        })
        .unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    let mut produced: HashMap<String, u64> = HashMap::new();
    let batch: Vec<(String, String)> = (0..6_000)
        .map(|i| {
            let key = format!("k{}", i % 16);
            let seq = produced.entry(key.clone()).or_insert(0);
            *seq += 1;
            (key, (*seq - 1).to_string())
        })
        .collect();
    producer.send_batch(batch).unwrap();
    let mut kills = 0;
    while kills < 32 {
        let_time_pass(Duration::from_millis(50)); // the reader reconnects meanwhile
        kills += kill_readers(&server);
    }
    wait_for("everything acknowledged", || {
        pending(&server, &topic) == 0 && consumer.stats().map(|s| s.acked).unwrap_or(0) >= 6_000
    });
    drop(consumer);
    let report = check(
        &[path],
        &produced,
        &Rules {
            clean: true,
            ..Rules::default()
        },
    );
    assert_eq!(report.starts, 6_000, "nothing ran twice");
    let _ = std::fs::remove_dir_all(&dir);
}

/// While a handler runs, the member's connections drop three times: the entry's delivery
/// count in Redis stays 1 (a new owner would otherwise count attempts that never happened).
#[test]
fn reconnects_spend_no_delivery_counts() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("counts", 1).unwrap();
    let held = Held::default();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let consumer = builder(&server, &topic)
        .build(&pool, held.handler())
        .unwrap();
    let _open = held.opener(); // dropped before the consumer
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "v")
        .unwrap();
    held.wait_started();
    let before = connections_received(&server);
    for _ in 0..3 {
        kill_readers(&server);
        let_time_pass(Duration::from_millis(300)); // the reader reconnects and reads again
    }
    assert!(
        connections_received(&server) >= before + 3,
        "the member reconnected"
    );
    let pending = pending_entries(&server, &topic, 0);
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].2, 1, "delivery count after three reconnects");
    held.latch.open();
    wait_for("the ack", || consumer.stats().unwrap().acked == 1);
}

/// An I/O timeout shorter than the reader's wait for new entries: the idle reader does not
/// reconnect in a loop, and a running entry's delivery count stays 1.
#[test]
fn a_short_io_timeout_keeps_the_idle_reader_connected() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("shortio", 1).unwrap();
    let held = Held::default();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let consumer = builder(&server, &topic)
        .ack_batch(16, Duration::from_millis(200))
        .io_timeout(Duration::from_millis(50))
        .build(&pool, held.handler())
        .unwrap();
    let _open = held.opener(); // dropped before the consumer
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "v")
        .unwrap();
    held.wait_started();
    let before = connections_received(&server);
    let_time_pass(Duration::from_secs(1));
    let new = connections_received(&server) - before;
    // Before: the reader timed out and reconnected about ten times a second.
    assert!(new <= 5, "{new} connections in a second of idling");
    let pending = pending_entries(&server, &topic, 0);
    assert_eq!(pending[0].2, 1, "delivery count of the running entry");
    held.latch.open();
    wait_for("the ack", || consumer.stats().unwrap().acked == 1);
}

/// Entries trimmed from the stream while pending, then a clean release: the releasing member
/// reports them (they cannot be given back).
#[test]
fn entries_trimmed_while_pending_are_reported_at_a_release() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("trimrelease", 1).unwrap();
    let held = Held::default();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let consumer = Arc::new(
        builder(&server, &topic)
            .build(&pool, held.handler())
            .unwrap(),
    );
    let _open = held.opener(); // dropped before the consumer
    let ids = Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send_batch((0..10).map(|i| ("k", i.to_string())))
        .unwrap();
    held.wait_started();
    wait_for("all ten delivered", || pending(&server, &topic) == 10);
    let _: u64 = redis::cmd("XDEL")
        .arg(topic.shard_key(0))
        .arg(ids[4].to_string())
        .arg(ids[5].to_string())
        .arg(ids[6].to_string())
        .query(&mut server.connection())
        .unwrap();
    let stopper = {
        let c = Arc::clone(&consumer);
        std::thread::spawn(move || c.shutdown())
    };
    wait_for("the hand-off to begin", || {
        consumer.owned_shards().is_empty()
    });
    held.latch.open();
    stopper.join().unwrap();
    let s = consumer.stats().unwrap();
    assert_eq!(s.trimmed_while_pending, 3, "{s:?}");
    let left: Vec<String> = pending_entries(&server, &topic, 0)
        .into_iter()
        .map(|(id, _, _)| id)
        .collect();
    let expected: Vec<String> = [1, 2, 3, 7, 8, 9]
        .iter()
        .map(|&i| ids[i].to_string())
        .collect();
    assert_eq!(left, expected, "the unstarted entries still pending");
}

/// Redis loses its data while one handler runs (blocked): the member acquires the shard
/// again at once, and entries of other keys produced after run while that handler still runs.
#[test]
fn losing_redis_data_while_a_handler_runs_stops_no_other_key() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("dataloss", 1).unwrap();
    let held = Held::default();
    let others = Arc::new(AtomicUsize::new(0));
    let (held_h, others_h) = (held.clone(), Arc::clone(&others));
    let pool = keyway::Pool::builder().core_threads(4).build().unwrap();
    let consumer = builder(&server, &topic)
        .stall_after(Duration::from_millis(500))
        .build(&pool, move |d, _| {
            if d.key == b"blocked" {
                held_h.run();
            } else {
                others_h.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        })
        .unwrap();
    let _open = held.opener(); // dropped before the consumer
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("blocked", "v")
        .unwrap();
    held.wait_started();
    server.restart(); // empty
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer
        .send_batch((0..5).map(|i| (format!("other{i}"), "x")))
        .unwrap();
    wait_for("the other keys to run", || {
        others.load(Ordering::SeqCst) == 5
    });
    let s = consumer.stats().unwrap();
    assert!(s.groups_recreated >= 1, "{s:?}");
    held.latch.open();
    wait_for("nothing pending", || pending(&server, &topic) == 0);
}
