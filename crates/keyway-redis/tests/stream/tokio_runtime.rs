//! Async handlers awaiting tokio's timers against a real `redis-server` (the `tokio` feature):
//! a consumer given a runtime, and one built from inside a runtime, poll their handlers'
//! futures with it entered, so `tokio::time::sleep` works on the pool's threads. Every entry
//! is handled once with no panic, retry or dead letter; no key has two entries in flight, and
//! each key's entries ran in stream order, while all keys' first entries wait at once on a
//! pool of two threads (a future waiting on a tokio timer holds none).

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::kinds::{AsyncLatch, OpenAsyncOnDrop};
use common::local::*;
use common::*;
use keyway_redis::stream::{Producer, StreamConsumer, StreamConsumerBuilder, Topic};
use parking_lot::Mutex;

const KEYS: usize = 12;
const PER_KEY: u64 = 8;

/// A runtime of one worker with its timer on.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap()
}

/// What the handlers saw: entries of a key in flight twice, and each key's sequence numbers
/// in the order they started.
#[derive(Default)]
struct Seen {
    in_flight: Mutex<HashSet<Vec<u8>>>,
    overlaps: AtomicUsize,
    order: Mutex<HashMap<Vec<u8>, Vec<u64>>>,
}

/// Builds a consumer (`build` gets the builder) whose handler awaits tokio timers: the first
/// entry of each key sleeps until all keys' first entries are waiting at once (a tokio
/// timeout bounds that wait), the later ones sleep 1 or 2 ms; then appends `PER_KEY` entries
/// to each of `KEYS` keys, waits until all are acknowledged and checks what was seen.
fn run(
    server: &RedisServer,
    topic: &Topic,
    build: impl FnOnce(StreamConsumerBuilder, &keyway::Pool, Handler) -> StreamConsumer,
) {
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .build()
        .unwrap();
    let all_first = Arc::new(AsyncLatch::default());
    let _open = OpenAsyncOnDrop(Arc::clone(&all_first));
    let seen = Arc::new(Seen::default());
    let (latch, log) = (Arc::clone(&all_first), Arc::clone(&seen));
    let handler: Handler = Arc::new(move |key: Vec<u8>, payload: Vec<u8>| {
        let (latch, log) = (Arc::clone(&latch), Arc::clone(&log));
        Box::pin(async move {
            let seq: u64 = std::str::from_utf8(&payload)?.parse()?;
            if !log.in_flight.lock().insert(key.clone()) {
                log.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            log.order.lock().entry(key.clone()).or_default().push(seq);
            tokio::time::sleep(Duration::from_millis(1 + seq % 2)).await;
            if seq == 0 {
                tokio::time::timeout(Duration::from_secs(30), latch.wait(KEYS)).await?;
            }
            log.in_flight.lock().remove(&key);
            Ok(())
        })
    });
    let consumer = build(builder(server, topic), &pool, handler);
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    for seq in 0..PER_KEY {
        let batch: Vec<(String, String)> = (0..KEYS)
            .map(|k| (format!("key-{k}"), seq.to_string()))
            .collect();
        producer.send_batch(batch).unwrap();
    }
    let total = KEYS as u64 * PER_KEY;
    wait_for("everything acknowledged", || {
        let s = consumer.stats().unwrap();
        s.acked + s.dead_lettered == total
    });
    let stats = consumer.stats().unwrap();
    assert_eq!(
        (
            stats.acked,
            stats.handler_panics,
            stats.retries,
            stats.dead_lettered
        ),
        (total, 0, 0, 0),
        "every entry succeeded at its first attempt"
    );
    assert_eq!(
        all_first.arrived(),
        KEYS,
        "every key's first entry waited at once"
    );
    assert_eq!(
        seen.overlaps.load(Ordering::SeqCst),
        0,
        "a key had two entries in flight"
    );
    let order = seen.order.lock();
    assert_eq!(order.len(), KEYS);
    for (key, seqs) in order.iter() {
        let expected: Vec<u64> = (0..PER_KEY).collect();
        assert_eq!(seqs, &expected, "order of {}", String::from_utf8_lossy(key));
    }
    assert_eq!(pending(server, topic), 0);
    drop(consumer);
}

/// The handler of [`run`]: a key and a payload to a boxed future.
type Handler = Arc<
    dyn Fn(
            Vec<u8>,
            Vec<u8>,
        ) -> std::pin::Pin<
            Box<
                dyn std::future::Future<
                        Output = Result<(), Box<dyn std::error::Error + Send + Sync>>,
                    > + Send,
            >,
        > + Send
        + Sync,
>;

#[test]
fn an_async_handler_awaits_tokio_timers_of_the_runtime_it_was_given() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let rt = runtime();
    let topic = Topic::new("tokio-given", 4).unwrap();
    run(&server, &topic, |b, pool, handler| {
        b.runtime(rt.handle().clone())
            .build_async(pool, move |d, p| handler(d.key, p))
            .unwrap()
    });
}

#[test]
fn an_async_handler_built_inside_a_runtime_awaits_its_timers() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let rt = runtime();
    let topic = Topic::new("tokio-current", 4).unwrap();
    run(&server, &topic, |b, pool, handler| {
        let _inside = rt.enter();
        b.build_async(pool, move |d, p| handler(d.key, p)).unwrap()
    });
}
