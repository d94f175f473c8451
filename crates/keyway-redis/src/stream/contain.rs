//! Containing user code: the handler and the `on_ack` hook run on the consumer's threads (a
//! pool thread, a shard's reader, the ack timer), and a panic of theirs must not take that
//! thread's work with it (protocol rule H in the [module docs](crate::stream)). A panic is
//! caught and turned into a message; a panic payload whose own `Drop` panics is contained
//! too (and leaked). While user code of a consumer runs, the thread knows it, so that the
//! consumer's `shutdown` called from there does not wait for that very code.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    /// The consumer whose user code this thread runs now (0: none).
    static INSIDE: Cell<u64> = const { Cell::new(0) };
}

/// Runs `f`, user code of consumer `instance`, with its panic contained: `Err` with the
/// panic's message.
pub(crate) fn contain<R>(instance: u64, f: impl FnOnce() -> R) -> Result<R, String> {
    let outer = INSIDE.with(|c| c.replace(instance));
    let result = catch_unwind(AssertUnwindSafe(f));
    INSIDE.with(|c| c.set(outer));
    result.map_err(|panic| {
        let text = message(&*panic);
        drop_payload(panic);
        text
    })
}

/// Whether this thread is running user code of consumer `instance` (a handler or a hook).
pub(crate) fn inside(instance: u64) -> bool {
    INSIDE.with(|c| c.get() == instance)
}

fn message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string payload".to_owned())
}

/// Drops a panic payload; if its `Drop` panics, that second payload is leaked (its `Drop`
/// might panic as well).
fn drop_payload(panic: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(panic))) {
        std::mem::forget(again);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Bomb;

    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("boom in drop");
        }
    }

    #[test]
    fn a_panic_and_a_panicking_payload_are_contained() {
        assert_eq!(contain(7, || 1), Ok(1));
        assert_eq!(contain(7, || -> () { panic!("no") }), Err("no".to_owned()));
        let r = contain(7, || -> () { std::panic::panic_any(Bomb) });
        assert_eq!(r, Err("a non-string payload".to_owned()));
    }

    #[test]
    fn the_thread_knows_whose_code_it_runs() {
        assert!(!inside(9));
        assert_eq!(contain(9, || inside(9) && !inside(8)), Ok(true));
        assert!(!inside(9));
    }
}
