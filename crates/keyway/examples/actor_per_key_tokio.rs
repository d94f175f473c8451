//! An actor per account under tokio, with per-account state: every deposit of an account is
//! handled in order, one at a time, by an async handler that owns the account's balance and
//! awaits tokio (a timeout around a simulated store write) with no wrapper — the pool is bound
//! to the program's runtime (`PoolBuilder::tokio_runtime`, keyway's `tokio` feature), so its
//! threads live inside it and every future is polled there.
//!
//! It then runs the same work through each of keyway's ways to keep an actor per key, and
//! tokio's own (a task and a channel per account), and prints how long each took: the figures
//! of the crate docs' "Which API for an actor per key". Every way does the same work, as its
//! users would write it: an account's state lives as long as the account (the typed lanes'
//! key state, the tokio task's variable, or a cell per account made up front for the ways with
//! a future per message), and the tokio way sends through the sender it keeps per account, as
//! the held-lane way does through its lane handle. Every way's balances and order are checked;
//! the program exits non-zero if one is wrong.
//!
//! `cargo run --release --example actor_per_key_tokio [accounts] [deposits per account] [way]`
//! (default 10,000 x 20, every way; a third argument runs only the ways whose name contains it,
//! for a profiler).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One account's state: its balance, the last deposit applied and whether one came out of
/// order (or to a state made anew, which lost the earlier ones).
#[derive(Default, Clone, Copy, PartialEq, Debug)]
struct Account {
    balance: u64,
    last: Option<u32>,
    out_of_order: bool,
}

impl Account {
    fn apply(mut self, seq: u32) -> Account {
        self.out_of_order |= self.last.map_or(seq != 0, |last| last + 1 != seq);
        self.balance += u64::from(seq) + 1;
        self.last = Some(seq);
        self
    }
}

/// A store write as a service would await it: bounded by a tokio timeout (which needs the
/// runtime's timer: it panics outside a runtime).
async fn write(account: Account) -> Account {
    tokio::time::timeout(Duration::from_secs(5), async { account })
        .await
        .expect("the store write timed out")
}

type Balances = Arc<Mutex<HashMap<u32, Account>>>;

/// What every way must end with: each account got `deposits` deposits, in order.
fn check(name: &str, balances: &Balances, accounts: u32, deposits: u32) -> Result<(), String> {
    let balances = balances.lock().unwrap();
    let want = Account {
        balance: (1..=u64::from(deposits)).sum(),
        last: deposits.checked_sub(1),
        out_of_order: false,
    };
    if balances.len() != accounts as usize {
        return Err(format!("{name}: {} accounts of {accounts}", balances.len()));
    }
    match balances.iter().find(|(_, a)| **a != want) {
        Some((id, a)) => Err(format!("{name}: account {id} is {a:?}, want {want:?}")),
        None => Ok(()),
    }
}

/// keyway's typed lanes with async handlers owning each account's state: the recommended way.
/// `held`: the sender keeps a handle on each account's lane, as the tokio way keeps each
/// account's channel sender (a `Vec` index per message); else it sends by key (a look-up of the
/// key's lane per message, which the tokio way does not do).
async fn typed_lanes_async_with_state(
    pool: &keyway::Pool,
    accounts: u32,
    deposits: u32,
    held: bool,
) -> Balances {
    let balances = Balances::default();
    let saved = balances.clone();
    // The handler's futures are polled inside the pool's runtime.
    let state =
        keyway::KeyState::new(|_: &u32| Account::default()).on_idle(move |id: &u32, account| {
            saved.lock().unwrap().insert(*id, account);
        });
    let lanes = pool.typed_lanes_async_with_state(state, |_: &u32, account: Account, seq: u32| {
        write(account.apply(seq))
    });
    if held {
        let handles: Vec<_> = (0..accounts).map(|id| lanes.lane(id)).collect();
        for seq in 0..deposits {
            for lane in &handles {
                lane.send(seq).expect("the pool accepts");
            }
        }
    } else {
        for seq in 0..deposits {
            for id in 0..accounts {
                lanes.send(id, seq).expect("the pool accepts");
            }
        }
    }
    // Awaiting one account's deposits from tokio: a flush is a handle, and handles are futures.
    lanes
        .flush(0)
        .expect("the pool accepts")
        .await
        .expect("flushed");
    balances // the pool's shutdown hands each account's state to `on_idle`
}

/// keyway's sync typed lanes (the state by reference): no future per message.
fn typed_lanes_with_state(pool: &keyway::Pool, accounts: u32, deposits: u32) -> Balances {
    let balances = Balances::default();
    let saved = balances.clone();
    let state =
        keyway::KeyState::new(|_: &u32| Account::default()).on_idle(move |id: &u32, account| {
            saved.lock().unwrap().insert(*id, account);
        });
    let lanes = pool.typed_lanes_with_state(state, |_: &u32, account: &mut Account, seq: u32| {
        *account = account.apply(seq);
    });
    for seq in 0..deposits {
        for id in 0..accounts {
            lanes.send(id, seq).expect("the pool accepts");
        }
    }
    balances
}

/// Each account's state for the ways with a future per message: a cell per account, made up
/// front as the tokio way makes a channel and a task per account. Each future takes its account's
/// cell (an `Arc` clone and an uncontended lock: the lane runs one future of the account at a
/// time), so these ways do the work the others do, not a shared map's look-up under one lock.
type Cells = Vec<Arc<Mutex<Account>>>;

/// A future per message in the account's lane (`spawn_sequential`, handle dropped, or
/// `execute_async_sequential`, no handle); the state in the account's cell.
fn future_per_message(pool: &keyway::Pool, accounts: u32, deposits: u32, detached: bool) -> Cells {
    let cells: Cells = (0..accounts).map(|_| Arc::default()).collect();
    for seq in 0..deposits {
        for (id, cell) in (0..accounts).zip(&cells) {
            let cell = cell.clone();
            let fut = async move {
                let account = *cell.lock().unwrap();
                let account = write(account.apply(seq)).await;
                *cell.lock().unwrap() = account;
            };
            if detached {
                pool.execute_async_sequential(id, fut)
                    .expect("the pool accepts");
            } else {
                drop(pool.spawn_sequential(id, fut).expect("the pool accepts"));
            }
        }
    }
    cells
}

/// What a way ends with: the map its states were handed to, or its cells.
enum Accounts {
    Handed(Balances),
    Cells(Cells),
}

impl Accounts {
    /// The final states, read from the cells as the other ways hand theirs over at the end.
    fn into_balances(self) -> Balances {
        match self {
            Accounts::Handed(balances) => balances,
            Accounts::Cells(cells) => {
                let balances = Balances::default();
                let mut map = balances.lock().unwrap();
                for (id, cell) in (0..).zip(cells) {
                    map.insert(id, *cell.lock().unwrap());
                }
                drop(map);
                balances
            }
        }
    }
}

/// tokio alone: a task and a channel per account.
async fn tokio_task_per_account(accounts: u32, deposits: u32) -> Balances {
    let balances = Balances::default();
    let mut senders = Vec::new();
    let mut tasks = Vec::new();
    for id in 0..accounts {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        let balances = balances.clone();
        senders.push(tx);
        tasks.push(tokio::spawn(async move {
            let mut account = Account::default();
            while let Some(seq) = rx.recv().await {
                account = write(account.apply(seq)).await;
            }
            balances.lock().unwrap().insert(id, account);
        }));
    }
    for seq in 0..deposits {
        for tx in &senders {
            tx.send(seq).expect("the task runs");
        }
    }
    drop(senders);
    for task in tasks {
        task.await.expect("no task panicked");
    }
    balances
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let accounts: u32 = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let deposits: u32 = args.next().map_or(Ok(20), |a| a.parse())?;
    let only = args.next().unwrap_or_default();
    println!("{accounts} accounts x {deposits} deposits, each awaiting a tokio timeout");
    let mut failures = Vec::new();
    let ways = [
        "typed_lanes_async_with_state",
        "typed_lanes_async_with_state, a lane per account",
        "typed_lanes_with_state (sync)",
        "execute_async_sequential",
        "spawn_sequential",
        "tokio task + channel per account",
    ];
    for name in ways.into_iter().filter(|name| name.contains(only.as_str())) {
        // Each account's state lasts while its lane is idle between two deposits (by default
        // only about 4,096 idle lanes are kept, for at most a quarter of a second). Bound to
        // this runtime: a future keeps no handle of it, and a poll enters nothing.
        let pool = keyway::Pool::builder()
            .keep_idle(Duration::from_secs(60))
            .tokio_runtime(tokio::runtime::Handle::current())
            .build()?;
        let started = Instant::now();
        let ended = match name {
            "typed_lanes_async_with_state" => Accounts::Handed(
                typed_lanes_async_with_state(&pool, accounts, deposits, false).await,
            ),
            "typed_lanes_async_with_state, a lane per account" => Accounts::Handed(
                typed_lanes_async_with_state(&pool, accounts, deposits, true).await,
            ),
            "typed_lanes_with_state (sync)" => {
                Accounts::Handed(typed_lanes_with_state(&pool, accounts, deposits))
            }
            "execute_async_sequential" => {
                Accounts::Cells(future_per_message(&pool, accounts, deposits, true))
            }
            "spawn_sequential" => {
                Accounts::Cells(future_per_message(&pool, accounts, deposits, false))
            }
            _ => Accounts::Handed(tokio_task_per_account(accounts, deposits).await),
        };
        // Every accepted message handled (and each lane's state handed to `on_idle`); the
        // shutdown is awaited, holding no thread of the runtime.
        pool.shutdown_async().await;
        let balances = ended.into_balances();
        let took = started.elapsed();
        let verdict = match check(name, &balances, accounts, deposits) {
            Ok(()) => "ok",
            Err(e) => {
                failures.push(e);
                "WRONG"
            }
        };
        println!(
            "{name:>50}: {:>7.1} ms  {verdict}",
            took.as_secs_f64() * 1e3
        );
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; ").into())
    }
}
