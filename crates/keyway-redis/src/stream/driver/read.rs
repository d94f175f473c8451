//! The shard reader's reads and claims: new entries through the fenced read script, the
//! replay of the pending list and the recovery of entries a lost reply delivered, both through
//! the fenced claim script while the shard's ack lock is held (protocol rule R).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use super::{Accepted, ShardReader};
use crate::stream::context::evalsha;
use crate::stream::reply::{self, Fenced};
use crate::stream::{EntryId, StreamError};

/// Redis times blocked commands out on its `hz` tick (100 ms by default): how much longer
/// than its `BLOCK` a blocking read may take.
const BLOCK_GRACE: Duration = Duration::from_millis(150);

impl ShardReader {
    /// `(id, delivery count)` of up to `count` entries pending after `after`, for `consumer`
    /// or anyone.
    fn pending_after(
        &mut self,
        after: EntryId,
        count: usize,
        consumer: Option<&str>,
    ) -> Result<Option<Vec<(EntryId, u64)>>, StreamError> {
        let mut cmd = redis::cmd("XPENDING");
        cmd.arg(&self.shard.stream)
            .arg(self.ctx.group())
            .arg(format!("({after}"))
            .arg("+")
            .arg(count);
        if let Some(consumer) = consumer {
            cmd.arg(consumer);
        }
        let value: Value = match cmd.query(self.conn()?) {
            Ok(v) => v,
            Err(e) if e.code() == Some("NOGROUP") => {
                self.group_lost()?;
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Some(reply::pending_counts(&value)?))
    }

    /// Replays the next pending entries of the shard after `after`, whoever they were
    /// delivered to, in id order: each is claimed with its delivery count plus one (this
    /// delivery), unless it is in the window already. Holds the ack lock (protocol rule R).
    pub(super) fn replay_batch(
        &mut self,
        after: EntryId,
        room: usize,
    ) -> Result<Accepted, StreamError> {
        let shard = Arc::clone(&self.shard);
        let _acks = shard.acks.lock();
        let Some(rows) = self.pending_after(after, room, None)? else {
            return Ok(Vec::new());
        };
        let last = rows.last().map(|&(id, _)| id);
        let claims = self.plan(&rows, |n| n.saturating_add(1));
        let accepted = self.claim(claims)?;
        match last {
            Some(last) if rows.len() >= room => self.replay = Some(last),
            _ => {
                self.replay = None;
                tracing::info!(
                    shard = self.shard.index,
                    epoch = self.epoch,
                    replayed = self.replayed,
                    "pending entries replayed; reading new ones"
                );
            }
        }
        Ok(accepted)
    }

    /// After a Redis error: claims again, with their delivery counts unchanged, this member's
    /// pending entries that a lost reply delivered (pending here, not in the window). The
    /// entries still to be replayed are left to the replay. Holds the ack lock, so none of
    /// them was acknowledged meanwhile (protocol rule R).
    pub(super) fn recover_own(&mut self) -> Result<Accepted, StreamError> {
        let shard = Arc::clone(&self.shard);
        let _acks = shard.acks.lock();
        let member = self.ctx.member.clone();
        let page = self.ctx.cfg.window.max(100);
        let mut after = EntryId::default();
        let mut found = Vec::new();
        loop {
            let Some(rows) = self.pending_after(after, page, Some(&member))? else {
                return Ok(Vec::new());
            };
            let full = rows.len() >= page;
            if let Some(&(last, _)) = rows.last() {
                after = last;
            }
            let replay = self.replay;
            found.extend(rows.into_iter().filter(|&(id, _)| {
                // Beyond the replay's cursor and never claimed at this epoch: the replay
                // delivers it (and counts that delivery).
                replay.is_none_or(|cursor| id <= cursor) || self.planned.contains_key(&id)
            }));
            if !full {
                break;
            }
        }
        let claims = self.plan(&found, |n| n);
        if !claims.is_empty() {
            tracing::info!(
                shard = self.shard.index,
                epoch = self.epoch,
                entries = claims.len(),
                "recovering entries a lost reply delivered"
            );
        }
        self.claim(claims)
    }

    /// The claims to send for pending `rows`: those not in the window, each with the count a
    /// claim sent before set (a lost reply), or else `count(its delivery count)`.
    fn plan(&mut self, rows: &[(EntryId, u64)], count: impl Fn(u64) -> u64) -> Vec<(EntryId, u64)> {
        let st = self.shard.state.lock();
        let claims: Vec<(EntryId, u64)> = rows
            .iter()
            .filter(|(id, _)| !st.holds(*id))
            .map(|&(id, n)| {
                (
                    id,
                    self.planned.get(&id).copied().unwrap_or_else(|| count(n)),
                )
            })
            .collect();
        drop(st);
        for &(id, n) in &claims {
            self.planned.insert(id, n);
        }
        claims
    }

    /// Claims `claims` (id, delivery count) through the fenced claim script and dispatches
    /// what it got.
    fn claim(&mut self, claims: Vec<(EntryId, u64)>) -> Result<Accepted, StreamError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let keys = [self.shard.lease.as_str(), self.shard.stream.as_str()];
        let mut cmd = evalsha(&self.ctx.scripts.claim, &keys);
        cmd.arg(self.ctx.group())
            .arg(&self.ctx.member)
            .arg(self.epoch);
        for (id, n) in &claims {
            cmd.arg(id.to_string()).arg(*n);
        }
        let value: Value = match cmd.query(self.conn()?) {
            Ok(v) => v,
            Err(e) if e.code() == Some("NOGROUP") => return self.group_lost().map(|()| Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let got = reply::fenced_claim(&value, true)?;
        let counts: HashMap<EntryId, u64> = claims.into_iter().collect();
        for id in counts.keys() {
            self.planned.remove(id);
        }
        if got.refused {
            self.refused();
            return Ok(Vec::new());
        }
        self.report_trimmed(&got.trimmed);
        self.replayed += got.entries.len() as u64;
        Ok(self.accept(got.entries, &counts))
    }

    /// Reads new entries through the fenced read script.
    pub(super) fn read_batch(&mut self, room: usize) -> Result<Accepted, StreamError> {
        let keys = [self.shard.lease.as_str(), self.shard.stream.as_str()];
        let mut cmd = evalsha(&self.ctx.scripts.read, &keys);
        cmd.arg(self.ctx.group())
            .arg(&self.ctx.member)
            .arg(self.epoch)
            .arg(room);
        let value: Value = match cmd.query(self.conn()?) {
            Ok(v) => v,
            Err(e) if e.code() == Some("NOGROUP") => return self.group_lost().map(|()| Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let Fenced {
            refused,
            entries,
            last,
            ..
        } = reply::fenced_read(&value)?;
        if refused {
            self.refused();
            return Ok(Vec::new());
        }
        self.idle_after = last;
        Ok(self.accept(entries, &HashMap::new()))
    }

    /// Waits (a blocking `XREAD`, which delivers nothing to anyone) until the stream has an
    /// entry after `after`, at most the block time. The block is shorter than the I/O
    /// timeout's allowance for this one command, so an idle reader never times out.
    pub(super) fn wait_for_new(&mut self, after: EntryId) -> Result<(), StreamError> {
        let block = self
            .ctx
            .cfg
            .ack_interval
            .clamp(Duration::from_millis(1), Duration::from_millis(100));
        let io = self.ctx.cfg.io_timeout;
        let allowance = io.saturating_add(block).saturating_add(BLOCK_GRACE);
        let stream = self.shard.stream.clone();
        let conn = self.conn()?;
        conn.set_read_timeout(Some(allowance))?;
        let waited: redis::RedisResult<Value> = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(1)
            .arg("BLOCK")
            .arg(block.as_millis() as u64)
            .arg("STREAMS")
            .arg(&stream)
            .arg(after.to_string())
            .query(conn);
        conn.set_read_timeout(Some(io))?;
        waited.map(drop).map_err(StreamError::from)
    }
}
