//! [`ShardState`]: the in-process state machine of one shard, pure (no Redis, no threads, no
//! clock of its own) so that it can be model-checked.
//!
//! Phases: `Idle` → `Active` (lease held at an epoch) → `Releasing` (stop reading, wait for the
//! running entries, flush acks) → `Idle`; or `Active`/`Releasing` → `Lost` (the lease is gone).
//!
//! Entries are tagged with the epoch that delivered them. The rules:
//! 1. The window (entries delivered and not yet settled) never exceeds the limit: `room` is 0
//!    unless `Active`.
//! 2. An entry starts, and a failed entry tries again, only if it is still queued (running)
//!    *at the epoch that delivered it* and the lease is confirmed at that epoch
//!    ([`confirmed`](ShardState::confirmed): `Active`, and renewed recently enough);
//!    otherwise it is skipped or abandoned (and stays pending in Redis for the next owner)
//!    or waits (lease not confirmed lately). This is the stream module's fencing rule.
//! 3. Releasing and losing drop the queued entries at once (under the same lock as `start`),
//!    so nothing starts after a revoke.
//! 4. A new epoch is activated as soon as the former one is over (`Idle` or `Lost`), even if
//!    a task of the former epoch still runs: the former epoch's entries are swept, and that
//!    task's late finish touches nothing. A key's task from the former epoch never overlaps
//!    one from the new epoch because both run in the key's lane, one after the other (the
//!    old task holds the lane until it returns); so one slow handler never holds up the
//!    shard's other keys.
//! 5. Sweeping old entries happens inside `activate`, only for older epochs, and a late finish
//!    touches its entry only if the epoch matches: an old task never removes or acks an entry
//!    delivered again at the new epoch (race 2, "a stale sweep removing a fresh entry").
//! 6. A refusal by Redis (renewal, ack, fenced read) loses the lease only if it is about the
//!    current epoch and not the answer to this member's own release
//!    ([`refused`](ShardState::refused)); a loss is reported once.

use std::collections::HashMap;
use std::time::Instant;

use crate::stream::EntryId;

/// The phase of a shard in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Not held.
    Idle,
    /// Held: reading and starting entries.
    Active,
    /// Being handed off: nothing new starts; waits for running entries and flushes acks.
    Releasing,
    /// The lease is gone: nothing new starts; late acks will be refused.
    Lost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Queued,
    Running,
    Done,
}

#[derive(Debug)]
struct Slot {
    epoch: u64,
    status: Status,
    /// Redis's delivery count of the entry when this member got it.
    deliveries: u64,
}

/// What [`ShardState::may_retry`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Try again now.
    Go,
    /// The lease was not confirmed lately: ask again soon.
    Wait,
    /// Released, lost or superseded: give the entry up (it stays pending in Redis).
    Stop,
}

/// What [`ShardState::start`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Run it now (it counts as running until `finish`).
    Run,
    /// Do not run it: revoked, superseded or already done.
    Skip,
    /// The lease was not confirmed lately: ask again soon.
    Wait,
}

/// How a started entry ended.
#[derive(Debug)]
pub(crate) enum Finish<D> {
    /// To be acked: `None` after success, `Some(d)` to be dead-lettered with `d`.
    Settle(Option<D>),
    /// Not to be acked: it stays pending in Redis (the lease went while it retried).
    Abandon,
}

/// An entry waiting for its ack (or dead letter).
#[derive(Debug)]
pub(crate) struct ToAck<D> {
    pub(crate) id: EntryId,
    pub(crate) epoch: u64,
    pub(crate) dead: Option<D>,
}

/// The state of one shard in this process.
#[derive(Debug)]
pub(crate) struct ShardState<D> {
    phase: Phase,
    epoch: u64,
    limit: usize,
    entries: HashMap<EntryId, Slot>,
    running: usize,
    to_ack: Vec<ToAck<D>>,
    valid_until: Option<Instant>,
    /// Entries left unstarted by a release, with their delivery counts: the reader gives the
    /// counts back in Redis, so a clean hand-off does not use up an attempt.
    returned: Vec<(EntryId, u64)>,
    /// The release of the lease at `epoch` was sent: a refusal from now on is its answer.
    release_sent: bool,
}

impl<D> ShardState<D> {
    /// An idle shard whose window holds at most `limit` entries.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            phase: Phase::Idle,
            epoch: 0,
            limit,
            entries: HashMap::new(),
            running: 0,
            to_ack: Vec::new(),
            valid_until: None,
            returned: Vec::new(),
            release_sent: false,
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Entries delivered and not settled (queued, running, or done and waiting for the ack).
    pub(crate) fn window(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn running(&self) -> usize {
        self.running
    }

    pub(crate) fn acks_waiting(&self) -> usize {
        self.to_ack.len()
    }

    /// Whether a new epoch may be activated now (rule 4): the former one is over.
    pub(crate) fn can_activate(&self) -> bool {
        matches!(self.phase, Phase::Idle | Phase::Lost)
    }

    /// The lease was acquired at `epoch` (higher than any before): sweeps what older epochs
    /// left, running entries included (rules 4 and 5), and starts reading. False, changing
    /// nothing, if not allowed (rule 4).
    pub(crate) fn activate(&mut self, epoch: u64, valid_until: Instant) -> bool {
        if !self.can_activate() || epoch <= self.epoch {
            return false;
        }
        self.entries.retain(|_, slot| slot.epoch >= epoch);
        self.to_ack.retain(|a| a.epoch >= epoch);
        self.returned.clear();
        self.running = 0;
        self.phase = Phase::Active;
        self.epoch = epoch;
        self.valid_until = Some(valid_until);
        self.release_sent = false;
        true
    }

    /// The lease was confirmed at `epoch`: entries may start until `valid_until`.
    pub(crate) fn renewed(&mut self, epoch: u64, valid_until: Instant) {
        if self.epoch == epoch && matches!(self.phase, Phase::Active | Phase::Releasing) {
            self.valid_until = Some(valid_until);
        }
    }

    /// Whether the lease was confirmed recently enough to start entries at `now`.
    pub(crate) fn fresh(&self, now: Instant) -> bool {
        self.valid_until.is_some_and(|v| now < v)
    }

    /// The fencing rule: whether this member may act on the shard at `epoch` now (read,
    /// start, retry, dispatch): `Active` at that epoch and the lease renewed recently enough.
    pub(crate) fn confirmed(&self, epoch: u64, now: Instant) -> bool {
        self.phase == Phase::Active && self.epoch == epoch && self.fresh(now)
    }

    /// Whether entry `id` delivered at `epoch` is still to be handed to its lane: queued at
    /// that epoch while the shard is `Active` (a release or a loss dropped it otherwise).
    pub(crate) fn dispatchable(&self, id: EntryId, epoch: u64) -> bool {
        self.phase == Phase::Active
            && self.epoch == epoch
            && self
                .entries
                .get(&id)
                .is_some_and(|s| s.epoch == epoch && s.status == Status::Queued)
    }

    /// Whether entry `id` is in the window (at any epoch).
    pub(crate) fn holds(&self, id: EntryId) -> bool {
        self.entries.contains_key(&id)
    }

    /// How many more entries may be delivered now (rule 1).
    pub(crate) fn room(&self) -> usize {
        if self.phase == Phase::Active {
            self.limit.saturating_sub(self.entries.len())
        } else {
            0
        }
    }

    /// Records a delivered entry (`deliveries`: Redis's delivery count); false (do not
    /// dispatch it) if not `Active` at `epoch`, or if it is already in the window.
    pub(crate) fn deliver(&mut self, id: EntryId, epoch: u64, deliveries: u64) -> bool {
        if self.phase == Phase::Releasing && epoch == self.epoch {
            // Read while the release began: never started, so returned like the queued ones.
            self.returned.push((id, deliveries));
            return false;
        }
        if self.phase != Phase::Active || epoch != self.epoch || self.entries.contains_key(&id) {
            return false;
        }
        self.entries.insert(
            id,
            Slot {
                epoch,
                status: Status::Queued,
                deliveries,
            },
        );
        true
    }

    /// Forgets a delivered entry that could not be dispatched (it stays pending in Redis).
    pub(crate) fn undeliver(&mut self, id: EntryId, epoch: u64) {
        if self
            .entries
            .get(&id)
            .is_some_and(|s| s.epoch == epoch && s.status == Status::Queued)
        {
            self.entries.remove(&id);
        }
    }

    /// May entry `id` delivered at `epoch` start now (rule 2)?
    pub(crate) fn start(&mut self, id: EntryId, epoch: u64, now: Instant) -> Start {
        let fresh = self.fresh(now);
        let active = self.phase == Phase::Active && self.epoch == epoch;
        match self.entries.get_mut(&id) {
            Some(slot) if slot.epoch == epoch && slot.status == Status::Queued => {
                if !active {
                    Start::Skip
                } else if !fresh {
                    Start::Wait
                } else {
                    slot.status = Status::Running;
                    self.running += 1;
                    Start::Run
                }
            }
            _ => Start::Skip,
        }
    }

    /// May a running entry of `epoch` try again (after a failure) at `now`? Only while the
    /// lease is confirmed (rule 2); not once the shard is being released or was lost.
    pub(crate) fn may_retry(&self, epoch: u64, now: Instant) -> Retry {
        if self.phase != Phase::Active || self.epoch != epoch {
            Retry::Stop
        } else if self.confirmed(epoch, now) {
            Retry::Go
        } else {
            Retry::Wait
        }
    }

    /// A started entry ended (rule 5: only its own epoch's slot is touched). True if it was to
    /// be acked but the lease is known lost: the ack is not sent (it would be refused) and the
    /// entry stays pending for the new owner.
    pub(crate) fn finish(&mut self, id: EntryId, epoch: u64, how: Finish<D>) -> bool {
        let Some(slot) = self.entries.get_mut(&id) else {
            return false;
        };
        if slot.epoch != epoch || slot.status != Status::Running {
            return false;
        }
        self.running -= 1;
        match how {
            Finish::Settle(_) if self.phase == Phase::Lost => {
                self.entries.remove(&id);
                true
            }
            Finish::Settle(dead) => {
                slot.status = Status::Done;
                self.to_ack.push(ToAck { id, epoch, dead });
                false
            }
            Finish::Abandon => {
                self.entries.remove(&id);
                false
            }
        }
    }

    /// Takes the acks waiting to be sent.
    pub(crate) fn take_acks(&mut self) -> Vec<ToAck<D>> {
        std::mem::take(&mut self.to_ack)
    }

    /// Puts back acks that could not be sent (Redis unreachable), before any newer ones.
    pub(crate) fn requeue_acks(&mut self, mut acks: Vec<ToAck<D>>) {
        acks.append(&mut self.to_ack);
        self.to_ack = acks;
    }

    /// Entries of `epoch` acked, dead-lettered or refused: they leave the window.
    pub(crate) fn settled(&mut self, epoch: u64, ids: impl IntoIterator<Item = EntryId>) {
        for id in ids {
            if self
                .entries
                .get(&id)
                .is_some_and(|s| s.epoch == epoch && s.status == Status::Done)
            {
                self.entries.remove(&id);
            }
        }
    }

    /// Drops the queued entries (they stay pending in Redis); returns them with their
    /// delivery counts.
    fn drop_queued(&mut self) -> Vec<(EntryId, u64)> {
        let mut dropped = Vec::new();
        self.entries.retain(|&id, s| {
            let queued = s.status == Status::Queued;
            if queued {
                dropped.push((id, s.deliveries));
            }
            !queued
        });
        dropped.sort();
        dropped
    }

    /// Starts a hand-off (rule 3); returns how many queued entries are left for the next
    /// owner (see [`take_returned`](Self::take_returned)).
    pub(crate) fn release(&mut self) -> usize {
        if self.phase != Phase::Active {
            return 0;
        }
        self.phase = Phase::Releasing;
        self.returned = self.drop_queued();
        self.returned.len()
    }

    /// The entries a release left unstarted, with their delivery counts.
    pub(crate) fn take_returned(&mut self) -> Vec<(EntryId, u64)> {
        std::mem::take(&mut self.returned)
    }

    /// Whether a release may complete: nothing runs, no ack waits.
    pub(crate) fn drained(&self) -> bool {
        self.running == 0 && self.to_ack.is_empty()
    }

    /// The release of the lease is about to be sent: a refusal seen from now on (a renewal
    /// racing with it) is its answer, not a loss (rule 6).
    pub(crate) fn sending_release(&mut self) {
        if self.phase == Phase::Releasing {
            self.release_sent = true;
        }
    }

    /// The hand-off is over (the lease released, or given up): back to `Idle`. Acks still
    /// waiting are given up too (Redis was unreachable): their entries stay pending and run
    /// again under the next owner.
    pub(crate) fn released(&mut self) {
        if self.phase == Phase::Releasing {
            self.phase = Phase::Idle;
            self.valid_until = None;
            self.to_ack.clear();
            self.entries.retain(|_, s| s.status == Status::Running);
        }
    }

    /// The lease is gone (rule 3); returns the queued entries dropped, or `None` if it was
    /// not held (already lost, released or idle: nothing to report again).
    pub(crate) fn lose(&mut self) -> Option<usize> {
        if !matches!(self.phase, Phase::Active | Phase::Releasing) {
            return None;
        }
        self.phase = Phase::Lost;
        self.valid_until = None;
        self.returned.clear();
        Some(self.drop_queued().len())
    }

    /// Redis refused this member's lease at `epoch` (a renewal, an ack batch, a fenced read):
    /// the lease is lost if that is the current epoch and the refusal is not the answer to
    /// this member's own release (rule 6). Returns the queued entries dropped, or `None` when
    /// this is no (new) loss.
    pub(crate) fn refused(&mut self, epoch: u64) -> Option<usize> {
        if epoch != self.epoch || self.release_sent {
            return None;
        }
        self.lose()
    }
}

#[cfg(test)]
mod tests {
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
}
