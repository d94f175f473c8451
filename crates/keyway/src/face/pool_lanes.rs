//! [`Pool`]'s untyped context lanes: sequential and coalescing tasks and lane handles, the key
//! type inferred at each call. Their rules and examples are on [`Contexts`], the keyed entry
//! point; these link there.

use std::hash::Hash;

#[cfg(doc)]
use super::contexts::Contexts;
use super::lane::Lane;
use super::pool::Pool;
use crate::error::SubmitError;
use crate::lane::closures::{self, plain, with_handle};
use crate::task::TaskHandle;

/// Context lanes on the pool, untyped: see [`Contexts`].
impl Pool {
    /// Runs `f` in the lane of `ctx`, after every task submitted to `ctx` before; contexts run
    /// in parallel. The untyped form of [`Contexts::execute_sequential`], which states the
    /// ordering rule and shows it.
    ///
    /// The key's type is inferred at each call and is part of the context's identity: `"a"`
    /// and `String::from("a")`, or `1u32` and `1u64`, are different contexts whose tasks run
    /// in parallel, with no warning. [`Pool::contexts`] fixes the key type once.
    pub fn execute_sequential<K, F>(&self, ctx: K, f: F) -> Result<(), SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() + Send + 'static,
    {
        closures::submit(
            &self.handle.registry,
            &self.handle.lanes,
            ctx,
            f,
            false,
            plain,
        )
    }

    /// Like [`execute_sequential`](Pool::execute_sequential), returning a [`TaskHandle`]: the
    /// untyped form of [`Contexts::submit_sequential`].
    ///
    /// The key's type is part of the context's identity (see
    /// [`execute_sequential`](Pool::execute_sequential)).
    pub fn submit_sequential<K, F, T>(&self, ctx: K, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        closures::submit(
            &self.handle.registry,
            &self.handle.lanes,
            ctx,
            f,
            false,
            with_handle,
        )
    }

    /// A coalescing task in the lane of `ctx`: it replaces the lane's last pending task if that
    /// one is coalescing and has not started. The untyped form of
    /// [`Contexts::execute_coalescing`], which states the rule and shows it.
    ///
    /// The key's type is part of the context's identity (see
    /// [`execute_sequential`](Pool::execute_sequential)).
    pub fn execute_coalescing<K, F>(&self, ctx: K, f: F) -> Result<(), SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() + Send + 'static,
    {
        closures::submit(
            &self.handle.registry,
            &self.handle.lanes,
            ctx,
            f,
            true,
            plain,
        )
    }

    /// Like [`execute_coalescing`](Pool::execute_coalescing), returning a [`TaskHandle`] (a
    /// replaced task's says [`TaskError::Coalesced`](crate::TaskError::Coalesced)): the untyped
    /// form of [`Contexts::submit_coalescing`].
    ///
    /// The key's type is part of the context's identity (see
    /// [`execute_sequential`](Pool::execute_sequential)).
    pub fn submit_coalescing<K, F, T>(&self, ctx: K, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        closures::submit(
            &self.handle.registry,
            &self.handle.lanes,
            ctx,
            f,
            true,
            with_handle,
        )
    }

    /// A handle on the lane of `ctx`, skipping the context look-up on each submission: the
    /// untyped form of [`Contexts::lane`].
    ///
    /// The key's type is part of the context's identity (see
    /// [`execute_sequential`](Pool::execute_sequential)).
    ///
    /// # Panics
    ///
    /// If `ctx`'s `Hash`, `Eq` or `Drop` panics (the pool itself is left intact).
    pub fn lane<K>(&self, ctx: K) -> Lane<K>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        Lane::pin(self, ctx)
    }

    /// Waits for the tasks submitted to `ctx` before, as [`Contexts::flush`] does (which says
    /// what a flush waits for and when it is refused).
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// let pool = keyway::Pool::new().unwrap();
    /// pool.execute_sequential(3u8, || ()).unwrap();
    /// pool.flush(3u8).unwrap().join().unwrap(); // old code still compiles, with a warning
    /// ```
    #[deprecated(note = "use `pool.lane(ctx).flush()`, or `flush` on `pool.contexts::<K>()`")]
    pub fn flush<K>(&self, ctx: K) -> Result<TaskHandle<()>, SubmitError<()>>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        self.contexts::<K>().flush(ctx)
    }
}
