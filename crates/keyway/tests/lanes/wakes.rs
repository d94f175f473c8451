//! Wake-ups between workers: a job published while a worker searches for work (producers then
//! wake nobody) still reaches a sleeping worker when the searcher takes another job.
//!
//! The jobs here can only finish together: each waits at a latch until the other has started,
//! for at most a generous timeout that fails the test. A lost wake-up leaves the second job
//! queued while one worker waits inside the first and the other sleeps. The pool has exactly two
//! threads and a monitor that never calls a worker blocked, so nothing else rescues the job.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Latch, HANG};

/// How long a job waits for its partner before the test calls the wake-up lost.
const LOST: Duration = Duration::from_secs(10);

fn two_workers() -> keyway::Pool {
    keyway::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .blocked_after(HANG)
        .build()
        .unwrap()
}

/// Busy-waits `d` (the test needs sub-microsecond phases, which a sleep cannot give).
fn busy(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Submits two jobs that wait for each other; false if one gave up waiting.
fn pair_meets(pool: &keyway::Pool) -> bool {
    let started = Latch::new(2);
    let done = Latch::new(2);
    let met = Arc::new(AtomicBool::new(true));
    for _ in 0..2 {
        let (started, done, met) = (started.clone(), done.clone(), met.clone());
        pool.execute(move || {
            started.count_down();
            if !started.wait_for(LOST) {
                met.store(false, Ordering::SeqCst);
            }
            done.count_down();
        })
        .unwrap();
    }
    done.wait();
    met.load(Ordering::SeqCst)
}

/// Each round, a prelude job keeps one worker busy while the other goes to sleep; when the
/// prelude ends, its worker starts searching, and a pair of jobs that must run together is
/// published a varying delay later (0 to 16 µs), so that over the rounds the pair arrives at
/// every point of the search, its end and the searcher's last looks among them. Whichever
/// worker takes the first job must wake the sleeper for the second.
#[test]
fn a_job_published_while_a_worker_searches_reaches_a_sleeping_worker() {
    let pool = two_workers();
    for round in 0..4_000u64 {
        let ended = Arc::new(AtomicBool::new(false));
        let prelude = ended.clone();
        pool.execute(move || {
            busy(Duration::from_micros(50));
            prelude.store(true, Ordering::Release);
        })
        .unwrap();
        while !ended.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        busy(Duration::from_nanos((round % 64) * 250));
        assert!(
            pair_meets(&pool),
            "round {round}: a job waited for {LOST:?} while a worker slept (lost wake-up)"
        );
    }
    pool.shutdown();
}
