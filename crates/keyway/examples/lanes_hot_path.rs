//! Drives the lane hot path alone, for profiling: one producer feeds `CONTEXTS` lanes with
//! `TASKS` tiny tasks each, round robin, then waits for them all.
//!
//! `cargo run --release -p keyway --example lanes_hot_path -- [contexts] [tasks] [work] [plain|keys]`
//!
//! `plain`: unkeyed tasks; `keys`: `execute_sequential` by key (a look-up per task, lanes not
//! pinned, so they go idle and leave or stay cached) instead of `Lane` handles.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[inline(never)]
fn work(n: u64) {
    let a = AtomicU64::new(0);
    for _ in 0..n {
        a.fetch_add(1, Ordering::Relaxed);
    }
    std::hint::black_box(a.load(Ordering::Relaxed));
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let contexts = *args.first().unwrap_or(&16) as usize;
    let tasks = *args.get(1).unwrap_or(&50_000);
    let units = *args.get(2).unwrap_or(&10);
    let plain = std::env::args().any(|a| a == "plain");
    let by_key = std::env::args().any(|a| a == "keys");
    let pool = keyway::Pool::new().unwrap();
    // By key: no handle pins the lanes, so an idle lane may leave its table (or the idle cache).
    let lanes: Vec<_> = if by_key {
        Vec::new()
    } else {
        (0..contexts).map(|c| pool.lane(c)).collect()
    };
    let done = Arc::new(AtomicU64::new(0));
    let total = tasks * contexts as u64;
    for round in 0..3 {
        done.store(0, Ordering::SeqCst);
        let start = Instant::now();
        for _ in 0..tasks {
            for c in 0..contexts {
                let d = done.clone();
                let task = move || {
                    work(units);
                    d.fetch_add(1, Ordering::Relaxed);
                };
                if plain {
                    pool.execute(task).unwrap();
                } else if by_key {
                    pool.execute_sequential(c, task).unwrap();
                } else if let Some(lane) = lanes.get(c) {
                    lane.execute(task).unwrap();
                }
            }
        }
        while done.load(Ordering::Relaxed) < total {
            std::thread::yield_now();
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "round {round}: {total} tasks in {secs:.3} s = {:.1} M tasks/s",
            total as f64 / secs / 1e6
        );
    }
    println!("{}", pool.stats());
}
