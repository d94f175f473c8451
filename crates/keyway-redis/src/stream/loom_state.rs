//! loom models of the shard state machine ([`ShardState`], rules 2–6 of its module docs) and
//! of the stream module's protocol rules F and R: an entry task, the control side (revoke,
//! re-assign, re-deliver, a lease going stale), an ack sender and the reader's recovery scan
//! act on one shard's state under its lock, in every interleaving loom can find. They name
//! four races:
//!
//! 1. **A key's running task surviving a revoke/re-assign**: the task of entry `X` (key `k`)
//!    started at epoch 1 must not still run when `X` — or any later entry of `k` — starts at
//!    epoch 2 after the lease was lost and acquired again. The new epoch is activated without
//!    waiting for the old task; the key's lane (a lock each task of the key holds from its
//!    start check to its finish) keeps them apart.
//! 2. **A stale sweep removing a fresh entry**: the former epoch's clean-up (the late finish of
//!    the old task and the settling of its ack) must not remove, or settle, the same entry
//!    delivered again at the new epoch.
//! 3. **A fenced retry after the lease went**: a failing entry's retry loop and a lease that
//!    stops being confirmed (renewals fail, the phase stays `Active`), after which another
//!    member runs the entry: no attempt may start once the new owner ran it.
//! 4. **A recovery scan racing an ack**: after an error the reader lists its pending entries
//!    and delivers again those not in the window, while an ack batch of the same shard is
//!    sent: an entry already acknowledged must never be delivered (and run) again.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p keyway-redis --lib loom`.
//!
//! Deliberate breaks tried when these models were written: running the tasks outside their
//! key's lane fails model 1 (the epoch-2 run of `X` starts beside the epoch-1 run, which
//! `activate` no longer waits for); settling by id alone, without comparing epochs, fails
//! model 2 (the fresh entry leaves the window); `may_retry` looking at the phase only (the
//! check before rule F) fails model 3; a recovery scan that does not hold the ack lock fails
//! model 4 (the scan finds `X` pending, the ack settles it, the scan delivers it again).

use std::time::{Duration, Instant};

use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use crate::stream::state::{Finish, Phase, Retry, ShardState, Start};
use crate::stream::EntryId;

const X: EntryId = EntryId { ms: 1, seq: 0 };

fn later() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

/// Runs entry `X` at `epoch` as a task does in its key's lane (`lane`, held throughout):
/// start, run (counted in `running_for_key`, which must never exceed one), finish.
fn task(
    state: &Mutex<ShardState<()>>,
    lane: &Mutex<()>,
    running_for_key: &AtomicUsize,
    epoch: u64,
) -> bool {
    let _lane = lane.lock().unwrap();
    let start = state.lock().unwrap().start(X, epoch, Instant::now());
    if start != Start::Run {
        return false;
    }
    let before = running_for_key.fetch_add(1, Ordering::SeqCst);
    assert_eq!(before, 0, "two runs of one key at once (epoch {epoch})");
    running_for_key.fetch_sub(1, Ordering::SeqCst);
    let _late = state.lock().unwrap().finish(X, epoch, Finish::Settle(None));
    true
}

/// Acquires `epoch`, waiting (as the control thread does, by trying again) until no entry of
/// the former epoch runs.
fn reacquire(state: &Mutex<ShardState<()>>, epoch: u64) {
    loop {
        if state.lock().unwrap().activate(epoch, later()) {
            return;
        }
        thread::yield_now();
    }
}

#[test]
fn loom_running_task_does_not_survive_revoke_and_reassign() {
    loom::model(|| {
        let state = Arc::new(Mutex::new(ShardState::<()>::new(4)));
        let lane = Arc::new(Mutex::new(()));
        let running_for_key = Arc::new(AtomicUsize::new(0));
        {
            let mut st = state.lock().unwrap();
            assert!(st.activate(1, later()));
            assert!(st.deliver(X, 1, 1));
        }
        let old = {
            let (state, lane, running) = (
                Arc::clone(&state),
                Arc::clone(&lane),
                Arc::clone(&running_for_key),
            );
            thread::spawn(move || task(&state, &lane, &running, 1))
        };
        // Control: the lease is lost (revoke), acquired again, X delivered again and run.
        let _ = state.lock().unwrap().lose();
        reacquire(&state, 2);
        assert!(
            state.lock().unwrap().deliver(X, 2, 1),
            "the epoch-1 entry is gone"
        );
        let new_ran = task(&state, &lane, &running_for_key, 2);
        old.join().unwrap();
        assert!(new_ran, "the fresh delivery runs");
        let st = state.lock().unwrap();
        assert_eq!(st.running(), 0);
        assert_eq!(st.phase(), Phase::Active);
        // Only the epoch-2 run is to be acked: the old one was skipped or finished late.
        assert_eq!(st.acks_waiting(), 1);
        assert_eq!(st.window(), 1);
    });
}

#[test]
fn loom_stale_sweep_does_not_remove_a_fresh_entry() {
    loom::model(|| {
        let state = Arc::new(Mutex::new(ShardState::<()>::new(4)));
        {
            let mut st = state.lock().unwrap();
            assert!(st.activate(1, later()));
            assert!(st.deliver(X, 1, 1));
            assert_eq!(st.start(X, 1, Instant::now()), Start::Run);
        }
        // The old epoch's task finishes late, and the old reader settles what it took.
        let old = {
            let state = Arc::clone(&state);
            thread::spawn(move || {
                state.lock().unwrap().finish(X, 1, Finish::Settle(None));
                let taken: Vec<_> = {
                    let mut st = state.lock().unwrap();
                    st.take_acks()
                        .into_iter()
                        .filter(|a| a.epoch == 1)
                        .map(|a| a.id)
                        .collect()
                };
                state.lock().unwrap().settled(1, taken);
                // A reader that lost its lease settles everything it had, by epoch.
                state.lock().unwrap().settled(1, [X]);
            })
        };
        // Control: revoke, re-acquire, deliver X again.
        let _ = state.lock().unwrap().lose();
        reacquire(&state, 2);
        assert!(
            state.lock().unwrap().deliver(X, 2, 1),
            "the fresh entry is accepted"
        );
        old.join().unwrap();
        let mut st = state.lock().unwrap();
        assert_eq!(st.window(), 1, "the fresh entry is still in the window");
        assert_eq!(st.start(X, 2, Instant::now()), Start::Run, "and runs");
    });
}

#[test]
fn loom_no_retry_starts_once_the_lease_is_not_confirmed() {
    loom::model(|| {
        let base = Instant::now();
        let valid = Duration::from_millis(10);
        let state = Arc::new(Mutex::new(ShardState::<()>::new(4)));
        // The member's clock (ms since `base`), and whether another member ran `X`.
        let clock = Arc::new(AtomicU64::new(0));
        let new_owner_ran = Arc::new(AtomicBool::new(false));
        {
            let mut st = state.lock().unwrap();
            assert!(st.activate(1, base + valid));
            assert!(st.deliver(X, 1, 1));
            assert_eq!(st.start(X, 1, base), Start::Run);
        }
        // The entry's task: it failed; it decides whether to try again, up to three looks.
        let retrier = {
            let (state, clock, ran) = (
                Arc::clone(&state),
                Arc::clone(&clock),
                Arc::clone(&new_owner_ran),
            );
            thread::spawn(move || {
                for _ in 0..3 {
                    let st = state.lock().unwrap();
                    // What happened before this look: the new owner's run, then this clock.
                    let ran_before = ran.load(Ordering::SeqCst);
                    let now = base + Duration::from_millis(clock.load(Ordering::SeqCst));
                    match st.may_retry(1, now) {
                        Retry::Go => assert!(
                            !ran_before,
                            "an attempt started after the new owner ran the entry"
                        ),
                        Retry::Wait => {}
                        Retry::Stop => return,
                    }
                    drop(st);
                    thread::yield_now();
                }
            })
        };
        // Renewals fail (the phase stays Active) while time passes beyond the confirmed
        // deadline; the lease expires in Redis after that, and another member runs X; then
        // the member learns the loss.
        clock.store(20, Ordering::SeqCst);
        new_owner_ran.store(true, Ordering::SeqCst);
        let _ = state.lock().unwrap().lose();
        retrier.join().unwrap();
    });
}

#[test]
fn loom_a_recovery_scan_never_delivers_an_acknowledged_entry_again() {
    loom::model(|| {
        let state = Arc::new(Mutex::new(ShardState::<()>::new(4)));
        // Redis's pending list for this member, and the shard's ack lock.
        let pel = Arc::new(Mutex::new(vec![X]));
        let acks = Arc::new(Mutex::new(()));
        {
            let mut st = state.lock().unwrap();
            assert!(st.activate(1, later()));
            assert!(st.deliver(X, 1, 1));
            assert_eq!(st.start(X, 1, Instant::now()), Start::Run);
            st.finish(X, 1, Finish::Settle(None));
        }
        // An ack sender: takes the batch, XACK (the entry leaves the pending list), settles.
        let sender = {
            let (state, pel, acks) = (Arc::clone(&state), Arc::clone(&pel), Arc::clone(&acks));
            thread::spawn(move || {
                let _acks = acks.lock().unwrap();
                let batch = state.lock().unwrap().take_acks();
                pel.lock()
                    .unwrap()
                    .retain(|id| !batch.iter().any(|a| a.id == *id));
                state.lock().unwrap().settled(1, batch.iter().map(|a| a.id));
            })
        };
        // The reader after an error: under the ack lock, lists its pending entries and
        // delivers again those not in the window.
        let again = {
            let _acks = acks.lock().unwrap();
            let pending: Vec<EntryId> = pel.lock().unwrap().clone();
            let mut st = state.lock().unwrap();
            let mut again = 0;
            for id in pending {
                if !st.holds(id) && st.deliver(id, 1, 1) {
                    again += 1;
                }
            }
            again
        };
        sender.join().unwrap();
        assert_eq!(again, 0, "an acknowledged entry was delivered again");
        assert!(pel.lock().unwrap().is_empty());
        assert_eq!(state.lock().unwrap().window(), 0);
    });
}
