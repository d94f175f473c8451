//! loom models of the sequencer's lock-free core (`README.md` beside this file).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p keyway --lib loom`. Each model is
//! small (2–3 threads, capacity 1 or 2, 2–4 tickets). The turns write to a log with no
//! synchronization of its own, so loom reports a data race if two turns are not ordered by
//! happens-before (Rule 2); each model then checks that every closure ran exactly once, in ticket
//! order, and that the overflow lists and flags are clean afterwards (Rules 3, 5, 6).

use super::{OrderedMap, RunOutcome, Sequencer};
use crate::loom::cell::UnsafeCell;
use crate::loom::sync::Arc;
use crate::loom::thread;

/// A log that only turns write to. It has no lock: the sequencer's ordering is all that keeps
/// its accesses apart, and loom checks that it does.
struct Log(UnsafeCell<Vec<u64>>);

// SAFETY: only written inside turns of one sequencer (Rule 2), read after every thread joined.
unsafe impl Sync for Log {}
// SAFETY: as above.
unsafe impl Send for Log {}

impl Log {
    fn new() -> Arc<Log> {
        Arc::new(Log(UnsafeCell::new(Vec::new())))
    }

    fn push(&self, n: u64) {
        // SAFETY: called only inside a turn (see the `Sync` impl).
        self.0.with_mut(|v| unsafe { (*v).push(n) });
    }

    fn get(&self) -> Vec<u64> {
        // SAFETY: called after every thread joined.
        self.0.with(|v| unsafe { (*v).clone() })
    }
}

/// Runs `f` under loom, exploring every interleaving if `preemption_bound` is `None`, or those
/// with at most that many preemptions. `LOOM_MAX_PREEMPTIONS`, when set, overrides the bound.
fn model<F>(preemption_bound: Option<usize>, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        builder.preemption_bound = preemption_bound;
    }
    builder.check(f);
}

/// Runs ticket `ticket` with a closure that logs its number.
fn log_turn(ticket: super::Ticket, log: &Arc<Log>) -> RunOutcome {
    let n = ticket.number();
    let log = Arc::clone(log);
    ticket.run(move || log.push(n))
}

/// After every thread joined: nothing parked, nothing stored, no overflow flag left, no panic.
fn assert_clean(sequencer: &Sequencer) {
    sequencer.inner.assert_clean();
    assert_eq!(
        sequencer.panicked(),
        0,
        "no turn panicked (a loom failure in a turn would)"
    );
}

/// Rule 3: the owner of ticket 1 stores its closure while the owner of ticket 0 finishes turn 0
/// and passes turn 1; exactly one of them runs closure 1, after closure 0.
#[test]
fn loom_store_vs_pass() {
    model(None, || {
        let sequencer = Sequencer::new(2).unwrap();
        let log = Log::new();
        let t0 = sequencer.next_ticket();
        let t1 = sequencer.next_ticket();
        let l = Arc::clone(&log);
        let a = thread::spawn(move || log_turn(t0, &l));
        let second = log_turn(t1, &log);
        let first = a.join().unwrap();
        assert_eq!(first, RunOutcome::Ran, "ticket 0's turn is reached at once");
        assert!(matches!(second, RunOutcome::Ran | RunOutcome::Deferred));
        assert_eq!(log.get(), [0, 1]);
        assert_clean(&sequencer);
    });
}

/// Three owners racing on a ring of two: ticket 2 reuses slot 0 (a lap on), so the hand-off and
/// the slot's recycling (Rules 1 and 4) are both exercised.
#[test]
fn loom_three_owners_ring_reuse() {
    model(Some(7), || {
        let sequencer = Sequencer::new(2).unwrap();
        let log = Log::new();
        let tickets: Vec<_> = (0..3).map(|_| sequencer.next_ticket()).collect();
        let mut tickets = tickets.into_iter();
        let (t0, t1, t2) = (
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
        );
        let l = Arc::clone(&log);
        let a = thread::spawn(move || log_turn(t2, &l));
        let l = Arc::clone(&log);
        let b = thread::spawn(move || log_turn(t1, &l));
        let _ = log_turn(t0, &log);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(log.get(), [0, 1, 2]);
        assert_clean(&sequencer);
    });
}

/// A dropped ticket hands in an empty turn: the ticket after it still runs, in order.
#[test]
fn loom_drop_skips() {
    model(None, || {
        let sequencer = Sequencer::new(2).unwrap();
        let log = Log::new();
        let t0 = sequencer.next_ticket();
        let t1 = sequencer.next_ticket();
        let t2 = sequencer.next_ticket();
        let l = Arc::clone(&log);
        let a = thread::spawn(move || log_turn(t0, &l));
        let b = thread::spawn(move || drop(t1));
        let _ = log_turn(t2, &log);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(log.get(), [0, 2]);
        assert_clean(&sequencer);
    });
}

/// Rule 5: ticket 3 is a lap ahead of slot 1 and parks in the slot's overflow list, racing the
/// advance that brings slot 1 to it; it must be settled and run after ticket 2, however they
/// interleave.
#[test]
fn loom_overflow_park_vs_advance() {
    model(None, || {
        let sequencer = Sequencer::new(2).unwrap();
        let log = Log::new();
        let tickets: Vec<_> = (0..4).map(|_| sequencer.next_ticket()).collect();
        let mut tickets = tickets.into_iter();
        let (t0, t1, t2, t3) = (
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
        );
        let l = Arc::clone(&log);
        let far = thread::spawn(move || log_turn(t3, &l));
        let _ = log_turn(t0, &log);
        let _ = log_turn(t1, &log);
        let _ = log_turn(t2, &log);
        far.join().unwrap();
        assert_eq!(log.get(), [0, 1, 2, 3]);
        assert_clean(&sequencer);
    });
}

/// Rule 6: the thread that passes turn 1 (on a flagged slot) settles ticket 3, while the owner of
/// turn 1 races ahead through turns 1 and 2 and may pass slot 1 before ticket 3 is delivered to
/// it; whoever ends up holding ticket 3's work with its turn reached runs it.
#[test]
fn loom_overflow_settle_vs_publisher() {
    model(None, || {
        let sequencer = Sequencer::new(2).unwrap();
        let log = Log::new();
        let tickets: Vec<_> = (0..4).map(|_| sequencer.next_ticket()).collect();
        let mut tickets = tickets.into_iter();
        let (t0, t1, t2, t3) = (
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
        );
        // Park ticket 3 first, so that slot 1 is flagged before anything runs.
        let _ = log_turn(t3, &log);
        let l = Arc::clone(&log);
        let a = thread::spawn(move || log_turn(t0, &l));
        let l = Arc::clone(&log);
        let b = thread::spawn(move || {
            let _ = log_turn(t1, &l);
            let _ = log_turn(t2, &l);
        });
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(log.get(), [0, 1, 2, 3]);
        assert_clean(&sequencer);
    });
}

/// Capacity 1: every ticket but the current one is a lap or more ahead, so every early ticket
/// goes through the overflow list, including a dropped one.
#[test]
fn loom_capacity_one_all_overflow() {
    model(Some(6), || {
        let sequencer = Sequencer::new(1).unwrap();
        let log = Log::new();
        let t0 = sequencer.next_ticket();
        let t1 = sequencer.next_ticket();
        let t2 = sequencer.next_ticket();
        let l = Arc::clone(&log);
        let a = thread::spawn(move || log_turn(t2, &l));
        let b = thread::spawn(move || drop(t1));
        let _ = log_turn(t0, &log);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(log.get(), [0, 2]);
        assert_clean(&sequencer);
    });
}

/// Rule 5: two tickets parked on the same slot at once (capacity 1, tickets 2 and 3 handed in
/// early by one thread while another runs 0 and 1): settling the first must leave the flag up
/// for the second; and the slot's cells are reused two laps on (Rule 4).
#[test]
fn loom_two_parked_on_one_slot() {
    model(Some(7), || {
        let sequencer = Sequencer::new(1).unwrap();
        let log = Log::new();
        let tickets: Vec<_> = (0..4).map(|_| sequencer.next_ticket()).collect();
        let mut tickets = tickets.into_iter();
        let (t0, t1, t2, t3) = (
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
        );
        let l = Arc::clone(&log);
        let early = thread::spawn(move || {
            let _ = log_turn(t3, &l);
            let _ = log_turn(t2, &l);
        });
        let _ = log_turn(t0, &log);
        let _ = log_turn(t1, &log);
        early.join().unwrap();
        assert_eq!(log.get(), [0, 1, 2, 3]);
        assert_clean(&sequencer);
    });
}

/// Rule 6: tickets 2 and 3 are parked on the one slot of a capacity-1 ring. The thread passing
/// turn 1 settles ticket 2 while ticket 1's owner runs turn 1, passes turn 2 (ticket 2 not yet
/// delivered) and settles ticket 3, which then sits behind the still-parked ticket 2: settle must
/// find it there, and the late settle of ticket 2 must run it, since its turn was passed.
#[test]
fn loom_settle_behind_a_pending_entry() {
    model(None, || {
        let sequencer = Sequencer::new(1).unwrap();
        let log = Log::new();
        let tickets: Vec<_> = (0..4).map(|_| sequencer.next_ticket()).collect();
        let mut tickets = tickets.into_iter();
        let (t0, t1, t2, t3) = (
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
        );
        assert_eq!(log_turn(t3, &log), RunOutcome::Deferred);
        assert_eq!(log_turn(t2, &log), RunOutcome::Deferred);
        let l = Arc::clone(&log);
        let a = thread::spawn(move || log_turn(t0, &l));
        let _ = log_turn(t1, &log);
        a.join().unwrap();
        assert_eq!(log.get(), [0, 1, 2, 3]);
        assert_clean(&sequencer);
    });
}

/// Rule 4: with capacity 1, ticket 3 writes the closure cell that the publisher read when it
/// took ticket 1, two laps earlier, and the writer (thread `b`) never synchronized with the
/// publisher directly: only the release on the take's advance orders the two.
#[test]
fn loom_cells_reused_two_laps_on() {
    model(Some(3), || {
        let sequencer = Sequencer::new(1).unwrap();
        let log = Log::new();
        let tickets: Vec<_> = (0..4).map(|_| sequencer.next_ticket()).collect();
        let mut tickets = tickets.into_iter();
        let (t0, t1, t2, t3) = (
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
        );
        let l = Arc::clone(&log);
        let a = thread::spawn(move || log_turn(t1, &l));
        let l = Arc::clone(&log);
        let b = thread::spawn(move || {
            let _ = log_turn(t2, &l);
            let _ = log_turn(t3, &l);
        });
        let _ = log_turn(t0, &log);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(log.get(), [0, 1, 2, 3]);
        assert_clean(&sequencer);
    });
}

/// The ordered map's sink is touched only inside turns: two items processed on two threads reach
/// the sink in input order, and loom sees no race on the sink.
#[test]
fn loom_ordered_map() {
    model(None, || {
        let log = Log::new();
        let sink_log = Arc::clone(&log);
        let map = OrderedMap::new(2, |x: u64| x * 10, move |y: u64| sink_log.push(y)).unwrap();
        let mut threads = Vec::new();
        for item in [1, 2] {
            map.submit(item, |task| threads.push(thread::spawn(task)));
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(log.get(), [10, 20]);
        assert_clean(map.sequencer());
    });
}
