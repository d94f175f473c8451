//! Rate limits that hold in any window: a 50 per second executor, whenever in its interval its
//! calls arrive (0, 300, 700, 950 ms in), in bursts, releases no more than 51 of them in any
//! sliding second. Measured from the release timestamps (the scheduler's `released` trace
//! event, stamped as the scheduler's thread emits it); a count, not a timing assertion. When
//! the calls started (what a remote API sees, a little later on a busy machine) is printed
//! beside it.
//!
//! A test binary of its own: the capturing subscriber is the process-wide default (the
//! scheduler's thread is not the test's), which can be set once per process and would see the
//! releases of every other test running in it.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keyway::{ExecutorConfig, Pool, Scheduler};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Release times by executor name.
type Releases = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

struct Name(Option<String>);

impl Visit for Name {
    fn record_debug(&mut self, _: &Field, _: &dyn Debug) {}
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "executor" {
            self.0 = Some(value.to_owned());
        }
    }
}

struct Sub(Releases);

impl Subscriber for Sub {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target().starts_with("keyway")
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let now = Instant::now();
        let mut name = Name(None);
        event.record(&mut name);
        if let Some(name) = name.0 {
            self.0.lock().unwrap().entry(name).or_default().push(now);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// The most of `times` that any closed window of one second holds.
fn worst_second(times: &mut [Instant]) -> usize {
    times.sort_unstable();
    let mut worst = 0;
    let mut from = 0;
    for to in 0..times.len() {
        while times[to] - times[from] > Duration::from_secs(1) {
            from += 1;
        }
        worst = worst.max(to - from + 1);
    }
    worst
}

/// A 50/s executor named `name` (the default 1 s interval); at `offset` into its first
/// interval a client schedules `calls` calls all due at once (a burst: the worst case), and as
/// many again 1.5 s later. Returns when each call started.
fn client(pool: &Pool, name: &str, offset: Duration, calls: usize) -> Vec<Instant> {
    let built = Instant::now();
    let s = Scheduler::builder(pool)
        .executor(name, ExecutorConfig::with_tps(50.0))
        .build()
        .unwrap();
    let started = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for wave in [offset, offset + Duration::from_millis(1500)] {
        // The scenario, not a synchronisation: the client arrives this far into the interval.
        std::thread::sleep(wave.saturating_sub(built.elapsed()));
        for _ in 0..calls {
            let started = started.clone();
            handles.push(
                s.schedule(name, Duration::ZERO, move || {
                    started.lock().unwrap().push(Instant::now())
                })
                .unwrap(),
            );
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    s.shutdown();
    started.lock().unwrap().clone()
}

#[test]
fn a_50_per_second_limit_holds_in_every_sliding_second_at_any_start_offset() {
    let releases = Releases::default();
    tracing::subscriber::set_global_default(Sub(releases.clone())).unwrap();
    let pool = Pool::builder()
        .core_threads(4)
        .max_threads(8)
        .build()
        .unwrap();
    let offsets = [0, 300, 700, 950].map(Duration::from_millis);
    // The four clients at once, each on its own scheduler (so the test takes ~4 s, not 16).
    let runs: Vec<_> = offsets
        .iter()
        .map(|&offset| {
            let pool = pool.clone();
            let name = format!("api-{}", offset.as_millis());
            std::thread::spawn(move || client(&pool, &name, offset, 120))
        })
        .collect();
    let started: Vec<Vec<Instant>> = runs.into_iter().map(|r| r.join().unwrap()).collect();
    for (offset, mut started) in offsets.iter().zip(started) {
        let name = format!("api-{}", offset.as_millis());
        let mut released = releases.lock().unwrap()[&name].clone();
        assert_eq!((released.len(), started.len()), (240, 240));
        let worst = worst_second(&mut released);
        println!(
            "started {offset:?} into the interval: worst sliding second {worst} released, {} \
             started (load average {})",
            worst_second(&mut started),
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
        assert!(
            worst <= 51,
            "started {offset:?} into the interval: {worst} released in one second (limit 50)"
        );
    }
}
