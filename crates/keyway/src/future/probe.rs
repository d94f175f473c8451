//! Polling a future while noting whether it woke itself (`wake_by_ref` on the poll's own waker,
//! as a yield does). A future that returns `Pending` after waking itself is already queued
//! again, so it needs no entry in the pool's set of waiting futures (`live`): `shutdown_now`
//! drops its queued poll, or its next poll sees the pool stopping. Only a future that really
//! waits (for a timer, I/O, another thread) is registered.
//!
//! The probe is a waker on the poll's stack frame. It can be reached only through the `&Waker`
//! of the poll's `Context` (the borrow cannot outlive the poll): `wake_by_ref` notes the wake
//! and wakes the real waker; `clone` hands out a clone of the real waker (boxed), so nothing
//! that outlives the poll ever refers to the probe.

use std::cell::Cell;
use std::task::{Context, RawWaker, RawWakerVTable, Waker};

struct Probe<'a> {
    inner: &'a Waker,
    woken: Cell<bool>,
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_probe);

/// # Safety
/// `data` is a `&Probe` that outlives every use of the probe waker (see the module doc).
unsafe fn probe<'a>(data: *const ()) -> &'a Probe<'a> {
    // SAFETY: the caller's contract.
    unsafe { &*(data as *const Probe<'a>) }
}

unsafe fn clone(data: *const ()) -> RawWaker {
    // SAFETY: a probe waker is only used during its poll (module doc).
    boxed(unsafe { probe(data) }.inner.clone())
}

unsafe fn wake(data: *const ()) {
    // Only a `Waker` owning the probe could be woken by value, and only `poll_noting_self_wake`
    // owns one (it never wakes it); handled as `wake_by_ref` all the same.
    // SAFETY: as `wake_by_ref`.
    unsafe { wake_by_ref(data) }
}

unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: a probe waker is only used during its poll (module doc).
    let p = unsafe { probe(data) };
    p.woken.set(true);
    p.inner.wake_by_ref();
}

unsafe fn drop_probe(_: *const ()) {}

/// A clone of the probe: the real waker, boxed (`Waker::data` and `Waker::vtable`, which would
/// hand out the real waker as is, need Rust 1.83, above this crate's MSRV). Only a future that
/// keeps its waker (a real wait) clones it.
static BOXED: RawWakerVTable =
    RawWakerVTable::new(boxed_clone, boxed_wake, boxed_wake_by_ref, boxed_drop);

fn boxed(waker: Waker) -> RawWaker {
    RawWaker::new(Box::into_raw(Box::new(waker)) as *const (), &BOXED)
}

unsafe fn boxed_clone(data: *const ()) -> RawWaker {
    // SAFETY: `data` is the `Box<Waker>` of a boxed raw waker, alive until its `boxed_drop`.
    boxed(unsafe { &*(data as *const Waker) }.clone())
}

unsafe fn boxed_wake(data: *const ()) {
    // SAFETY: as `boxed_clone`; waking by value consumes the raw waker (and its box).
    unsafe { Box::from_raw(data as *mut Waker) }.wake();
}

unsafe fn boxed_wake_by_ref(data: *const ()) {
    // SAFETY: as `boxed_clone`.
    unsafe { &*(data as *const Waker) }.wake_by_ref();
}

unsafe fn boxed_drop(data: *const ()) {
    // SAFETY: as `boxed_wake`: the raw waker is dropped, and its box with it.
    drop(unsafe { Box::from_raw(data as *mut Waker) });
}

/// Runs `f` (a poll) with a context whose waker notes a wake through it; returns `f`'s result
/// and whether the future woke itself that way during the poll.
pub(crate) fn poll_noting_self_wake<R>(
    cx: &mut Context<'_>,
    f: impl FnOnce(&mut Context<'_>) -> R,
) -> (R, bool) {
    let probe = Probe {
        inner: cx.waker(),
        woken: Cell::new(false),
    };
    let raw = RawWaker::new(&probe as *const Probe<'_> as *const (), &VTABLE);
    // SAFETY: the vtable's functions uphold `RawWaker`'s contract for as long as the waker is
    // used: the waker and every `&Waker` to it live only within this call, while `probe` does
    // (the `Context` borrows it), and `clone` hands out the real waker.
    let waker = unsafe { Waker::from_raw(raw) };
    let mut inner = Context::from_waker(&waker);
    let out = f(&mut inner);
    let woken = probe.woken.get();
    drop(waker);
    (out, woken)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn notes_a_self_wake_and_hands_out_the_real_waker() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let real = Waker::from(count.clone());
        let mut cx = Context::from_waker(&real);
        let ((), woken) = poll_noting_self_wake(&mut cx, |_| ());
        assert!(!woken);
        let ((), woken) = poll_noting_self_wake(&mut cx, |cx| cx.waker().wake_by_ref());
        assert!(woken);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // A clone outlives the poll: it is the real waker, and a wake through it is not noted.
        let (kept, woken) = poll_noting_self_wake(&mut cx, |cx| cx.waker().clone());
        assert!(!woken);
        let again = kept.clone();
        assert_eq!(
            Arc::strong_count(&count),
            4,
            "ours, the real waker's, two clones'"
        );
        kept.wake();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        again.wake_by_ref();
        assert_eq!(count.0.load(Ordering::SeqCst), 3);
        drop(again);
        assert_eq!(Arc::strong_count(&count), 2, "each clone dropped once");
    }
}
