//! The consumer group's Lua scripts: membership heartbeats, leases with fencing numbers, and
//! fenced acks and dead letters. Each runs atomically inside Redis.
//!
//! **Group time.** Expiries are compared with the group's time: Redis `TIME` minus the time
//! during which nobody reached Redis at all (a gap between two calls longer than two
//! heartbeats counts as an outage, less one heartbeat). So a pause or restart of Redis stops
//! the clocks of every lease and member instead of expiring them all at once, and nothing
//! depends on the members' own clocks agreeing.
//!
//! **Leases.** A hash per shard: `owner`, `epoch`, `expires` (group time, µs). Acquiring
//! raises `epoch` to one more than before, and at least Redis `TIME` in milliseconds, so that
//! epochs keep growing even after Redis lost its data; renewing and releasing require
//! the owner *and* the epoch to match; acks and dead letters require the same, so a former
//! owner's late acks are refused.
//!
//! **Fenced reads.** A member reads new entries and claims pending ones only through
//! scripts that check the lease the same way (protocol rule F in the
//! [module docs](crate::stream)): a read delayed past a takeover reaches Redis after the
//! lease moved and delivers nothing. Claims set each entry's delivery count to a value the
//! member chose (`XCLAIM … RETRYCOUNT`), so a claim sent again after a lost reply counts
//! nothing twice (protocol rule R).

use redis::Script;

/// The group-time function every timed script starts with. `hb` is the heartbeat in µs.
const CLOCK: &str = r"
local function group_now(clock, hb)
  local t = redis.call('TIME')
  local raw = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('HGET', clock, 'last') or raw)
  local offset = tonumber(redis.call('HGET', clock, 'offset') or 0)
  local gap = raw - last
  if gap > 2 * hb then
    offset = offset + (gap - hb)
  end
  redis.call('HSET', clock, 'last', string.format('%.0f', raw), 'offset', string.format('%.0f', offset))
  return raw - offset
end
";

/// KEYS: members, clock. ARGV: member, heartbeat µs, TTL µs, key expiry ms.
/// Prunes members whose last heartbeat is a TTL old, records this one, returns the live ids.
const HEARTBEAT: &str = r"
local now = group_now(KEYS[2], tonumber(ARGV[2]))
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%.0f', now - tonumber(ARGV[3])))
if #dead > 0 then
  redis.call('ZREM', KEYS[1], unpack(dead))
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return redis.call('ZRANGE', KEYS[1], 0, -1)
";

/// KEYS: members. ARGV: member.
const LEAVE: &str = r"
return redis.call('ZREM', KEYS[1], ARGV[1])
";

/// KEYS: clock, lease. ARGV: member, heartbeat µs, lease µs.
/// Takes the lease if it is free, expired or already this member's (a restart with the same
/// id); returns `{new epoch, previous owner or ''}`, or `{0, owner}` when another member holds
/// it. A previous owner means a takeover (its lease expired instead of being released).
const ACQUIRE: &str = r"
local now = group_now(KEYS[1], tonumber(ARGV[2]))
local owner = redis.call('HGET', KEYS[2], 'owner')
local expires = tonumber(redis.call('HGET', KEYS[2], 'expires') or 0)
if owner and owner ~= '' and owner ~= ARGV[1] and expires > now then
  return {0, owner}
end
local t = redis.call('TIME')
local floor = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local epoch = math.max(tonumber(redis.call('HGET', KEYS[2], 'epoch') or 0) + 1, floor)
redis.call('HSET', KEYS[2], 'epoch', string.format('%.0f', epoch), 'owner', ARGV[1], 'expires', string.format('%.0f', now + tonumber(ARGV[3])))
epoch = string.format('%.0f', epoch)
return {epoch, owner or ''}
";

/// KEYS: clock, lease 1..n. ARGV: member, heartbeat µs, lease µs, epoch 1..n.
/// Renews each lease still held by this member at that epoch; returns 1 or 0 per lease.
const RENEW: &str = r"
local now = group_now(KEYS[1], tonumber(ARGV[2]))
local out = {}
for i = 2, #KEYS do
  local held = redis.call('HMGET', KEYS[i], 'owner', 'epoch')
  if held[1] == ARGV[1] and held[2] == ARGV[i + 2] then
    redis.call('HSET', KEYS[i], 'expires', string.format('%.0f', now + tonumber(ARGV[3])))
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
";

/// KEYS: lease. ARGV: member, epoch. Frees the lease if held at that epoch; 1 or 0.
const RELEASE: &str = r"
local held = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if held[1] == ARGV[1] and held[2] == ARGV[2] then
  redis.call('HSET', KEYS[1], 'owner', '', 'expires', '0')
  return 1
end
return 0
";

/// KEYS: lease, stream. ARGV: group, member, epoch, ids...
/// Acks the ids if this member holds the lease at that epoch: the count acked, or -1 (fenced).
const ACK: &str = r"
local held = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if held[1] ~= ARGV[2] or held[2] ~= ARGV[3] then
  return -1
end
if #ARGV < 4 then
  return 0
end
return redis.call('XACK', KEYS[2], ARGV[1], unpack(ARGV, 4))
";

/// KEYS: lease, stream, dead-letter stream. ARGV: group, member, epoch, id, key, payload,
/// attempts, reason. Copies the entry to the dead letters and acks it in one step, if this
/// member holds the lease at that epoch: 1, or -1 (fenced).
const DEAD_LETTER: &str = r"
local held = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if held[1] ~= ARGV[2] or held[2] ~= ARGV[3] then
  return -1
end
redis.call('XADD', KEYS[3], '*', 'k', ARGV[5], 'p', ARGV[6], 'id', ARGV[4], 'attempts', ARGV[7], 'reason', ARGV[8], 'epoch', ARGV[3])
redis.call('XACK', KEYS[2], ARGV[1], ARGV[4])
return 1
";

/// KEYS: lease, held hash. ARGV: member, epoch, key, entry id.
/// Quarantines `key` (the entry exhausted its attempts) if this member holds the lease at
/// that epoch: 1, or -1 (fenced). The entry is not acknowledged.
const HOLD: &str = r"
local held = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if held[1] ~= ARGV[1] or held[2] ~= ARGV[2] then
  return -1
end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
return 1
";

/// KEYS: held hash, stream. ARGV: group, key.
/// Releases a quarantined key (anyone may: an operator's decision): deletes its hold and
/// sets the delivery count of the entry that exhausted its attempts back to 0, so that it
/// has its attempts again wherever it runs next. 1 if the key was held, else 0.
pub(crate) const RELEASE_HOLD: &str = r"
local id = redis.call('HGET', KEYS[1], ARGV[2])
if not id then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[2])
local ok, p = pcall(redis.call, 'XPENDING', KEYS[2], ARGV[1], id, id, 1)
if ok and p[1] then
  redis.call('XCLAIM', KEYS[2], ARGV[1], p[1][2], 0, id, 'RETRYCOUNT', 0, 'JUSTID')
end
return 1
";

/// KEYS: lease, stream. ARGV: group, member, epoch, then pairs of entry id and delivery count.
/// A releasing owner gives back the delivery counts of the entries it never started (the next
/// owner's claim counts them again), if it still holds the lease at that epoch. Entries
/// trimmed from the stream meanwhile cannot be given back: they leave the pending list and
/// their ids are returned, to be reported. `{1, trimmed ids}`, or `{-1}`.
const GIVE_BACK: &str = r"
local held = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if held[1] ~= ARGV[2] or held[2] ~= ARGV[3] then
  return {-1}
end
local gone = {}
for i = 4, #ARGV - 1, 2 do
  if #redis.call('XRANGE', KEYS[2], ARGV[i], ARGV[i], 'COUNT', 1) == 0 then
    redis.call('XACK', KEYS[2], ARGV[1], ARGV[i])
    gone[#gone + 1] = ARGV[i]
  else
    redis.call('XCLAIM', KEYS[2], ARGV[1], ARGV[2], 0, ARGV[i], 'RETRYCOUNT', ARGV[i + 1], 'JUSTID')
  end
end
return {1, gone}
";

/// KEYS: lease, stream. ARGV: group, member, epoch, count.
/// Reads up to `count` new entries for this member if it holds the lease at that epoch:
/// `{1, entries}`; `{2, id}` when there are none (`id`: the stream's last entry, to wait
/// for newer ones from); `{-1}` when fenced.
const READ: &str = r"
local held = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if held[1] ~= ARGV[2] or held[2] ~= ARGV[3] then
  return {-1}
end
local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[4], 'STREAMS', KEYS[2], '>')
if read and read[1] and #read[1][2] > 0 then
  return {1, read[1][2]}
end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if last[1] then
  return {2, last[1][1]}
end
return {2, '0-0'}
";

/// KEYS: lease, stream. ARGV: group, member, epoch, then pairs of entry id and delivery count.
/// Claims each pending entry for this member with that delivery count, if it holds the lease
/// at that epoch. `{1, entries claimed, ids trimmed from the stream}` (the trimmed ones leave
/// the pending list), or `{-1}` when fenced.
const CLAIM: &str = r"
local held = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if held[1] ~= ARGV[2] or held[2] ~= ARGV[3] then
  return {-1}
end
local out, gone = {}, {}
for i = 4, #ARGV - 1, 2 do
  if #redis.call('XRANGE', KEYS[2], ARGV[i], ARGV[i], 'COUNT', 1) == 0 then
    redis.call('XACK', KEYS[2], ARGV[1], ARGV[i])
    gone[#gone + 1] = ARGV[i]
  else
    local got = redis.call('XCLAIM', KEYS[2], ARGV[1], ARGV[2], 0, ARGV[i], 'RETRYCOUNT', ARGV[i + 1])
    if got[1] then
      out[#out + 1] = got[1]
    end
  end
end
return {1, out, gone}
";

/// The compiled scripts (sent by hash; loaded again when Redis has forgotten them).
pub(crate) struct Scripts {
    pub(crate) heartbeat: Script,
    pub(crate) leave: Script,
    pub(crate) acquire: Script,
    pub(crate) renew: Script,
    pub(crate) release: Script,
    pub(crate) ack: Script,
    pub(crate) dead_letter: Script,
    pub(crate) give_back: Script,
    pub(crate) read: Script,
    pub(crate) claim: Script,
    pub(crate) hold: Script,
    pub(crate) release_hold: Script,
    /// The source of each, to load them all in one round trip on a new connection.
    pub(crate) sources: Vec<String>,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        let timed = |body: &str| format!("{CLOCK}{body}");
        let [heartbeat, leave, acquire, renew, release, ack, dead_letter, give_back, read, claim, hold, release_hold] = [
            timed(HEARTBEAT),
            LEAVE.to_owned(),
            timed(ACQUIRE),
            timed(RENEW),
            RELEASE.to_owned(),
            ACK.to_owned(),
            DEAD_LETTER.to_owned(),
            GIVE_BACK.to_owned(),
            READ.to_owned(),
            CLAIM.to_owned(),
            HOLD.to_owned(),
            RELEASE_HOLD.to_owned(),
        ];
        Self {
            heartbeat: Script::new(&heartbeat),
            leave: Script::new(&leave),
            acquire: Script::new(&acquire),
            renew: Script::new(&renew),
            release: Script::new(&release),
            ack: Script::new(&ack),
            dead_letter: Script::new(&dead_letter),
            give_back: Script::new(&give_back),
            read: Script::new(&read),
            claim: Script::new(&claim),
            hold: Script::new(&hold),
            release_hold: Script::new(&release_hold),
            sources: vec![
                heartbeat,
                leave,
                acquire,
                renew,
                release,
                ack,
                dead_letter,
                give_back,
                read,
                claim,
                hold,
                release_hold,
            ],
        }
    }
}
