//! A context's futures queued behind one another: one driver per lane activation polls them one
//! after another, and hands the lane back to a runner for anything else. Order holds across
//! closures, panics, cancelled handles and real waits in between, on several contexts at once.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::finishes;
use keyway::Pool;

/// A reply from another thread: the future really waits.
async fn remote_reply() {
    let (tx, rx) = futures::channel::oneshot::channel();
    std::thread::spawn(move || tx.send(()).unwrap());
    rx.await.unwrap();
}

const KEYS: u32 = 4;
const ITEMS: u32 = 300;

#[test]
fn a_contexts_futures_closures_panics_and_cancels_keep_their_order() {
    finishes("a chain of futures and closures", || {
        let panics = Arc::new(AtomicUsize::new(0));
        let p = panics.clone();
        let pool = Pool::builder()
            .core_threads(2)
            .panic_hook(move |_| {
                p.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        let logs: Arc<Vec<Mutex<Vec<u32>>>> =
            Arc::new((0..KEYS).map(|_| Mutex::new(Vec::new())).collect());
        let mut gates = Vec::new();
        let mut handles = Vec::new();
        let mut want: Vec<Vec<u32>> = vec![Vec::new(); KEYS as usize];
        for key in 0..KEYS {
            // Each key's lane is held by a waiting future while the rest queue behind it.
            let (open, gate) = futures::channel::oneshot::channel::<()>();
            gates.push(open);
            pool.execute_async_sequential(key, async move {
                let _ = gate.await;
            })
            .unwrap();
        }
        for i in 0..ITEMS {
            for key in 0..KEYS {
                let logs = logs.clone();
                let log = move |i| logs[key as usize].lock().unwrap().push(i);
                match i % 6 {
                    // A closure between two futures: the lane goes back to a runner.
                    0 => pool.execute_sequential(key, move || log(i)).unwrap(),
                    1 => {
                        pool.execute_async_sequential(key, async move {
                            remote_reply().await;
                            log(i);
                        })
                        .unwrap();
                    }
                    2 => {
                        pool.execute_async_sequential(key, async move {
                            keyway::yield_now().await;
                            panic!("a future of the chain panics");
                        })
                        .unwrap();
                        continue;
                    }
                    3 => {
                        // Cancelled before it starts: it never runs, and the chain goes on.
                        let handle = pool.spawn_sequential(key, async move { log(i) }).unwrap();
                        handle.cancel();
                        handles.push(handle);
                        continue;
                    }
                    4 => handles.push(
                        pool.spawn_sequential(key, async move {
                            keyway::yield_now().await;
                            log(i);
                        })
                        .unwrap(),
                    ),
                    _ => pool
                        .execute_async_sequential(key, async move { log(i) })
                        .unwrap(),
                }
                want[key as usize].push(i);
            }
        }
        for open in gates {
            open.send(()).unwrap();
        }
        pool.shutdown();
        for (key, want) in want.iter().enumerate() {
            assert_eq!(
                *logs[key].lock().unwrap(),
                *want,
                "key {key}: every item once, in order"
            );
        }
        assert_eq!(panics.load(Ordering::SeqCst), (KEYS * ITEMS / 6) as usize);
        let cancelled = handles
            .into_iter()
            .filter_map(|h| h.join().err())
            .filter(|e| e.is_cancelled())
            .count();
        assert_eq!(cancelled, (KEYS * ITEMS / 6) as usize, "each cancelled one");
    });
}
