//! What a pool thread holds outside any queue, in one per-thread record, so that a
//! `shutdown_now` called on that very thread (from inside a task or a future's first poll) can
//! see it (step 4 of the "Shutdown" section of `README.md`):
//!
//! * **the chunk it runs.** A lane runner takes a chunk of entries from its lane and runs them
//!   one by one. While one of them runs, the others are in no queue: a `shutdown_now` called from
//!   that very task would never see them. So the runner registers its chunk ([`hold`]) for the
//!   time each entry runs, and `shutdown_now`, on the same thread, puts the registered chunk
//!   back at the front of its lane ([`put_back_held`]; lane rule 5) before it counts itself
//!   inside, so no other caller drains that lane before the chunk is back.
//! * **the futures it is launching.** In a future's first poll the thread holds two admissions:
//!   the launched entry's (counted finished by its launcher once the first poll returns) and the
//!   future's own. A `shutdown_now` called inside it allows for the first ([`launching`],
//!   [`launching_here`]), or it would wait for itself.

use std::cell::Cell;
use std::ptr::NonNull;

use super::worker;

/// A chunk that can go back to the front of its lane, in order.
pub(crate) trait Held {
    /// Puts every entry not yet started back at the front of the lane, and returns how many of
    /// the chunk's entries already ran without being counted finished yet (then counted here).
    fn put_back(&self) -> usize;
}

/// The record: one per thread, const-initialised, no destructor.
struct Holding {
    /// The chunk of the lane runner on this thread, while one of its entries runs.
    chunk: Cell<Option<NonNull<dyn Held>>>,
    /// How many futures this thread is in the first poll of.
    launching: Cell<u64>,
}

thread_local! {
    static HOLDING: Holding = const {
        Holding {
            chunk: Cell::new(None),
            launching: Cell::new(0),
        }
    };
}

/// Registers `chunk` until the returned guard is dropped.
pub(crate) fn hold(chunk: &(dyn Held + 'static)) -> HeldGuard {
    let prev = HOLDING.with(|h| h.chunk.replace(Some(NonNull::from(chunk))));
    HeldGuard { prev }
}

/// Restores the previous registration (none, unless runners nest) when dropped.
pub(crate) struct HeldGuard {
    prev: Option<NonNull<dyn Held>>,
}

impl Drop for HeldGuard {
    fn drop(&mut self) {
        let _ = HOLDING.try_with(|h| h.chunk.set(self.prev));
    }
}

/// Puts the chunk of the runner on this thread (if any) back into its lane.
pub(crate) fn put_back_held() {
    if let Some(chunk) = HOLDING.try_with(|h| h.chunk.get()).ok().flatten() {
        // SAFETY: `chunk` only ever holds a pointer that `hold` took from a live reference, and
        // the guard `hold` returned clears it again before that reference's referent can go away
        // (the runner keeps the chunk on its stack frame and drops the guard first, also when
        // unwinding). The record is thread-local, so the referent lives on this very thread's
        // stack, below the current call. `put_back` only takes a `RefCell` borrow of the chunk,
        // which the runner never holds while an entry runs, so no `&mut` aliases it.
        let ran = unsafe { chunk.as_ref() }.put_back();
        // The runner counts finished tasks per chunk; `shutdown_now` waits for the count, so
        // those of this chunk that already ran are counted now (the runner will not again).
        if ran > 0 {
            worker::with_current(|cx| {
                if let Some(cx) = cx {
                    cx.registry.count_finished(ran, Some(cx));
                }
            });
        }
    }
}

/// Runs `first_poll`, the first poll of a future whose task was just extended (`extend_task`)
/// while its launcher still counts the entry running. A `shutdown_now` called from inside it
/// (from the future, or from a future it resumed in place) thus knows that this thread holds one
/// admission more than the job it runs, and does not wait for it.
pub(crate) fn launching<R>(first_poll: impl FnOnce() -> R) -> R {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            let _ = HOLDING.try_with(|h| h.launching.set(h.launching.get() - 1));
        }
    }
    HOLDING.with(|h| h.launching.set(h.launching.get() + 1));
    let _leave = Leave;
    first_poll()
}

/// Admissions this thread holds beyond the one of the job it runs (see [`launching`]).
pub(crate) fn launching_here() -> u64 {
    HOLDING.try_with(|h| h.launching.get()).unwrap_or(0)
}
