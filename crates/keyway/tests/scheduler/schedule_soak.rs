//! Soak: 100 tasks per second through a 100 TPS executor for 10 minutes (set
//! `KEYWAY_SOAK_SECS` to change the length); the process's resident memory must stay flat.
//! Ignored by default: `cargo test --release -p keyway --test scheduler schedule_soak -- --ignored --nocapture`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keyway::{ExecutorConfig, Pool, Scheduler};

/// Resident set size in KiB, from `/proc/self/statm`.
fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4
}

#[test]
#[ignore = "soak: runs for 10 minutes"]
fn hundred_tps_for_ten_minutes_keeps_memory_flat() {
    let secs: u64 = std::env::var("KEYWAY_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let pool = Pool::new().unwrap();
    let scheduler = Scheduler::builder(&pool)
        .executor(
            "soak",
            ExecutorConfig::with_tps(100.0).timeout(Duration::from_secs(30)),
        )
        .build()
        .unwrap();
    let ran = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut scheduled = 0u64;
    let mut next_sample = start;
    while start.elapsed() < Duration::from_secs(secs) {
        // 100 a second, due 0-2 s later.
        for _ in 0..10 {
            let ran = ran.clone();
            let delay = Duration::from_millis(scheduled * 7919 % 2000);
            let handle = scheduler
                .schedule("soak", delay, move || {
                    ran.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
            drop(handle); // detached: counted in the stats
            scheduled += 1;
        }
        if Instant::now() >= next_sample {
            let st = scheduler.stats("soak").unwrap();
            let rss = rss_kib();
            println!(
                "t={:>4}s rss={rss} KiB scheduled={} ran={} pending={} timed_out={} threads={}",
                start.elapsed().as_secs(),
                st.scheduled,
                st.ran,
                st.pending,
                st.timed_out,
                std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count()),
            );
            samples.push(rss);
            next_sample += Duration::from_secs(30);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    scheduler.shutdown();
    let st = scheduler.stats("soak").unwrap();
    println!("end: {st:?} rss={} KiB", rss_kib());
    assert_eq!(st.ran + st.timed_out, scheduled);
    assert_eq!(st.timed_out, 0, "100 a second fit a 100 TPS limit");
    // Flat: after the first minute, never more than 1 MiB above the first-minute level.
    if samples.len() > 3 {
        let base = samples[2];
        let top = *samples[2..].iter().max().unwrap();
        assert!(
            top <= base + 1024,
            "memory grew from {base} KiB to {top} KiB"
        );
    }
}
