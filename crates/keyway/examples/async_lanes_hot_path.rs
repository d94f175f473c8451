//! Drives the async lane paths alone, for profiling: one producer feeds `CONTEXTS` keys with
//! `TASKS` messages each, round robin; each is handled by a future that yields once, then does a
//! little work. `typed` runs them through `typed_lanes_async` (a message per task, like an actor's
//! mailbox), `spawn` as one `Lane::spawn` future per task. Checks that every task ran in order.
//!
//! `cargo run --release -p keyway --example async_lanes_hot_path -- [contexts] [tasks] [typed|spawn] [rounds]`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Each context's next expected sequence number (checked by the context's own task, so
/// relaxed is enough: one task of a context runs at a time).
struct Seen(Vec<AtomicU64>);

impl Seen {
    #[inline(never)]
    fn task(&self, ctx: usize, seq: u64) {
        let mut a = 0u64;
        for i in 0..10 {
            a = std::hint::black_box(a.wrapping_add(i));
        }
        let prev = self.0[ctx].fetch_add(1, Ordering::Relaxed);
        assert_eq!(prev, seq, "context {ctx}: task {seq} ran out of order");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let contexts = num(0, 1024) as usize;
    let tasks = num(1, 200);
    let spawn = args.get(2).is_some_and(|a| a == "spawn");
    let rounds = num(3, 3);
    let pool = keyway::Pool::new().unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let total = tasks * contexts as u64;
    for round in 0..rounds {
        let seen = Arc::new(Seen((0..contexts).map(|_| AtomicU64::new(0)).collect()));
        done.store(0, Ordering::SeqCst);
        let start = Instant::now();
        if spawn {
            let lanes: Vec<_> = (0..contexts).map(|c| pool.lane(c)).collect();
            for seq in 0..tasks {
                for (ctx, lane) in lanes.iter().enumerate() {
                    let (seen, done) = (seen.clone(), done.clone());
                    let fut = async move {
                        keyway::yield_now().await;
                        seen.task(ctx, seq);
                        done.fetch_add(1, Ordering::Relaxed);
                    };
                    drop(lane.spawn(fut).unwrap());
                }
            }
        } else {
            let (seen2, done2) = (seen.clone(), done.clone());
            let lanes = pool.typed_lanes_async(move |ctx: &usize, seq: u64| {
                let (seen, done, ctx) = (seen2.clone(), done2.clone(), *ctx);
                async move {
                    keyway::yield_now().await;
                    seen.task(ctx, seq);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
            for seq in 0..tasks {
                for ctx in 0..contexts {
                    lanes.send(ctx, seq).unwrap();
                }
            }
        }
        while done.load(Ordering::Relaxed) < total {
            std::thread::yield_now();
        }
        let secs = start.elapsed().as_secs_f64();
        assert!(seen.0.iter().all(|s| s.load(Ordering::Relaxed) == tasks));
        println!(
            "round {round}: {total} tasks in {secs:.3} s = {:.2} M tasks/s",
            total as f64 / secs / 1e6
        );
    }
    pool.shutdown();
}
