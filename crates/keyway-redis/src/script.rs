//! The heartbeat and leave scripts, run atomically inside Redis, and the share rule applied to
//! what the heartbeat returns.
//!
//! Keys of one executor (all under the namespace, one hash tag so they share a cluster slot):
//! - `members`: sorted set, member id → last heartbeat, in the group's time (below);
//! - `joined`: sorted set, member id → when it (re)joined, in the group's time;
//! - `clock`: hash with `last` (Redis `TIME` of the last heartbeat by anyone, µs), `offset`
//!   (the time, µs, during which nobody could heartbeat: Redis paused or down for everyone)
//!   and `created` (when the group was created, in the group's time).
//!
//! The group's time is Redis `TIME` minus `offset`: it stops while nobody can heartbeat, so a
//! pause of Redis itself does not expire every member at once. Nothing uses a client's clock.

use redis::Script;

/// One heartbeat of one member: prune the expired, record this member, count.
///
/// KEYS: members, joined, clock. ARGV: member id, heartbeat µs, TTL µs, key expiry ms.
/// Returns `{live members, members whose last heartbeat is not after this member's join,
/// group age µs, Redis TIME µs, 1 if this member was not in the set (new, or expired and back)
/// else 0}` (numbers as strings: Lua would truncate them to integers).
const HEARTBEAT: &str = r"
local id = ARGV[1]
local heartbeat = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local t = redis.call('TIME')
local raw = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('HGET', KEYS[3], 'last') or raw)
local offset = tonumber(redis.call('HGET', KEYS[3], 'offset') or 0)
local gap = raw - last
if gap > heartbeat then
  offset = offset + (gap - heartbeat)
end
local now = raw - offset
redis.call('HSET', KEYS[3], 'last', string.format('%.0f', raw), 'offset', string.format('%.0f', offset))
redis.call('HSETNX', KEYS[3], 'created', string.format('%.0f', now))
local created = tonumber(redis.call('HGET', KEYS[3], 'created'))
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%.0f', now - ttl))
if #dead > 0 then
  redis.call('ZREM', KEYS[1], unpack(dead))
  redis.call('ZREM', KEYS[2], unpack(dead))
end
local added = redis.call('ZADD', KEYS[1], string.format('%.0f', now), id)
redis.call('ZADD', KEYS[2], 'NX', string.format('%.0f', now), id)
local joined = tonumber(redis.call('ZSCORE', KEYS[2], id))
local live = redis.call('ZCARD', KEYS[1])
local behind = redis.call('ZCOUNT', KEYS[1], '-inf', string.format('%.0f', joined))
if now == joined then
  behind = behind - 1
end
for i = 1, 3 do
  redis.call('PEXPIRE', KEYS[i], ARGV[4])
end
return {tostring(live), tostring(behind), string.format('%.0f', now - created), string.format('%.0f', raw), tostring(added)}
";

/// A member leaves: KEYS: members, joined. ARGV: member id.
const LEAVE: &str = r"
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
";

/// The compiled scripts (each is sent by hash, and loaded again when Redis has forgotten it).
pub(crate) struct Scripts {
    pub(crate) heartbeat: Script,
    pub(crate) leave: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Self {
            heartbeat: Script::new(HEARTBEAT),
            leave: Script::new(LEAVE),
        }
    }
}

/// The Redis keys of one executor under a namespace.
pub(crate) fn keys(namespace: &str, executor: &str) -> [String; 3] {
    ["members", "joined", "clock"].map(|k| format!("{namespace}:{{{executor}}}:{k}"))
}

/// What one heartbeat learned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Beat {
    /// Live members, this one included.
    pub(crate) live: u64,
    /// Other members whose last heartbeat is not after this member's join: they may not have
    /// counted it yet.
    pub(crate) behind: u64,
    /// How long the group has existed in Redis, µs of the group's time.
    pub(crate) group_age_us: f64,
    /// Redis `TIME`, µs since the Unix epoch.
    pub(crate) redis_time_us: f64,
    /// This member was not in the member set: it is new, or the others expired it (it could not
    /// heartbeat for a TTL) and it is back.
    pub(crate) added: bool,
}

impl Beat {
    /// Parses the heartbeat script's reply.
    pub(crate) fn parse(reply: &[String]) -> Option<Self> {
        let [live, behind, age, time, added] = reply else {
            return None;
        };
        Some(Self {
            live: live.parse().ok()?,
            behind: behind.parse().ok()?,
            group_age_us: age.parse().ok()?,
            redis_time_us: time.parse().ok()?,
            added: match added.as_str() {
                "0" => false,
                "1" => true,
                _ => return None,
            },
        })
    }

    /// This member's new fraction of the limit, given its previous one.
    ///
    /// The fair fraction is `1 / live`. A member takes it only when it is *settled*: every other
    /// member has heartbeated since it joined (so each counted it and lowered its own share),
    /// and the group is older than the TTL (after Redis lost its data, every member that is
    /// still alive has re-registered by then). Until then it may lower its fraction, never
    /// raise it: a new process starts at zero, and a process re-registering after Redis lost its
    /// data (the group is younger than the TTL) keeps its last share. A process the others
    /// expired while it could not heartbeat (the group is older than the TTL: they took its
    /// share) starts at zero again, as a new one does.
    pub(crate) fn next_fraction(&self, previous: f64, ttl_us: f64) -> f64 {
        let fair = 1.0 / self.live.max(1) as f64;
        let old_group = self.group_age_us >= ttl_us;
        let settled = self.behind == 0 && old_group;
        let previous = if self.added && old_group {
            0.0
        } else {
            previous
        };
        if settled {
            fair
        } else {
            previous.min(fair)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(live: u64, behind: u64, group_age_us: f64) -> Beat {
        Beat {
            live,
            behind,
            group_age_us,
            redis_time_us: 0.0,
            added: false,
        }
    }

    fn added(live: u64, behind: u64, group_age_us: f64) -> Beat {
        Beat {
            added: true,
            ..beat(live, behind, group_age_us)
        }
    }

    #[test]
    fn a_member_expired_and_back_starts_at_zero() {
        // The others expired it and took its share: back before they counted it again, it has
        // none, whatever it had before...
        assert_eq!(added(3, 2, 10.0).next_fraction(1.0 / 3.0, 5.0), 0.0);
        // ...and takes the fair one once they have (settled), as a new member does.
        assert_eq!(added(3, 0, 10.0).next_fraction(1.0 / 3.0, 5.0), 1.0 / 3.0);
        // Redis lost its data (young group): everyone re-registers and keeps its last share.
        assert_eq!(added(3, 2, 1.0).next_fraction(1.0 / 3.0, 5.0), 1.0 / 3.0);
    }

    #[test]
    fn settled_members_take_the_fair_fraction() {
        assert_eq!(beat(4, 0, 10.0).next_fraction(0.0, 5.0), 0.25);
        assert_eq!(beat(1, 0, 10.0).next_fraction(0.5, 5.0), 1.0);
    }

    #[test]
    fn unsettled_members_never_raise_their_fraction() {
        // Others have not heartbeated since it joined.
        assert_eq!(beat(2, 1, 10.0).next_fraction(0.0, 5.0), 0.0);
        assert_eq!(beat(1, 1, 10.0).next_fraction(1.0 / 3.0, 5.0), 1.0 / 3.0);
        // The group is younger than the TTL (Redis lost its data): keep the last share...
        assert_eq!(beat(1, 0, 1.0).next_fraction(1.0 / 3.0, 5.0), 1.0 / 3.0);
        // ...or lower it.
        assert_eq!(beat(4, 0, 1.0).next_fraction(1.0 / 3.0, 5.0), 0.25);
    }

    #[test]
    fn replies_parse_or_are_refused() {
        let ok = ["3", "0", "12", "1700000000000000", "0"].map(String::from);
        assert_eq!(
            Beat::parse(&ok),
            Some(beat(3, 0, 12.0)).map(|b| Beat {
                redis_time_us: 1.7e15,
                ..b
            })
        );
        assert_eq!(Beat::parse(&ok[..4]), None);
        assert_eq!(
            Beat::parse(&["x", "0", "1", "2", "0"].map(String::from)),
            None
        );
        assert_eq!(
            Beat::parse(&["3", "0", "1", "2", "2"].map(String::from)),
            None
        );
        // A zero count (cannot happen: this member was just added) never divides by zero.
        assert_eq!(beat(0, 0, 10.0).next_fraction(0.0, 5.0), 1.0);
    }

    #[test]
    fn keys_share_one_hash_tag() {
        assert_eq!(
            keys("ns", "pay"),
            ["ns:{pay}:members", "ns:{pay}:joined", "ns:{pay}:clock"]
        );
    }
}
