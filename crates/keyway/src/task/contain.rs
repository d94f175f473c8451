//! Containment of user code the pool runs outside a task's own catch: drops of values the user
//! gave it (keys, futures, wakers), which may panic.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Drops `value`, containing (and logging) a panic of its `Drop`.
pub(crate) fn drop_quietly<T>(value: T) {
    if catch_unwind(AssertUnwindSafe(move || drop(value))).is_err() {
        tracing::error!("keyway: a context key's Drop panicked (contained)");
    }
}
