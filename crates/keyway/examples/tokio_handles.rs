//! keyway handles awaited from a tokio runtime: CPU-bound or blocking work runs on keyway's pool
//! (in order per account where it must), async code awaits the results without blocking its
//! runtime's threads. Checks every awaited value; exits non-zero if one is wrong.
//!
//! `cargo run --release -p keyway --example tokio_handles`

use std::error::Error;
use std::sync::{Arc, Mutex};

/// Applies one deposit to `account`, returning the balance after it (runs on keyway's pool).
fn deposit(ledger: &Mutex<Vec<(u32, i64)>>, account: u32, amount: i64) -> i64 {
    let mut ledger = ledger.lock().unwrap();
    let before: i64 = ledger.iter().filter(|e| e.0 == account).map(|e| e.1).sum();
    ledger.push((account, amount));
    before + amount
}

async fn run(pool: keyway::Pool) -> Result<(), Box<dyn Error>> {
    // 1. A plain task: `TaskHandle` is a future of `Result<T, TaskError>`.
    let sum = pool.submit(|| (1..=1000u64).sum::<u64>())?.await?;
    check(sum == 500_500, format!("sum {sum}"))?;

    // 2. Many tokio tasks feed four accounts; keyway runs each account's deposits one at a time
    //    in submission order, so the balances each deposit saw are the running sums.
    let ledger = Arc::new(Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for client in 0..4u32 {
        let (pool, ledger) = (pool.clone(), ledger.clone());
        clients.push(tokio::spawn(async move {
            // Submit all fifty, then await them: keyway, not the awaiting, keeps the order.
            let mut handles = Vec::new();
            for i in 1..=50i64 {
                let ledger = ledger.clone();
                let handle = pool.submit_sequential(client, move || deposit(&ledger, client, i));
                handles.push(handle.map_err(|e| e.to_string())?);
            }
            let mut seen = Vec::new();
            for h in handles {
                seen.push(h.await.map_err(|e| e.to_string())?);
            }
            Ok::<_, String>(seen)
        }));
    }
    for (client, joined) in clients.into_iter().enumerate() {
        let seen = joined.await??;
        let expected: Vec<i64> = (1..=50)
            .scan(0, |balance, i| {
                *balance += i;
                Some(*balance)
            })
            .collect();
        check(seen == expected, format!("account {client} saw {seen:?}"))?;
    }

    // 3. Awaited concurrently: all submitted first, then awaited in any order.
    let handles: Vec<_> = (0..100u64)
        .map(|i| pool.submit_sequential(i % 7, move || i * i))
        .collect::<Result<_, _>>()?;
    let squares = tokio::spawn(async move {
        let mut out = Vec::new();
        for h in handles.into_iter().rev() {
            out.push(h.await.map_err(|e| e.to_string())?);
        }
        Ok::<_, String>(out)
    })
    .await??;
    let expected: Vec<u64> = (0..100u64).rev().map(|i| i * i).collect();
    check(squares == expected, "squares out of place".into())?;

    // 4. A multi-key task (both accounts held) awaited like any other.
    let moved = pool.submit_keyed([1u32, 2u32], || "moved 10")?.await?;
    check(moved == "moved 10", format!("keyed: {moved}"))?;

    // 5. A panic comes back as an error, not as a panic of the awaiting task.
    let panicked = pool.submit(|| -> u8 { panic!("bad input") })?.await;
    check(
        panicked.as_ref().is_err_and(|e| e.is_panic()),
        format!("panic: {panicked:?}"),
    )?;

    // 6. A tokio timeout around a handle: the slow task still runs to its end on the pool.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let slow = pool.submit(move || rx.recv().is_ok())?;
    let timed = tokio::time::timeout(std::time::Duration::from_millis(20), slow).await;
    check(
        timed.is_err(),
        "the slow task finished before its gate opened".into(),
    )?;
    drop(tx);
    Ok(())
}

fn check(ok: bool, what: String) -> Result<(), Box<dyn Error>> {
    if ok {
        Ok(())
    } else {
        Err(format!("wrong result: {what}").into())
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let pool = keyway::Pool::builder().name("tokio-demo").build()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()?;
    runtime.block_on(run(pool.clone()))?;
    pool.shutdown();
    let stats = pool.stats();
    check(stats.panicked_tasks == 1, format!("{stats}"))?;
    println!("tokio_handles: every awaited value checked; {stats}");
    Ok(())
}
