//! The hasher a pool gives context keys: the fast default, or one the user chose
//! ([`PoolBuilder::hasher`](super::PoolBuilder::hasher)).
//!
//! The user's `BuildHasher` is erased behind a trait object so that the lane tables need no type
//! parameter for it; the default stays a plain value, so the common path has no indirect call.

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

/// How a pool hashes context keys. Cloning shares the seed: every table of one pool (its context
/// lanes, multi-key tasks, typed lanes) hashes a key to the same value.
#[derive(Clone)]
pub(crate) enum KeyHasher {
    /// hashbrown's default (foldhash), seeded at random per pool.
    Fast(hashbrown::DefaultHashBuilder),
    /// The user's choice.
    Custom(Arc<dyn ErasedBuildHasher>),
}

/// A `BuildHasher` behind a trait object: the caller feeds the fresh hasher, this finishes it.
pub(crate) trait ErasedBuildHasher: Send + Sync + 'static {
    fn hash_with(&self, feed: &mut dyn FnMut(&mut dyn Hasher)) -> u64;
}

impl<B: BuildHasher + Send + Sync + 'static> ErasedBuildHasher for B {
    fn hash_with(&self, feed: &mut dyn FnMut(&mut dyn Hasher)) -> u64 {
        let mut hasher = self.build_hasher();
        feed(&mut hasher);
        hasher.finish()
    }
}

impl KeyHasher {
    pub(crate) fn custom<B: BuildHasher + Send + Sync + 'static>(build: B) -> Self {
        KeyHasher::Custom(Arc::new(build))
    }

    /// The hash of `value`, as `BuildHasher::hash_one` computes it.
    pub(crate) fn hash_one<T: Hash>(&self, value: T) -> u64 {
        match self {
            KeyHasher::Fast(build) => build.hash_one(value),
            KeyHasher::Custom(build) => {
                build.hash_with(&mut |mut hasher: &mut dyn Hasher| value.hash(&mut hasher))
            }
        }
    }
}

impl Default for KeyHasher {
    fn default() -> Self {
        KeyHasher::Fast(Default::default())
    }
}

impl fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyHasher::Fast(_) => "Fast",
            KeyHasher::Custom(_) => "Custom",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::KeyHasher;
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;

    #[test]
    fn a_custom_hasher_hashes_as_its_build_hasher_does() {
        let build = RandomState::new();
        let erased = KeyHasher::custom(build.clone());
        for key in ["a", "b", "a longer key than a word"] {
            assert_eq!(erased.hash_one((7u8, key)), build.hash_one((7u8, key)));
        }
    }

    #[test]
    fn clones_share_the_seed() {
        let fast = KeyHasher::default();
        assert_eq!(fast.clone().hash_one("k"), fast.hash_one("k"));
        let custom = KeyHasher::custom(RandomState::new());
        assert_eq!(custom.clone().hash_one("k"), custom.hash_one("k"));
    }
}
