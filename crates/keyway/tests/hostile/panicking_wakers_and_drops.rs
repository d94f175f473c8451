//! User code in the pool's bookkeeping paths: a panic in a waker (a lane future's handle, a
//! room waiter), in an output's drop or in a panic payload's drop must not skip a finish count
//! or a lane's release, starve other waiters or leave a worker marked blocked. Each test is one
//! reproduced defect; a hang is turned into a failure by `finishes`.

use crate::common;

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{eventually, finishes, poll_with_panicking_waker, Gate, PanicOnDrop, HANG};
use keyway::Pool;

/// The pool is idle, and its monitor, which had marked a task blocked, sees no blocked worker
/// once the task is over: the worker's "inside a task" state is right.
fn no_blocked_worker_after_a_blocked_task(pool: &Pool) {
    let (tx, rx) = channel();
    let p = pool.clone();
    pool.execute(move || {
        // The monitor marks this task blocked (it stays in it well past `blocked_after`).
        let mut seen = false;
        for _ in 0..20_000 {
            if p.stats().blocked_threads >= 1 {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        tx.send(seen).unwrap();
    })
    .unwrap();
    assert!(
        rx.recv_timeout(HANG).unwrap(),
        "the monitor never saw a blocking task as blocked"
    );
    assert!(pool.wait_idle_timeout(HANG));
    eventually("no blocked worker once idle", || {
        pool.stats().blocked_threads == 0
    });
}

/// A lane future's handle awaited with a waker that panics on wake: the lane still goes on and
/// shutdown returns.
#[test]
fn lane_future_handle_waker_panic_does_not_stall_the_lane() {
    finishes("lane future with a panicking handle waker", || {
        let pool = Pool::builder().core_threads(1).build().unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        let mut handle = pool
            .spawn_sequential("k", async move {
                g.wait();
                5
            })
            .unwrap();
        assert!(poll_with_panicking_waker(&mut handle));
        gate.open();
        assert_eq!(
            pool.submit_sequential("k", || 7).unwrap().join().unwrap(),
            7
        );
        pool.shutdown();
        assert_eq!(pool.stats().blocked_threads, 0);
    });
}

/// A `wait_for_room_async` waiter whose waker panics, woken by a lane task's finish: the lane
/// is released all the same.
#[test]
fn room_waiter_waker_panic_does_not_stall_the_lane() {
    finishes("room waiter with a panicking waker", || {
        let pool = Pool::builder().core_threads(1).capacity(1).build().unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute_sequential("k", move || g.wait()).unwrap();
        let mut wait = Box::pin(pool.wait_for_room_async(|| (), |t| pool.execute(t)));
        assert!(poll_with_panicking_waker(&mut wait));
        gate.open();
        // The finish woke the waiter (its waker panicked); the lane must still be free.
        let mut got = None;
        for _ in 0..1000 {
            match pool.submit_sequential("k", || 7) {
                Ok(h) => {
                    got = Some(h.join().unwrap());
                    break;
                }
                Err(keyway::SubmitError::Full(_)) => {
                    assert!(pool.wait_idle_timeout(HANG));
                }
                Err(e) => panic!("refused: {e:?}"),
            }
        }
        assert_eq!(got, Some(7));
        drop(wait);
        pool.shutdown();
    });
}

/// Several room waiters: one panicking waker does not keep the others from being woken.
#[test]
fn room_waiter_waker_panic_does_not_starve_the_others() {
    finishes("room waiters behind a panicking waker", || {
        let pool = Pool::builder().core_threads(1).capacity(1).build().unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute(move || g.wait()).unwrap();
        let mut bad = Box::pin(pool.wait_for_room_async(|| (), |t| pool.execute(t)));
        assert!(poll_with_panicking_waker(&mut bad));
        // A well-behaved waiter behind it, on a thread of its own.
        let p = pool.clone();
        let good = std::thread::spawn(move || {
            futures::executor::block_on(p.wait_for_room_async(|| 3, |t| p.submit(t)))
                .unwrap()
                .join()
                .unwrap()
        });
        // Wait until the good waiter is registered: the pool stays full until the gate opens.
        gate.open();
        assert_eq!(good.join().unwrap(), 3);
        drop(bad);
        pool.shutdown();
    });
}

/// A lane future finishing in its first poll with an output whose drop panics (its handle
/// dropped): the launch is still counted; shutdown returns.
#[test]
fn lane_future_output_drop_panic_in_first_poll_is_counted() {
    finishes("output drop panic in a first poll", || {
        let pool = Pool::builder().core_threads(1).build().unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute_sequential("k", move || g.wait()).unwrap();
        drop(pool.spawn_sequential("k", async { PanicOnDrop }).unwrap());
        gate.open();
        assert_eq!(
            pool.submit_sequential("k", || 7).unwrap().join().unwrap(),
            7
        );
        pool.shutdown();
    });
}

/// A future that waits for an outside wake-up once, then completes with `PanicOnDrop`.
struct WakeOnceThenPanicOnDrop {
    waker: Arc<Mutex<Option<Waker>>>,
    polled: bool,
}

impl Future for WakeOnceThenPanicOnDrop {
    type Output = PanicOnDrop;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<PanicOnDrop> {
        if self.polled {
            return Poll::Ready(PanicOnDrop);
        }
        self.polled = true;
        *self.waker.lock().unwrap() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// The same panic in a later poll: the worker's progress state stays right (the monitor still
/// sees a blocked task, and no blocked worker once idle); shutdown returns.
#[test]
fn lane_future_output_drop_panic_in_later_poll_keeps_progress_right() {
    finishes("output drop panic in a later poll", || {
        let pool = Pool::builder()
            .core_threads(1)
            .monitor_period(Duration::from_millis(1))
            .blocked_after(Duration::from_millis(5))
            .build()
            .unwrap();
        let slot = Arc::new(Mutex::new(None::<Waker>));
        let fut = WakeOnceThenPanicOnDrop {
            waker: slot.clone(),
            polled: false,
        };
        drop(pool.spawn_sequential("k", fut).unwrap());
        eventually("the future parked", || slot.lock().unwrap().is_some());
        slot.lock().unwrap().take().unwrap().wake();
        assert_eq!(
            pool.submit_sequential("k", || 7).unwrap().join().unwrap(),
            7
        );
        no_blocked_worker_after_a_blocked_task(&pool);
        pool.shutdown();
    });
}

/// A task panics with a payload whose drop panics: shutdown returns.
#[test]
fn panic_payload_drop_panic_is_contained() {
    finishes("payload drop panic", || {
        let pool = Pool::builder().core_threads(1).build().unwrap();
        pool.execute(|| std::panic::panic_any(PanicOnDrop)).unwrap();
        assert!(pool.wait_idle_timeout(HANG));
        assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1);
        pool.shutdown();
    });
}

/// The same in a lane, with the context's next task in the same chunk: it runs, the lane goes
/// on, shutdown returns.
#[test]
fn panic_payload_drop_panic_in_a_lane_keeps_the_lane() {
    finishes("payload drop panic in a lane", || {
        let pool = Pool::builder().core_threads(1).build().unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute_sequential("k", move || g.wait()).unwrap();
        pool.execute_sequential("k", || std::panic::panic_any(PanicOnDrop))
            .unwrap();
        let next = pool.submit_sequential("k", || 7).unwrap();
        gate.open();
        assert_eq!(next.join().unwrap(), 7);
        assert_eq!(
            pool.submit_sequential("k", || 8).unwrap().join().unwrap(),
            8
        );
        pool.shutdown();
    });
}
