//! Serves `/metrics` (Prometheus text format) for a keyway pool and a Redis stream consumer
//! under load: the pool's sampled queue-wait and run-time histograms, oldest waiting age,
//! tasks and threads; the consumer's per-shard lag, pending entries, epochs, and its message,
//! lease (takeovers) and dead-letter counts. The page is rendered by
//! `metrics-exporter-prometheus` and served by a small HTTP loop here.
//!
//! ```text
//! cargo run --release -p keyway-redis --features metrics --example metrics_server [ADDR]
//! cargo run --release -p keyway-redis --features metrics --example metrics_server -- --check
//! ```
//!
//! Starts its own `redis-server` (on `PATH`; without one it says so and exits 0, unless
//! `KEYWAY_REQUIRE_REDIS=1`), a producer (one entry in 500 is a poison that fails until it is
//! dead-lettered) and a second task source on the pool. Serves on `ADDR` (default
//! `127.0.0.1:9898`) until killed. With `--check` it serves on a free port, fetches the page
//! twice over HTTP, and exits non-zero unless every series the dashboard
//! (`docs/grafana/keyway.json`) reads is there and the load's counters moved in between.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keyway_redis::stream::{Producer, StreamConsumer, Topic};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

#[path = "common/redis_server.rs"]
mod redis_server;
use redis_server::Redis;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Histogram buckets, seconds: 10 µs to 10 s.
const BUCKETS: &[f64] = &[
    1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0,
];

/// What the check (and the dashboard) needs on the page.
const REQUIRED: &[&str] = &[
    "keyway_pool_task_queue_wait_seconds_bucket",
    "keyway_pool_task_run_seconds_bucket",
    "keyway_pool_task_oldest_waiting_seconds",
    "keyway_pool_task_longest_running_seconds",
    "keyway_pool_tasks_total",
    "keyway_pool_tasks",
    "keyway_pool_threads",
    "keyway_pool_lanes",
    "keyway_pool_lane_deepest_queued",
    "keyway_stream_shard_lag_messages",
    "keyway_stream_shard_pending_messages",
    "keyway_stream_shard_oldest_pending_seconds",
    "keyway_stream_shard_epoch",
    "keyway_stream_shard_owned",
    "keyway_stream_shard_window_messages",
    "keyway_stream_messages_total",
    "keyway_stream_leases_total",
    "keyway_stream_stalls_total",
    "keyway_stream_shard_held_messages",
    "keyway_stream_shard_quarantined_keys",
    "keyway_stream_keys_total",
    "keyway_stream_append_to_handled_seconds_bucket",
];

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    let addr = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| {
            if check {
                "127.0.0.1:0"
            } else {
                "127.0.0.1:9898"
            }
            .to_owned()
        });
    let mut prometheus = PrometheusBuilder::new();
    for name in [
        "keyway_pool_task_queue_wait_seconds",
        "keyway_pool_task_run_seconds",
        "keyway_stream_append_to_handled_seconds",
    ] {
        prometheus = prometheus.set_buckets_for_metric(Matcher::Full(name.to_owned()), BUCKETS)?;
    }
    // Installed before the pool and the consumer are built: they register their series as
    // they start.
    let handle = prometheus.install_recorder()?;
    let Some(redis) = Redis::start()? else {
        return Ok(());
    };
    let url = redis.url();
    let topic = Topic::new("orders", 4)?.namespace("metrics-demo");
    let pool = keyway::Pool::builder()
        .name("demo")
        .metrics(true)
        .monitor_period(Duration::from_millis(100))
        .build()?;
    let consumer = StreamConsumer::builder(url.as_str(), topic.clone())
        .max_attempts(2)
        .backoff(Duration::from_millis(1), Duration::from_millis(2))
        .build(&pool, |_, payload| {
            if payload == b"poison" {
                return Err("a poison entry".into());
            }
            std::thread::sleep(Duration::from_micros(200)); // the work
            Ok(())
        })?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    {
        // The producer: 40 entries every 20 ms over 64 keys, one in 500 a poison.
        let (stop, url, topic) = (stop.clone(), url.clone(), topic.clone());
        threads.push(std::thread::spawn(move || -> Result<(), Error> {
            let mut producer = Producer::connect(&url, topic)?;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let batch: Vec<(String, String)> = (0..40)
                    .map(|_| {
                        n += 1;
                        let payload = if n % 500 == 0 {
                            "poison".to_owned()
                        } else {
                            n.to_string()
                        };
                        (format!("key-{}", n % 64), payload)
                    })
                    .collect();
                producer.send_batch(batch)?;
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        }));
    }
    {
        // A second source: short tasks in 16 lanes of the same pool.
        let (stop, pool) = (stop.clone(), pool.clone());
        threads.push(std::thread::spawn(move || -> Result<(), Error> {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..100 {
                    n += 1;
                    pool.execute_sequential(n % 16, || std::hint::black_box(()))
                        .map_err(|e| e.to_string())?;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(())
        }));
    }
    let listener = TcpListener::bind(&addr)?;
    let local = listener.local_addr()?;
    println!("serving http://{local}/metrics");
    {
        let handle = handle.clone();
        std::thread::spawn(move || serve(listener, handle));
    }
    let publish = || -> Result<(), Error> {
        keyway_redis::metrics::publish(
            &consumer.stats()?,
            topic.name(),
            "keyway",
            consumer.member_id(),
        );
        handle.run_upkeep();
        Ok(())
    };
    if !check {
        loop {
            publish()?;
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let mut pages = Vec::new();
    for _ in 0..2 {
        // Long enough for a dead letter (one poison in 500 entries, 2,000 entries a second)
        // and for the pool's monitor to publish.
        for _ in 0..8 {
            publish()?;
            std::thread::sleep(Duration::from_millis(200));
        }
        publish()?;
        pages.push(parse(&fetch(local)?));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().map_err(|_| "a load thread panicked")??;
    }
    drop(consumer);
    pool.shutdown();
    drop(redis);
    check_pages(&pages[0], &pages[1])
}

/// The series of a page: `name{labels}` → value.
type Page = HashMap<String, f64>;

fn check_pages(first: &Page, second: &Page) -> Result<(), Error> {
    let names = |p: &Page| -> Vec<String> {
        p.keys()
            .map(|k| k.split('{').next().unwrap_or(k).to_owned())
            .collect()
    };
    let present = names(second);
    let missing: Vec<&&str> = REQUIRED
        .iter()
        .filter(|r| !present.iter().any(|n| n == **r))
        .collect();
    if !missing.is_empty() {
        return Err(format!("missing on /metrics: {missing:?}").into());
    }
    // A series summed over its labels, keeping those that have `labels`.
    let sum = |p: &Page, name: &str, labels: &[&str]| -> f64 {
        p.iter()
            .filter(|(k, _)| {
                let (n, l) = k.split_once('{').unwrap_or((k.as_str(), ""));
                n == name && labels.iter().all(|want| l.contains(want))
            })
            .map(|(_, v)| v)
            .sum()
    };
    let moving: [(&str, &[&str]); 5] = [
        (
            "keyway_pool_task_queue_wait_seconds_count",
            &["pool=\"demo\""],
        ),
        ("keyway_pool_task_run_seconds_count", &["pool=\"demo\""]),
        ("keyway_pool_tasks_total", &["state=\"submitted\""]),
        ("keyway_stream_messages_total", &["outcome=\"acked\""]),
        (
            "keyway_stream_append_to_handled_seconds_count",
            &["topic=\"orders\""],
        ),
    ];
    for (name, labels) in moving {
        let (a, b) = (sum(first, name, labels), sum(second, name, labels));
        println!("{name}{labels:?}: {a} -> {b}");
        if b <= a {
            return Err(format!("{name} did not move between the fetches ({a} -> {b})").into());
        }
    }
    let dead = sum(
        second,
        "keyway_stream_messages_total",
        &["outcome=\"dead_lettered\""],
    );
    if dead < 1.0 {
        return Err("no dead letter counted".into());
    }
    println!(
        "ok: {} series, every required one present, the load's counters moved",
        second.len()
    );
    Ok(())
}

/// `GET /metrics` over HTTP/1.1 from `addr`: the body.
fn fetch(addr: std::net::SocketAddr) -> Result<String, Error> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    let (head, body) = reply.split_once("\r\n\r\n").ok_or("no HTTP header end")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("GET /metrics: {}", head.lines().next().unwrap_or("")).into());
    }
    Ok(body.to_owned())
}

/// Each sample line of a Prometheus text page (comments skipped).
fn parse(body: &str) -> Page {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// Answers `GET /metrics` with the rendered page, anything else with 404.
fn serve(listener: TcpListener, handle: PrometheusHandle) {
    for conn in listener.incoming().flatten() {
        let handle = handle.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(&conn);
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                return;
            }
            // The rest of the header.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut conn = &conn;
            let _ = if request.starts_with("GET /metrics ") {
                let body = handle.render();
                write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                write!(
                    conn,
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            };
        });
    }
}
