//! `keyway` and `keyway-unordered`: a keyway-redis `StreamConsumer` (one member) on a keyway
//! pool of [`THREADS`] threads, with its defaults but for a 5 ms ack interval (the loops of
//! the hand-written consumers acknowledge each batch as soon as it ran; 5 ms keeps the last
//! acks of a run from waiting the default 20 ms). `keyway` runs each key's messages one at a
//! time in stream order (its lanes); `keyway-unordered` is the same consumer built with
//! `key_order(false)`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keyway::Pool;
use keyway_redis::stream::{StreamConsumer, Topic};

use super::{StreamSystem, GROUP};
use crate::work::stream::StreamRun;

/// The pool's threads.
pub const THREADS: usize = 16;
/// The consumer's ack interval (acks are also sent every 256 entries, the default).
pub const ACK_INTERVAL: Duration = Duration::from_millis(5);

/// A consumer with or without key order.
pub struct KeywayStream<const ORDERED: bool> {
    url: String,
    topic: Topic,
    run: Arc<StreamRun>,
    pool: Pool,
    consumer: Option<StreamConsumer>,
}

/// Key-ordered.
pub type KeywayOrdered = KeywayStream<true>;
/// Without key order.
pub type KeywayUnordered = KeywayStream<false>;

impl<const ORDERED: bool> StreamSystem for KeywayStream<ORDERED> {
    const NAME: &'static str = if ORDERED {
        "keyway"
    } else {
        "keyway-unordered"
    };
    const ORDERED: bool = ORDERED;

    fn setup(url: &str, topic: &Topic, run: Arc<StreamRun>) -> Result<Self, String> {
        let pool = Pool::builder()
            .core_threads(THREADS)
            .build()
            .map_err(|e| format!("building the keyway pool: {e}"))?;
        Ok(Self {
            url: url.to_owned(),
            topic: topic.clone(),
            run,
            pool,
            consumer: None,
        })
    }

    fn start(&mut self) -> Result<(), String> {
        let (run, acks) = (Arc::clone(&self.run), Arc::clone(&self.run));
        let consumer = StreamConsumer::builder(self.url.as_str(), self.topic.clone())
            .group(GROUP)
            .key_order(ORDERED)
            .ack_batch(256, ACK_INTERVAL)
            .on_ack(move |a| acks.acked(a.succeeded.len()))
            .build(&self.pool, move |_, payload| {
                run.handle(payload).map_err(Into::into)
            })
            .map_err(|e| format!("building the consumer: {e}"))?;
        self.consumer = Some(consumer);
        Ok(())
    }

    fn wait_consuming(&self) -> Result<(), String> {
        let consumer = self.consumer.as_ref().ok_or("not started")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while consumer.owned_shards().len() < self.topic.shards() as usize {
            if Instant::now() > deadline {
                return Err("the consumer did not take its shards within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    fn teardown(self) -> Result<(), String> {
        let Some(consumer) = self.consumer else {
            return Ok(());
        };
        consumer.shutdown();
        let stats = consumer.stats().map_err(|e| e.to_string())?;
        drop(consumer);
        self.pool.shutdown();
        if stats.redeliveries + stats.dead_lettered + stats.retries > 0 {
            return Err(format!(
                "a clean run redelivered {}, retried {} and dead-lettered {} entries",
                stats.redeliveries, stats.retries, stats.dead_lettered
            ));
        }
        Ok(())
    }
}
