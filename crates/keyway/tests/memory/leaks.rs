//! Nothing of a pool (lane, key, table, task) is left
//! once it is dropped, on every shutdown path; and after a burst of one-shot contexts the bytes
//! the pool holds come back near where they were.
//!
//! A counting global allocator measures live heap bytes; keys, handlers and tasks carry counted
//! tokens, so a leaked lane (which owns its key) or table (which owns its handler) shows up
//! exactly. The tests share the allocator, so they run one at a time.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{eventually, fixed_pool, Gate};
use keyway::Pool;

pub(crate) fn live_bytes() -> isize {
    common::counting::live_bytes() as isize
}

/// Live instances of `Counted` (keys, handler captures, task captures).
static LIVE: AtomicUsize = AtomicUsize::new(0);

#[derive(Hash, PartialEq, Eq)]
pub(crate) struct Counted(u64);

impl Counted {
    pub(crate) fn new(i: u64) -> Self {
        LIVE.fetch_add(1, Ordering::SeqCst);
        Counted(i)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Uses `pool` on every kind of lane: keyed lanes (some cached idle afterwards), a pinned lane,
/// typed lanes, multi-key tasks, coalescing; returns the handles it made. With `settle`, waits
/// until the pinned lane ran its tasks.
fn exercise(
    pool: &Pool,
    settle: bool,
) -> (keyway::Lane<Counted>, keyway::TypedLanes<Counted, Counted>) {
    let token = Counted::new(u64::MAX);
    let typed = pool.typed_lanes(move |_k: &Counted, _m: Counted| {
        let _ = &token;
    });
    let lane = pool.lane(Counted::new(1_000_000));
    for i in 0..300u64 {
        let c = Counted::new(i);
        pool.execute_sequential(Counted::new(i % 50), move || drop(c))
            .unwrap();
        let c = Counted::new(i);
        pool.execute_coalescing(Counted::new(i % 7), move || drop(c))
            .unwrap();
        pool.execute_keyed([Counted::new(i % 11), Counted::new(100 + i % 13)], || ())
            .unwrap();
        typed.send(Counted::new(i % 20), Counted::new(i)).unwrap();
        let c = Counted::new(i);
        lane.execute(move || drop(c)).unwrap();
        // Futures: each waits once, holding a counted capture across the await.
        let c = Counted::new(i);
        let fut = async move {
            YieldOnce(false).await;
            drop(c);
        };
        drop(pool.spawn_sequential(Counted::new(i % 30), fut).unwrap());
        let c = Counted::new(i);
        let fut = async move {
            YieldOnce(false).await;
            drop(c);
        };
        let keys = [Counted::new(i % 11), Counted::new(200 + i % 5)];
        drop(pool.spawn_keyed(keys, fut).unwrap());
        let c = Counted::new(i);
        drop(lane.spawn(async move { drop(c) }).unwrap());
    }
    if settle {
        lane.submit(|| ()).unwrap().join().unwrap();
    }
    (lane, typed)
}

/// Returns `Pending` once (waking itself), then `Ready`.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            std::task::Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// Checks that nothing counted is alive and the heap is back within `slack` bytes of `before`.
pub(crate) fn all_freed(what: &str, before: isize, slack: isize) {
    eventually(
        &format!("{what}: every key, task and handler freed"),
        || LIVE.load(Ordering::SeqCst) == 0,
    );
    let deadline = std::time::Instant::now() + common::HANG;
    while live_bytes() - before > slack {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the heap stays {} bytes above its level",
            live_bytes() - before
        );
        // crossbeam's deques free their old buffers through epoch-based reclamation, which runs
        // when some thread pins: drive it, so deferred frees are not mistaken for a leak.
        for _ in 0..64 {
            crossbeam_epoch::pin().flush();
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The pool's own threads hold a little (thread names, join handles) until they exit.
pub(crate) const SLACK: isize = 16 << 10;

#[test]
fn dropping_every_handle_without_shutdown_frees_everything() {
    let _serial = crate::serial();
    let before = live_bytes();
    for _ in 0..20 {
        let pool = fixed_pool(1);
        // The work runs after the pool closed: the drop of the last handle waits for it (and
        // sweeps the idle lanes after), so the gate opens from another thread.
        let gate = common::hold_workers(&pool, 1);
        let (lane, typed) = exercise(&pool, false);
        let opener = std::thread::spawn(move || gate.open());
        drop((lane, typed, pool));
        opener.join().unwrap();
    }
    all_freed("dropped pools", before, SLACK);
}

#[test]
fn shutdown_then_dropping_a_lane_handle_frees_everything() {
    let _serial = crate::serial();
    let before = live_bytes();
    for _ in 0..20 {
        let pool = fixed_pool(2);
        let (lane, typed) = exercise(&pool, true);
        pool.shutdown();
        drop(pool);
        drop(typed);
        drop(lane); // the last handle, after shutdown
    }
    all_freed("lane handle dropped after shutdown", before, SLACK);
}

#[test]
fn shutdown_from_inside_a_pool_task_frees_everything() {
    let _serial = crate::serial();
    let before = live_bytes();
    for _ in 0..20 {
        let pool = fixed_pool(1);
        let gate = common::hold_workers(&pool, 1);
        // Runs right after the held task, before the lanes below: they go idle after it.
        let p = pool.clone();
        pool.execute(move || p.shutdown()).unwrap();
        let (lane, typed) = exercise(&pool, false);
        // The drop of the last handle waits for the held task: open the gate from elsewhere.
        let opener = std::thread::spawn(move || gate.open());
        drop((lane, typed, pool));
        opener.join().unwrap();
    }
    all_freed("shutdown inside a task", before, SLACK);
}

/// Each round on a thread of its own: the futures `shutdown_now` hands back are dropped there,
/// and their recycled cells (`task/spill.rs`) are kept by that thread (up to 64 of each class,
/// 62 KiB, and what overflows in the process-wide depot) until it exits. So the round's thread
/// exits before the heap is measured: what stays then is a leak.
#[test]
fn shutdown_now_from_outside_and_inside_frees_everything() {
    let _serial = crate::serial();
    let before = live_bytes();
    for round in 0..20 {
        std::thread::spawn(move || shutdown_now_round(round))
            .join()
            .unwrap();
    }
    all_freed("shutdown_now", before, SLACK);
}

/// One round of [`shutdown_now_from_outside_and_inside_frees_everything`].
fn shutdown_now_round(round: u32) {
    let pool = fixed_pool(1);
    let gate = Gate::new();
    let g = gate.clone();
    pool.execute_sequential(Counted::new(0), move || g.wait())
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    if round % 2 == 1 {
        // Right behind the held task: it stops the pool while the rest still waits.
        let p = pool.clone();
        pool.execute_sequential(Counted::new(0), move || {
            let _ = tx.send(p.shutdown_now());
        })
        .unwrap();
    }
    let (lane, typed) = exercise(&pool, false);
    let back = if round % 2 == 0 {
        common::shutdown_now_while_held(&pool, &gate)
    } else {
        gate.open();
        rx.recv().unwrap()
    };
    assert!(!back.is_empty(), "round {round}");
    drop(back); // handed-back tasks dropped unrun: their captures go too
    drop((lane, typed, pool));
}

#[test]
fn memory_returns_after_a_burst_of_one_shot_contexts() {
    let _serial = crate::serial();
    let pool = Pool::builder()
        .core_threads(2)
        .monitor_period(std::time::Duration::from_millis(20))
        .build()
        .unwrap();
    // Warm: the pool's own structures at their working size.
    for i in 0..10_000u64 {
        pool.execute_sequential(i, || ()).unwrap();
    }
    let quiet = |pool: &Pool| {
        eventually("burst done and every lane freed", || {
            let s = pool.stats();
            s.unfinished_tasks() == 0 && s.live_lanes == 0
        })
    };
    quiet(&pool);
    let before = live_bytes();
    // The burst: every worker held, so all 2,000,000 lanes are live at once.
    let gate = common::hold_workers(&pool, 2);
    for i in 0..2_000_000u64 {
        pool.execute_sequential(i, || ()).unwrap();
    }
    let peak = live_bytes() - before;
    gate.open();
    quiet(&pool);
    let after = live_bytes() - before;
    assert!(
        after < 1 << 20,
        "the pool keeps {after} bytes more than before the burst (peak +{peak})"
    );
    pool.shutdown();
}

/// Closures too large for a lane entry (here 32 bytes) go to recycled cells, which a burst
/// fills by the hundred thousand; once no cell has moved for a while, the pool's monitor gives
/// them back to the allocator, though the pool and every thread that freed them live on. (With
/// the monitor's trim removed, the pool keeps about 4 MiB of cells after this burst.)
#[test]
fn recycled_cells_of_a_burst_go_back_once_it_is_over() {
    let _serial = crate::serial();
    let pool = Pool::builder()
        .core_threads(2)
        .monitor_period(std::time::Duration::from_millis(20))
        .build()
        .unwrap();
    let ran = std::sync::Arc::new(AtomicUsize::new(0));
    let burst = |n: u64| {
        let gate = common::hold_workers(&pool, 2);
        for i in 0..n {
            let (ran, words) = (ran.clone(), [i, i + 1, i + 2]);
            pool.execute_sequential(i % 1_024, move || {
                ran.fetch_add(
                    1 + (words[0] + words[2] - 2 * words[1]) as usize,
                    Ordering::SeqCst,
                );
            })
            .unwrap();
        }
        gate.open();
        eventually("the burst ran", || pool.stats().unfinished_tasks() == 0);
    };
    // Warm: the pool's own structures (lanes, queue blocks) at their working size.
    burst(20_000);
    let before = live_bytes();
    burst(300_000);
    assert_eq!(ran.load(Ordering::SeqCst), 320_000);
    let deadline = std::time::Instant::now() + common::HANG;
    while live_bytes() - before > 1 << 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the pool keeps {} bytes more than before the burst",
            live_bytes() - before
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    pool.shutdown();
}

/// Futures waiting forever (their wakers held by nobody but the pool) are cancelled by
/// `shutdown_now` and freed, with everything they captured; async typed lanes too.
#[test]
fn shutdown_now_frees_waiting_futures() {
    let _serial = crate::serial();
    let before = live_bytes();
    for round in 0..20u64 {
        let pool = fixed_pool(2);
        let token = Counted::new(u64::MAX);
        let typed = pool.typed_lanes_async(move |_k: &Counted, m: Counted| {
            let _ = &token;
            async move {
                std::future::pending::<()>().await;
                drop(m);
            }
        });
        let mut handles = Vec::new();
        for i in 0..50u64 {
            let c = Counted::new(i);
            let forever = async move {
                std::future::pending::<()>().await;
                drop(c);
            };
            handles.push(match i % 3 {
                0 => pool.spawn(forever).unwrap(),
                1 => pool.spawn_sequential(Counted::new(i % 7), forever).unwrap(),
                _ => pool
                    .spawn_keyed([Counted::new(i % 5), Counted::new(10 + i % 4)], forever)
                    .unwrap(),
            });
            typed.send(Counted::new(i % 6), Counted::new(i)).unwrap();
        }
        if round % 2 == 0 {
            drop(handles);
        }
        let back = pool.shutdown_now();
        drop(back);
        drop((typed, pool));
    }
    all_freed("waiting futures", before, SLACK);
}

/// Counted like [`Counted`], and its drop panics (with no message: the panic hook stays quiet).
struct PanicsInDrop(#[allow(dead_code)] Counted, [u64; 4]);

impl Drop for PanicsInDrop {
    fn drop(&mut self) {
        std::panic::resume_unwind(Box::new("a capture's drop panicked"));
    }
}

/// Closures and futures in recycled cells whose drop panics (a capture's `Drop`) leak nothing:
/// each cell goes back (the value is moved out of it before its drop runs, or its storage freed
/// after an unwinding drop) and the panic is contained: a closure coalesced away (its panic
/// reported to the panic hook), a future coalesced away, a future started and cancelled at its
/// await point by `shutdown_now`. The pool goes on: each context's last closure runs. With a
/// cell kept when its value's drop unwinds, the heap grows by a cell per panic.
#[test]
fn values_whose_drop_panics_in_recycled_cells_leak_nothing() {
    let _serial = crate::serial();
    let before = live_bytes();
    // Each round on a thread of its own, which keeps the cells it freed until it exits (as in
    // `shutdown_now_from_outside_and_inside_frees_everything`).
    for _round in 0..10 {
        std::thread::spawn(panicking_drops_round).join().unwrap();
    }
    all_freed("values whose drop panics", before, SLACK);
}

/// One round of [`values_whose_drop_panics_in_recycled_cells_leak_nothing`].
fn panicking_drops_round() {
    {
        let reports = std::sync::Arc::new(AtomicUsize::new(0));
        let r = reports.clone();
        let pool = Pool::builder()
            .core_threads(2)
            .panic_hook(move |_| {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute_sequential(0u64, move || g.wait()).unwrap();
        let ran = std::sync::Arc::new(AtomicUsize::new(0));
        for i in 0..200u64 {
            let (token, ran) = (PanicsInDrop(Counted::new(i), [i; 4]), ran.clone());
            pool.execute_coalescing(0u64, move || {
                ran.fetch_add(1, Ordering::SeqCst);
                drop(token);
            })
            .unwrap();
            let token = PanicsInDrop(Counted::new(i), [i; 4]);
            let fut = async move { std::hint::black_box(&token).1[0] };
            drop(pool.spawn_coalescing(1u64, fut).unwrap());
            let token = PanicsInDrop(Counted::new(i), [i; 4]);
            pool.execute_async_sequential(2 + i % 50, async move {
                std::future::pending::<()>().await;
                drop(token);
            })
            .unwrap();
        }
        gate.open();
        eventually("the last closure ran", || ran.load(Ordering::SeqCst) == 1);
        // 199 closures coalesced away, and the last one's run: each drop's panic reported.
        eventually("every panic reported", || {
            reports.load(Ordering::SeqCst) >= 200
        });
        drop(pool.shutdown_now());
        drop(pool);
    }
}

/// A key whose hash panics (with no message: the panic hook stays quiet).
#[derive(PartialEq, Eq)]
struct PanickyKey;

impl std::hash::Hash for PanickyKey {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {
        std::panic::resume_unwind(Box::new("a key's hash panicked"));
    }
}

/// A future `execute_async_sequential` refuses comes back as it was, whole: it is written in its
/// storage before it is submitted (so the submit path moves a pointer, not the future), and
/// read back out of it when refused, the storage freed. Refused for a key whose hash panics and
/// for a pool shut down; each future then runs on the caller's executor with every capture it
/// was made with. With the storage kept when refused, the heap grows by a cell per future.
#[test]
fn refused_futures_come_back_whole_and_leave_nothing() {
    use keyway::SubmitError;
    use std::sync::atomic::AtomicU64;
    let _serial = crate::serial();
    let before = live_bytes();
    let sum = std::sync::Arc::new(AtomicU64::new(0));
    let make = |i: u64| {
        let (token, pad, sum) = (Counted::new(i), [i; 24], sum.clone());
        async move {
            sum.fetch_add(pad.iter().sum::<u64>() + token.0, Ordering::SeqCst);
        }
    };
    for _round in 0..100 {
        let pool = fixed_pool(1);
        match pool.execute_async_sequential(PanickyKey, make(1)) {
            Err(SubmitError::KeyPanicked(fut)) => futures::executor::block_on(fut),
            other => panic!("a key's hash panicked: {:?}", other.map_err(|e| e.kind())),
        }
        pool.shutdown();
        match pool.execute_async_sequential(7u64, make(2)) {
            Err(SubmitError::Shutdown(fut)) => futures::executor::block_on(fut),
            other => panic!("the pool is shut down: {:?}", other.map_err(|e| e.kind())),
        }
        drop(pool);
    }
    assert_eq!(sum.load(Ordering::SeqCst), 100 * (25 + 50));
    all_freed("refused futures", before, SLACK);
}
