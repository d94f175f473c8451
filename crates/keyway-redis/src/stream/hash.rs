//! The shard rule of the wire format (version 1) and the rendezvous assignment of shards to
//! members.
//!
//! **Shard rule v1** (fixed: producers and consumers of every version must agree on it): the
//! shard of a key is the 64-bit FNV-1a hash of the key's bytes, modulo the number of shards.
//! FNV-1a 64: start from `0xcbf29ce484222325`; for each byte, xor it in, then multiply by
//! `0x100000001b3` (wrapping). A future rule would get a new version name; v1 never changes.

/// The name of the shard rule this crate implements (see [`shard_of`]).
pub const SHARD_RULE: &str = "fnv1a64-mod-v1";

/// 64-bit FNV-1a of `bytes`.
///
/// ```
/// use keyway_redis::stream::fnv1a64;
/// assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
/// assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
/// ```
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The shard of `key` among `shards` shards under rule v1: `fnv1a64(key) % shards` (`0` when
/// `shards` is `0`, which a [`Topic`](crate::stream::Topic) never has).
///
/// ```
/// use keyway_redis::stream::shard_of;
/// assert_eq!(shard_of(b"alice", 8), shard_of(b"alice", 8)); // one key, one shard
/// assert!(shard_of(b"bob", 8) < 8);
/// ```
pub fn shard_of(key: &[u8], shards: u32) -> u32 {
    if shards == 0 {
        return 0;
    }
    (fnv1a64(key) % u64::from(shards)) as u32
}

/// A strong 64-bit mixer (splitmix64's finaliser), so that rendezvous weights of near names
/// differ in every bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The weight of `member` for `shard`: the highest weight owns the shard.
fn weight(member: &str, shard: u32) -> u64 {
    mix(fnv1a64(member.as_bytes()) ^ mix(u64::from(shard).wrapping_add(1)))
}

/// The member that should own `shard` (rendezvous, "highest random weight", hashing): each
/// member's weight for the shard is a hash of both; the heaviest wins, ties to the smaller
/// name. A member joining or leaving moves only the shards it wins or held: about
/// `shards / members` of them.
pub(crate) fn rendezvous_owner(shard: u32, members: &[String]) -> Option<&str> {
    members
        .iter()
        .max_by(|a, b| {
            weight(a, shard)
                .cmp(&weight(b, shard))
                .then_with(|| b.cmp(a))
        })
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn shard_rule_is_stable() {
        // Wire format: these values must never change.
        assert_eq!(
            shard_of(b"foobar", 16),
            (0x85944171f73967e8_u64 % 16) as u32
        );
        assert_eq!(shard_of(b"x", 0), 0);
        assert_eq!(shard_of(b"anything", 1), 0);
    }

    #[test]
    fn rendezvous_moves_few_shards() {
        let three: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let four: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let shards = 64;
        let mut moved = 0;
        for s in 0..shards {
            let before = rendezvous_owner(s, &three).unwrap();
            let after = rendezvous_owner(s, &four).unwrap();
            if before != after {
                assert_eq!(after, "d", "a shard moves only to the newcomer");
                moved += 1;
            }
        }
        assert!(moved > 0 && moved < shards / 2, "moved {moved} of {shards}");
        assert_eq!(rendezvous_owner(0, &[]), None);
    }
}
