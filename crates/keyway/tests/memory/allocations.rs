//! Allocation budgets of the hot paths: no heap allocation per task on the sequential,
//! coalescing, batched (`execute_all`), typed (`TypedLane::send`), plain, sequencer and
//! scheduler-release paths. A counting global allocator counts every allocation in the process
//! while 100,000 small tasks go through one warm lane (or the path named). Each bound sits far
//! below one allocation per task (and, for batches, below one per batch), so a `Box` added to
//! a path fails its test.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::least_of;

pub(crate) const TASKS: u64 = 100_000;

/// Allocations made while `submit` is called `TASKS` times and the pool runs them all.
pub(crate) fn allocations_for(
    pool: &keyway::Pool,
    done: &Arc<AtomicUsize>,
    submit: impl Fn(u64),
) -> u64 {
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
pub(crate) fn assert_at_most(path: &str, allocs: u64, max: u64) {
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
pub(crate) const INJECTOR_BLOCK: u64 = 63;

#[test]
fn sequential_tasks_on_a_warm_lane_allocate_nothing_per_task() {
    let _serial = crate::serial();
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

/// The cells a submitter that runs ahead of the workers holds in flight, at most.
const RUN_AHEAD: u64 = TASKS / 10;

/// A closure too large for a lane entry's place (an `Arc` and three words: 32 bytes; an `Arc`
/// and six: 56) is kept in a recycled cell: the cells freed by the workers come back to the
/// submitter, so a warm path allocates nothing per task for it either, on one lane or on 1,024.
/// The submitter runs ahead of the workers, and the cells it holds in flight are as many as its
/// backlog: the first bursts find fewer recycled than they need (and, faster with the recycled
/// ones, run further ahead: measured 16,572 and 17,342 allocations in the first two rounds on
/// one lane, then 56 and 60), so the figure is the least of four rounds. On a loaded machine
/// every round may run ahead (measured 3,097 as the least of four, in a CI run with builds
/// beside it), so the bound is a tenth of the tasks: a `Box` per closure fails every round
/// (100,000 allocations), ten times over the bound ([`RUN_AHEAD`]).
#[test]
fn closures_too_large_for_an_entry_allocate_nothing_per_task() {
    let _serial = crate::serial();
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let least = |submit: &dyn Fn(u64)| least_of(4, || allocations_for(&pool, &done, submit));
    let d = done.clone();
    let n = least(&|i| {
        let (d, words) = (d.clone(), [i, i + 1, i + 2]);
        pool.execute_sequential(7u32, move || {
            d.fetch_add(
                1 + (words[0] + words[2] - 2 * words[1]) as usize,
                Ordering::SeqCst,
            );
        })
        .unwrap()
    });
    assert_at_most("execute_sequential, 32-byte closure", n, RUN_AHEAD);
    let d = done.clone();
    let n = least(&|i| {
        let (d, words) = (d.clone(), [i; 6]);
        pool.execute_sequential((i % 1_024) as u32, move || {
            d.fetch_add(1 + (words[0] - words[5]) as usize, Ordering::SeqCst);
        })
        .unwrap()
    });
    assert_at_most(
        "execute_sequential, 56-byte closure, 1,024 keys",
        n,
        RUN_AHEAD,
    );
    pool.shutdown();
}

#[test]
fn coalescing_tasks_on_a_warm_lane_allocate_nothing_per_task() {
    let _serial = crate::serial();
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
    let _serial = crate::serial();
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
    let _serial = crate::serial();
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

/// `Lane::execute_all`: batches of 16 tasks on a warm lane allocate nothing per task. A batch
/// is gathered into one buffer on its way in (measured: 6,258 allocations for 6,250 batches),
/// so the bound is one per batch; one per task would be 100,000 more.
#[test]
fn batches_on_a_warm_lane_allocate_nothing_per_task() {
    let _serial = crate::serial();
    const BATCH: u64 = 16;
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let lane = pool.lane(7u32);
    let d = done.clone();
    let n = allocations_for(&pool, &done, |i| {
        if i % BATCH == 0 {
            let batch = (0..BATCH).map(|_| {
                let d = d.clone();
                move || {
                    d.fetch_add(1, Ordering::SeqCst);
                }
            });
            lane.execute_all(batch).unwrap();
        }
    });
    assert_at_most(
        "Lane::execute_all",
        n,
        TASKS / BATCH + TASKS / INJECTOR_BLOCK,
    );
    drop(lane);
    pool.shutdown();
}

/// `TypedLane::send`: a message per task to one handler on a warm typed lane allocates
/// nothing per message.
#[test]
fn typed_messages_on_a_warm_lane_allocate_nothing_per_message() {
    let _serial = crate::serial();
    let pool = common::fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let lanes = pool.typed_lanes(move |_: &u32, add: usize| {
        d.fetch_add(add, Ordering::SeqCst);
    });
    let lane = lanes.lane(7);
    let n = allocations_for(&pool, &done, |_| lane.send(1).unwrap());
    assert_at_most("TypedLane::send", n, TASKS / INJECTOR_BLOCK);
    drop(lane);
    pool.shutdown();
}

/// Tasks a sequencer test counts: a static, so the closures handed to `Ticket::run` capture
/// nothing and a stored (boxed) one needs no heap block of its own.
static TURNS: AtomicUsize = AtomicUsize::new(0);

/// A sequencer's tickets allocate nothing per turn: turns run in order on one thread take the
/// ready path (nothing stored), and turns run out of order on the pool store their closure (a
/// zero-sized one here, whose box takes no memory), so whatever the path itself allocates
/// shows. On the pool the ring holds every ticket of a round: a ticket more than a ring ahead
/// of the oldest unfinished turn parks in its slot's overflow list, which allocates by design,
/// and how far ahead tickets get depends on how the OS schedules the two workers (one
/// descheduled while its turn is pending lets the other run a ring's worth past it).
#[test]
fn sequencer_turns_allocate_nothing_per_ticket() {
    let _serial = crate::serial();
    let sequencer = keyway::Sequencer::new(1_024).unwrap();
    let turn = || {
        TURNS.fetch_add(1, Ordering::SeqCst);
    };
    // In order, on this thread: every turn is ready when it arrives.
    for _ in 0..TASKS {
        let _ = sequencer.next_ticket().run(turn);
    }
    // This thread's allocations only: the claim is about the path these turns take here, and
    // another thread (a pool an earlier test left to finish in the background) may allocate
    // meanwhile.
    let before = common::counting::thread_allocations();
    for _ in 0..TASKS {
        let _ = sequencer.next_ticket().run(turn);
    }
    let n = common::counting::thread_allocations() - before;
    assert_at_most("Sequencer, in order", n, 16);
    // On the pool: turns arrive out of order and wait for their predecessors, in a ring that
    // holds a whole round, so no ticket takes the overflow path however the workers are
    // scheduled.
    let sequencer = keyway::Sequencer::new(TASKS as usize).unwrap();
    let pool = common::fixed_pool(2);
    let n = allocations_for_turns(&pool, &sequencer);
    // The global queue's blocks (one per `INJECTOR_BLOCK` jobs, 1,587 here) and the pool's own
    // bookkeeping, which varies with how the turns interleave (measured 1,587-1,790): twice
    // the blocks still fails at once on one allocation per turn (100,000).
    assert_at_most("Sequencer, on the pool", n, 2 * (TASKS / INJECTOR_BLOCK));
    pool.shutdown();
}

/// Allocations made while `TASKS` plain tasks each run a sequencer turn, after a warm round.
fn allocations_for_turns(pool: &keyway::Pool, sequencer: &keyway::Sequencer) -> u64 {
    let mut n = 0;
    for _round in 0..2 {
        TURNS.store(0, Ordering::SeqCst);
        let before = common::counting::allocations();
        for _ in 0..TASKS {
            let ticket = sequencer.next_ticket();
            pool.execute(move || {
                let _ = ticket.run(|| {
                    TURNS.fetch_add(1, Ordering::SeqCst);
                });
            })
            .unwrap();
        }
        common::eventually("all turns ran", || {
            TURNS.load(Ordering::SeqCst) as u64 == TASKS
        });
        n = common::counting::allocations() - before;
    }
    n
}

/// The scheduler's release path, one task at a time: tasks already scheduled on a paused
/// executor (their entries made before the count starts) are released to the pool when it
/// resumes, paced over the interval, and run. A task handed to the pool on its own costs one
/// allocation (its release record, more than the pool keeps inline); nothing else on the way
/// may allocate.
#[test]
fn the_schedulers_release_path_allocates_only_the_release_record() {
    let _serial = crate::serial();
    const TASKS: usize = 20_000;
    const FAST: f64 = 1e9;
    let pool = common::fixed_pool(2);
    let (tx, intervals) = std::sync::mpsc::channel::<()>();
    let tx = Mutex::new(tx);
    let scheduler = keyway::Scheduler::builder(&pool)
        .interval(std::time::Duration::from_millis(10))
        .executor("x", keyway::ExecutorConfig::with_tps(0.0))
        .interval_hook(move |_| {
            let _ = tx.lock().unwrap_or_else(|e| e.into_inner()).send(());
        })
        .build()
        .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let mut released = 0;
    for _round in 0..2 {
        // Paused (a new limit holds from the next interval on: two interval ends after the
        // change it is in force): every task waits in the scheduler until the count started.
        scheduler.set_tps("x", 0.0).unwrap();
        while intervals.try_recv().is_ok() {}
        for _ in 0..2 {
            intervals.recv().unwrap();
        }
        done.store(0, Ordering::SeqCst);
        for _ in 0..TASKS {
            let d = done.clone();
            scheduler
                .execute_with(
                    "x",
                    keyway::Timing::after(std::time::Duration::ZERO),
                    move || {
                        d.fetch_add(1, Ordering::SeqCst);
                    },
                )
                .unwrap();
        }
        let before = common::counting::allocations();
        assert_eq!(
            done.load(Ordering::SeqCst),
            0,
            "a paused executor released a task"
        );
        scheduler.set_tps("x", FAST).unwrap();
        common::eventually("all ran", || done.load(Ordering::SeqCst) == TASKS);
        released = common::counting::allocations() - before;
    }
    println!("scheduler release: {released} allocations for {TASKS} tasks");
    // One release record per task, the global queue's blocks, and slack for the pool's own
    // bookkeeping (measured 20,329-20,334): a second allocation per task (40,000) still fails.
    let max = (TASKS + 2 * (TASKS / 63) + 64) as u64;
    assert!(
        released <= max,
        "scheduler release: {released} allocations for {TASKS} tasks (at most {max})"
    );
    scheduler.shutdown();
    pool.shutdown();
}

/// The scheduler's release path in bulk: tasks of an unlimited executor all due at one instant
/// are released in one step and handed to the pool in batches, allocating per batch (its
/// buffer and the pool task that runs it), not per task.
#[test]
fn the_schedulers_bulk_release_allocates_per_batch_not_per_task() {
    let _serial = crate::serial();
    const TASKS: usize = 20_000;
    let pool = common::fixed_pool(2);
    let scheduler = keyway::Scheduler::builder(&pool)
        .interval(std::time::Duration::from_millis(10))
        .executor("x", keyway::ExecutorConfig::unlimited())
        .build()
        .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let mut lead = std::time::Duration::from_millis(100);
    let mut counted = Vec::new();
    while counted.len() < 2 {
        done.store(0, Ordering::SeqCst);
        // Due together, far enough ahead that scheduling them all ends first; a round in which
        // one ran before the count started does not count, and the next gives more time.
        let at = std::time::Instant::now() + lead;
        for _ in 0..TASKS {
            let d = done.clone();
            scheduler
                .execute_with("x", keyway::Timing::at(at), move || {
                    d.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
        }
        let before = common::counting::allocations();
        let clean = done.load(Ordering::SeqCst) == 0;
        common::eventually("all ran", || done.load(Ordering::SeqCst) == TASKS);
        let n = common::counting::allocations() - before;
        if clean {
            counted.push(n);
        } else {
            lead *= 2;
        }
    }
    let released = counted[1];
    println!("scheduler bulk release: {released} allocations for {TASKS} tasks");
    // Batches of up to 32 tasks: two allocations per batch would be 1,250.
    let max = (TASKS / 10) as u64;
    assert!(
        released <= max,
        "scheduler bulk release: {released} allocations for {TASKS} tasks (at most {max})"
    );
    scheduler.shutdown();
    pool.shutdown();
}
