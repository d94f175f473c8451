//! When the stream consumer acknowledges: a batch that is not full waits at most the ack
//! interval, gathering the acks of entries that finish meanwhile, and goes out though no
//! more entries come (the shard's reader blocked in a read).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use keyway_redis::stream::{Producer, StreamConsumer, StreamConsumerBuilder, Topic};
use parking_lot::Mutex;

fn builder(server: &RedisServer, topic: &Topic) -> StreamConsumerBuilder {
    StreamConsumer::builder(server.url(), topic.clone())
        .lease(Duration::from_secs(1))
        .heartbeat(Duration::from_millis(100))
        .io_timeout(Duration::from_millis(500))
}

/// The acks of a burst go out once all of it has finished, without more entries coming:
/// the shard's reader is blocked in a read meanwhile (which Redis 7.0 ends only on its
/// 100 ms tick), so the consumer's ack timer sends them.
#[test]
fn the_acks_of_a_finished_burst_go_out_without_more_entries() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("burst", 2).unwrap();
    let pool = keyway::Pool::builder().core_threads(4).build().unwrap();
    let consumer = builder(&server, &topic)
        .ack_batch(1_000, Duration::from_millis(50))
        .build(&pool, |_, _| Ok(()))
        .unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer
        .send_batch((0..10).map(|i| (format!("k{i}"), "x")))
        .unwrap();
    wait_for("the burst acknowledged", || {
        consumer.stats().unwrap().acked == 10
    });
    let mut conn = server.connection();
    for s in 0..topic.shards() {
        let summary: (u64, Option<String>, Option<String>, redis::Value) = redis::cmd("XPENDING")
            .arg(topic.shard_key(s))
            .arg("keyway")
            .query(&mut conn)
            .unwrap();
        assert_eq!(summary.0, 0, "shard {s}: entries pending");
    }
}

/// Entries of a shard that finish one after another, each while the shard has nothing else
/// to do, are acknowledged together within the interval: not one script call each.
#[test]
fn acks_of_entries_finishing_one_after_another_share_a_batch() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("trickle", 1).unwrap();
    let pool = keyway::Pool::builder().core_threads(4).build().unwrap();
    let batches = Arc::new(Mutex::new(Vec::new()));
    let handled = Arc::new(AtomicUsize::new(0));
    let (batches_hook, handled_hook) = (Arc::clone(&batches), Arc::clone(&handled));
    let consumer = builder(&server, &topic)
        .ack_batch(1_000, Duration::from_secs(3))
        .on_ack(move |a| batches_hook.lock().push(a.succeeded.len()))
        .build(&pool, move |_, _| {
            handled_hook.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    wait_for("the shard held", || consumer.owned_shards() == [0]);
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    for i in 0..5 {
        producer.send(format!("k{i}"), "x").unwrap();
        wait_for("the entry handled", || {
            handled.load(Ordering::SeqCst) == i + 1
        });
    }
    wait_for("every entry acknowledged", || {
        consumer.stats().unwrap().acked == 5
    });
    let batches = batches.lock().clone();
    assert_eq!(batches.iter().sum::<usize>(), 5);
    // Five trips before; one now, two if the machine took seconds over the five entries.
    assert!(batches.len() < 5, "one ack batch per entry: {batches:?}");
}
