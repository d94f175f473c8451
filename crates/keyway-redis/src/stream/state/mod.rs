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
//! 7. Quarantine: a key is *held* once an entry of it exhausted its attempts under the
//!    quarantine policy ([`Finish::Hold`]), or when the holds stored in Redis are loaded at
//!    activation. An entry of a held key that comes to start is held instead (kept here with
//!    its payload, not run, not acknowledged). Held entries leave the window (they are not in
//!    flight) and count toward the held limit; a shard whose held entries reach the limit has
//!    no room. [`unhold`](ShardState::unhold) gives a key's held entries back, in id order,
//!    to run in its lane; releasing the shard or losing it gives them up (they stay pending
//!    in Redis, and the hold stays in Redis for the next owner).

use std::collections::HashMap;
use std::time::Instant;

use crate::stream::EntryId;

mod quarantine;

use quarantine::HeldKey;

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
    /// Its key is quarantined: kept, not run, not acknowledged.
    Held,
}

#[derive(Debug)]
struct WindowEntry {
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
    /// Its key is quarantined: the entry was kept (held), not to be run now.
    Held,
}

/// How a started entry ended.
#[derive(Debug)]
pub(crate) enum Finish<D, E = ()> {
    /// To be acked: `None` after success, `Some(d)` to be dead-lettered with `d`.
    Settle(Option<D>),
    /// Not to be acked: it stays pending in Redis (the lease went while it retried).
    Abandon,
    /// Attempts exhausted under the quarantine policy: the entry is held (not acked) and its
    /// key quarantined; `note` goes out with the acks, to store the hold in Redis.
    Hold {
        /// The entry's key.
        key: Vec<u8>,
        /// The entry, kept to run again once the key is released.
        entry: E,
        /// What the ack sender writes to Redis for the hold.
        note: D,
    },
}

/// An entry waiting for its ack (or dead letter).
#[derive(Debug)]
pub(crate) struct ToAck<D> {
    pub(crate) id: EntryId,
    pub(crate) epoch: u64,
    pub(crate) dead: Option<D>,
}

/// The state of one shard in this process (`D`: what a dead letter or a hold carries to the
/// ack sender; `E`: an entry kept while its key is held).
#[derive(Debug)]
pub(crate) struct ShardState<D, E = ()> {
    phase: Phase,
    epoch: u64,
    limit: usize,
    entries: HashMap<EntryId, WindowEntry>,
    /// Quarantined keys (rule 7) and the entries held for them.
    held: HashMap<Vec<u8>, HeldKey<E>>,
    /// Entries held, over all keys (they are in `entries`, with status `Held`).
    held_count: usize,
    /// The most held entries before the shard stops reading.
    held_limit: usize,
    running: usize,
    to_ack: Vec<ToAck<D>>,
    valid_until: Option<Instant>,
    /// Entries left unstarted by a release, with their delivery counts: the reader gives the
    /// counts back in Redis, so a clean hand-off does not use up an attempt.
    returned: Vec<(EntryId, u64)>,
    /// The release of the lease at `epoch` was sent: a refusal from now on is its answer.
    release_sent: bool,
}

impl<D, E> ShardState<D, E> {
    /// An idle shard whose window holds at most `limit` entries.
    #[cfg(test)]
    pub(crate) fn new(limit: usize) -> Self {
        Self::with_held_limit(limit, usize::MAX)
    }

    /// An idle shard whose window holds at most `limit` entries in flight, and which stops
    /// reading while it holds `held_limit` entries of quarantined keys (rule 7).
    pub(crate) fn with_held_limit(limit: usize, held_limit: usize) -> Self {
        Self {
            phase: Phase::Idle,
            epoch: 0,
            limit,
            entries: HashMap::new(),
            held: HashMap::new(),
            held_count: 0,
            held_limit,
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

    /// Entries in flight: delivered and not settled (queued, running, or done and waiting
    /// for the ack), held entries not counted (rule 7).
    pub(crate) fn window(&self) -> usize {
        self.entries.len() - self.held_count
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
        self.held.clear();
        self.held_count = 0;
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

    /// How many more entries may be delivered now (rule 1): none while the held entries
    /// fill their limit (rule 7).
    pub(crate) fn room(&self) -> usize {
        if self.phase == Phase::Active && self.held_count < self.held_limit {
            self.limit.saturating_sub(self.window())
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
            WindowEntry {
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

    /// As [`start`](Self::start), for an entry of `key`: if the key is held (rule 7) an
    /// entry that would run is held instead (`make` gives what is kept): [`Start::Held`].
    pub(crate) fn start_unless_held(
        &mut self,
        id: EntryId,
        epoch: u64,
        now: Instant,
        key: &[u8],
        make: impl FnOnce() -> E,
    ) -> Start {
        if !self.held.contains_key(key) {
            return self.start(id, epoch, now);
        }
        let fresh = self.fresh(now);
        let active = self.phase == Phase::Active && self.epoch == epoch;
        let Some(w) = self.entries.get_mut(&id) else {
            return Start::Skip;
        };
        if w.epoch != epoch || w.status != Status::Queued || !active {
            return Start::Skip;
        }
        if !fresh {
            return Start::Wait;
        }
        w.status = Status::Held;
        let deliveries = w.deliveries;
        self.held_count += 1;
        if let Some(h) = self.held.get_mut(key) {
            h.entries.push((id, make(), deliveries));
        }
        Start::Held
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
    pub(crate) fn finish(&mut self, id: EntryId, epoch: u64, how: Finish<D, E>) -> bool {
        let Some(slot) = self.entries.get_mut(&id) else {
            return false;
        };
        if slot.epoch != epoch || slot.status != Status::Running {
            return false;
        }
        self.running -= 1;
        match how {
            Finish::Settle(_) | Finish::Hold { .. } if self.phase == Phase::Lost => {
                self.entries.remove(&id);
                true
            }
            Finish::Hold { key, entry, note } => {
                slot.status = Status::Held;
                let deliveries = slot.deliveries;
                self.held_count += 1;
                let h = self.held.entry(key).or_insert_with(|| HeldKey {
                    poison: None,
                    entries: Vec::new(),
                    stored: false,
                    releasing: false,
                });
                h.releasing = false;
                h.poison = Some(id);
                h.entries.push((id, entry, deliveries));
                self.to_ack.push(ToAck {
                    id,
                    epoch,
                    dead: Some(note),
                });
                false
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

    /// Drops the queued and the held entries (they stay pending in Redis, and the holds in
    /// Redis); returns them with their delivery counts.
    fn drop_queued(&mut self) -> Vec<(EntryId, u64)> {
        let mut dropped = Vec::new();
        self.held.clear();
        self.held_count = 0;
        self.entries.retain(|&id, s| {
            let queued = matches!(s.status, Status::Queued | Status::Held);
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
            self.held.clear();
            self.held_count = 0;
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
mod tests;
