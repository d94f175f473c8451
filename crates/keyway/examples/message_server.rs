//! A message server: each client's messages are handled in order, one at a time, with the
//! client's session kept by its lane (keyed state: no lock shared between clients); price ticks
//! are coalesced, so a slow screen shows the latest price and skips stale ones.
//!
//! `cargo run --release -p keyway --example message_server` — exits non-zero if a client's
//! messages were lost, duplicated or reordered, or a screen showed a stale price last.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use keyway::{KeyState, Pool};

const CLIENTS: u64 = 500;
const MESSAGES: u64 = 400; // per client
const SYMBOLS: [&str; 4] = ["EURUSD", "GBPUSD", "USDJPY", "AUDUSD"];
const TICKS: u64 = 20_000; // per symbol

/// A client's session, owned by the client's lane while it is active.
#[derive(Default)]
struct Session {
    first: Option<u64>,
    last: Option<u64>,
    out_of_order: u64,
}

/// What a session leaves behind: its first and last message, and how many came out of order.
type Saved = (u64, u64, u64);

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let pool = Pool::new()?;

    // When a quiet client's lane is freed (or at shutdown), its session is saved here: the only
    // shared lock, taken once per session rather than once per message.
    let saved: Arc<Mutex<HashMap<u64, Vec<Saved>>>> = Arc::default();
    let store = saved.clone();
    let sessions = KeyState::new(|_client: &u64| Session::default()).on_idle(
        move |client: &u64, s: Session| {
            if let (Some(first), Some(last)) = (s.first, s.last) {
                let runs = &mut *store.lock().unwrap();
                runs.entry(*client)
                    .or_default()
                    .push((first, last, s.out_of_order));
            }
        },
    );
    let server =
        pool.typed_lanes_with_state(sessions, |_client: &u64, s: &mut Session, seq: u64| {
            match s.last {
                Some(last) if seq != last + 1 => s.out_of_order += 1,
                None => s.first = Some(seq),
                _ => {}
            }
            s.last = Some(seq);
        });

    // The screen: the latest price per symbol, each shown one at a time; ticks coalesce.
    let shown: Arc<Mutex<HashMap<&'static str, Vec<u64>>>> = Arc::default();
    let screen = shown.clone();
    let prices = pool.typed_lanes(move |symbol: &&'static str, tick: u64| {
        std::hint::black_box((0..200).sum::<u64>()); // drawing takes a while
        screen
            .lock()
            .unwrap()
            .entry(*symbol)
            .or_default()
            .push(tick);
    });

    std::thread::scope(|s| {
        for conn in 0..4 {
            let server = &server;
            s.spawn(move || {
                for seq in 0..MESSAGES {
                    for client in (0..CLIENTS).filter(|c| c % 4 == conn) {
                        server.send(client, seq).expect("pool running");
                    }
                }
            });
        }
        for symbol in SYMBOLS {
            let prices = &prices;
            s.spawn(move || {
                for tick in 0..TICKS {
                    prices.send_coalescing(symbol, tick).expect("pool running");
                }
            });
        }
    });
    for symbol in SYMBOLS {
        prices.flush(symbol)?.join()?; // every tick sent so far is shown or replaced
    }
    pool.shutdown(); // every session still alive goes to `on_idle`

    let mut failures = Vec::new();
    let saved = saved.lock().unwrap();
    for client in 0..CLIENTS {
        // A client's lane may have been freed and re-made while it was quiet: its sessions
        // together must cover its messages exactly once, each in order.
        let mut runs = saved.get(&client).cloned().unwrap_or_default();
        runs.sort();
        let mut next = 0;
        for (first, last, out_of_order) in runs {
            if first != next || out_of_order != 0 {
                failures.push(format!(
                    "client {client}: run {first}..={last}, expected {next}"
                ));
            }
            next = last + 1;
        }
        if next != MESSAGES {
            failures.push(format!("client {client}: {next} of {MESSAGES} messages"));
        }
    }
    let shown = shown.lock().unwrap();
    let mut skipped = 0;
    for symbol in SYMBOLS {
        let ticks = &shown[symbol];
        if ticks.windows(2).any(|w| w[0] >= w[1]) || ticks.last() != Some(&(TICKS - 1)) {
            failures.push(format!("{symbol}: stale or out of order ticks shown"));
        }
        skipped += TICKS - ticks.len() as u64;
    }
    println!(
        "{} clients x {MESSAGES} messages in order, in {} sessions; {} ticks, {skipped} coalesced away",
        CLIENTS,
        saved.values().map(Vec::len).sum::<usize>(),
        TICKS * SYMBOLS.len() as u64,
    );
    for f in &failures {
        eprintln!("FAILED: {f}");
    }
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
