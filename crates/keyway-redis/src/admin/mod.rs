//! # Operating a stream consumer group from outside
//!
//! [`Admin`] reads and acts on a [`Topic`]'s consumer group the way the members see it —
//! leases with their epochs and the group's own clock, members' heartbeats, the dead-letter
//! streams, the quarantined keys — with no member running in this process. The
//! `keyway-stream` command is a shell around it (`inspect`, `members`, `release`,
//! `dead-letters list|show|replay|purge`, `cleanup`).
//!
//! ```no_run
//! use keyway_redis::admin::Admin;
//! use keyway_redis::stream::Topic;
//! let mut admin = Admin::connect("redis://127.0.0.1:6379", Topic::new("orders", 8)?, "keyway")?;
//! for shard in admin.inspect()?.shards {
//!     println!("shard {}: owner {:?} epoch {} lag {:?} pending {}",
//!         shard.shard, shard.owner, shard.epoch, shard.lag, shard.pending);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! **What each action promises.**
//! - [`inspect`](Admin::inspect) and [`members`](Admin::members) only read.
//! - [`replay`](Admin::replay) moves a dead letter back to the end of its shard's stream and
//!   deletes it from the dead letters, in one script (atomic: never both, never neither). The
//!   entry then runs after every entry already in its shard, so after the later entries of its
//!   key that ran while it sat in the dead letters, and before entries of its key appended
//!   after the replay. Consumers with the default failure policy hold no key back after a
//!   dead letter, so nothing else waits for a replay.
//! - [`release`](Admin::release) lets a quarantined key go (consumers built with
//!   [`FailurePolicy::Quarantine`](crate::stream::FailurePolicy::Quarantine) hold a key whose
//!   entry exhausted its attempts): it deletes the key's hold and gives that entry its
//!   attempts back, in one script. The shard's owner sees it within a heartbeat and runs the
//!   key's held entries in order, that entry first, then the key's later entries.
//! - [`purge`](Admin::purge) deletes dead letters.
//! - [`cleanup`](Admin::cleanup) deletes the group's consumers that are not live members and
//!   have no pending entries; the check and the delete are one script, so a consumer that has
//!   pending entries when it runs is never deleted (its entries would otherwise be lost to
//!   the group's pending list).

mod dead;
mod error;
mod report;

use std::time::Duration;

use redis::{Connection, Script, Value};

pub use dead::{DeadLetter, Replayed};
pub use error::AdminError;
pub use report::{
    CleanupReport, GroupReport, Member, MembersReport, Quarantined, ShardReport, Straggler,
};

use crate::stream::Topic;

/// Deletes consumer `ARGV[2]` of group `ARGV[1]` from every stream in `KEYS` only if it has
/// no pending entry in any of them: the count deleted (0 or 1 per stream), or -N where N is its
/// pending entries (nothing deleted).
const CLEANUP: &str = r"
local pending = 0
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[i], ARGV[1])
    if ok then
      for _, c in ipairs(consumers) do
        local name, p
        for j = 1, #c, 2 do
          if c[j] == 'name' then name = c[j + 1] end
          if c[j] == 'pending' then p = c[j + 1] end
        end
        if name == ARGV[2] then pending = pending + p end
      end
    end
  end
end
if pending > 0 then
  return -pending
end
local deleted = 0
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local ok, n = pcall(redis.call, 'XGROUP', 'DELCONSUMER', KEYS[i], ARGV[1], ARGV[2])
    if ok then deleted = deleted + 1 end
  end
end
return deleted
";

/// A connection to one topic's consumer group, for operators (see the module docs).
pub struct Admin {
    conn: Connection,
    topic: Topic,
    group: String,
    /// How long a member stays in the group without a heartbeat (the consumers' lease).
    lease: Duration,
}

impl Admin {
    /// Connects to the Redis at `url` for `topic`'s group `group` (the consumers' default
    /// group is `keyway`). Members are taken as alive for the consumers' default lease (10 s);
    /// see [`lease`](Self::lease).
    pub fn connect(url: &str, topic: Topic, group: &str) -> Result<Self, AdminError> {
        let client = redis::Client::open(url).map_err(AdminError::InvalidUrl)?;
        let timeout = Duration::from_secs(5);
        let conn = client.get_connection_with_timeout(timeout)?;
        conn.set_read_timeout(Some(timeout))?;
        Ok(Admin {
            conn,
            topic,
            group: group.to_owned(),
            lease: Duration::from_secs(10),
        })
    }

    /// The lease the group's consumers were built with (their
    /// [`lease`](crate::stream::StreamConsumerBuilder::lease)): a member whose last heartbeat
    /// is older is not alive. Zero is taken as one microsecond.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_micros(1));
        self
    }

    /// The topic.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    fn shard_of(&self, shard: u32) -> Result<u32, AdminError> {
        if shard < self.topic.shards() {
            Ok(shard)
        } else {
            Err(AdminError::NoSuchShard {
                shard,
                shards: self.topic.shards(),
            })
        }
    }

    /// The group's time now (µs), as its scripts count it: Redis `TIME` less the outages the
    /// clock has recorded. Read only: the clock is not advanced.
    fn group_now(&mut self) -> Result<i128, AdminError> {
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query(&mut self.conn)?;
        let offset: Option<i64> = redis::cmd("HGET")
            .arg(self.topic.clock_key(&self.group))
            .arg("offset")
            .query(&mut self.conn)?;
        Ok(i128::from(secs) * 1_000_000 + i128::from(micros) - i128::from(offset.unwrap_or(0)))
    }

    /// Live members and when each last heartbeated (µs of group time).
    fn member_beats(&mut self) -> Result<Vec<(String, i128)>, AdminError> {
        let rows: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(self.topic.members_key(&self.group))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(&mut self.conn)?;
        Ok(rows.into_iter().map(|(m, s)| (m, s as i128)).collect())
    }

    /// Releases the quarantined key `key` (see the module docs): true if it was quarantined.
    ///
    /// ```no_run
    /// use keyway_redis::admin::Admin;
    /// use keyway_redis::stream::Topic;
    /// let mut admin = Admin::connect("redis://127.0.0.1:6379", Topic::new("orders", 8)?, "keyway")?;
    /// let was_held = admin.release(b"account-42")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(&mut self, key: &[u8]) -> Result<bool, AdminError> {
        let shard = crate::stream::shard_of(key, self.topic.shards());
        let released: i64 = Script::new(crate::stream::RELEASE_HOLD)
            .key(self.topic.held_key(&self.group, shard))
            .key(self.topic.shard_key(shard))
            .arg(&self.group)
            .arg(key)
            .invoke(&mut self.conn)?;
        Ok(released == 1)
    }

    /// Whether `key` is quarantined: the id of its entry that exhausted its attempts.
    ///
    /// ```no_run
    /// use keyway_redis::admin::Admin;
    /// use keyway_redis::stream::Topic;
    /// let mut admin = Admin::connect("redis://127.0.0.1:6379", Topic::new("orders", 8)?, "keyway")?;
    /// if let Some(entry) = admin.quarantined(b"account-42")? {
    ///     println!("account-42 is held since entry {entry}");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quarantined(&mut self, key: &[u8]) -> Result<Option<String>, AdminError> {
        let shard = crate::stream::shard_of(key, self.topic.shards());
        Ok(redis::cmd("HGET")
            .arg(self.topic.held_key(&self.group, shard))
            .arg(key)
            .query(&mut self.conn)?)
    }

    /// Per shard: owner, epoch, lease time left, lag, pending entries, the oldest pending
    /// entry's idle time, dead letters and quarantined keys; and the members alive.
    pub fn inspect(&mut self) -> Result<GroupReport, AdminError> {
        let now = self.group_now()?;
        let lease = self.lease.as_micros() as i128;
        let members: Vec<Member> = self
            .member_beats()?
            .into_iter()
            .map(|(id, beat)| Member::new(id, now - beat, lease))
            .collect();
        let mut shards = Vec::new();
        for shard in 0..self.topic.shards() {
            shards.push(self.shard(shard, now, &members)?);
        }
        Ok(GroupReport {
            topic: self.topic.name().to_owned(),
            group: self.group.clone(),
            shards,
            members,
        })
    }

    fn shard(
        &mut self,
        shard: u32,
        now: i128,
        members: &[Member],
    ) -> Result<ShardReport, AdminError> {
        let stream = self.topic.shard_key(shard);
        let (owner, epoch, expires): (Option<String>, Option<u64>, Option<i64>) =
            redis::cmd("HMGET")
                .arg(self.topic.lease_key(&self.group, shard))
                .arg("owner")
                .arg("epoch")
                .arg("expires")
                .query(&mut self.conn)?;
        let owner = owner.filter(|o| !o.is_empty());
        let lease_left = match (&owner, expires) {
            (Some(_), Some(e)) => Some(micros(i128::from(e) - now)),
            _ => None,
        };
        let summary: Value = redis::cmd("XPENDING")
            .arg(&stream)
            .arg(&self.group)
            .query(&mut self.conn)
            .unwrap_or(Value::Nil);
        let oldest: Value = redis::cmd("XPENDING")
            .arg(&stream)
            .arg(&self.group)
            .arg("-")
            .arg("+")
            .arg(1)
            .query(&mut self.conn)
            .unwrap_or(Value::Nil);
        let groups: Value = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(&stream)
            .query(&mut self.conn)
            .unwrap_or(Value::Nil);
        let dead_letters: u64 = redis::cmd("XLEN")
            .arg(self.topic.dead_letter_key(shard))
            .query(&mut self.conn)?;
        let length: u64 = redis::cmd("XLEN").arg(&stream).query(&mut self.conn)?;
        let mut quarantined: Vec<Quarantined> = redis::cmd("HGETALL")
            .arg(self.topic.held_key(&self.group, shard))
            .query::<Vec<(Vec<u8>, String)>>(&mut self.conn)?
            .into_iter()
            .map(|(key, entry_id)| Quarantined { key, entry_id })
            .collect();
        quarantined.sort_by(|a, b| a.key.cmp(&b.key));
        let owner_alive = owner
            .as_ref()
            .map(|o| members.iter().any(|m| &m.id == o && m.alive));
        Ok(ShardReport {
            shard,
            owner,
            owner_alive,
            epoch: epoch.unwrap_or(0),
            lease_left,
            length,
            lag: crate::stream::group_lag(&groups, &self.group),
            pending: crate::stream::pending_count(&summary),
            oldest_pending: crate::stream::oldest_idle(&oldest),
            dead_letters,
            quarantined,
        })
    }

    /// The live members (with the time since their last heartbeat), and the consumers of the
    /// group that have pending entries but are no live member (a member that died: its
    /// entries wait for the next owner of their shard to claim them).
    pub fn members(&mut self) -> Result<MembersReport, AdminError> {
        let now = self.group_now()?;
        let lease = self.lease.as_micros() as i128;
        let members: Vec<Member> = self
            .member_beats()?
            .into_iter()
            .map(|(id, beat)| Member::new(id, now - beat, lease))
            .collect();
        let mut stragglers: Vec<Straggler> = Vec::new();
        for (name, shard, pending) in self.consumers()? {
            if members.iter().any(|m| m.id == name && m.alive) {
                continue;
            }
            match stragglers.iter_mut().find(|s| s.consumer == name) {
                Some(s) => {
                    s.pending += pending;
                    if pending > 0 {
                        s.shards.push(shard);
                    }
                }
                None => stragglers.push(Straggler {
                    consumer: name,
                    pending,
                    shards: if pending > 0 { vec![shard] } else { Vec::new() },
                }),
            }
        }
        Ok(MembersReport {
            members,
            stragglers,
        })
    }

    /// Every consumer of the group on every shard: `(name, shard, pending)`.
    fn consumers(&mut self) -> Result<Vec<(String, u32, u64)>, AdminError> {
        let mut out = Vec::new();
        for shard in 0..self.topic.shards() {
            let reply: Value = match redis::cmd("XINFO")
                .arg("CONSUMERS")
                .arg(self.topic.shard_key(shard))
                .arg(&self.group)
                .query(&mut self.conn)
            {
                Ok(v) => v,
                // No stream or no group there yet: no consumers.
                Err(e) if e.kind() == redis::ErrorKind::ResponseError => continue,
                Err(e) => return Err(e.into()),
            };
            let Value::Array(consumers) = reply else {
                continue;
            };
            for c in &consumers {
                let name = report::field(c, "name").and_then(report::as_string);
                let pending = report::field(c, "pending")
                    .and_then(crate::stream::as_int)
                    .unwrap_or(0);
                if let Some(name) = name {
                    out.push((name, shard, pending));
                }
            }
        }
        Ok(out)
    }

    /// Deletes the consumers of the group that are not live members and have no pending
    /// entries, on every shard (`dry_run`: only says which). A consumer with pending entries is
    /// refused, checked and deleted in one script: see the module docs.
    pub fn cleanup(&mut self, dry_run: bool) -> Result<CleanupReport, AdminError> {
        let report = self.members()?;
        let mut out = CleanupReport::default();
        let keys: Vec<String> = (0..self.topic.shards())
            .map(|s| self.topic.shard_key(s))
            .collect();
        let script = Script::new(CLEANUP);
        for s in report.stragglers {
            if s.pending > 0 {
                out.refused.push(s);
                continue;
            }
            if dry_run {
                out.deleted.push(s.consumer);
                continue;
            }
            let mut call = script.prepare_invoke();
            for k in &keys {
                call.key(k);
            }
            let n: i64 = call
                .arg(&self.group)
                .arg(&s.consumer)
                .invoke(&mut self.conn)?;
            if n < 0 {
                // It took entries since `members` looked.
                out.refused.push(Straggler {
                    pending: n.unsigned_abs(),
                    ..s
                });
            } else {
                out.deleted.push(s.consumer);
            }
        }
        out.dry_run = dry_run;
        Ok(out)
    }
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

/// A signed µs count as a duration, negative ones as zero.
fn micros(us: i128) -> Duration {
    Duration::from_micros(u64::try_from(us.max(0)).unwrap_or(u64::MAX))
}
