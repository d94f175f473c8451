//! The reader of one shard while this member holds its lease: replays the pending entries
//! (whoever they were delivered to, in id order) before reading new ones, recovers its own
//! pending entries after a Redis error, keeps the window, dispatches each entry to its key's
//! lane (or the pool, without key order), flushes fenced acks, and hands the shard off.
//!
//! Every read and claim goes through a fenced script (protocol rule F in the
//! [module docs](crate::stream)); every scan of the pending list holds the shard's ack lock
//! and never claims an entry of the window again (protocol rule R).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keyway::SubmitError;
use redis::{Connection, Value};

use crate::stream::acks;
use crate::stream::context::{bump, evalsha, Ctx, LaneKey, Shard};
use crate::stream::delivery::Handler;
use crate::stream::reply::{self, Fenced, RawEntry};
use crate::stream::state::Phase;
use crate::stream::task;
use crate::stream::{EntryId, StreamError};

/// How long a reader waits between two looks for room in a full pool (protocol rule B).
const ROOM_CHECK: Duration = Duration::from_millis(50);

/// Redis times blocked commands out on its `hz` tick (100 ms by default): how much longer
/// than its `BLOCK` a blocking read may take.
const BLOCK_GRACE: Duration = Duration::from_millis(150);

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

    /// Quarantined keys: loads those stored in Redis once per epoch (before anything of it
    /// is read or replayed, so a member that takes a shard over keeps them held), and then
    /// looks for releases every heartbeat while some are held (at once after a release
    /// through this consumer). A released key's held entries are given back to its lane.
    fn holds(&mut self) -> Result<(), StreamError> {
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
        let lane_key = key.clone();
        let submitted = match &*self.ctx.handler {
            Handler::Sync(_) => {
                let task = move || {
                    let entries = shard.state.lock().unhold(epoch, &key);
                    for (_, e, n) in entries {
                        task::run(&ctx, &shard, e, epoch, n);
                    }
                };
                self.submit_one(&lane_key, Now(task), || self.active())
            }
            Handler::Async(_) => {
                let task = async move {
                    let entries = shard.state.lock().unhold(epoch, &key);
                    for (_, e, n) in entries {
                        task::run_async(Arc::clone(&ctx), Arc::clone(&shard), e, epoch, n).await;
                    }
                };
                self.submit_one(&lane_key, Later(task), || self.active())
            }
        };
        if let Err(refused) = submitted {
            tracing::error!(shard = self.shard.index, error = %refused, "the pool refused a released key's entries (shut down?); they stay pending");
        }
    }

    /// Whether the shard is still `Active` at this epoch.
    fn active(&self) -> bool {
        let st = self.shard.state.lock();
        st.phase() == Phase::Active && st.epoch() == self.epoch
    }

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
    fn replay_batch(&mut self, after: EntryId, room: usize) -> Result<Accepted, StreamError> {
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
    fn recover_own(&mut self) -> Result<Accepted, StreamError> {
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
                replay.map_or(true, |cursor| id <= cursor) || self.planned.contains_key(&id)
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

    /// Reads new entries through the fenced read script.
    fn read_batch(&mut self, room: usize) -> Result<Accepted, StreamError> {
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
    fn wait_for_new(&mut self, after: EntryId) -> Result<(), StreamError> {
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

    /// Records the entries in the window (those not there yet, while the shard is `Active`
    /// at this epoch); returns them with their delivery counts, to be [submitted](Self::submit).
    fn accept(&self, entries: Vec<RawEntry>, counts: &HashMap<EntryId, u64>) -> Accepted {
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
    fn submit(&self, accepted: Accepted) {
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
            let (id, key) = (e.id, e.key.clone());
            let (ctx, shard, epoch) = (Arc::clone(&self.ctx), Arc::clone(&self.shard), self.epoch);
            let submitted = match &*self.ctx.handler {
                Handler::Sync(_) => {
                    let task = move || task::run(&ctx, &shard, e, epoch, deliveries);
                    self.submit_one(&key, Now(task), || self.dispatchable(id))
                }
                Handler::Async(_) => {
                    let task = task::run_async(ctx, shard, e, epoch, deliveries);
                    self.submit_one(&key, Later(task), || self.dispatchable(id))
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

    /// Submits `task` (for key `key`), waiting while the pool is full and `wanted`; `Ok` also
    /// when it stopped being wanted (its entry released or lost) while waiting: its entries
    /// stay pending, to nobody's harm.
    fn submit_one<J: Job>(
        &self,
        key: &[u8],
        task: J,
        wanted: impl Fn() -> bool,
    ) -> Result<(), keyway::SubmitErrorKind> {
        let lane = self
            .ctx
            .cfg
            .key_order
            .then(|| (self.ctx.instance, key.to_vec()));
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
        let returned = {
            let mut st = shard.state.lock();
            // Rule 6 of the shard state: a renewal refused from now on is the answer to
            // this release, not a lost lease.
            st.sending_release();
            st.take_returned()
        };
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
                pipe.add_command(give_back);
            }
            let mut release = evalsha(&ctx.scripts.release, &[shard.lease.as_str()]);
            release.arg(&ctx.member).arg(epoch);
            pipe.add_command(release);
            pipe.query::<Vec<Value>>(conn).map_err(StreamError::from)
        });
        if let Ok(replies) = &released {
            if !returned.is_empty() {
                // Entries trimmed while pending could not be given back: reported here.
                match replies.first().map(|v| reply::fenced_claim(v, false)) {
                    Some(Ok(given)) => self.report_trimmed(&given.trimmed),
                    Some(Err(e)) => {
                        tracing::warn!(shard = shard.index, error = %e, "give-back reply")
                    }
                    None => {}
                }
            }
        }
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

/// An entry's task, for either kind of handler: a closure (sync handler, [`Now`]) or a future
/// (async handler, [`Later`]), submitted to the key's lane or, without key order, to the pool.
trait Job: Sized + Send + 'static {
    fn submit(self, ctx: &Ctx, lane: Option<&LaneKey>) -> Result<(), SubmitError<Self>>;
}

/// A sync handler's entry: a closure.
struct Now<F>(F);

/// An async handler's entry: a future.
struct Later<F>(F);

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
