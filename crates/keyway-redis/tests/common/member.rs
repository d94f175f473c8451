//! A stream member process of the multi-process tests: a consumer with the test settings
//! whose handler journals every start, finish and ack, claims its shard in a fencing sink
//! before it starts and writes to it as it ends, and fails on a poison message.
//! `KW_STREAM_HANDLER=async` in the tests' environment (which the members inherit) makes it
//! an async handler.

use std::cell::RefCell;
use std::io::BufRead;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keyway_redis::stream::{Delivery, HandlerError, StreamConsumer, StreamStats};

use super::cluster::*;
use super::journal::Journal;

/// The fencing sink: accepts a write (a run's claim as it starts, or its result as it ends)
/// for a shard only if its epoch is not below the highest epoch written for that shard.
const SINK: &str = r"
local max = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or 0)
local e = tonumber(ARGV[2])
if e < max then return 0 end
if e > max then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1
";

/// How long a handler run lasts while its member's slow flag is set, long enough that a
/// test that sees such a run start can pause the member in the middle of it.
pub const SLOW_RUN: Duration = Duration::from_secs(5);

/// The slow flag of the member writing `journal`: while this file exists, its handler runs
/// last [`SLOW_RUN`].
pub fn slow_flag(journal: &std::path::Path) -> std::path::PathBuf {
    journal.with_extension("slow")
}

thread_local! {
    static SINK_CONN: RefCell<Option<redis::Connection>> = const { RefCell::new(None) };
}

fn sink_write(url: &str, ns: &str, d: &Delivery) -> Result<bool, HandlerError> {
    let started = Instant::now();
    loop {
        let result = SINK_CONN.with(|c| -> redis::RedisResult<i64> {
            let mut c = c.borrow_mut();
            if c.is_none() {
                let conn = redis::Client::open(url)?
                    .get_connection_with_timeout(Duration::from_millis(300))?;
                conn.set_read_timeout(Some(Duration::from_millis(300)))?;
                *c = Some(conn);
            }
            let r = redis::Script::new(SINK)
                .key(format!("{ns}:sink"))
                .arg(d.shard)
                .arg(d.epoch)
                .invoke(c.as_mut().unwrap());
            if r.is_err() {
                *c = None;
            }
            r
        });
        match result {
            Ok(n) => return Ok(n == 1),
            Err(e) if started.elapsed() > Duration::from_secs(20) => return Err(e.into()),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// A member process: the test binary run again as its ignored `stream_member` test, which
/// calls this.
pub fn run() {
    let Ok(url) = std::env::var(ENV_URL) else {
        return;
    };
    let ns = std::env::var(ENV_NS).unwrap();
    if let Ok(filter) = std::env::var("KW_STREAM_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let id = std::env::var(ENV_ID).unwrap();
    let journal_path = std::path::PathBuf::from(std::env::var(ENV_JOURNAL).unwrap());
    let journal = Arc::new(Journal::create(&journal_path));
    let slow = slow_flag(&journal_path);
    let poison: Option<(String, u64)> = std::env::var(ENV_POISON).ok().and_then(|p| {
        let (k, s) = p.split_once(':')?;
        Some((k.to_owned(), s.parse().ok()?))
    });
    let mut pool = keyway::Pool::builder().core_threads(8);
    if let Some(capacity) = std::env::var(ENV_CAPACITY)
        .ok()
        .and_then(|c| c.parse().ok())
    {
        pool = pool.max_threads(8).capacity(capacity);
    }
    let pool = pool.build().unwrap();
    let acks = Arc::clone(&journal);
    let (sink_url, sink_ns) = (url.clone(), ns.clone());
    let builder = StreamConsumer::builder(url.as_str(), topic(&ns))
        .member_id(id)
        .window(WINDOW)
        .lease(LEASE)
        .heartbeat(LEASE / 5)
        .max_attempts(5)
        .backoff(Duration::from_millis(10), Duration::from_millis(40))
        .ack_batch(16, Duration::from_millis(10))
        .io_timeout(Duration::from_millis(300))
        .stall_after(Duration::from_secs(3))
        .on_ack(move |a| acks.acked(a));
    // KW_STREAM_HANDLER=async runs the fault tests with async handlers.
    let consumer = super::kinds::build(
        builder,
        &pool,
        super::kinds::Kind::from_env(),
        move |d, payload| {
            let seq: u64 = std::str::from_utf8(payload)?.parse()?;
            // The run claims its shard at its epoch before it starts: from then on a write of
            // an older epoch is refused, so a run of an older owner still going (paused, or
            // cut off from Redis, when its lease ran out) cannot be accepted once this one
            // has started.
            if !sink_write(&sink_url, &sink_ns, d)? {
                journal.refused(d, seq);
                return Err("fenced: a newer epoch claimed this shard".into());
            }
            journal.start(d, seq);
            let h = keyway_redis::stream::fnv1a64(&[&d.key[..], payload].concat());
            let work = Duration::from_micros(h % 1_000); // U(0, 1 ms)
            std::thread::sleep(if slow.exists() { SLOW_RUN } else { work });
            let key = String::from_utf8_lossy(&d.key).into_owned();
            if poison.as_ref() == Some(&(key, seq)) {
                journal.finish(d, seq, "fail");
                return Err("poison".into());
            }
            // The run ends before its write: if the write is accepted, no newer owner had
            // claimed the shard yet, so none of its runs had started.
            let ended = super::journal::now_ns();
            if !sink_write(&sink_url, &sink_ns, d)? {
                journal.finish_at(d, seq, "fenced", ended);
                return Err("fenced: a newer epoch wrote this shard".into());
            }
            journal.finish_at(d, seq, "ok", ended);
            Ok(())
        },
    )
    .expect("build the consumer");
    let s = serve(&consumer);
    println!(
        "stats takeovers={} refused={} recreated={} redeliveries={} stalls={} dead={} lost={} releases={}",
        s.takeovers,
        s.refused_acks,
        s.groups_recreated,
        s.redeliveries,
        s.stalls,
        s.dead_lettered,
        s.leases_lost,
        s.releases
    );
}

/// A member process's life once its consumer is built: tells the test it is ready, consumes
/// until the test writes `stop` on its stdin (or closes it), then shuts the consumer down and
/// returns its final numbers for the member to report.
pub fn serve(consumer: &StreamConsumer) -> StreamStats {
    println!("ready");
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        if line == "stop" {
            break;
        }
    }
    consumer.shutdown();
    consumer.stats().unwrap_or_default()
}
