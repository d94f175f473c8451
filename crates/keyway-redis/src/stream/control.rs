//! The control thread of a consumer: heartbeats its membership (Redis-timed), computes the
//! shards it should own (rendezvous hashing over the live members), renews, acquires and
//! releases leases, starts the shard readers, and watches for stalls.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redis::Connection;

use crate::stream::context::{bump, evalsha, Ctx};
use crate::stream::driver::ShardReader;
use crate::stream::hash::rendezvous_owner;
use crate::stream::state::Phase;
use crate::stream::StreamError;

/// A shard this member holds (or is handing off).
struct Held {
    epoch: u64,
    reader: JoinHandle<()>,
}

/// What the stall detector remembers of a shard.
struct Watch {
    progress: u64,
    since: Instant,
    reported: bool,
}

pub(crate) struct Control {
    ctx: Arc<Ctx>,
    conn: Option<Connection>,
    held: HashMap<u32, Held>,
    members: Vec<String>,
    watch: HashMap<u32, Watch>,
    outage: bool,
}

impl Control {
    pub(crate) fn new(ctx: Arc<Ctx>, conn: Connection) -> Self {
        Self {
            ctx,
            conn: Some(conn),
            held: HashMap::new(),
            members: Vec::new(),
            watch: HashMap::new(),
            outage: false,
        }
    }

    /// Runs until the consumer is shut down and every shard is handed off.
    pub(crate) fn run(mut self) {
        let heartbeat = self.ctx.cfg.heartbeat();
        loop {
            let stopping = *self.ctx.stopping.lock();
            let started = Instant::now();
            match self.tick(stopping) {
                Ok(()) => {
                    if self.outage {
                        self.outage = false;
                        tracing::info!(member = %self.ctx.member, "Redis reachable again");
                    }
                }
                Err(e) => {
                    self.conn = None;
                    if !self.outage {
                        self.outage = true;
                        tracing::warn!(member = %self.ctx.member, error = %e, "membership: Redis failed; retrying");
                    }
                }
            }
            if stopping && self.held.is_empty() {
                self.leave();
                return;
            }
            let next = if stopping {
                started + Duration::from_millis(10)
            } else {
                started + heartbeat
            };
            let mut flag = self.ctx.stopping.lock();
            if *flag == stopping {
                self.ctx.stop_cv.wait_until(&mut flag, next);
            }
        }
    }

    fn conn(&mut self) -> Result<&mut Connection, StreamError> {
        if self.conn.is_none() {
            self.conn = Some(self.ctx.connect("control")?);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| StreamError::Protocol("no connection".into()))
    }

    fn tick(&mut self, stopping: bool) -> Result<(), StreamError> {
        self.reap();
        if !stopping {
            self.heartbeat()?;
        }
        // Before renewing: when stopping, the hand-offs start even if Redis is unreachable
        // (each gives up on its acks after a lease and lets the lease expire).
        self.rebalance(stopping);
        self.renew()?;
        if !stopping {
            self.acquire()?;
        }
        self.watch_stalls();
        Ok(())
    }

    /// Forgets the shards whose reader has finished (released or lost).
    fn reap(&mut self) {
        let done: Vec<u32> = self
            .held
            .iter()
            .filter(|(_, h)| h.reader.is_finished())
            .map(|(&s, _)| s)
            .collect();
        for s in done {
            if let Some(h) = self.held.remove(&s) {
                let _ = h.reader.join();
            }
        }
    }

    fn heartbeat(&mut self) -> Result<(), StreamError> {
        let ctx = Arc::clone(&self.ctx);
        let cfg = &ctx.cfg;
        let members_key = cfg.topic.members_key(&cfg.group);
        let clock_key = cfg.topic.clock_key(&cfg.group);
        let expiry_ms = (cfg.lease.as_millis() as u64)
            .saturating_mul(20)
            .max(60_000);
        let members: Vec<String> = evalsha(&ctx.scripts.heartbeat, &[&members_key, &clock_key])
            .arg(&ctx.member)
            .arg(cfg.heartbeat().as_micros() as u64)
            .arg(cfg.lease.as_micros() as u64)
            .arg(expiry_ms)
            .query(self.conn()?)?;
        if members != self.members {
            tracing::info!(member = %ctx.member, live = ?members, "group membership changed");
            self.members = members;
        }
        Ok(())
    }

    /// The local deadline for starting entries under a lease confirmed at `sent`: a tenth of
    /// the lease before Redis would let it expire.
    fn valid_until(&self, sent: Instant) -> Instant {
        let lease = self.ctx.cfg.lease;
        sent + lease.saturating_sub(lease / 10)
    }

    fn renew(&mut self) -> Result<(), StreamError> {
        if self.held.is_empty() {
            return Ok(());
        }
        let ctx = Arc::clone(&self.ctx);
        let cfg = &ctx.cfg;
        let shards: Vec<(u32, u64)> = self.held.iter().map(|(&s, h)| (s, h.epoch)).collect();
        let clock = cfg.topic.clock_key(&cfg.group);
        let mut keys = vec![clock.as_str()];
        keys.extend(
            shards
                .iter()
                .map(|&(s, _)| ctx.shards[s as usize].lease.as_str()),
        );
        let mut cmd = evalsha(&ctx.scripts.renew, &keys);
        cmd.arg(&ctx.member)
            .arg(cfg.heartbeat().as_micros() as u64)
            .arg(cfg.lease.as_micros() as u64);
        for &(_, epoch) in &shards {
            cmd.arg(epoch);
        }
        let sent = Instant::now();
        let renewed: Vec<i64> = cmd.query(self.conn()?)?;
        let valid_until = self.valid_until(sent);
        for (&(s, epoch), ok) in shards.iter().zip(renewed) {
            let shard = &ctx.shards[s as usize];
            let mut st = shard.state.lock();
            if ok == 1 {
                st.renewed(epoch, valid_until);
            } else if let Some(dropped) = st.refused(epoch) {
                drop(st);
                shard.cv.notify_all();
                bump(&ctx.totals.leases_lost, 1);
                tracing::warn!(
                    shard = s,
                    epoch,
                    dropped,
                    "lease lost: another member took the shard; starting nothing more on it"
                );
            }
        }
        Ok(())
    }

    /// Hands off the shards this member should no longer own (all of them when stopping).
    fn rebalance(&mut self, stopping: bool) {
        for &s in self.held.keys() {
            let keep =
                !stopping && rendezvous_owner(s, &self.members) == Some(self.ctx.member.as_str());
            if keep {
                continue;
            }
            let shard = &self.ctx.shards[s as usize];
            let mut st = shard.state.lock();
            if st.phase() == Phase::Active {
                let left = st.release();
                drop(st);
                shard.cv.notify_all();
                tracing::info!(
                    shard = s,
                    left_pending = left,
                    stopping,
                    "handing the shard off"
                );
            }
        }
    }

    /// Tries to take every shard this member should own and does not hold.
    fn acquire(&mut self) -> Result<(), StreamError> {
        let ctx = Arc::clone(&self.ctx);
        let cfg = &ctx.cfg;
        let wanted: Vec<u32> = (0..cfg.topic.shards())
            .filter(|s| !self.held.contains_key(s))
            .filter(|&s| rendezvous_owner(s, &self.members) == Some(ctx.member.as_str()))
            .filter(|&s| ctx.shards[s as usize].state.lock().can_activate())
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let clock = cfg.topic.clock_key(&cfg.group);
        let mut pipe = redis::pipe();
        for &s in &wanted {
            let mut cmd = evalsha(
                &ctx.scripts.acquire,
                &[&clock, &ctx.shards[s as usize].lease],
            );
            cmd.arg(&ctx.member)
                .arg(cfg.heartbeat().as_micros() as u64)
                .arg(cfg.lease.as_micros() as u64);
            pipe.add_command(cmd);
        }
        let sent = Instant::now();
        let results: Vec<(String, String)> = pipe.query(self.conn()?)?;
        let valid_until = self.valid_until(sent);
        for (s, (epoch, previous)) in wanted.into_iter().zip(results) {
            let epoch: u64 = epoch.parse().unwrap_or(0);
            if epoch == 0 {
                continue; // still held by another member
            }
            let shard = Arc::clone(&ctx.shards[s as usize]);
            if !shard.state.lock().activate(epoch, valid_until) {
                continue; // cannot happen: checked above, and only this thread activates
            }
            bump(&ctx.totals.acquisitions, 1);
            // Its own lease (a restart with the same id) is taken back, not over.
            if !previous.is_empty() && previous != ctx.member {
                bump(&ctx.totals.takeovers, 1);
                tracing::warn!(shard = s, epoch, from = %previous, "took the shard over from a member whose lease expired; replaying its pending entries first");
            } else {
                tracing::info!(shard = s, epoch, "acquired the shard");
            }
            let driver = ShardReader::new(Arc::clone(&ctx), Arc::clone(&shard), epoch);
            let spawned = std::thread::Builder::new()
                .name(format!("keyway-stream-{s}"))
                .spawn(move || driver.run());
            match spawned {
                Ok(reader) => {
                    self.held.insert(s, Held { epoch, reader });
                }
                Err(e) => {
                    tracing::error!(shard = s, error = %e, "could not start the shard's reader; releasing it");
                    let _ = shard.state.lock().lose();
                }
            }
        }
        Ok(())
    }

    /// Reports a shard with entries in its window and no progress for `stall_after`.
    fn watch_stalls(&mut self) {
        let now = Instant::now();
        for (&s, _) in self.held.iter() {
            let shard = &self.ctx.shards[s as usize];
            let progress = shard.progress.load(Ordering::Relaxed);
            let (window, phase) = {
                let st = shard.state.lock();
                (st.window(), st.phase())
            };
            let w = self.watch.entry(s).or_insert(Watch {
                progress,
                since: now,
                reported: false,
            });
            if progress != w.progress || window == 0 || phase != Phase::Active {
                *w = Watch {
                    progress,
                    since: now,
                    reported: false,
                };
                continue;
            }
            if !w.reported && now.duration_since(w.since) >= self.ctx.cfg.stall_after {
                w.reported = true;
                bump(&self.ctx.totals.stalls, 1);
                tracing::warn!(shard = s, window, stalled_for = ?now.duration_since(w.since), "shard stalled: entries pending and no progress");
            }
        }
    }

    fn leave(&mut self) {
        let ctx = Arc::clone(&self.ctx);
        let members_key = ctx.cfg.topic.members_key(&ctx.cfg.group);
        if let Ok(conn) = self.conn() {
            let _: Result<i64, _> = evalsha(&ctx.scripts.leave, &[&members_key])
                .arg(&ctx.member)
                .query(conn);
        }
        ctx.stopped.store(true, Ordering::Release);
        // Every shard is handed off (and its acks flushed): nothing left for the timer.
        ctx.ack_timer.stop();
    }
}
