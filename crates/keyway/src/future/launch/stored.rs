//! Where a submitted future lives from submission to its end, type-erased: its storage, and
//! the rules that make owning a value there sound.
//!
//! # Storage
//!
//! A submitted future, with its handle's completer and its runtime (a `Spawned`), lives in
//! storage of its own from submission to its end: a recycled cell of its size's class up to
//! 512 bytes (`task::alloc_recycled`: cells freed on the workers come back to the submitters),
//! an allocation of the allocator's own above. A future is made on the submitting thread and
//! freed on a worker, which the allocator's per-thread caches do not help with: a box of the
//! actor example's future (232 bytes) cost ~390 instructions of `malloc` and `free` per
//! future, its cell ~55 (callgrind, `actor_per_key_tokio`, 1,000 accounts, 20 against 10
//! deposits each, valgrind's fair scheduling so that the workers keep up as on real cores).
//!
//! The storage is chosen by the value's layout alone, so the layout its vtable gives back
//! (`Layout::for_value`) frees it, and a `Stored` owns it as a `Box<dyn Launch>` would:
//!
//! * **L1.** From `Unsent::new` until it is consumed or dropped (as an `Unsent`, a `Launcher` or
//!   a [`Started`]), its storage holds one live `Spawned`, which nothing else owns.
//! * **L2.** `Stored::consume` hands the value to one of the consuming methods of [`Launch`],
//!   which moves it out first thing (before anything that can panic); the storage is then freed
//!   without dropping it, also when the method unwinds.
//! * **L3.** A dropped `Stored` drops its value in place, then frees the storage, also when the
//!   value's drop unwinds (user code: a future's captures).
//! * **L4.** A [`Started`] future is pinned in its storage: it is polled there, never consumed
//!   (so never moved out), and dropped in place by L3.

use std::alloc::Layout;
use std::future::Future;
use std::mem::{size_of, size_of_val, ManuallyDrop};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::task::Context;

use super::super::driver::Release;
use super::super::prefetch::prefetch;
use super::super::runtime::Runtime;
use super::{Launcher, Spawned};
use crate::engine::Registry;
use crate::task::{alloc_recycled, free_recycled, Abandon, Completer, PanicReport};

/// What a stored future can do. The consuming methods take the value by `&mut` (their storage
/// is not a `Box`) and move it out (L2).
pub(super) trait Launch: Send {
    /// Starts the future on the pool (first poll here); `release` is let go once it is done.
    ///
    /// # Safety
    /// L2: the value is moved out; the caller neither uses nor drops it afterwards.
    unsafe fn launch(&mut self, registry: &Arc<Registry>, release: Release);
    /// Runs the future to completion on the calling thread, inside `bound` (the runtime its
    /// pool is bound to) if given, else inside the one it kept.
    ///
    /// # Safety
    /// As for `launch`.
    unsafe fn run_here(&mut self, bound: Option<Runtime>) -> Result<(), PanicReport>;
    /// Drops the future unstarted, telling its handle why.
    ///
    /// # Safety
    /// As for `launch`.
    unsafe fn abandon(&mut self, why: Abandon);
    /// One poll in place, in a driver of the pool of `pool` that polls the futures of a lane
    /// one after another ([`Started`]).
    fn poll_step(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        may_resume: &dyn Fn() -> bool,
        pool: &Registry,
    ) -> Step;
    /// Dropped at its await point (or before its first poll), inside the runtime a poll for
    /// the pool of `pool` enters (`None`: the pool is gone; the runtime it keeps), its handle
    /// told it was cancelled.
    fn cancel(self: Pin<&mut Self>, pool: Option<&Registry>);
}

/// What one poll of a future started in place did.
pub(crate) enum Step {
    /// It waits; `woke_itself`: it is queued again by its own wake (a yield), not by someone
    /// else holding its waker.
    Waits { woke_itself: bool },
    /// It is done (completed, panicked with this report, or cancelled by its handle), its
    /// handle told, the future dropped.
    Done(Option<PanicReport>),
}

/// A future started in place: polled by the driver of the lane it runs in, which goes on to the
/// lane's next future in the same task (no task and no lane job per future).
pub(crate) struct Started(pub(super) Stored);

impl Started {
    /// The future, pinned in its storage.
    #[inline]
    fn pinned(&mut self) -> Pin<&mut dyn Launch> {
        // SAFETY: L1 — the storage holds the live value, ours alone while `self` is borrowed;
        // L4 — a started future is never moved out of it, and dropped in place.
        unsafe { Pin::new_unchecked(&mut *self.0 .0.as_ptr()) }
    }

    /// Polls it for the pool of `pool` (inside the runtime it belongs in: `Runtime::enter_in`);
    /// a self-wake is resumed in place while `may_resume` allows.
    #[inline]
    pub(crate) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        may_resume: &dyn Fn() -> bool,
        pool: &Registry,
    ) -> Step {
        self.pinned().poll_step(cx, may_resume, pool)
    }

    /// Cancels it at its await point (`shutdown_now`, or the pool of `pool` is gone: `None`),
    /// dropping it inside the runtime its polls enter.
    pub(crate) fn cancel(&mut self, pool: Option<&Registry>) {
        self.pinned().cancel(pool)
    }
}

/// A `Spawned` future in storage of its own, type-erased (see the module documentation):
/// owned as a `Box<dyn Launch>` would be, in a recycled cell when it fits one.
pub(super) struct Stored(pub(super) NonNull<dyn Launch>);

// SAFETY: L1 — it owns its value alone, which is `Send` (`Launch`'s bound).
unsafe impl Send for Stored {}

/// A submitted future already in its storage, before it is admitted: the face writes it there
/// first thing, so it is copied once on its way (from the submitter's argument into the
/// storage), not again by each layer of the submit path that moves it; refused, it is read back
/// out. Typed: what it holds is a `Spawned<F>` with no handle yet.
pub(crate) struct Unsent<F: Future>(NonNull<Spawned<F>>);

impl<F> Unsent<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// Stores `fut` with the runtime it keeps (`Runtime::for_pool`), each field written in
    /// place (not into a `Spawned` on the stack and then into the storage).
    #[inline]
    pub(crate) fn new(fut: F, runtime: Runtime) -> Self {
        const { assert!(size_of::<Spawned<F>>() > 0, "a Spawned is never zero-sized") };
        let at = alloc_recycled(Layout::new::<Spawned<F>>()).cast::<Spawned<F>>();
        // SAFETY: `at` is storage of a `Spawned<F>`'s layout, ours alone (S2 of the cells, or
        // the allocator's); each field is written once, with nothing between the writes that
        // can panic, before the value is taken as live (L1).
        unsafe {
            ptr::addr_of_mut!((*at).fut).write(Some(fut));
            ptr::addr_of_mut!((*at).handle).write(None);
            ptr::addr_of_mut!((*at).runtime).write(runtime);
            Unsent(NonNull::new_unchecked(at))
        }
    }

    /// Accepted: the future with its handle's completer (if any), type-erased.
    #[inline]
    pub(crate) fn into_launcher(self, handle: Option<Completer<F::Output>>) -> Launcher {
        let at = ManuallyDrop::new(self).0;
        // SAFETY: L1 — the live value, ours alone; its handle is `None` (`new`), so writing
        // over it drops nothing.
        unsafe { ptr::addr_of_mut!((*at.as_ptr()).handle).write(handle) };
        Launcher(Stored(at))
    }

    /// Refused: the future back, its storage freed.
    #[cold]
    pub(crate) fn into_future(self) -> F {
        let at = ManuallyDrop::new(self).0.as_ptr();
        // SAFETY: L1 — the live value, moved out once; then its storage (from `alloc_recycled`
        // with this layout, in `new`) is freed, holding nothing.
        let Spawned { fut, .. } = unsafe {
            let spawned = ptr::read(at);
            free_recycled(at.cast(), Layout::new::<Spawned<F>>());
            spawned
        };
        match fut {
            Some(fut) => fut,
            None => unreachable!("an unsent future is there until it is sent"),
        }
    }
}

impl<F: Future> Drop for Unsent<F> {
    fn drop(&mut self) {
        let _storage = Storage {
            at: self.0.as_ptr().cast(),
            layout: Layout::new::<Spawned<F>>(),
        };
        // SAFETY: L1, L3 — the live value, dropped once, in place; its storage is freed by
        // `_storage` afterwards, also if this drop unwinds.
        unsafe { ptr::drop_in_place(self.0.as_ptr()) }
    }
}

impl Stored {
    /// Starts loading its value's cache lines at once: a future is made on its submitter's
    /// core and polled on a worker's, and its first poll would otherwise miss on each line in
    /// turn (the handle, the future's state, its captures).
    #[inline]
    pub(super) fn prefetch(&self) {
        // SAFETY: L1 — the value is live while its size is read.
        let len = size_of_val(unsafe { self.0.as_ref() });
        prefetch(self.0.as_ptr().cast::<u8>(), len);
    }

    /// Hands the value to `f`, which moves it out with one consuming method of `Launch`; the
    /// storage is freed afterwards, the value not dropped (L2).
    #[inline]
    pub(super) fn consume<R>(self, f: impl FnOnce(&mut dyn Launch) -> R) -> R {
        let at = ManuallyDrop::new(self).0;
        let _storage = Storage::of(at);
        // SAFETY: L1 — the live value, ours alone (`self` is consumed, and not dropped).
        f(unsafe { &mut *at.as_ptr() })
    }
}

impl Drop for Stored {
    fn drop(&mut self) {
        let _storage = Storage::of(self.0);
        // SAFETY: L1, L3 — the live value, dropped once, in place; its storage is freed by
        // `_storage` afterwards, also if this drop unwinds.
        unsafe { ptr::drop_in_place(self.0.as_ptr()) }
    }
}

/// The storage of a stored value, freed when this goes (L2, L3: the value moved out or
/// dropped by then).
struct Storage {
    at: *mut u8,
    layout: Layout,
}

impl Storage {
    /// The storage of `at`, whose value is still live (its layout is read from it).
    #[inline]
    fn of(at: NonNull<dyn Launch>) -> Self {
        // SAFETY: L1 — the value is live while its layout is read.
        let layout = Layout::for_value(unsafe { at.as_ref() });
        Storage {
            at: at.as_ptr().cast(),
            layout,
        }
    }
}

impl Drop for Storage {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the storage came from `alloc_recycled` with this layout (`Unsent::new`: the
        // layout of the value it holds), and its value was moved out or dropped (L2, L3).
        unsafe { free_recycled(self.at, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::fresh_cells;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops, and panics in its drop if `panics`.
    struct Token {
        drops: Arc<AtomicUsize>,
        panics: bool,
    }

    impl Drop for Token {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
            if self.panics {
                panic!("a future's capture panicked in its drop");
            }
        }
    }

    /// A future holding `token` and `N` bytes, waiting once before it completes.
    fn future<const N: usize>(token: Token) -> impl Future<Output = ()> + Send + 'static {
        let pad = [7u8; N];
        async move {
            crate::yield_now().await;
            std::hint::black_box((&token, pad));
        }
    }

    fn address(launcher: &Launcher) -> *const u8 {
        launcher.0 .0.as_ptr().cast::<u8>().cast_const()
    }

    fn layout(launcher: &Launcher) -> Layout {
        // SAFETY: L1 — a live value, borrowed while `launcher` is.
        Layout::for_value(unsafe { launcher.0 .0.as_ref() })
    }

    /// The actor example's future (232 bytes with its handle and runtime) and every smaller one
    /// go to a recycled cell, whose class `alloc_recycled` picks from the size; a larger one
    /// than the largest class to the allocator. Each way, the value is dropped once.
    #[test]
    fn a_future_goes_to_a_recycled_cell_up_to_512_bytes() {
        let drops = Arc::new(AtomicUsize::new(0));
        let token = || Token {
            drops: drops.clone(),
            panics: false,
        };
        let small = Launcher::new(future::<8>(token()), None, Runtime::default());
        let example = Launcher::new(future::<200>(token()), None, Runtime::default());
        let large = Launcher::new(future::<1_000>(token()), None, Runtime::default());
        let sizes = [&small, &example, &large].map(|l| layout(l).size());
        assert!(
            sizes[0] < sizes[1] && sizes[1] <= 512 && sizes[2] > 512,
            "{sizes:?}"
        );
        let fresh = fresh_cells();
        drop((small, example, large));
        let (small, example) = (
            Launcher::new(future::<8>(token()), None, Runtime::default()),
            Launcher::new(future::<200>(token()), None, Runtime::default()),
        );
        assert_eq!(fresh_cells(), fresh, "both cells came back");
        drop((small, example));
        assert_eq!(drops.load(Ordering::SeqCst), 5);
    }

    /// A poll reads the handle and the runtime before the future: they come first, in the
    /// future's first cache line (a handle past the end of a 232-byte future was a line of its
    /// own to miss on).
    #[test]
    fn a_stored_futures_handle_and_runtime_come_first() {
        type Example = Spawned<std::future::Ready<[u8; 200]>>;
        assert_eq!(std::mem::offset_of!(Example, handle), 0);
        assert!(std::mem::offset_of!(Example, runtime) < 64);
        assert!(std::mem::offset_of!(Example, fut) < 64);
    }

    /// A future whose drop panics (a capture's `Drop`) still gives its cell back, however it
    /// goes: dropped unstarted (the panic goes on to the dropper: a lane entry contains it),
    /// abandoned (contained here), or started and cancelled at its await point (contained).
    /// The next future of its class then takes the same cell.
    #[test]
    fn a_future_whose_drop_panics_gives_its_cell_back() {
        let drops = Arc::new(AtomicUsize::new(0));
        let make = || {
            Launcher::new(
                future::<200>(Token {
                    drops: drops.clone(),
                    panics: true,
                }),
                None,
                Runtime::default(),
            )
        };
        let first = make();
        let cell = address(&first);
        let fresh = fresh_cells();
        assert!(catch_unwind(AssertUnwindSafe(|| drop(first))).is_err());
        let second = make();
        assert_eq!(address(&second), cell, "dropped: the cell went back");
        second.abandon(Abandon::Coalesced);
        let third = make();
        assert_eq!(address(&third), cell, "abandoned: the cell went back");
        let mut started = third.start();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let pool = crate::Pool::builder().core_threads(1).build().unwrap();
        assert!(matches!(
            started.poll(&mut cx, &|| false, pool.registry()),
            Step::Waits { .. }
        ));
        started.cancel(Some(pool.registry()));
        drop(started);
        pool.shutdown();
        let fourth = make();
        assert_eq!(
            address(&fourth),
            cell,
            "started, cancelled: the cell went back"
        );
        assert_eq!(fresh_cells(), fresh, "no cell allocated anew");
        assert!(catch_unwind(AssertUnwindSafe(|| drop(fourth))).is_err());
        assert_eq!(drops.load(Ordering::SeqCst), 4, "each future dropped once");
    }
}
