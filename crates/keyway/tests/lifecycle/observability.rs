//! What a user sees of a running pool: `Stats` (waiting and running counted apart, `Display`),
//! `LaneDepth` and `PanicReport` context hashes that match `Pool::context_hash` for closure
//! lanes and typed lanes alike, and the pool's name.

use crate::common;

use std::sync::{Arc, Mutex};

use common::{Gate, Latch};
use keyway::{PanicReport, Pool, PoolBuilder};

/// One worker, no auxiliary thread: a task waiting at `gate` holds the only worker, so every
/// lane task submitted after it stays queued where `Stats` can see it.
fn held_pool(gate: &Gate) -> Pool {
    held_pool_with(gate, Pool::builder())
}

/// [`held_pool`] from `builder`'s other settings.
fn held_pool_with(gate: &Gate, builder: PoolBuilder) -> Pool {
    let pool = builder.core_threads(1).max_threads(1).build().unwrap();
    let started = Latch::new(1);
    let (s, g) = (started.clone(), gate.clone());
    pool.execute(move || {
        s.count_down();
        g.wait();
    })
    .unwrap();
    started.wait();
    pool
}

#[test]
fn typed_and_closure_lanes_report_the_hash_pool_context_hash_gives() {
    let gate = Gate::new();
    let pool = held_pool(&gate);
    let typed = pool.typed_lanes(|_key: &u64, _msg: ()| ());
    // Typed key k gets 2k + 2 messages, closure context "ctx-k" gets 2k + 1: every depth names
    // one lane, and the deepest eight are typed and closure lanes in turn.
    for k in 0..40u64 {
        for _ in 0..2 * k + 2 {
            typed.send(k, ()).unwrap();
        }
        for _ in 0..2 * k + 1 {
            pool.execute_sequential(format!("ctx-{k}"), || ()).unwrap();
        }
    }
    let stats = pool.stats();
    let depths: Vec<usize> = stats.largest_lanes.iter().map(|d| d.queued).collect();
    assert_eq!(depths, (73..=80).rev().collect::<Vec<_>>());
    for depth in &stats.largest_lanes {
        let k = (depth.queued as u64 - 1) / 2;
        let (key, expected) = if depth.queued % 2 == 0 {
            (format!("typed {k}"), pool.context_hash(&k))
        } else {
            let ctx = format!("ctx-{k}");
            (ctx.clone(), pool.context_hash(&ctx))
        };
        assert_eq!(
            depth.context_hash, expected,
            "lane of {key} (depth {}) reports a hash Pool::context_hash does not give",
            depth.queued
        );
    }
    gate.open();
    pool.shutdown();
}

/// A runner takes its lane's whole queue at once and runs a batch of it a turn: the entries it
/// took beyond that batch still count in the lane's depth while its first task runs.
#[test]
fn a_lane_whose_runner_took_a_long_queue_still_reports_its_depth() {
    const BATCH: usize = 4;
    let gate = Gate::new();
    // The only worker is held while the lane fills: its runner then takes all 101 entries.
    let pool = held_pool_with(&gate, Pool::builder().lane_batch(BATCH));
    let blocker_started = Latch::new(1);
    let lane_gate = Gate::new();
    let (b, lg) = (blocker_started.clone(), lane_gate.clone());
    pool.execute_sequential("hot", move || {
        b.count_down();
        lg.wait();
    })
    .unwrap();
    for _ in 0..100 {
        pool.execute_sequential("hot", || ()).unwrap();
    }
    gate.open();
    blocker_started.wait();
    let deepest = pool.stats().largest_lanes[0];
    assert_eq!(deepest.context_hash, pool.context_hash(&"hot"));
    // 100 wait behind the running one; at most this turn's batch of them is not counted.
    assert!(
        deepest.queued >= 100 - BATCH && deepest.queued <= 100,
        "depth {} of a lane with 100 tasks waiting",
        deepest.queued
    );
    lane_gate.open();
    pool.shutdown();
}

#[test]
fn panic_reports_name_the_context_thread_and_payload_under_contention() {
    const SENDERS: u64 = 4;
    const KEYS: u64 = 64;
    let reports: Arc<Mutex<Vec<PanicReport>>> = Arc::default();
    let sink = reports.clone();
    let pool = Pool::builder()
        .core_threads(3)
        .thread_name("obs")
        .panic_hook(move |r: &PanicReport| sink.lock().unwrap().push(r.clone()))
        .build()
        .unwrap();
    let typed = pool.typed_lanes(|key: &u64, round: u64| {
        if round % 2 == 0 {
            std::panic::panic_any(*key);
        }
    });
    let start = Latch::new(SENDERS as usize);
    let senders: Vec<_> = (0..SENDERS)
        .map(|t| {
            let (typed, start) = (typed.clone(), start.clone());
            std::thread::spawn(move || {
                start.count_down();
                start.wait();
                for k in (t..KEYS).step_by(SENDERS as usize) {
                    for round in 0..4 {
                        typed.send(k, round).unwrap();
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    pool.shutdown();
    let reports = reports.lock().unwrap();
    assert_eq!(
        reports.len() as u64,
        KEYS * 2,
        "two panicking rounds per key"
    );
    for r in reports.iter() {
        let key = r
            .take_payload()
            .expect("a typed message has no handle: the report keeps the payload");
        let key = *key.downcast::<u64>().expect("the payload is the key");
        assert_eq!(r.context_hash(), Some(pool.context_hash(&key)), "key {key}");
        assert!(r.thread_name().unwrap().starts_with("obs-"), "{r}");
        assert!(r.to_string().contains("in context 0x"), "{r}");
    }
}

#[test]
fn stats_count_running_and_waiting_tasks_apart() {
    let gate = Gate::new();
    let pool = Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .reserved_threads(1)
        .build()
        .unwrap();
    let started = Latch::new(3);
    for _ in 0..2 {
        let (s, g) = (started.clone(), gate.clone());
        pool.execute(move || {
            s.count_down();
            g.wait();
        })
        .unwrap();
    }
    // A third task on the reserved thread (retried until one is idle).
    let mut task = {
        let (s, g) = (started.clone(), gate.clone());
        Box::new(move || {
            s.count_down();
            g.wait();
        }) as Box<dyn FnOnce() + Send>
    };
    while let Err(e) = pool.try_execute(task) {
        task = e.into_inner();
        std::thread::yield_now();
    }
    started.wait();
    for i in 0..5 {
        pool.execute_sequential(i % 2, || ()).unwrap();
    }
    let s = pool.stats();
    assert_eq!((s.running_tasks, s.waiting_tasks), (3, 5), "{s}");
    assert_eq!(s.unfinished_tasks(), 8);
    #[allow(deprecated)]
    {
        assert_eq!(s.queued_tasks, 8, "the old name keeps its meaning");
        assert_eq!(s.transfers, s.jobs_moved_off_blocked);
    }
    let line = s.to_string();
    assert!(line.contains("tasks: 5 waiting, 3 running"), "{line}");
    assert!(line.contains("1 reserved (0 idle)"), "{line}");
    gate.open();
    pool.shutdown();
    let s = pool.stats();
    assert_eq!((s.running_tasks, s.waiting_tasks), (0, 0), "{s}");
    assert_eq!(s.completed_tasks, 8);
}

#[test]
fn pool_names_default_to_the_thread_prefix_and_take_any_string() {
    for (name, expect) in [
        (None, "keyway"),
        (Some(""), ""),
        (Some("orders ✓ \u{0}"), "orders ✓ \u{0}"),
    ] {
        let mut b = Pool::builder().core_threads(1);
        if let Some(n) = name {
            b = b.name(n);
        }
        let pool = b.build().unwrap();
        assert_eq!(pool.name(), expect);
        pool.shutdown();
    }
    let long = "x".repeat(1 << 16);
    let pool = Pool::builder()
        .core_threads(1)
        .thread_name("io")
        .build()
        .unwrap();
    assert_eq!(pool.name(), "io");
    pool.shutdown();
    let pool = Pool::builder()
        .core_threads(1)
        .name(long.clone())
        .build()
        .unwrap();
    assert_eq!(pool.name(), long);
    pool.shutdown();
}

#[test]
fn reports_and_stats_stay_send_sync_and_clone() {
    fn shareable<T: Send + Sync + Clone + 'static>() {}
    shareable::<PanicReport>(); // the payload is behind a lock: a report is still `Sync`
    shareable::<keyway::Stats>();
    shareable::<keyway::LaneDepth>();
}
