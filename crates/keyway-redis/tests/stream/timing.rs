//! What a consumer reports about time: each entry its handler handled (succeeded on) counts
//! once in the append-to-handled histogram, retries and the wait inside the handler included;
//! an entry that never succeeds does not count.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use keyway_redis::stream::{Producer, StreamConsumer, Topic};

/// How long the slow entry's handler holds it.
const SLOW: Duration = Duration::from_millis(60);

#[test]
fn each_handled_entry_counts_once_from_its_append_to_its_success() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("handled", 1).unwrap();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let flaky_tries = Arc::new(AtomicUsize::new(0));
    let tries = Arc::clone(&flaky_tries);
    let consumer = StreamConsumer::builder(server.url(), topic.clone())
        .lease(Duration::from_secs(1))
        .heartbeat(Duration::from_millis(100))
        .max_attempts(2)
        .backoff(Duration::from_millis(1), Duration::from_millis(2))
        .build(&pool, move |_, payload| match payload {
            b"poison" => Err("never handled".into()),
            b"flaky" if tries.fetch_add(1, Ordering::SeqCst) == 0 => Err("first try".into()),
            b"slow" => {
                std::thread::sleep(SLOW); // the work whose time the histogram must show
                Ok(())
            }
            _ => Ok(()),
        })
        .unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer
        .send_batch([
            ("a", "fine"),
            ("b", "flaky"),
            ("c", "poison"),
            ("d", "slow"),
        ])
        .unwrap();
    wait_for("three acked and one dead letter", || {
        let s = consumer.stats().unwrap();
        s.acked == 3 && s.dead_lettered == 1
    });
    let s = consumer.stats().unwrap();
    let h = &s.append_to_handled;
    assert_eq!(
        h.count(),
        3,
        "the fine, the flaky (once) and the slow entry"
    );
    assert_eq!(flaky_tries.load(Ordering::SeqCst), 2);
    // The slow entry was handled at least `SLOW` after its append (its id's milliseconds are
    // rounded down, which only adds).
    assert!(h.quantile(1.0).unwrap() >= SLOW, "{h:?}");
    assert!(h.sum() >= SLOW);
}
