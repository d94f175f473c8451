//! Containment of user code the pool runs outside a task's own catch: drops of values the user
//! gave it (keys, futures, wakers), which may panic.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Drops `value`, containing (and logging) a panic of its `Drop`.
pub(crate) fn drop_quietly<T>(value: T) {
    if catch_unwind(AssertUnwindSafe(move || drop(value))).is_err() {
        tracing::error!("keyway: a drop of a user value panicked (contained)");
    }
}

/// Wakes `waker` (a user's: it runs the executor's code), containing (and logging) a panic of
/// its `wake`: the bookkeeping around a wake-up must go on whatever the executor does.
pub(crate) fn wake_quietly(waker: std::task::Waker) {
    if catch_unwind(AssertUnwindSafe(move || waker.wake())).is_err() {
        tracing::error!("keyway: a waker panicked when woken (contained)");
    }
}

/// Runs `f`, user code in a bookkeeping path (a drop, a wake-up), containing (and logging) its
/// panic as `what`.
pub(crate) fn contain(what: &'static str, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        tracing::error!(what, "keyway: user code panicked (contained)");
    }
}
