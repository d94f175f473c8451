//! What `Pool::stats` and `Pool::metrics` cost, with few and with many live lanes, and what a
//! thread polling them in a loop does to other threads' submissions.
//!
//! ```text
//! cargo run --release -p keyway --example stats_cost [LANES...]   # default: 16 200000
//! ```
//!
//! For each lane count: a pool (metrics on) with that many idle lanes kept live, the median
//! cost of one `stats()` and one `metrics()` call (medians of 25 batches of 200 calls), then a
//! submitter's `execute_sequential` latency over 16 keys (p50, p99, p99.9 of 200,000 calls)
//! without and with a thread calling `metrics()` in a loop. Exits non-zero if the lanes were
//! not live (the figures would mean nothing); the figures themselves are printed, not judged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keyway::Pool;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The median cost of one call of `f`.
fn per_call(mut f: impl FnMut()) -> Duration {
    let batches = (0..25)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..200 {
                f();
            }
            t.elapsed() / 200
        })
        .collect();
    median(batches)
}

/// p50, p99, p99.9 of `n` submissions' latency.
fn submit_latency(pool: &Pool, n: usize) -> [Duration; 3] {
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        pool.execute_sequential(1_000_000_000 + (i % 16) as u64, || ())
            .unwrap();
        lat.push(t.elapsed());
        if i % 1024 == 1023 {
            pool.wait_idle(); // keep the queues short: this measures the submission path
        }
    }
    lat.sort();
    let q = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
    [q(0.5), q(0.99), q(0.999)]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let counts = if args.is_empty() {
        vec![16, 200_000]
    } else {
        args
    };
    println!("lanes    stats()    metrics()  submit p50/p99/p99.9 alone      polled");
    for lanes in counts {
        // Every idle lane kept, for an hour: a count bound is split between the table's
        // shards, so two keys in one shard could free one of them and measure fewer lanes.
        let pool = Pool::builder()
            .metrics(true)
            .idle_lanes(usize::MAX)
            .keep_idle(Duration::from_secs(3600))
            .build()
            .unwrap();
        for k in 0..lanes as u64 {
            pool.execute_sequential(k, || ()).unwrap();
        }
        pool.wait_idle();
        let live = pool.stats().live_lanes;
        if live < lanes {
            eprintln!("only {live} of {lanes} lanes live");
            std::process::exit(1);
        }
        let stats = per_call(|| drop(std::hint::black_box(pool.stats())));
        let metrics = per_call(|| drop(std::hint::black_box(pool.metrics())));
        let alone = submit_latency(&pool, 200_000);
        let stop = Arc::new(AtomicBool::new(false));
        let poller = {
            let (pool, stop) = (pool.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut calls = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    std::hint::black_box(pool.metrics());
                    calls += 1;
                }
                calls
            })
        };
        let polled = submit_latency(&pool, 200_000);
        stop.store(true, Ordering::Relaxed);
        let calls = poller.join().unwrap();
        println!(
            "{lanes:<8} {stats:<10.2?} {metrics:<10.2?} {:.2?}/{:.2?}/{:.2?}   {:.2?}/{:.2?}/{:.2?} ({calls} polls)",
            alone[0], alone[1], alone[2], polled[0], polled[1], polled[2]
        );
        pool.shutdown();
    }
}
