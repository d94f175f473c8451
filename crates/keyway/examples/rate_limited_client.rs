//! A rate-limited API client: an API that allows 50 calls per second, called by a program that
//! starts 700 ms into the scheduler's interval and sends its calls in bursts. The scheduler
//! releases them at 50 per second; the program records when each call went out, prints the
//! most calls any sliding second saw, and exits non-zero if that is over the bound the docs
//! state ("Rate limits: what is guaranteed": at most the limit + 1 released, and the calls
//! start a little later than released, so on a loaded machine a few more may start within one
//! second: the bound checked here is the limit + 10%).
//!
//! `cargo run --release -p keyway --example rate_limited_client`

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keyway::{ExecutorConfig, Pool, Scheduler, Timing};

const LIMIT: usize = 50;
/// The most calls that may start in one sliding second: the limit + 10% (see the module docs).
const START_BOUND: usize = LIMIT + LIMIT / 10;

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let pool = Pool::new()?;
    let built = Instant::now();
    let scheduler = Scheduler::builder(&pool)
        .executor("api", ExecutorConfig::with_tps(LIMIT as f64))
        .build()?;

    let sent = Arc::new(Mutex::new(Vec::new()));
    let mut calls = Vec::new();
    // Three bursts of 60 calls, the first 700 ms into the interval, then every 800 ms.
    for burst in 0..3u32 {
        let at = Duration::from_millis(700 + 800 * u64::from(burst));
        std::thread::sleep(at.saturating_sub(built.elapsed()));
        for i in 0..60u32 {
            let sent = sent.clone();
            // Some calls are urgent: they go first among those waiting.
            let timing = Timing::after(Duration::ZERO).priority(i64::from(i % 10 == 0));
            calls.push(scheduler.schedule_with("api", timing, move || {
                sent.lock().unwrap().push(Instant::now()); // the call to the API goes here
            })?);
        }
    }
    for call in calls {
        call.join()?;
    }
    drop(scheduler);
    drop(pool); // the last handles: both shut down, every accepted call has run

    let mut sent = sent.lock().unwrap().clone();
    sent.sort_unstable();
    let (mut worst, mut from) = (0, 0);
    for to in 0..sent.len() {
        while sent[to] - sent[from] > Duration::from_secs(1) {
            from += 1;
        }
        worst = worst.max(to - from + 1);
    }
    let took = sent[sent.len() - 1] - sent[0];
    println!(
        "{} calls in {took:.2?}; limit {LIMIT}/s; worst sliding second: {worst} calls",
        sent.len()
    );
    if worst > START_BOUND {
        eprintln!("over the bound: {worst} > {START_BOUND}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
