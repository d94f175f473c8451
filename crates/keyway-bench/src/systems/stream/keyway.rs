//! `keyway` and `keyway-unordered`: a keyway-redis `StreamConsumer` (one member) on a keyway
//! pool of [`THREADS`] threads, with its defaults but for a 5 ms ack interval (the loops of
//! the hand-written consumers acknowledge each batch as soon as it ran; 5 ms keeps the last
//! acks of a run from waiting the default 20 ms). `keyway` runs each key's messages one at a
//! time in stream order (its lanes); `keyway-unordered` is the same consumer built with
//! `key_order(false)`. Their handler is sync: a message's work sleeps its pool thread.
//!
//! `keyway-async` and `keyway-unordered-async`: the same consumers built with an async
//! handler (`build_async`) on a pool of at most [`ASYNC_THREADS`] threads, whose work awaits
//! a tokio timer (a runtime of one worker thread, given to the consumer, drives the timers):
//! a waiting message holds no thread.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keyway::Pool;
use keyway_redis::stream::{StreamConsumer, Topic};

use super::{StreamSystem, GROUP};
use crate::work::stream::StreamRun;

/// The pool's threads (sync handler).
pub const THREADS: usize = 16;
/// The most threads of the pool of an async handler.
pub const ASYNC_THREADS: usize = 4;
/// The consumer's ack interval (acks are also sent every 256 entries, the default).
pub const ACK_INTERVAL: Duration = Duration::from_millis(5);

/// A consumer with or without key order, with a sync or an async handler.
pub struct KeywayStream<const ORDERED: bool, const ASYNC: bool> {
    url: String,
    topic: Topic,
    run: Arc<StreamRun>,
    pool: Pool,
    /// The async handler's timers.
    timers: Option<tokio::runtime::Runtime>,
    consumer: Option<StreamConsumer>,
}

/// Key-ordered.
pub type KeywayOrdered = KeywayStream<true, false>;
/// Without key order.
pub type KeywayUnordered = KeywayStream<false, false>;
/// Key-ordered, async handler.
pub type KeywayAsync = KeywayStream<true, true>;
/// Without key order, async handler.
pub type KeywayUnorderedAsync = KeywayStream<false, true>;

impl<const ORDERED: bool, const ASYNC: bool> KeywayStream<ORDERED, ASYNC> {
    /// The pool's threads.
    pub const POOL_THREADS: usize = if ASYNC { ASYNC_THREADS } else { THREADS };
}

impl<const ORDERED: bool, const ASYNC: bool> StreamSystem for KeywayStream<ORDERED, ASYNC> {
    const NAME: &'static str = match (ORDERED, ASYNC) {
        (true, false) => "keyway",
        (false, false) => "keyway-unordered",
        (true, true) => "keyway-async",
        (false, true) => "keyway-unordered-async",
    };
    const ORDERED: bool = ORDERED;

    fn setup(url: &str, topic: &Topic, run: Arc<StreamRun>) -> Result<Self, String> {
        let mut pool = Pool::builder().core_threads(Self::POOL_THREADS);
        if ASYNC {
            pool = pool.max_threads(ASYNC_THREADS);
        }
        let pool = pool
            .build()
            .map_err(|e| format!("building the keyway pool: {e}"))?;
        let timers = ASYNC
            .then(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_time()
                    .build()
                    .map_err(|e| format!("building the timers' runtime: {e}"))
            })
            .transpose()?;
        Ok(Self {
            url: url.to_owned(),
            topic: topic.clone(),
            run,
            pool,
            timers,
            consumer: None,
        })
    }

    fn start(&mut self) -> Result<(), String> {
        let (run, acks) = (Arc::clone(&self.run), Arc::clone(&self.run));
        let builder = StreamConsumer::builder(self.url.as_str(), self.topic.clone())
            .group(GROUP)
            .key_order(ORDERED)
            .ack_batch(256, ACK_INTERVAL)
            .on_ack(move |a| acks.acked(a.succeeded.len()));
        let consumer = match &self.timers {
            Some(timers) => builder.runtime(timers.handle().clone()).build_async(
                &self.pool,
                move |_, payload| {
                    let run = Arc::clone(&run);
                    async move { run.handle_async(&payload).await.map_err(Into::into) }
                },
            ),
            None => builder.build(&self.pool, move |_, payload| {
                run.handle(payload).map_err(Into::into)
            }),
        }
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
        drop(self.timers);
        if stats.redeliveries + stats.dead_lettered + stats.retries > 0 {
            return Err(format!(
                "a clean run redelivered {}, retried {} and dead-lettered {} entries",
                stats.redeliveries, stats.retries, stats.dead_lettered
            ));
        }
        Ok(())
    }
}
