//! `shutdown_async`: the graceful shutdown awaited from async code. Its future completes only
//! once every accepted task has run and the threads have exited, from a tokio task, from many
//! callers at once, and for a future obtained inside a pool task; awaited inside a future on a
//! lane (which cannot wait for itself) it completes at once and the pool still finishes. A hang
//! is a failure (`finishes`).

use crate::common;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::task::Context;

use common::{finishes, fixed_pool, Gate, Latch, HANG};
use keyway::{Pool, SubmitError};

/// Queues `n` counting tasks behind `gate` on `pool`: one held task first, in lane 0, the
/// counting ones spread over lanes 0..4 (so some wait in the held lane, some do not).
fn counting_behind(pool: &Pool, gate: &Gate, n: usize) -> Arc<AtomicUsize> {
    let started = Latch::new(1);
    let held = common::held_task(gate, &started);
    pool.execute_sequential(0u32, move || {
        held();
    })
    .unwrap();
    started.wait();
    let ran = Arc::new(AtomicUsize::new(0));
    for i in 0..n {
        let ran = ran.clone();
        pool.execute_sequential((i % 4) as u32, move || {
            ran.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    ran
}

fn threads(pool: &Pool) -> usize {
    let stats = pool.stats();
    stats.core_threads + stats.auxiliary_threads
}

fn is_pending(fut: &mut (impl Future + Unpin)) -> bool {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    std::pin::Pin::new(fut).poll(&mut cx).is_pending()
}

#[test]
fn awaited_from_a_tokio_task_it_completes_once_the_pool_has_stopped() {
    finishes("shutdown_async from a tokio task", || {
        let pool = fixed_pool(1);
        let gate = Gate::new();
        let ran = counting_behind(&pool, &gate, 200);
        let mut stopping = pool.shutdown_async();
        // Intake stops before the call returns.
        assert!(matches!(pool.execute(|| ()), Err(SubmitError::Shutdown(_))));
        // The held task still runs: not done.
        assert!(is_pending(&mut stopping));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let (p, r) = (pool.clone(), ran.clone());
        let awaited = rt.spawn(async move {
            stopping.await;
            (r.load(Ordering::SeqCst), threads(&p))
        });
        gate.open();
        let seen = rt.block_on(awaited).unwrap();
        assert_eq!(seen, (200, 0));
    });
}

#[test]
fn many_callers_at_once_each_complete_once_the_pool_has_stopped() {
    finishes("shutdown_async from many callers", || {
        let pool = fixed_pool(2);
        let gate = Gate::new();
        let ran = counting_behind(&pool, &gate, 500);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        // Threads calling at once (four awaiting, one blocking in `shutdown`), and tokio tasks.
        let threads_in = 4;
        let all_in = Arc::new(Barrier::new(threads_in + 2));
        let awaiting: Vec<_> = (0..threads_in)
            .map(|_| {
                let (pool, ran, all_in) = (pool.clone(), ran.clone(), all_in.clone());
                std::thread::spawn(move || {
                    all_in.wait();
                    futures::executor::block_on(pool.shutdown_async());
                    (ran.load(Ordering::SeqCst), threads(&pool))
                })
            })
            .collect();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (pool, ran) = (pool.clone(), ran.clone());
                rt.spawn(async move {
                    pool.shutdown_async().await;
                    (ran.load(Ordering::SeqCst), threads(&pool))
                })
            })
            .collect();
        let blocking = {
            let (pool, all_in) = (pool.clone(), all_in.clone());
            std::thread::spawn(move || {
                all_in.wait();
                pool.shutdown();
            })
        };
        all_in.wait();
        gate.open();
        for task in tasks {
            assert_eq!(rt.block_on(task).unwrap(), (500, 0));
        }
        for thread in awaiting {
            assert_eq!(thread.join().unwrap(), (500, 0));
        }
        blocking.join().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 500);
    });
}

#[test]
fn awaited_inside_a_future_on_a_lane_it_completes_and_the_pool_finishes() {
    finishes("shutdown_async inside a lane future", || {
        let pool = fixed_pool(2);
        let ran = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let p = pool.clone();
        pool.execute_async_sequential("account", async move {
            p.shutdown_async().await;
            tx.send(p.execute(|| ()).is_err()).unwrap();
        })
        .unwrap();
        // Accepted behind the future in its own lane, or refused once intake stopped: each
        // accepted one runs.
        let mut accepted = 0;
        for _ in 0..100 {
            let ran = ran.clone();
            let counted = move || {
                ran.fetch_add(1, Ordering::SeqCst);
            };
            if pool.execute_sequential("account", counted).is_ok() {
                accepted += 1;
            }
        }
        let refused_inside = rx.recv_timeout(HANG).expect("the future did not complete");
        assert!(refused_inside);
        futures::executor::block_on(pool.shutdown_async());
        assert_eq!(ran.load(Ordering::SeqCst), accepted);
        assert_eq!(threads(&pool), 0);
    });
}

#[test]
fn obtained_inside_a_pool_task_and_awaited_outside_it_waits_for_the_pool() {
    finishes("shutdown_async from a pool task", || {
        let pool = fixed_pool(1);
        let gate = Gate::new();
        let ran = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let p = pool.clone();
        let g = gate.clone();
        pool.execute_sequential(7u8, move || {
            tx.send((p.shutdown_async(), p.execute(|| ()).is_err()))
                .unwrap();
            g.wait_for(HANG);
        })
        .unwrap();
        // Accepted before the task above ran, or refused after.
        let mut accepted = 0;
        for _ in 0..50 {
            let ran = ran.clone();
            let counted = move || {
                ran.fetch_add(1, Ordering::SeqCst);
            };
            if pool.execute_sequential(7u8, counted).is_ok() {
                accepted += 1;
            }
        }
        let (stopping, refused_inside) = rx.recv_timeout(HANG).unwrap();
        assert!(refused_inside);
        let mut stopping = pin!(stopping);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        // The task that started it is still held: polled out here, it waits.
        assert!(stopping.as_mut().poll(&mut cx).is_pending());
        gate.open();
        futures::executor::block_on(stopping);
        assert_eq!(ran.load(Ordering::SeqCst), accepted);
        assert_eq!(threads(&pool), 0);
    });
}
