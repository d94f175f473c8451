//! Quarantined keys as the shard reader sees them: the holds stored in Redis, loaded once per
//! epoch, and the releases it looks for, whose held entries go back to their key's lane.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::dispatch::{Later, Now};
use super::ShardReader;
use crate::stream::context::bump;
use crate::stream::delivery::Handler;
use crate::stream::task;
use crate::stream::{EntryId, StreamError};

impl ShardReader {
    /// Quarantined keys: loads those stored in Redis once per epoch (before anything of it
    /// is read or replayed, so a member that takes a shard over keeps them held), and then
    /// looks for releases every heartbeat while some are held (at once after a release
    /// through this consumer). A released key's held entries are given back to its lane.
    pub(super) fn holds(&mut self) -> Result<(), StreamError> {
        let now = Instant::now();
        if !self.holds_loaded {
            let holds: Vec<(Vec<u8>, String)> = redis::cmd("HGETALL")
                .arg(&self.shard.held)
                .query(self.conn()?)?;
            let holds = holds
                .into_iter()
                .map(|(k, id)| (k, id.parse::<EntryId>().ok()))
                .collect::<Vec<_>>();
            if !holds.is_empty() {
                tracing::info!(
                    shard = self.shard.index,
                    epoch = self.epoch,
                    keys = holds.len(),
                    "quarantined keys found: their entries are held"
                );
            }
            self.shard.state.lock().load_holds(self.epoch, holds);
            self.holds_loaded = true;
            self.holds_seen = now;
            return Ok(());
        }
        let asked = self.shard.check_holds.swap(false, Ordering::Relaxed);
        if !asked && now.duration_since(self.holds_seen) < self.ctx.cfg.heartbeat() {
            return Ok(());
        }
        let held = self.shard.state.lock().stored_holds();
        if held.is_empty() {
            return Ok(());
        }
        self.holds_seen = now;
        let stored: Vec<Vec<u8>> = redis::cmd("HKEYS")
            .arg(&self.shard.held)
            .query(self.conn()?)?;
        for key in held.into_iter().filter(|k| !stored.contains(k)) {
            if self.shard.state.lock().mark_releasing(self.epoch, &key) {
                tracing::info!(shard = self.shard.index, key = %String::from_utf8_lossy(&key), "quarantined key released: its held entries run again, in order");
                bump(&self.ctx.totals.released_keys, 1);
                self.submit_release(key);
            }
        }
        Ok(())
    }

    /// Puts the task that releases `key` in the key's lane: it runs once the key's tasks
    /// ahead of it have started (and been held), then runs the held entries in order.
    fn submit_release(&self, key: Vec<u8>) {
        let (ctx, shard, epoch) = (Arc::clone(&self.ctx), Arc::clone(&self.shard), self.epoch);
        let lane = self.lane_of(&key);
        let submitted = match &*self.ctx.handler {
            Handler::Sync(_) => {
                let task = move || {
                    let entries = shard.state.lock().unhold(epoch, &key);
                    for (_, e, n) in entries {
                        task::run(&ctx, &shard, e, epoch, n);
                    }
                };
                self.submit_one(lane, Now(task), || self.active())
            }
            Handler::Async(_) => {
                let task = async move {
                    let entries = shard.state.lock().unhold(epoch, &key);
                    for (_, e, n) in entries {
                        task::run_async(Arc::clone(&ctx), Arc::clone(&shard), e, epoch, n).await;
                    }
                };
                self.submit_one(lane, Later(task), || self.active())
            }
        };
        if let Err(refused) = submitted {
            tracing::error!(shard = self.shard.index, error = %refused, "the pool refused a released key's entries (shut down?); they stay pending");
        }
    }
}
