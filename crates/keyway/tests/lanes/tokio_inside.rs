//! tokio inside keyway futures with no wrapper (the `tokio` feature, on in keyway's own tests):
//! a future spawned from inside a tokio runtime, and an async typed lane made there, use that
//! runtime's timers and sockets; one that uses tokio outside any runtime gets a report saying
//! what to do; a typed lane's handler panic reaches the panic hook.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyway::{PanicReport, Pool, TaskError};

fn pool_with_hook() -> (Pool, Arc<Mutex<Vec<PanicReport>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let pool = Pool::builder()
        .core_threads(2)
        .panic_hook(move |r| sink.lock().unwrap().push(r.clone()))
        .build()
        .unwrap();
    (pool, seen)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
#[test]
async fn tokio_sleep_in_spawn_sequential_under_tokio_main() {
    let (pool, panics) = pool_with_hook();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..3u32 {
        let log = log.clone();
        handles.push(
            pool.spawn_sequential("account-1", async move {
                tokio::time::sleep(Duration::from_millis(5 * u64::from(3 - i))).await;
                log.lock().unwrap().push(i);
                i
            })
            .unwrap(),
        );
    }
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.await.unwrap(), i as u32);
    }
    assert_eq!(
        *log.lock().unwrap(),
        vec![0, 1, 2],
        "in order across awaits"
    );
    assert!(panics.lock().unwrap().is_empty());
    pool.shutdown();
}

#[tokio::test] // a current-thread runtime: its driver runs while this test awaits
async fn tokio_sleep_and_socket_in_spawn_under_a_current_thread_runtime() {
    let (pool, _) = pool_with_hook();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = pool
        .spawn(async move {
            use tokio::io::AsyncWriteExt;
            let (mut socket, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
            socket.write_all(b"pong").await.unwrap();
        })
        .unwrap();
    let client = pool
        .spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut buf = [0; 4];
            socket.read_exact(&mut buf).await.unwrap();
            buf
        })
        .unwrap();
    assert_eq!(&client.await.unwrap(), b"pong");
    server.await.unwrap();
    pool.shutdown();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
#[test]
async fn tokio_sleep_in_a_typed_lanes_async_handler_under_tokio_main() {
    let (pool, panics) = pool_with_hook();
    let handled = Arc::new(Mutex::new(Vec::new()));
    let sink = handled.clone();
    let lanes = pool.typed_lanes_async(move |key: &u32, n: u32| {
        let (sink, key) = (sink.clone(), *key);
        async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            sink.lock().unwrap().push((key, n));
        }
    });
    for n in 0..3 {
        lanes.send(7, n).unwrap();
    }
    lanes.flush(7).unwrap().await.unwrap();
    assert_eq!(*handled.lock().unwrap(), vec![(7, 0), (7, 1), (7, 2)]);
    assert!(panics.lock().unwrap().is_empty());
    assert_eq!(pool.stats().panicked_tasks, 0);
    pool.shutdown();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
#[test]
async fn typed_lanes_async_with_state_awaits_tokio_timers() {
    let (pool, _) = pool_with_hook();
    let (saved, rx) = std::sync::mpsc::channel();
    let state = keyway::KeyState::new(|_: &u32| 0u64)
        .on_idle(move |key: &u32, total: u64| saved.send((*key, total)).unwrap());
    let totals =
        pool.typed_lanes_async_with_state(state, |_: &u32, total: u64, add: u64| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            total + add
        });
    for add in 1..=10 {
        totals.send(add as u32 % 2, add).unwrap();
    }
    pool.shutdown();
    let mut got: Vec<_> = rx.try_iter().collect();
    got.sort();
    assert_eq!(got, vec![(0, 2 + 4 + 6 + 8 + 10), (1, 1 + 3 + 5 + 7 + 9)]);
}

/// The text every report of a future that used tokio outside a runtime carries.
const HINT: &str = "turn on keyway's `tokio` cargo feature";

#[test]
fn a_future_using_tokio_outside_any_runtime_says_what_to_do() {
    let (pool, panics) = pool_with_hook();
    // Spawned from a plain thread: no runtime to capture.
    let handle = pool
        .spawn_sequential("k", async {
            tokio::time::sleep(Duration::from_millis(1)).await
        })
        .unwrap();
    match handle.join() {
        Err(TaskError::Panicked(p)) => assert!(p.message().contains(HINT), "{}", p.message()),
        other => panic!("expected a panic, got {other:?}"),
    }
    pool.wait_idle();
    let panics = panics.lock().unwrap();
    assert_eq!(panics.len(), 1);
    assert!(
        panics[0].message().contains(HINT),
        "{}",
        panics[0].message()
    );
    assert_eq!(panics[0].context_hash(), Some(pool.context_hash(&"k")));
}

#[test]
fn a_typed_lanes_async_handler_panic_reaches_the_panic_hook_with_its_key() {
    let (pool, panics) = pool_with_hook();
    // Made outside any runtime: the handler's tokio sleep panics, on each message.
    let lanes = pool.typed_lanes_async(|_: &u32, _: u32| async {
        tokio::time::sleep(Duration::from_millis(1)).await;
    });
    for n in 0..3 {
        lanes.send(7, n).unwrap(); // accepted: the panic comes later, on the pool
    }
    lanes.flush(7).unwrap().join().unwrap();
    let panics = panics.lock().unwrap();
    assert_eq!(panics.len(), 3, "each message's panic is reported");
    for report in panics.iter() {
        assert_eq!(report.context_hash(), Some(pool.context_hash(&7u32)));
        assert!(report.message().contains(HINT), "{}", report.message());
    }
    assert_eq!(pool.stats().panicked_tasks, 3);
}
