//! Key-ordered parallel consumption of a Redis stream by two member processes.
//!
//! Starts its own `redis-server` on a free loopback port, runs itself twice more as consumer
//! group members (`stream_demo member …`), produces messages over many keys, waits until the
//! group has acknowledged them all, stops the members (a clean hand-off), and checks that
//! every message ran exactly once and each key's messages ran in order. Exits non-zero if not.
//!
//! `cargo run --release -p keyway-redis --example stream_demo [async] [messages]` (default
//! 4,000); with `async` the members' handlers are async: their waits are awaited, holding no
//! thread, instead of slept.
//! `… stream_demo throughput [messages]` measures instead one member consuming a backlog with
//! no work per message: messages per second and Redis commands per message.
//! Needs `redis-server` on `PATH`; without one it says so and exits 0, unless
//! `KEYWAY_REQUIRE_REDIS=1`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use keyway_redis::stream::{HandlerError, Producer, StreamConsumer, Topic};

#[path = "common/redis_server.rs"]
mod redis_server;
use redis_server::Redis;

type Error = Box<dyn std::error::Error + Send + Sync>;

const KEYS: u64 = 32;

fn topic() -> Result<Topic, Error> {
    Ok(Topic::new("demo", 8)?.namespace("stream-demo"))
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("member") {
        return member(&args[2], &args[3], &args[4], args[5] == "async");
    }
    if args.get(1).map(String::as_str) == Some("throughput") {
        let n = args.get(2).map_or(Ok(200_000), |n| n.parse())?;
        return throughput(n);
    }
    let is_async = args.get(1).map(String::as_str) == Some("async");
    let kind = if is_async { "async" } else { "sync" };
    let messages: u64 = args
        .get(1 + usize::from(is_async))
        .map_or(Ok(4_000), |n| n.parse())?;
    let Some(redis) = Redis::start()? else {
        return Ok(());
    };
    let url = redis.url();
    let dir = std::env::temp_dir().join(format!("keyway-stream-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut members = Vec::new();
    for id in ["member-a", "member-b"] {
        let out = dir.join(format!("{id}.log"));
        members.push((spawn_member(&url, id, &out.to_string_lossy(), kind)?, out));
    }
    let started = Instant::now();
    let mut producer = Producer::connect(&url, topic()?)?;
    let mut sent = 0;
    while sent < messages {
        let batch: Vec<(String, String)> = (sent..(sent + 500).min(messages))
            .map(|i| (format!("account-{}", i % KEYS), (i / KEYS).to_string()))
            .collect();
        sent += batch.len() as u64;
        producer.send_batch(batch)?; // one round trip per 500
    }
    println!("produced {messages} messages over {KEYS} keys into 8 shards ({kind} handlers)");
    wait_until_consumed(&url, Duration::from_secs(120))?;
    let elapsed = started.elapsed();
    for (child, _) in &mut members {
        if let Some(stdin) = child.stdin.as_mut() {
            writeln!(stdin, "stop")?;
        }
    }
    let mut runs: Vec<(String, u64)> = Vec::new();
    for (mut child, out) in members {
        let status = child.wait()?;
        if !status.success() {
            return Err(format!("a member exited with {status}").into());
        }
        let text = std::fs::read_to_string(&out)?;
        let mine: Vec<(String, u64)> = text
            .lines()
            .filter_map(|l| {
                let (k, s) = l.split_once(' ')?;
                Some((k.to_owned(), s.parse().ok()?))
            })
            .collect();
        println!("{}: ran {} messages", out.display(), mine.len());
        runs.extend(mine);
    }
    // A clean hand-off runs nothing twice.
    let mut seen = std::collections::HashSet::new();
    for (key, seq) in &runs {
        if !seen.insert((key.clone(), *seq)) {
            return Err(format!("{key}/{seq} ran twice").into());
        }
    }
    if seen.len() as u64 != messages {
        return Err(format!("{} of {messages} messages ran", seen.len()).into());
    }
    check_order(&dir)?;
    println!(
        "all {messages} messages ran exactly once, in order per key, in {:.2?} ({:.0} msg/s)",
        elapsed,
        messages as f64 / elapsed.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Within each member, a key's messages ran in increasing order (no member ever ran a key
/// backwards), and across members a key's runs never interleave: one member's runs of a key
/// all come before or all after the other's.
fn check_order(dir: &std::path::Path) -> Result<(), Error> {
    let mut ranges: HashMap<String, Vec<(u64, u64)>> = HashMap::new();
    for entry in std::fs::read_dir(dir)? {
        let text = std::fs::read_to_string(entry?.path())?;
        let mut last: HashMap<String, (u64, u64)> = HashMap::new();
        for l in text.lines() {
            let Some((k, s)) = l.split_once(' ') else {
                continue;
            };
            let s: u64 = s.parse()?;
            match last.get_mut(k) {
                Some((_, hi)) if s <= *hi => return Err(format!("{k}: {s} after {hi}").into()),
                Some((_, hi)) => *hi = s,
                None => {
                    last.insert(k.to_owned(), (s, s));
                }
            }
        }
        for (k, r) in last {
            ranges.entry(k).or_default().push(r);
        }
    }
    for (k, mut rs) in ranges {
        rs.sort();
        for w in rs.windows(2) {
            if w[1].0 <= w[0].1 {
                return Err(format!("{k}: runs of two members interleave").into());
            }
        }
    }
    Ok(())
}

/// A member: consumes until told `stop` on stdin, appending `key seq` per message it ran.
fn member(url: &str, id: &str, out: &str, is_async: bool) -> Result<(), Error> {
    let file = Arc::new(std::sync::Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out)?,
    ));
    // The work: up to 2 ms of waiting (an I/O call, say), then a line in the member's log.
    let work =
        |payload: &[u8]| Duration::from_micros(keyway_redis::stream::fnv1a64(payload) % 2_000);
    let record = move |file: &std::sync::Mutex<std::fs::File>,
                       key: &[u8],
                       payload: &[u8]|
          -> Result<(), HandlerError> {
        let line = format!(
            "{} {}\n",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(payload)
        );
        file.lock()
            .map_err(|_| "poisoned")?
            .write_all(line.as_bytes())?;
        Ok(())
    };
    let pool = keyway::Pool::builder().core_threads(8).build()?;
    let builder = StreamConsumer::builder(url, topic()?)
        .member_id(id)
        .lease(Duration::from_secs(2));
    let consumer = if is_async {
        let timer = Timer::start();
        builder.build_async(&pool, move |delivery, payload| {
            let (file, wait) = (Arc::clone(&file), timer.after(work(&payload)));
            async move {
                wait.await;
                record(&file, &delivery.key, &payload)
            }
        })?
    } else {
        builder.build(&pool, move |delivery, payload| {
            std::thread::sleep(work(payload));
            record(&file, &delivery.key, payload)
        })?
    };
    for line in std::io::stdin().lock().lines() {
        if line? == "stop" {
            break;
        }
    }
    consumer.shutdown(); // hands its shards off: unstarted entries stay for the others
    let stats = consumer.stats()?;
    eprintln!(
        "{id}: {} acked, {} redelivered, {} takeovers, {} releases",
        stats.acked, stats.redeliveries, stats.takeovers, stats.releases
    );
    Ok(())
}

fn spawn_member(url: &str, id: &str, out: &str, kind: &str) -> Result<Child, Error> {
    let me = std::env::current_exe()?;
    Ok(Command::new(me)
        .args(["member", url, id, out, kind])
        .stdin(Stdio::piped())
        .spawn()?)
}

/// Waits until every shard's group has read everything and acknowledged it.
fn wait_until_consumed(url: &str, patience: Duration) -> Result<(), Error> {
    let mut conn = redis::Client::open(url)?.get_connection()?;
    let topic = topic()?;
    let deadline = Instant::now() + patience;
    loop {
        let mut left = 0;
        for s in 0..topic.shards() {
            let pending: redis::Value = redis::cmd("XPENDING")
                .arg(topic.shard_key(s))
                .arg("keyway")
                .query(&mut conn)
                .unwrap_or(redis::Value::Nil);
            let groups: Vec<HashMap<String, redis::Value>> = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(topic.shard_key(s))
                .query(&mut conn)
                .unwrap_or_default();
            let lag = match groups.first().and_then(|g| g.get("lag")) {
                Some(redis::Value::Int(n)) => *n,
                _ => 1,
            };
            let pending = match pending {
                redis::Value::Array(a) => match a.first() {
                    Some(redis::Value::Int(n)) => *n,
                    _ => 1,
                },
                _ => 1,
            };
            left += lag + pending;
        }
        if left == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{left} messages still unconsumed").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One member, no work per message: how fast a backlog of `n` messages over 100 keys is
/// consumed and acknowledged, and how many Redis commands that takes per message.
fn throughput(n: u64) -> Result<(), Error> {
    let Some(redis) = Redis::start()? else {
        return Ok(());
    };
    let url = redis.url();
    let mut producer = Producer::connect(&url, topic()?)?;
    for start in (0..n).step_by(1_000) {
        producer
            .send_batch((start..(start + 1_000).min(n)).map(|i| (format!("k{}", i % 100), "")))?;
    }
    let mut conn = redis::Client::open(url.as_str())?.get_connection()?;
    let commands = |conn: &mut redis::Connection| -> Result<u64, Error> {
        let info: String = redis::cmd("INFO").arg("stats").query(conn)?;
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix("total_commands_processed:"))
            .ok_or("no total_commands_processed")?;
        Ok(line.trim().parse()?)
    };
    let before = commands(&mut conn)?;
    let pool = keyway::Pool::new()?;
    let started = Instant::now();
    let consumer = StreamConsumer::builder(url.as_str(), topic()?)
        .ack_batch(500, Duration::from_millis(5))
        .build(&pool, |_, _| Ok(()))?;
    let acked = || consumer.stats().map(|s| s.acked).unwrap_or(0);
    while acked() < n {
        std::thread::sleep(Duration::from_millis(5));
    }
    let elapsed = started.elapsed();
    let used = commands(&mut conn)?.saturating_sub(before);
    drop(consumer);
    println!(
        "one member, zero work: {n} messages in {elapsed:.2?}: {:.0} msg/s, {:.4} Redis commands per message (including stats polling)",
        n as f64 / elapsed.as_secs_f64(),
        used as f64 / n as f64
    );
    Ok(())
}

/// A timer thread for the async handlers' waits (keyway has no timer; a runtime's would do).
#[derive(Clone)]
struct Timer(Arc<(Mutex<BinaryHeap<Reverse<Alarm>>>, Condvar)>);

struct Alarm(Instant, Waker);

impl PartialEq for Alarm {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Alarm {}
impl PartialOrd for Alarm {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Alarm {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

impl Timer {
    fn start() -> Self {
        let timer = Timer(Arc::new((Mutex::new(BinaryHeap::new()), Condvar::new())));
        let shared = Arc::clone(&timer.0);
        std::thread::spawn(move || {
            let (alarms, cv) = &*shared;
            let mut alarms = alarms.lock().unwrap();
            loop {
                let now = Instant::now();
                match alarms.peek() {
                    Some(Reverse(Alarm(at, _))) if *at <= now => {
                        if let Some(Reverse(Alarm(_, waker))) = alarms.pop() {
                            waker.wake();
                        }
                    }
                    Some(Reverse(Alarm(at, _))) => {
                        let wait = *at - now;
                        alarms = cv.wait_timeout(alarms, wait).unwrap().0;
                    }
                    None => alarms = cv.wait(alarms).unwrap(),
                }
            }
        });
        timer
    }

    /// A future that completes `d` from now.
    fn after(&self, d: Duration) -> Sleep {
        Sleep {
            timer: self.clone(),
            at: Instant::now() + d,
        }
    }
}

struct Sleep {
    timer: Timer,
    at: Instant,
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        let (alarms, cv) = &*self.timer.0;
        alarms
            .lock()
            .unwrap()
            .push(Reverse(Alarm(self.at, cx.waker().clone())));
        cv.notify_one();
        Poll::Pending
    }
}
