//! loom models of the shard state machine ([`ShardState`], rules 2–5 of its module docs): an
//! entry task and the control side (revoke, re-assign, re-deliver) act on one shard's state
//! under its lock, in every interleaving loom can find. They name two races:
//!
//! 1. **A key's running task surviving a revoke/re-assign**: the task of entry `X` (key `k`)
//!    started at epoch 1 must not still run when `X` — or any later entry of `k` — starts at
//!    epoch 2 after the lease was lost and acquired again.
//! 2. **A stale sweep removing a fresh entry**: the former epoch's clean-up (the late finish of
//!    the old task and the settling of its ack) must not remove, or settle, the same entry
//!    delivered again at the new epoch.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p keyway-redis --lib loom`.
//!
//! Deliberate breaks tried when these models were written: letting `activate` go ahead while
//! an entry still runs fails model 1 (the running epoch-1 task is swept from under itself and
//! the epoch-2 delivery of its key may start beside it); settling by id alone, without
//! comparing epochs, fails model 2 (the fresh entry leaves the window).

use std::time::{Duration, Instant};

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use crate::stream::state::{Finish, Phase, ShardState, Start};
use crate::stream::EntryId;

const X: EntryId = EntryId { ms: 1, seq: 0 };

fn later() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

/// Runs entry `X` at `epoch` as a task does: start, run (counted in `running_for_key`, which
/// must never exceed one), finish.
fn task(state: &Mutex<ShardState<()>>, running_for_key: &AtomicUsize, epoch: u64) -> bool {
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
        let running_for_key = Arc::new(AtomicUsize::new(0));
        {
            let mut st = state.lock().unwrap();
            assert!(st.activate(1, later()));
            assert!(st.deliver(X, 1, 1));
        }
        let old = {
            let (state, running) = (Arc::clone(&state), Arc::clone(&running_for_key));
            thread::spawn(move || task(&state, &running, 1))
        };
        // Control: the lease is lost (revoke), acquired again, X delivered again and run.
        state.lock().unwrap().lose();
        reacquire(&state, 2);
        assert!(
            state.lock().unwrap().deliver(X, 2, 1),
            "the epoch-1 entry is gone"
        );
        let new_ran = task(&state, &running_for_key, 2);
        old.join().unwrap();
        assert!(new_ran, "the fresh delivery runs");
        let st = state.lock().unwrap();
        assert_eq!(st.running(), 0);
        assert_eq!(st.phase(), Phase::Active);
        // Only the epoch-2 run is to be acked: the old one was skipped or finished late.
        assert_eq!(st.acks_waiting(), 1);
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
        state.lock().unwrap().lose();
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
