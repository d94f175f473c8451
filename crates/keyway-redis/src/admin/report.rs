//! What [`Admin`](super::Admin) reports: the group's shards and members, and what a cleanup did.

use std::time::Duration;

use redis::Value;

/// A topic's consumer group as [`Admin::inspect`](super::Admin::inspect) sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupReport {
    /// The topic's name.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// Every shard, in order.
    pub shards: Vec<ShardReport>,
    /// The members in the group's membership set (alive or not yet pruned).
    pub members: Vec<Member>,
}

/// One shard of a [`GroupReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardReport {
    /// The shard.
    pub shard: u32,
    /// The member holding its lease, if any (released or never taken: `None`).
    pub owner: Option<String>,
    /// Whether that owner is alive (heartbeated within the lease).
    pub owner_alive: Option<bool>,
    /// The lease's epoch (fencing number): raised at every acquisition.
    pub epoch: u64,
    /// Group time left on the owner's lease (zero: expired, the next member to look takes it).
    pub lease_left: Option<Duration>,
    /// Entries in the shard's stream.
    pub length: u64,
    /// Entries not yet delivered to the group (`None` when Redis cannot tell).
    pub lag: Option<u64>,
    /// Entries delivered and not yet acknowledged.
    pub pending: u64,
    /// How long ago the oldest pending entry was last delivered.
    pub oldest_pending: Option<Duration>,
    /// Entries in the shard's dead letters.
    pub dead_letters: u64,
    /// The shard's quarantined keys (consumers with the quarantine failure policy), sorted
    /// by key: their entries are held until [`release`](super::Admin::release)d.
    pub quarantined: Vec<Quarantined>,
}

/// A quarantined key of a [`ShardReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Quarantined {
    /// The key.
    pub key: Vec<u8>,
    /// The id of its entry that exhausted its attempts (it runs first once released).
    pub entry_id: String,
}

/// A member of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Member {
    /// Its member id.
    pub id: String,
    /// Group time since its last heartbeat.
    pub last_seen: Duration,
    /// Whether it heartbeated within the lease.
    pub alive: bool,
}

impl Member {
    pub(super) fn new(id: String, age_us: i128, lease_us: i128) -> Self {
        Member {
            id,
            last_seen: super::micros(age_us),
            alive: age_us < lease_us,
        }
    }
}

/// A consumer of the group that is no live member.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Straggler {
    /// The consumer's name (a former member's id).
    pub consumer: String,
    /// Its pending entries, all shards together.
    pub pending: u64,
    /// The shards where it has pending entries.
    pub shards: Vec<u32>,
}

/// [`Admin::members`](super::Admin::members): who is alive, and who holds entries without
/// being alive.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MembersReport {
    /// The members in the membership set.
    pub members: Vec<Member>,
    /// Consumers of the group that are no live member, with or without pending entries.
    pub stragglers: Vec<Straggler>,
}

/// What [`Admin::cleanup`](super::Admin::cleanup) did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CleanupReport {
    /// Whether nothing was changed.
    pub dry_run: bool,
    /// Consumers deleted (no pending entries, no live member).
    pub deleted: Vec<String>,
    /// Consumers kept because they have pending entries.
    pub refused: Vec<Straggler>,
}

/// The value of `name` in a reply that is a flat field list or a map.
pub(super) fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    let is = |k: &Value| match k {
        Value::BulkString(b) => b == name.as_bytes(),
        Value::SimpleString(s) => s == name,
        _ => false,
    };
    match v {
        Value::Array(a) => a
            .chunks(2)
            .find(|c| c.first().is_some_and(is))
            .and_then(|c| c.get(1)),
        Value::Map(m) => m.iter().find(|(k, _)| is(k)).map(|(_, v)| v),
        _ => None,
    }
}

pub(super) fn as_string(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}
