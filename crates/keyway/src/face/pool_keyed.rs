//! [`Pool`]'s untyped multi-key tasks; their rules and examples are on [`Contexts`].

use std::hash::Hash;

#[cfg(doc)]
use super::contexts::Contexts;
use super::pool::Pool;
use crate::error::SubmitError;
use crate::lane::closures::{plain, with_handle};
use crate::lane::keyed;
use crate::task::TaskHandle;

/// Multi-key tasks on the pool, untyped: see [`Contexts`].
impl Pool {
    /// Runs `f` holding every key in `keys`: tasks sharing a key never overlap and run in
    /// submission order; tasks with disjoint keys run in parallel. The untyped form of
    /// [`Contexts::execute_keyed`], which states the rules and shows them.
    ///
    /// The keys' type is inferred at each call and is part of their identity: keys `1u32` and
    /// `1u64` are different keys, and tasks holding one do not exclude tasks holding the other.
    /// [`Pool::contexts`] fixes the key type once.
    pub fn execute_keyed<K, F>(
        &self,
        keys: impl IntoIterator<Item = K>,
        f: F,
    ) -> Result<(), SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() + Send + 'static,
    {
        keyed::submit(&self.handle.registry, &self.handle.lanes, keys, f, plain)
    }

    /// Like [`execute_keyed`](Pool::execute_keyed), returning a [`TaskHandle`]: the untyped form
    /// of [`Contexts::submit_keyed`].
    pub fn submit_keyed<K, F, T>(
        &self,
        keys: impl IntoIterator<Item = K>,
        f: F,
    ) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        keyed::submit(
            &self.handle.registry,
            &self.handle.lanes,
            keys,
            f,
            with_handle,
        )
    }
}
