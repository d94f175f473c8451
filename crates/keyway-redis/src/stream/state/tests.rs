//! Unit tests of the shard state machine (rules 1-7 of its module docs).

use super::*;
use std::time::Duration;

fn id(n: u64) -> EntryId {
    EntryId { ms: n, seq: 0 }
}

fn later() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

#[test]
fn window_bounds_delivery_and_acks_free_it() {
    let mut s: ShardState<()> = ShardState::new(2);
    assert_eq!(s.room(), 0, "idle: no room");
    assert!(s.activate(1, later()));
    assert!(s.deliver(id(1), 1, 1) && s.deliver(id(2), 1, 1));
    assert_eq!(s.room(), 0);
    assert_eq!(s.start(id(1), 1, Instant::now()), Start::Run);
    s.finish(id(1), 1, Finish::Settle(None));
    assert_eq!(s.room(), 0, "done but not acked still counts");
    let acks = s.take_acks();
    s.settled(1, acks.iter().map(|a| a.id));
    assert_eq!(s.room(), 1);
}

#[test]
fn release_keeps_unstarted_entries_for_the_next_owner() {
    let mut s: ShardState<()> = ShardState::new(10);
    s.activate(1, later());
    for n in 1..=3 {
        s.deliver(id(n), 1, 1);
    }
    assert_eq!(s.start(id(1), 1, Instant::now()), Start::Run);
    assert_eq!(s.release(), 2);
    assert_eq!(s.start(id(2), 1, Instant::now()), Start::Skip);
    assert!(!s.drained());
    s.finish(id(1), 1, Finish::Settle(None));
    let acks = s.take_acks();
    assert_eq!(acks.len(), 1);
    s.settled(1, [id(1)]);
    assert!(s.drained());
    s.released();
    assert_eq!(s.phase(), Phase::Idle);
}

#[test]
fn a_stale_lease_waits_and_a_lost_one_skips() {
    let mut s: ShardState<()> = ShardState::new(10);
    let now = Instant::now();
    s.activate(1, now);
    s.deliver(id(1), 1, 1);
    assert_eq!(s.start(id(1), 1, now), Start::Wait);
    s.renewed(1, later());
    assert_eq!(s.lose(), Some(1));
    assert_eq!(s.lose(), None, "lost once");
    assert_eq!(s.start(id(1), 1, now), Start::Skip);
}

#[test]
fn a_new_epoch_sweeps_the_old_running_entry_and_keeps_fresh_ones() {
    let mut s: ShardState<()> = ShardState::new(10);
    s.activate(1, later());
    s.deliver(id(1), 1, 1);
    assert_eq!(s.start(id(1), 1, Instant::now()), Start::Run);
    s.lose();
    assert!(s.activate(2, later()), "rule 4: no wait for the old task");
    assert_eq!(s.running(), 0);
    assert!(
        !s.finish(id(1), 1, Finish::Settle(None)),
        "the late finish touches nothing"
    );
    assert_eq!(s.acks_waiting(), 0);
    assert!(s.deliver(id(1), 2, 1), "the same entry, delivered again");
    s.settled(1, [id(1)]);
    assert!(!s.finish(id(1), 1, Finish::Abandon));
    assert_eq!(
        s.window(),
        1,
        "rule 5: the old epoch does not touch the fresh entry"
    );
    assert_eq!(s.start(id(1), 2, Instant::now()), Start::Run);
}

#[test]
fn a_retry_waits_for_a_confirmed_lease_and_stops_once_it_is_lost() {
    let mut s: ShardState<()> = ShardState::new(10);
    let now = Instant::now();
    s.activate(1, now + Duration::from_secs(1));
    s.deliver(id(1), 1, 1);
    assert_eq!(s.start(id(1), 1, now), Start::Run);
    assert_eq!(s.may_retry(1, now), Retry::Go);
    let after = now + Duration::from_secs(2);
    assert_eq!(s.may_retry(1, after), Retry::Wait, "not confirmed since");
    assert!(!s.confirmed(1, after));
    s.lose();
    assert_eq!(s.may_retry(1, after), Retry::Stop);
}

#[test]
fn a_refusal_of_an_older_epoch_or_of_the_own_release_is_no_loss() {
    let mut s: ShardState<()> = ShardState::new(10);
    s.activate(1, later());
    s.lose();
    assert!(s.activate(2, later()));
    assert_eq!(
        s.refused(1),
        None,
        "an old batch refused after re-acquiring"
    );
    assert_eq!(s.phase(), Phase::Active);
    s.release();
    s.sending_release();
    assert_eq!(s.refused(2), None, "the answer to the own release");
    s.released();
    assert_eq!(s.phase(), Phase::Idle);
    assert!(s.activate(3, later()));
    assert_eq!(s.refused(3), Some(0));
    assert_eq!(s.refused(3), None, "counted once");
}

#[test]
fn released_gives_up_the_acks_it_could_not_send() {
    let mut s: ShardState<()> = ShardState::new(10);
    s.activate(1, later());
    s.deliver(id(1), 1, 1);
    assert_eq!(s.start(id(1), 1, Instant::now()), Start::Run);
    s.finish(id(1), 1, Finish::Settle(None));
    s.release();
    let acks = s.take_acks();
    s.requeue_acks(acks); // Redis down: not sent
    s.released();
    assert_eq!(s.acks_waiting(), 0);
    assert_eq!(s.window(), 0);
}

#[test]
fn a_held_key_keeps_its_entries_out_of_the_window_until_released() {
    let mut s: ShardState<(), &str> = ShardState::with_held_limit(10, 2);
    s.activate(1, later());
    for n in 1..=4 {
        assert!(s.deliver(id(n), 1, 1));
    }
    let now = Instant::now();
    assert_eq!(
        s.start_unless_held(id(1), 1, now, b"a", || "a1"),
        Start::Run
    );
    let hold = Finish::Hold {
        key: b"a".to_vec(),
        entry: "a1",
        note: (),
    };
    assert!(!s.finish(id(1), 1, hold));
    assert_eq!(s.take_acks().len(), 1, "the hold goes out with the acks");
    s.settled(1, [id(1)]);
    assert_eq!(
        (s.window(), s.held()),
        (3, 1),
        "the held entry stays, out of the window"
    );
    assert_eq!(
        s.start_unless_held(id(2), 1, now, b"b", || "b2"),
        Start::Run,
        "other keys run"
    );
    assert_eq!(
        s.start_unless_held(id(3), 1, now, b"a", || "a3"),
        Start::Held
    );
    assert_eq!(
        s.start(id(3), 1, now),
        Start::Skip,
        "a held entry never starts"
    );
    assert_eq!((s.window(), s.held()), (2, 2));
    assert_eq!(s.room(), 0, "held entries fill their limit: no reading");
    assert!(
        s.stored_holds().is_empty(),
        "not in Redis yet: no release to see"
    );
    s.hold_stored(1, b"a");
    assert_eq!(s.stored_holds(), vec![b"a".to_vec()]);
    assert!(s.mark_releasing(1, b"a"));
    assert!(!s.mark_releasing(1, b"a"), "once");
    assert_eq!(
        s.start_unless_held(id(4), 1, now, b"a", || "a4"),
        Start::Held,
        "held until the lane's release task unholds it"
    );
    let back = s.unhold(1, b"a");
    assert_eq!(
        back,
        vec![(id(1), "a1", 1), (id(3), "a3", 1), (id(4), "a4", 1)],
        "in order, the poison first"
    );
    assert_eq!((s.window(), s.held()), (4, 0));
    assert_eq!(
        s.start_unless_held(id(1), 1, now, b"a", || "a1"),
        Start::Run
    );
}

#[test]
fn releasing_or_losing_a_shard_gives_held_entries_up() {
    let mut s: ShardState<(), ()> = ShardState::with_held_limit(10, 10);
    s.activate(1, later());
    s.deliver(id(1), 1, 3);
    s.load_holds(1, vec![(b"a".to_vec(), Some(id(1)))]);
    assert_eq!(
        s.start_unless_held(id(1), 1, Instant::now(), b"a", || ()),
        Start::Held
    );
    assert_eq!(s.release(), 1, "the held entry is given back");
    assert_eq!(s.take_returned(), vec![(id(1), 3)]);
    assert_eq!((s.window(), s.held()), (0, 0));
    s.released();
    assert!(s.activate(2, later()));
    assert!(
        s.held_keys().is_empty(),
        "a new epoch loads the holds again"
    );
}
