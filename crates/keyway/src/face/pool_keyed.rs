//! [`Pool`]'s multi-key tasks.

use std::hash::Hash;

use super::pool::Pool;
use crate::error::SubmitError;
use crate::lane::closures::{plain, with_handle};
use crate::lane::keyed;
use crate::task::TaskHandle;

/// Multi-key tasks on the pool.
impl Pool {
    /// Runs `f` holding every key in `keys`: two tasks sharing at least one key never overlap,
    /// and the one submitted first runs first; tasks with disjoint keys run in parallel.
    ///
    /// Duplicate keys count once; no keys makes a plain task; one key is exactly
    /// [`execute_sequential`](Pool::execute_sequential) on that key (same lane, same order). A
    /// task waiting for a busy key holds no thread.
    ///
    /// A context's type is part of its identity: keys `1u32` and `1u64` are different keys, and
    /// tasks holding one do not exclude tasks holding the other. [`Pool::contexts`] fixes the key
    /// type once (`pool.contexts::<u64>().execute_keyed([from, to], f)`).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = keyway::Pool::new().unwrap();
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// for (i, keys) in [vec!["alice", "bob"], vec!["bob"], vec!["bob", "carol"], vec!["alice"]]
    ///     .into_iter()
    ///     .enumerate()
    /// {
    ///     let log = log.clone();
    ///     pool.execute_keyed(keys, move || log.lock().unwrap().push(i)).unwrap();
    /// }
    /// pool.shutdown();
    /// let log = log.lock().unwrap();
    /// let pos = |i| log.iter().position(|&x| x == i).unwrap();
    /// // Everything touching "bob" ran in submission order; "alice" too.
    /// assert!(pos(0) < pos(1) && pos(1) < pos(2) && pos(0) < pos(3));
    /// ```
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

    /// Like [`execute_keyed`](Pool::execute_keyed), returning a [`TaskHandle`].
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let transfer = pool.submit_keyed(["acct-1", "acct-2"], || "moved 10").unwrap();
    /// assert_eq!(transfer.join().unwrap(), "moved 10");
    /// ```
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
