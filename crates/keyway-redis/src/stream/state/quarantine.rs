//! Quarantined keys in a shard's state (rule 7 of the [shard state](super)): which keys are
//! held, their held entries, whether each hold is stored in Redis, and their release.

use super::{Phase, ShardState, Status};
use crate::stream::EntryId;

/// A quarantined key's entries held by this member.
#[derive(Debug)]
pub(super) struct HeldKey<E> {
    /// The entry that exhausted its attempts, if known here: it runs first, with fresh
    /// attempts, once the key is released.
    pub(super) poison: Option<EntryId>,
    /// Its entries held here, in the order they came to start (id order): id, entry,
    /// delivery count.
    pub(super) entries: Vec<(EntryId, E, u64)>,
    /// The hold is stored in Redis (so a key missing there was released).
    pub(super) stored: bool,
    /// Released: a task in the key's lane will [`unhold`](ShardState::unhold) it.
    pub(super) releasing: bool,
}

impl<D, E> ShardState<D, E> {
    /// Entries of quarantined keys held here.
    pub(crate) fn held(&self) -> usize {
        self.held_count
    }

    /// The quarantined keys known here.
    #[cfg(test)]
    pub(crate) fn held_keys(&self) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = self.held.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// The quarantined keys whose hold is stored in Redis (a key among them missing there
    /// was released).
    pub(crate) fn stored_holds(&self) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = self
            .held
            .iter()
            .filter(|(_, h)| h.stored && !h.releasing)
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    /// The holds found in Redis at `epoch` (`key`, the entry that exhausted its attempts):
    /// their keys' entries are held from now on (rule 7). Nothing if not `Active` there.
    pub(crate) fn load_holds(&mut self, epoch: u64, holds: Vec<(Vec<u8>, Option<EntryId>)>) {
        if self.phase != Phase::Active || self.epoch != epoch {
            return;
        }
        for (key, poison) in holds {
            let h = self.held.entry(key).or_insert_with(|| HeldKey {
                poison: None,
                entries: Vec::new(),
                stored: true,
                releasing: false,
            });
            h.stored = true;
            h.poison = h.poison.or(poison);
        }
    }

    /// The hold of `key` was written to Redis at `epoch`.
    pub(crate) fn hold_stored(&mut self, epoch: u64, key: &[u8]) {
        if self.epoch == epoch {
            if let Some(h) = self.held.get_mut(key) {
                h.stored = true;
            }
        }
    }

    /// `key` was released in Redis: true (once) if it is held here at `epoch`; the caller
    /// then puts a task in the key's lane that [`unhold`](Self::unhold)s it, so the key's
    /// entries already in the lane ahead of that task are held, and run after the held ones.
    pub(crate) fn mark_releasing(&mut self, epoch: u64, key: &[u8]) -> bool {
        if self.phase != Phase::Active || self.epoch != epoch {
            return false;
        }
        match self.held.get_mut(key) {
            Some(h) if !h.releasing => {
                h.releasing = true;
                true
            }
            _ => false,
        }
    }

    /// Releases `key` at `epoch` (rule 7): its held entries, in order, to run again in its
    /// lane (queued again, in the window), the poison entry's delivery count reset to 1 so
    /// it has its attempts again. Empty if the key was not held, or the shard is not `Active`
    /// at `epoch` (then the entries stay pending in Redis).
    pub(crate) fn unhold(&mut self, epoch: u64, key: &[u8]) -> Vec<(EntryId, E, u64)> {
        if self.phase != Phase::Active || self.epoch != epoch {
            return Vec::new();
        }
        let Some(h) = self.held.remove(key) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(h.entries.len());
        for (id, e, _) in h.entries {
            let Some(w) = self.entries.get_mut(&id) else {
                continue;
            };
            if w.status != Status::Held || w.epoch != epoch {
                continue;
            }
            self.held_count -= 1;
            w.status = Status::Queued;
            if Some(id) == h.poison {
                w.deliveries = 1;
            }
            out.push((id, e, w.deliveries));
        }
        out
    }
}
