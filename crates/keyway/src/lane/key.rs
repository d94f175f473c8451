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
///
/// Inlined into each look-up: an out-of-line call per use cost about 20 instructions a task
/// (two uses on every send by key), the report of a panic stays out of line.
#[inline(always)]
pub(crate) fn catch_key<R>(f: impl FnOnce() -> R) -> Result<R, KeyPanicked> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Ok(r),
        Err(payload) => Err(key_panicked(payload)),
    }
}

/// Reports a key's panic (its payload is dropped without unwinding).
#[cold]
#[inline(never)]
fn key_panicked(payload: Box<dyn Any + Send>) -> KeyPanicked {
    tracing::error!("keyway: a context key's Hash, Eq or Drop panicked; task handed back");
    drop_quietly(payload);
    KeyPanicked
}

/// A context key's `Hash`, `Eq` or `Drop` panicked during a look-up.
pub(crate) struct KeyPanicked;
