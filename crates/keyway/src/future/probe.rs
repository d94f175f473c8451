//! Polling a future while catching its self-wakes (`wake_by_ref` on the poll's own waker, as a
//! yield does), so that a future that woke itself can be resumed at once, in place, instead of
//! going through its task's schedule function and a queue.
//!
//! [`poll_resuming`] polls a future with a *probe* waker. A wake through the probe during the
//! poll is only noted; when the poll returns `Pending`, the caller's `may_resume` decides: poll
//! again at once (the worker's continuation streak allows it and the pool is not stopping), or
//! hand the wake to the real waker, which queues the task as any wake does. So a self-wake is
//! never lost, and the future is polled again only after a wake: it is resumed, never spun. A
//! wake noted during a poll that returns `Ready` is dropped: there is nothing left to wake.
//!
//! The probe is a waker on the poll's stack frame. It can be reached only through the `&Waker`
//! of the poll's `Context` (the borrow cannot outlive the poll): `clone` hands out a clone of the
//! real waker itself (its data and vtable: no box, no allocation), so nothing that outlives the
//! poll ever refers to the probe. A future that keeps its waker (a real wait) thus keeps the real
//! one, and a wake through it queues the task.

use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

struct Probe<'a> {
    inner: &'a Waker,
    /// Atomic because a `&Waker` is `Sync`: the poll may lend it to a scoped thread.
    woken: AtomicBool,
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
    let real = unsafe { probe(data) }.inner.clone();
    // The clone is the real waker itself (its data and vtable), owned by the caller from here.
    let raw = RawWaker::new(real.data(), real.vtable());
    std::mem::forget(real);
    raw
}

unsafe fn wake(data: *const ()) {
    // Only a `Waker` owning the probe could be woken by value, and only `poll_once` owns one (it
    // never wakes it); handled as `wake_by_ref` all the same.
    // SAFETY: as `wake_by_ref`.
    unsafe { wake_by_ref(data) }
}

unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: a probe waker is only used during its poll (module doc).
    unsafe { probe(data) }.woken.store(true, Ordering::Relaxed);
}

unsafe fn drop_probe(_: *const ()) {}

/// Runs `poll` once with a context whose waker is a probe over `cx`'s; returns its result and
/// whether the future woke itself through the probe (a wake the caller must act on).
#[inline]
fn poll_once<R>(cx: &Context<'_>, poll: impl FnOnce(&mut Context<'_>) -> R) -> (R, bool) {
    let probe = Probe {
        inner: cx.waker(),
        woken: AtomicBool::new(false),
    };
    let raw = RawWaker::new(&probe as *const Probe<'_> as *const (), &VTABLE);
    // SAFETY: the vtable's functions uphold `RawWaker`'s contract for as long as the waker is
    // used: the waker and every `&Waker` to it live only within this call, while `probe` does
    // (the `Context` borrows it), and `clone` hands out the real waker.
    let waker = unsafe { Waker::from_raw(raw) };
    let out = poll(&mut Context::from_waker(&waker));
    drop(waker);
    (out, probe.woken.load(Ordering::Relaxed))
}

/// Polls a future (`poll`) until it is ready or waits without having woken itself; a future that
/// woke itself during its poll is polled again at once while `may_resume` allows it, and else
/// its wake goes to `cx`'s waker (the task is queued again). Returns the last poll's result and,
/// when `Pending`, whether the future is queued again by its own wake (true) or really waits
/// (false: someone else holds its waker).
#[inline]
pub(crate) fn poll_resuming<T>(
    cx: &mut Context<'_>,
    mut may_resume: impl FnMut() -> bool,
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>,
) -> (Poll<T>, bool) {
    loop {
        match poll_once(cx, &mut poll) {
            (Poll::Ready(value), _) => return (Poll::Ready(value), false),
            (Poll::Pending, false) => return (Poll::Pending, false),
            (Poll::Pending, true) if may_resume() => {}
            (Poll::Pending, true) => {
                cx.waker().wake_by_ref();
                return (Poll::Pending, true);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let real = Waker::from(count.clone());
        (count, real)
    }

    /// A future that wakes itself and is pending `yields` times, then is ready.
    fn yielding(yields: usize) -> impl FnMut(&mut Context<'_>) -> Poll<usize> {
        let mut polls = 0;
        move |cx| {
            polls += 1;
            if polls > yields {
                Poll::Ready(polls)
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    #[test]
    fn a_self_wake_is_resumed_in_place_while_allowed() {
        let (count, real) = counting();
        let mut cx = Context::from_waker(&real);
        let (out, _) = poll_resuming(&mut cx, || true, yielding(5));
        assert_eq!(
            out,
            Poll::Ready(6),
            "polled again after each of its 5 wakes"
        );
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            0,
            "no wake reached the task"
        );
    }

    #[test]
    fn a_self_wake_not_resumed_goes_to_the_real_waker() {
        let (count, real) = counting();
        let mut cx = Context::from_waker(&real);
        let mut allowed = 2;
        let mut fut = yielding(5);
        let resume = || {
            allowed -= 1;
            allowed >= 0
        };
        let (out, queued) = poll_resuming(&mut cx, resume, &mut fut);
        assert_eq!((out, queued), (Poll::Pending, true));
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "the third wake is queued"
        );
        let (out, _) = poll_resuming(&mut cx, || false, &mut fut);
        assert_eq!(out, Poll::Pending);
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_real_wait_keeps_the_real_waker_and_is_not_resumed() {
        let (count, real) = counting();
        let mut cx = Context::from_waker(&real);
        let mut kept = None;
        let (out, queued) = poll_resuming(
            &mut cx,
            || panic!("a real wait is not resumed"),
            |cx| {
                kept = Some(cx.waker().clone());
                Poll::<()>::Pending
            },
        );
        assert_eq!((out, queued), (Poll::Pending, false));
        // The clone outlives the poll: it is the real waker, and a wake through it reaches it.
        let kept = kept.unwrap();
        assert!(
            kept.will_wake(&real),
            "the clone is the real waker itself (no box around it, no allocation)"
        );
        let again = kept.clone();
        assert_eq!(
            Arc::strong_count(&count),
            4,
            "ours, the real waker's, two clones'"
        );
        kept.wake();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        again.wake_by_ref();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        drop(again);
        assert_eq!(Arc::strong_count(&count), 2, "each clone dropped once");
    }

    #[test]
    fn a_wake_from_a_scoped_thread_during_the_poll_is_noted() {
        let (count, real) = counting();
        let mut cx = Context::from_waker(&real);
        let mut first = true;
        let (out, _) = poll_resuming(
            &mut cx,
            || true,
            |cx| {
                if std::mem::replace(&mut first, false) {
                    let waker = cx.waker();
                    std::thread::scope(|s| {
                        s.spawn(|| waker.wake_by_ref());
                    });
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            },
        );
        assert_eq!(out, Poll::Ready(()));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_wake_before_ready_is_dropped() {
        let (count, real) = counting();
        let mut cx = Context::from_waker(&real);
        let (out, _) = poll_resuming(
            &mut cx,
            || panic!("nothing to resume"),
            |cx| {
                cx.waker().wake_by_ref();
                Poll::Ready(1)
            },
        );
        assert_eq!(out, Poll::Ready(1));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }
}
