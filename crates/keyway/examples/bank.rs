//! A bank: transfers hold their two accounts, audits hold every account, all through one
//! `Contexts<u64>` — so a transfer and an audit that share an account never overlap, and no key
//! of another type (a `usize` account, say) can slip into a different lane.
//!
//! `cargo run --release -p keyway --example bank` — exits non-zero if an audit saw money created
//! or destroyed, a balance went negative, or the final total is wrong.

use std::process::ExitCode;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use keyway::Pool;

const ACCOUNTS: u64 = 100;
const OPENING: i64 = 1_000; // per account
const TRANSFERS: u64 = 25_000; // per teller
const TELLERS: u64 = 4;
const AUDITS: u64 = 100;

/// Balances: each account is only touched by tasks holding its key, so plain relaxed loads and
/// stores suffice (the lanes order the tasks of each account).
struct Bank(Vec<AtomicI64>);

impl Bank {
    fn get(&self, account: u64) -> i64 {
        self.0[account as usize].load(Ordering::Relaxed)
    }
    fn set(&self, account: u64, balance: i64) {
        self.0[account as usize].store(balance, Ordering::Relaxed)
    }
}

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let pool = Pool::new()?;
    let accounts = pool.contexts::<u64>(); // every key is a u64 account number
    let bank = Arc::new(Bank(
        (0..ACCOUNTS).map(|_| AtomicI64::new(OPENING)).collect(),
    ));
    let overdrafts = Arc::new(AtomicU64::new(0));

    let audits = std::thread::scope(|s| {
        let tellers: Vec<_> = (0..TELLERS)
            .map(|teller| {
                let (accounts, bank, overdrafts) = (&accounts, &bank, &overdrafts);
                s.spawn(move || {
                    let mut audits = Vec::new();
                    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ teller; // xorshift: no dependency
                    let mut next = move || {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        rng
                    };
                    for i in 0..TRANSFERS {
                        if i % (TRANSFERS * TELLERS / AUDITS) == 0 {
                            // An audit holds every account: it sees the bank between transfers,
                            // never inside one.
                            let bank = bank.clone();
                            let total = move || (0..ACCOUNTS).map(|a| bank.get(a)).sum::<i64>();
                            audits
                                .push(accounts.submit_keyed(0..ACCOUNTS, total).expect("running"));
                        }
                        let from = next() % ACCOUNTS;
                        let to = (from + 1 + next() % (ACCOUNTS - 1)) % ACCOUNTS;
                        let amount = (next() % 100) as i64;
                        let (bank, overdrafts) = (bank.clone(), overdrafts.clone());
                        accounts
                            .execute_keyed([from, to], move || {
                                let balance = bank.get(from);
                                if balance < amount {
                                    return; // refused: insufficient funds
                                }
                                bank.set(from, balance - amount);
                                // The money is in flight until the credit: only holding both
                                // keys keeps an audit from seeing it missing.
                                std::thread::yield_now();
                                bank.set(to, bank.get(to) + amount);
                                if bank.get(from) < 0 {
                                    overdrafts.fetch_add(1, Ordering::Relaxed);
                                }
                            })
                            .expect("pool running");
                    }
                    audits
                })
            })
            .collect();
        tellers
            .into_iter()
            .flat_map(|t| t.join().expect("teller"))
            .collect::<Vec<_>>()
    });

    let expected = ACCOUNTS as i64 * OPENING;
    let totals: Vec<i64> = audits
        .into_iter()
        .map(|a| a.join())
        .collect::<Result<_, _>>()?;
    let wrong = totals.iter().filter(|&&t| t != expected).count();
    pool.shutdown(); // every accepted transfer has run
    let final_total: i64 = (0..ACCOUNTS).map(|a| bank.get(a)).sum();
    let negative = (0..ACCOUNTS).filter(|&a| bank.get(a) < 0).count();
    let overdrafts = overdrafts.load(Ordering::Relaxed);
    println!(
        "{} transfers, {} audits: {wrong} audits off, final total {final_total} \
         (expected {expected}), {negative} negative balances, {overdrafts} overdrafts",
        TELLERS * TRANSFERS,
        totals.len()
    );
    let ok = totals.len() as u64 == AUDITS
        && wrong == 0
        && final_total == expected
        && negative == 0
        && overdrafts == 0;
    if !ok {
        eprintln!("FAILED: money was created or destroyed");
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
