//! The hand-over of accepted entries to the pool: each to its key's lane (or the pool without
//! key order), in id order, waiting while the pool is full (protocol rule B), skipping what a
//! release or a loss dropped meanwhile (protocol rule F).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use keyway::SubmitError;

use super::{Accepted, ShardReader};
use crate::stream::context::{Ctx, LaneKey};
use crate::stream::delivery::Handler;
use crate::stream::reply::RawEntry;
use crate::stream::task;
use crate::stream::EntryId;

/// How long a reader waits between two looks for room in a full pool (protocol rule B).
const ROOM_CHECK: Duration = Duration::from_millis(50);

impl ShardReader {
    /// Records the entries in the window (those not there yet, while the shard is `Active`
    /// at this epoch); returns them with their delivery counts, to be [submitted](Self::submit).
    pub(super) fn accept(
        &self,
        entries: Vec<RawEntry>,
        counts: &HashMap<EntryId, u64>,
    ) -> Accepted {
        let mut st = self.shard.state.lock();
        entries
            .into_iter()
            .filter_map(|e| {
                let n = counts.get(&e.id).copied().unwrap_or(1);
                st.deliver(e.id, self.epoch, n).then_some((e, n))
            })
            .collect()
    }

    /// Hands each accepted entry to its key's lane (or, without key order, to the pool), in
    /// id order. Protocol rule F: an entry a release or a loss dropped meanwhile is not
    /// dispatched (nor given a rate slot). Protocol rule B: a full pool is waited for, not
    /// taken for a refusal.
    pub(super) fn submit(&self, accepted: Accepted) {
        let mut accepted = accepted.into_iter();
        for (e, deliveries) in accepted.by_ref() {
            if !self.dispatchable(e.id) {
                continue;
            }
            if let Some((scheduler, executor)) = &self.ctx.cfg.rate_limit {
                crate::stream::rate::wait_for_slot(scheduler, executor);
                if !self.dispatchable(e.id) {
                    continue;
                }
            }
            let (id, lane) = (e.id, self.lane_of(&e.key));
            let (ctx, shard, epoch) = (Arc::clone(&self.ctx), Arc::clone(&self.shard), self.epoch);
            let submitted = match &*self.ctx.handler {
                Handler::Sync(_) => {
                    let task = move || task::run(&ctx, &shard, e, epoch, deliveries);
                    self.submit_one(lane, Now(task), || self.dispatchable(id))
                }
                Handler::Async(_) => {
                    let task = task::run_async(ctx, shard, e, epoch, deliveries);
                    self.submit_one(lane, Later(task), || self.dispatchable(id))
                }
            };
            if let Err(refused) = submitted {
                tracing::error!(shard = self.shard.index, %id, error = %refused, "the pool refused the entry (shut down?); it and the rest of its batch stay pending");
                self.shard.state.lock().undeliver(id, self.epoch);
                break;
            }
        }
        // Refused by the pool: the later entries are not dispatched either (a key's later
        // entry must not run before an earlier one); they stay pending.
        let mut st = self.shard.state.lock();
        for (e, _) in accepted {
            st.undeliver(e.id, self.epoch);
        }
    }

    /// Whether entry `id` is still to be dispatched (protocol rule F).
    fn dispatchable(&self, id: EntryId) -> bool {
        self.shard.state.lock().dispatchable(id, self.epoch)
    }

    /// The lane of `key`'s entries, or `None` without key order (they go to the pool).
    pub(super) fn lane_of(&self, key: &[u8]) -> Option<LaneKey> {
        self.ctx
            .cfg
            .key_order
            .then(|| (self.ctx.instance, Arc::from(key)))
    }

    /// Submits `task` to `lane` (or to the pool), waiting while the pool is full and `wanted`;
    /// `Ok` also when it stopped being wanted (its entry released or lost) while waiting: its
    /// entries stay pending, to nobody's harm.
    pub(super) fn submit_one<J: Job>(
        &self,
        lane: Option<LaneKey>,
        task: J,
        wanted: impl Fn() -> bool,
    ) -> Result<(), keyway::SubmitErrorKind> {
        let mut task = task;
        loop {
            let attempt = |t: J| t.submit(&self.ctx, lane.as_ref());
            match self.ctx.pool.wait_for_room(task, ROOM_CHECK, attempt) {
                Ok(()) => return Ok(()),
                Err(SubmitError::Full(back)) if wanted() => task = back,
                Err(SubmitError::Full(_)) => return Ok(()),
                Err(e) => return Err(e.kind()),
            }
        }
    }
}

/// An entry's task, for either kind of handler: a closure (sync handler, [`Now`]) or a future
/// (async handler, [`Later`]), submitted to the key's lane or, without key order, to the pool.
pub(super) trait Job: Sized + Send + 'static {
    fn submit(self, ctx: &Ctx, lane: Option<&LaneKey>) -> Result<(), SubmitError<Self>>;
}

/// A sync handler's entry: a closure.
pub(super) struct Now<F>(pub(super) F);

/// An async handler's entry: a future.
pub(super) struct Later<F>(pub(super) F);

impl<F: FnOnce() + Send + 'static> Job for Now<F> {
    fn submit(self, ctx: &Ctx, lane: Option<&LaneKey>) -> Result<(), SubmitError<Self>> {
        let Self(t) = self;
        let wrap = |e| rewrap(e, Self);
        match lane {
            Some(lane) => ctx.lanes.execute_sequential(lane.clone(), t).map_err(wrap),
            None => ctx.pool.execute(t).map_err(wrap),
        }
    }
}

impl<F: Future<Output = ()> + Send + 'static> Job for Later<F> {
    fn submit(self, ctx: &Ctx, lane: Option<&LaneKey>) -> Result<(), SubmitError<Self>> {
        let Self(t) = self;
        let wrap = |e| rewrap(e, Self);
        match lane {
            Some(lane) => ctx
                .pool
                .execute_async_sequential(lane.clone(), t)
                .map_err(wrap),
            None => ctx.pool.execute_async(t).map_err(wrap),
        }
    }
}

/// The same refusal, handing back `wrap(task)` (a refusal of a kind keyway adds later reads as
/// a shut-down pool: the entry stays pending).
fn rewrap<T, U>(e: SubmitError<T>, wrap: impl FnOnce(T) -> U) -> SubmitError<U> {
    match e {
        SubmitError::Full(t) => SubmitError::Full(wrap(t)),
        SubmitError::KeyPanicked(t) => SubmitError::KeyPanicked(wrap(t)),
        other => SubmitError::Shutdown(wrap(other.into_inner())),
    }
}
