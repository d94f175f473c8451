//! The reader of one shard while this member holds its lease: replays the pending entries
//! (`XAUTOCLAIM` from `0-0`) before reading new ones (`XREADGROUP >`), keeps the window,
//! dispatches each entry to its key's lane (or the pool, without key order), flushes fenced
//! acks, and hands the shard off.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Connection, Value};

use crate::stream::acks;
use crate::stream::context::{bump, evalsha, Ctx, Shard};
use crate::stream::reply::{self, RawEntry};
use crate::stream::state::Phase;
use crate::stream::{EntryId, StreamError};

/// The reader of one shard at one epoch.
pub(crate) struct Driver {
    ctx: Arc<Ctx>,
    shard: Arc<Shard>,
    epoch: u64,
    conn: Option<Connection>,
    /// Where the replay of pending entries continues; `None` once it is done.
    replay: Option<EntryId>,
    replayed: u64,
    backoff: Duration,
    outage: bool,
}

impl Driver {
    pub(crate) fn new(ctx: Arc<Ctx>, shard: Arc<Shard>, epoch: u64) -> Self {
        Self {
            ctx,
            shard,
            epoch,
            conn: None,
            replay: Some(EntryId::default()),
            replayed: 0,
            backoff: Duration::from_millis(10),
            outage: false,
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
            let mut conn = self.ctx.connect()?;
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
        // A read whose reply was lost may have delivered entries to this member in Redis:
        // scan the pending list again (entries already in the window are not run twice).
        self.replay = Some(EntryId::default());
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

    /// One round: flush full batches of acks, then read (or replay) as much as the window allows.
    fn step(&mut self) -> Result<(), StreamError> {
        self.conn()?; // (re)connecting may find that Redis lost its data, and the lease
        self.flush(false)?;
        let room = {
            let mut st = self.shard.state.lock();
            let room = st.room();
            if room == 0 || !st.fresh(Instant::now()) {
                let wait = self.ctx.cfg.ack_interval.min(Duration::from_millis(50));
                self.shard.cv.wait_for(&mut st, wait);
                return Ok(());
            }
            room
        };
        match self.replay {
            Some(cursor) => self.replay_batch(cursor, room),
            None => self.read_batch(room),
        }
    }

    /// Claims the next pending entries of the shard, whoever they were delivered to, in id
    /// order, with their delivery counts.
    fn replay_batch(&mut self, cursor: EntryId, room: usize) -> Result<(), StreamError> {
        let (stream, group, member) = (&self.shard.stream, self.ctx.group(), &self.ctx.member);
        let mut pipe = redis::pipe();
        pipe.cmd("XPENDING")
            .arg(stream)
            .arg(group)
            .arg(cursor.to_string())
            .arg("+")
            .arg(room)
            .cmd("XAUTOCLAIM")
            .arg(stream)
            .arg(group)
            .arg(member)
            .arg(0)
            .arg(cursor.to_string())
            .arg("COUNT")
            .arg(room);
        let result: Result<(Value, Value), _> = pipe.query(self.conn()?);
        let (pending, claimed) = match result {
            Ok(r) => r,
            Err(e) if e.code() == Some("NOGROUP") => return self.group_lost(),
            Err(e) => return Err(e.into()),
        };
        let counts: HashMap<EntryId, u64> = reply::pending_counts(&pending)?
            .into_iter()
            .map(|(id, n)| (id, n.saturating_add(1)))
            .collect();
        let claimed = reply::autoclaim(&claimed)?;
        if !claimed.deleted.is_empty() {
            bump(&self.ctx.totals.trimmed, claimed.deleted.len() as u64);
            tracing::warn!(
                shard = self.shard.index,
                count = claimed.deleted.len(),
                ids = ?claimed.deleted,
                "pending entries were trimmed from the stream before they were processed; they are lost"
            );
        }
        self.replayed += claimed.entries.len() as u64;
        self.dispatch(claimed.entries, &counts);
        if claimed.next == EntryId::default() {
            self.replay = None;
            tracing::info!(
                shard = self.shard.index,
                epoch = self.epoch,
                replayed = self.replayed,
                "pending entries replayed; reading new ones"
            );
        } else {
            self.replay = Some(claimed.next);
        }
        Ok(())
    }

    fn read_batch(&mut self, room: usize) -> Result<(), StreamError> {
        let block = self.ctx.cfg.ack_interval.as_millis().clamp(1, 100) as u64;
        let (stream, group, member) = (&self.shard.stream, self.ctx.group(), &self.ctx.member);
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(group)
            .arg(member)
            .arg("COUNT")
            .arg(room)
            .arg("BLOCK")
            .arg(block)
            .arg("STREAMS")
            .arg(stream)
            .arg(">");
        let value: Value = match cmd.query(self.conn()?) {
            Ok(v) => v,
            Err(e) if e.code() == Some("NOGROUP") => return self.group_lost(),
            Err(e) => return Err(e.into()),
        };
        let entries = reply::read_group(&value)?;
        self.dispatch(entries, &HashMap::new());
        Ok(())
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
        let dropped = self.shard.state.lock().lose();
        self.shard.cv.notify_all();
        bump(&self.ctx.totals.leases_lost, 1);
        tracing::warn!(
            shard = self.shard.index,
            epoch = self.epoch,
            dropped,
            "the lease went with Redis's data; acquiring the shard again"
        );
    }

    /// Records the entries in the window and hands each to its key's lane (or, without key
    /// order, to the pool), in id order.
    fn dispatch(&mut self, entries: Vec<RawEntry>, counts: &HashMap<EntryId, u64>) {
        if entries.is_empty() {
            return;
        }
        let deliveries = |e: &RawEntry| counts.get(&e.id).copied().unwrap_or(1);
        let accepted: Vec<bool> = {
            let mut st = self.shard.state.lock();
            entries
                .iter()
                .map(|e| st.deliver(e.id, self.epoch, deliveries(e)))
                .collect()
        };
        for (e, ok) in entries.into_iter().zip(accepted) {
            if !ok {
                continue;
            }
            let deliveries = deliveries(&e);
            bump(&self.ctx.totals.delivered, 1);
            if deliveries > 1 {
                bump(&self.ctx.totals.redeliveries, 1);
            }
            if let Some((scheduler, executor)) = &self.ctx.cfg.rate_limit {
                crate::stream::rate::wait_for_slot(scheduler, executor);
            }
            let id = e.id;
            let lane = self
                .ctx
                .cfg
                .key_order
                .then(|| (self.ctx.instance, e.key.clone()));
            let (ctx, shard, epoch) = (Arc::clone(&self.ctx), Arc::clone(&self.shard), self.epoch);
            let task = move || crate::stream::task::run(&ctx, &shard, e, epoch, deliveries);
            let refused = match lane {
                Some(lane) => self.ctx.lanes.execute_sequential(lane, task).is_err(),
                None => self.ctx.pool.execute(task).is_err(),
            };
            if refused {
                tracing::error!(shard = self.shard.index, %id, "the pool refused the entry (shut down?); it stays pending");
                self.shard.state.lock().undeliver(id, self.epoch);
            }
        }
    }

    /// Sends the waiting acks and dead letters: all of them if `now`, else the full batches
    /// (those waiting for their interval are the [ack timer](crate::stream::ack_timer)'s),
    /// fenced by the epoch, on the shard's ack connection. Unless `now`, a thread sending
    /// acks meanwhile is left to it (it looks again before it lets go), and the reader goes
    /// on reading.
    fn flush(&mut self, now: bool) -> Result<(), StreamError> {
        let shard = Arc::clone(&self.shard);
        if now {
            let mut conn = shard.acks.lock();
            acks::flush(&self.ctx, &shard, &mut conn, |_| true)?;
            return Ok(());
        }
        let Some(mut conn) = shard.acks.try_lock() else {
            return Ok(());
        };
        acks::flush_full(&self.ctx, &shard, &mut conn)
    }

    /// Release: nothing new starts (the queued entries stay pending for the next owner); wait
    /// for the running ones, flush their acks, then free the lease.
    fn hand_off(mut self) {
        let deadline = Instant::now() + self.ctx.cfg.lease;
        let shard = Arc::clone(&self.shard);
        // Held from the last look at the state to the release: no task's batch is in flight.
        let _acks = loop {
            let flushed = self.flush(true);
            let acks = shard.acks.lock();
            let mut st = shard.state.lock();
            if st.phase() != Phase::Releasing {
                return; // lost meanwhile
            }
            if st.drained() {
                break acks;
            }
            if flushed.is_err() && st.running() == 0 && Instant::now() >= deadline {
                break acks; // Redis is down: the acks are lost, the entries will run again
            }
            drop(acks);
            shard.cv.wait_for(&mut st, self.ctx.cfg.ack_interval);
        };
        let epoch = self.epoch;
        let ctx = Arc::clone(&self.ctx);
        let returned = shard.state.lock().take_returned();
        let released = self.conn().and_then(|conn| {
            let keys = [shard.lease.as_str(), shard.stream.as_str()];
            let mut pipe = redis::pipe();
            if !returned.is_empty() {
                let mut give_back = evalsha(&ctx.scripts.give_back, &keys);
                give_back.arg(ctx.group()).arg(&ctx.member).arg(epoch);
                for (id, deliveries) in &returned {
                    give_back
                        .arg(id.to_string())
                        .arg(deliveries.saturating_sub(1));
                }
                pipe.add_command(give_back).ignore();
            }
            let mut release = evalsha(&ctx.scripts.release, &[shard.lease.as_str()]);
            release.arg(&ctx.member).arg(epoch);
            pipe.add_command(release);
            pipe.query::<(i64,)>(conn).map_err(StreamError::from)
        });
        let mut st = self.shard.state.lock();
        st.released();
        drop(st);
        self.shard.cv.notify_all();
        bump(&self.ctx.totals.releases, 1);
        match released {
            Ok(_) => tracing::info!(shard = self.shard.index, epoch, "shard released"),
            Err(e) => {
                tracing::warn!(shard = self.shard.index, epoch, error = %e, "could not release the lease; it expires by itself")
            }
        }
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
