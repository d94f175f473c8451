//! A lane's key, dropped with any panic of its `Drop` contained: a lane may be freed on a worker,
//! the monitor or a submitter, none of which may unwind because of a user's key.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::task::drop_quietly;

/// A type-erased key whose drop never unwinds.
pub(crate) struct LaneKey(Option<Box<dyn Any + Send + Sync>>);

impl LaneKey {
    pub(crate) fn new<K: Send + Sync + 'static>(key: K) -> Self {
        LaneKey(Some(Box::new(key)))
    }

    #[inline]
    pub(crate) fn get(&self) -> &(dyn Any + Send + Sync) {
        match &self.0 {
            Some(k) => &**k,
            None => unreachable!("a lane's key is only taken by its drop"),
        }
    }
}

impl Drop for LaneKey {
    fn drop(&mut self) {
        drop_quietly(self.0.take());
    }
}

/// Runs user code on a key (`Hash`, `Eq`), turning a panic into `Err(KeyPanicked)`.
pub(crate) fn catch_key<R>(f: impl FnOnce() -> R) -> Result<R, KeyPanicked> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|_| {
        tracing::error!("keyway: a context key's Hash, Eq or Drop panicked; task handed back");
        KeyPanicked
    })
}

/// A context key's `Hash`, `Eq` or `Drop` panicked during a look-up.
pub(crate) struct KeyPanicked;
