//! The entries a lane runner holds outside its lane's queue, made visible to `shutdown_now` when
//! it is called from inside one of them (rule 5 of `README.md`).
//!
//! A runner takes a chunk of entries from its lane and runs them one by one. While one of them
//! runs, the others are in no queue: a `shutdown_now` called from that very task would never see
//! them. So the runner registers its chunk in a thread-local for the time each entry runs, and
//! the drain (on the same thread) first puts the registered chunk back at the front of its lane.

use std::cell::Cell;
use std::ptr::NonNull;

use crate::pool::worker;

/// A chunk that can go back to the front of its lane, in order.
pub(super) trait Held {
    /// Puts every entry not yet started back at the front of the lane, and returns how many of
    /// the chunk's entries already ran without being counted finished yet (then counted here).
    fn put_back(&self) -> usize;
}

thread_local! {
    /// The chunk of the lane runner on this thread, while one of its entries runs.
    static HELD: Cell<Option<NonNull<dyn Held>>> = const { Cell::new(None) };
}

/// Registers `chunk` until the returned guard is dropped.
pub(super) fn hold(chunk: &(dyn Held + 'static)) -> HeldGuard {
    let prev = HELD.with(|h| h.replace(Some(NonNull::from(chunk))));
    HeldGuard { prev }
}

/// Restores the previous registration (none, unless runners nest) when dropped.
pub(super) struct HeldGuard {
    prev: Option<NonNull<dyn Held>>,
}

impl Drop for HeldGuard {
    fn drop(&mut self) {
        let _ = HELD.try_with(|h| h.set(self.prev));
    }
}

/// Puts the chunk of the runner on this thread (if any) back into its lane.
pub(super) fn put_back_held() {
    if let Some(chunk) = HELD.try_with(|h| h.get()).ok().flatten() {
        // SAFETY: `HELD` only ever holds a pointer that `hold` took from a live reference, and the
        // guard `hold` returned clears it again before that reference's referent can go away
        // (the runner keeps the chunk on its stack frame and drops the guard first, also when
        // unwinding). `HELD` is thread-local, so the referent lives on this very thread's stack,
        // below the current call. `put_back` only takes a `RefCell` borrow of the chunk, which
        // the runner never holds while an entry runs, so no `&mut` aliases it.
        let ran = unsafe { chunk.as_ref() }.put_back();
        // The runner counts finished tasks per chunk; `shutdown_now` waits for the count, so
        // those of this chunk that already ran are counted now (the runner will not again).
        if ran > 0 {
            worker::with_current(|cx| {
                if let Some(cx) = cx {
                    cx.tasks_done(ran);
                }
            });
        }
    }
}
