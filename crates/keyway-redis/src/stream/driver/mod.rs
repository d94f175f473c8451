//! The reader of one shard while this member holds its lease: replays the pending entries
//! (whoever they were delivered to, in id order) before reading new ones, recovers its own
//! pending entries after a Redis error, keeps the window, dispatches each entry to its key's
//! lane (or the pool, without key order), flushes fenced acks, and hands the shard off.
//!
//! Every read and claim goes through a fenced script (protocol rule F in the
//! [module docs](crate::stream)); every scan of the pending list holds the shard's ack lock
//! and never claims an entry of the window again (protocol rule R).
//!
//! This file is the reader's loop and what ends it (errors, a lost lease, a lost group); the
//! reads and claims are in `read`, quarantined keys in `holds`, the hand-over to the pool in
//! `dispatch`, acks and the release in `hand_off`.

mod dispatch;
mod hand_off;
mod holds;
mod read;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Connection;

use crate::stream::context::{bump, Ctx, Shard};
use crate::stream::reply::RawEntry;
use crate::stream::state::Phase;
use crate::stream::{EntryId, StreamError};

/// Entries recorded in the window, with their delivery counts, to be submitted.
type Accepted = Vec<(RawEntry, u64)>;

/// The reader of one shard at one epoch.
pub(crate) struct ShardReader {
    ctx: Arc<Ctx>,
    shard: Arc<Shard>,
    epoch: u64,
    conn: Option<Connection>,
    /// Where the replay of the pending list continues (after this id); `None` once done.
    replay: Option<EntryId>,
    /// A Redis error may have lost a reply that delivered entries to this member.
    recover: bool,
    /// Claims sent whose reply was not seen yet: the delivery count each set, sent again
    /// unchanged (protocol rule R).
    planned: HashMap<EntryId, u64>,
    /// After an empty read: the stream's last entry, to wait for newer ones from.
    idle_after: Option<EntryId>,
    replayed: u64,
    backoff: Duration,
    outage: bool,
    /// The quarantined keys stored in Redis were loaded at this epoch.
    holds_loaded: bool,
    /// When the holds in Redis were last looked at (to see releases).
    holds_seen: Instant,
}

impl ShardReader {
    pub(crate) fn new(ctx: Arc<Ctx>, shard: Arc<Shard>, epoch: u64) -> Self {
        Self {
            ctx,
            shard,
            epoch,
            conn: None,
            replay: Some(EntryId::default()),
            recover: false,
            planned: HashMap::new(),
            idle_after: None,
            replayed: 0,
            backoff: Duration::from_millis(10),
            outage: false,
            holds_loaded: false,
            holds_seen: Instant::now(),
        }
    }

    /// Runs until the shard is released or lost.
    pub(crate) fn run(mut self) {
        loop {
            let phase = {
                let st = self.shard.state.lock();
                if st.epoch() != self.epoch {
                    return;
                }
                st.phase()
            };
            match phase {
                Phase::Active => {}
                Phase::Releasing => return self.hand_off(),
                Phase::Lost | Phase::Idle => {
                    // Late acks are tried (and refused, unless nobody took the shard yet).
                    let _ = self.flush(true);
                    tracing::info!(
                        shard = self.shard.index,
                        epoch = self.epoch,
                        "stopped reading a lost shard"
                    );
                    return;
                }
            }
            match self.step() {
                Ok(()) => {
                    self.backoff = Duration::from_millis(10);
                    if self.outage {
                        self.outage = false;
                        tracing::info!(shard = self.shard.index, "Redis reachable again");
                    }
                }
                Err(e) => self.failed(e),
            }
        }
    }

    fn conn(&mut self) -> Result<&mut Connection, StreamError> {
        if self.conn.is_none() {
            let mut conn = self.ctx.connect("read")?;
            let recreated = create_group(&self.ctx, &self.shard, &mut conn)?;
            self.conn = Some(conn);
            if recreated {
                self.lost_with_data();
            }
        }
        self.conn
            .as_mut()
            .ok_or_else(|| StreamError::Protocol("no connection".into()))
    }

    fn failed(&mut self, e: StreamError) {
        self.conn = None;
        // A read or claim whose reply was lost may have delivered entries to this member in
        // Redis: recover them (protocol rule R) before reading on.
        self.recover = true;
        self.idle_after = None;
        if !self.outage {
            self.outage = true;
            tracing::warn!(shard = self.shard.index, error = %e, "shard reader: Redis failed; retrying with backoff");
        }
        let mut st = self.shard.state.lock();
        if st.phase() == Phase::Active {
            self.shard.cv.wait_for(&mut st, self.backoff);
        }
        self.backoff = (self.backoff * 2).min(self.ctx.cfg.heartbeat());
    }

    /// One round: flush full batches of acks, then recover, replay or read as much as the
    /// window allows, or wait for new entries.
    fn step(&mut self) -> Result<(), StreamError> {
        self.conn()?; // (re)connecting may find that Redis lost its data, and the lease
        self.flush(false)?;
        self.holds()?;
        let wait = self.ctx.cfg.ack_interval.min(Duration::from_millis(50));
        let room = {
            let mut st = self.shard.state.lock();
            let room = st.room();
            // Protocol rule F: nothing is read unless the lease is confirmed.
            if room == 0 || !st.confirmed(self.epoch, Instant::now()) {
                self.shard.cv.wait_for(&mut st, wait);
                return Ok(());
            }
            room
        };
        if let Some(after) = self.idle_after.take() {
            return self.wait_for_new(after);
        }
        // The consumer's in-flight cap, over its shards: reserved until what is read is in
        // the window.
        let room = self.ctx.reserve(room);
        if room == 0 {
            let mut st = self.shard.state.lock();
            self.shard.cv.wait_for(&mut st, wait);
            return Ok(());
        }
        let accepted = self.read_some(room);
        self.ctx.unreserve(room);
        self.submit(accepted?);
        Ok(())
    }

    /// Recovers, replays or reads up to `room` entries into the window.
    fn read_some(&mut self, room: usize) -> Result<Accepted, StreamError> {
        // The scans hold the ack lock until their entries are in the window; the entries
        // are submitted after (submitting may wait for a rate slot or room in the pool).
        let accepted = if self.recover {
            let accepted = self.recover_own()?;
            self.recover = false;
            accepted
        } else if let Some(after) = self.replay {
            self.replay_batch(after, room)?
        } else {
            self.read_batch(room)?
        };
        Ok(accepted)
    }

    /// Whether the shard is still `Active` at this epoch.
    fn active(&self) -> bool {
        let st = self.shard.state.lock();
        st.phase() == Phase::Active && st.epoch() == self.epoch
    }

    /// Reports pending entries found trimmed from the stream: they are lost.
    fn report_trimmed(&self, trimmed: &[EntryId]) {
        if trimmed.is_empty() {
            return;
        }
        bump(&self.ctx.totals.trimmed, trimmed.len() as u64);
        tracing::warn!(
            shard = self.shard.index,
            count = trimmed.len(),
            ids = ?trimmed,
            "pending entries were trimmed from the stream before they were processed; they are lost"
        );
    }

    /// Redis refused a fenced read or claim: the lease is not this member's at this epoch.
    fn refused(&self) {
        self.lease_gone(
            "read refused: another member holds the shard now; starting nothing more on it",
        );
    }

    /// The lease at this epoch is gone (`why`): the shard stops here, counted and logged once
    /// per epoch however many paths notice it.
    fn lease_gone(&self, why: &str) {
        let dropped = self.shard.state.lock().refused(self.epoch);
        self.shard.cv.notify_all();
        if let Some(dropped) = dropped {
            bump(&self.ctx.totals.leases_lost, 1);
            tracing::warn!(
                shard = self.shard.index,
                epoch = self.epoch,
                dropped,
                "{why}"
            );
        }
    }

    /// The group vanished (Redis lost its data): recreate it and say so.
    fn group_lost(&mut self) -> Result<(), StreamError> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        create_group(&self.ctx, &self.shard, conn)?;
        self.lost_with_data();
        Ok(())
    }

    /// Redis lost its data, and this shard's lease with it: stop here; the control thread
    /// acquires the shard again (a new epoch) and replays from the start of the pending list.
    fn lost_with_data(&mut self) {
        self.lease_gone("the lease went with Redis's data; acquiring the shard again");
    }
}

/// Creates the group on the shard's stream (and the stream) if missing, from the start of
/// the stream. If this consumer had seen the group before, Redis lost its data: say so and
/// return true.
pub(crate) fn create_group(
    ctx: &Ctx,
    shard: &Shard,
    conn: &mut Connection,
) -> Result<bool, StreamError> {
    let created: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&shard.stream)
        .arg(ctx.group())
        .arg("0")
        .arg("MKSTREAM")
        .query(conn);
    match created {
        Ok(()) => {
            if shard
                .group_seen
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                bump(&ctx.totals.groups_recreated, 1);
                tracing::warn!(shard = shard.index, group = ctx.group(), "the consumer group was gone (Redis lost its data?): recreated it; entries acknowledged or pending before are unknown to it");
                return Ok(true);
            }
            Ok(false)
        }
        Err(e) if e.code() == Some("BUSYGROUP") => {
            shard
                .group_seen
                .store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}
