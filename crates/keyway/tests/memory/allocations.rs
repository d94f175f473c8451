//! No heap allocation per task on the sequential, coalescing and plain
//! paths. A counting global allocator counts every allocation in the process while 100,000
//! small tasks go through one warm lane (or the plain path).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::SERIAL;

const TASKS: u64 = 100_000;

/// Allocations made while `submit` is called `TASKS` times and the pool runs them all.
fn allocations_for(pool: &keyway::Pool, done: &Arc<AtomicUsize>, submit: impl Fn(u64)) -> u64 {
    done.store(0, Ordering::SeqCst);
    // Warm: every buffer on the path at its working size.
    for i in 0..TASKS {
        submit(i);
    }
    common::eventually("warm-up ran", || {
        done.load(Ordering::SeqCst) as u64 == TASKS
    });
    done.store(0, Ordering::SeqCst);
    let before = common::counting::allocations();
    for i in 0..TASKS {
        submit(i);
    }
    common::eventually("all ran", || done.load(Ordering::SeqCst) as u64 == TASKS);
    let n = common::counting::allocations() - before;
    let _ = pool;
    n
}

/// At most `max` allocations for the `TASKS` tasks of `path`.
fn assert_at_most(path: &str, allocs: u64, max: u64) {
    println!("{path}: {allocs} allocations for {TASKS} tasks");
    assert!(
        allocs <= max,
        "{path}: {allocs} allocations for {TASKS} tasks (at most {max})"
    );
}

/// A warm lane allocates nothing at all: its queue buffer is reused, a task's closure is stored
/// inline, and a lane that goes idle between tasks is scheduled again without allocating (a lane
/// job is a reference count, and an idle lane job that goes through the global queue shares its
/// blocks with other jobs, at most one block per `INJECTOR_BLOCK` jobs).
const INJECTOR_BLOCK: u64 = 63;

#[test]
fn sequential_tasks_on_a_warm_lane_allocate_nothing_per_task() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let lane = pool.lane(7u32);
    let d = done.clone();
    let n = allocations_for(&pool, &done, |_| {
        let d = d.clone();
        lane.execute(move || {
            d.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap()
    });
    assert_at_most("Lane::execute", n, TASKS / INJECTOR_BLOCK);
    let d = done.clone();
    let n = allocations_for(&pool, &done, |_| {
        let d = d.clone();
        pool.execute_sequential(7u32, move || {
            d.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap()
    });
    assert_at_most("execute_sequential", n, TASKS / INJECTOR_BLOCK);
    drop(lane);
    pool.shutdown();
}

#[test]
fn coalescing_tasks_on_a_warm_lane_allocate_nothing_per_task() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    // A coalesced-away task counts too (its closure is dropped unrun).
    struct Count(Arc<AtomicUsize>);
    impl Drop for Count {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let n = allocations_for(&pool, &done, |_| {
        let c = Count(d.clone());
        pool.execute_coalescing(7u32, move || drop(c)).unwrap()
    });
    assert_at_most("execute_coalescing", n, TASKS / INJECTOR_BLOCK);
    pool.shutdown();
}

#[test]
fn plain_tasks_allocate_nothing_per_task() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let n = allocations_for(&pool, &done, |_| {
        let d = d.clone();
        pool.execute(move || {
            d.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap()
    });
    // The plain path: the task itself is inline; the global queue (crossbeam's injector)
    // allocates one block per 63 jobs submitted from outside the pool.
    assert_at_most("execute", n, TASKS / INJECTOR_BLOCK + 16);
    pool.shutdown();
}

#[test]
fn plain_tasks_from_four_producers_allocate_nothing_per_task() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    const PRODUCERS: u64 = 4;
    let run = |count: bool| {
        done.store(0, Ordering::SeqCst);
        // The producers are started and waiting before the count starts (a thread's start
        // allocates); they then submit a quarter of the tasks each, at once.
        let ready = std::sync::Barrier::new(PRODUCERS as usize + 1);
        let go = std::sync::Barrier::new(PRODUCERS as usize + 1);
        std::thread::scope(|s| {
            for _ in 0..PRODUCERS {
                let (pool, done, ready, go) = (&pool, &done, &ready, &go);
                s.spawn(move || {
                    ready.wait();
                    go.wait();
                    for _ in 0..TASKS / PRODUCERS {
                        let d = done.clone();
                        pool.execute(move || {
                            d.fetch_add(1, Ordering::SeqCst);
                        })
                        .unwrap();
                    }
                    ready.wait();
                });
            }
            ready.wait();
            let before = common::counting::allocations();
            go.wait();
            ready.wait();
            common::eventually("all ran", || done.load(Ordering::SeqCst) as u64 == TASKS);
            let n = common::counting::allocations() - before;
            if count {
                // The producers share the injector's blocks (1,587 for 100,000 jobs), but racing
                // producers and workers allocate a little more, not per task (measured: 1,614 to
                // 1,828 in 4 runs; the source is not pinned down). A per-task allocation would
                // show 100,000 more; the bound catches one per 10 tasks.
                assert_at_most("execute, 4 producers", n, TASKS / 10);
            }
        });
    };
    run(false); // warm: every buffer on the path at its working size
    run(true);
    pool.shutdown();
}
