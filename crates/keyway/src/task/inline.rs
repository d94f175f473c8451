//! `InlineBox`: one value of a type known only to its vtable, kept in place when it is small
//! and behind one box otherwise. The pool's [`Task`](super::Task) and the scheduler's waiting
//! job are both this store, each with a vtable of its own operations.
//!
//! Why inline: profiling the lane hot path showed `malloc`/`free` at ~20% of all cycles (a task
//! is allocated by the producer and freed by a worker, glibc's worst case), and on the schedule
//! path a box per task cost ~190 instructions in `malloc` and as many in `free`. Most closures
//! capture a few words, so up to [`WORDS`] words are kept in place and only larger values go to
//! the heap: to a recycled cell up to 64 bytes (`spill.rs`: a value made on one thread and
//! freed on another defeats the allocator's per-thread caches), to a box beyond.
//!
//! A user of the store supplies a vtable type `V` (a struct of plain `fn` pointers taking a
//! [`LiveValue`] or [`LiveValueRef`]), implements [`VTable`] (how to drop) and [`VTableFor<T>`] (the
//! vtable's instance for each stored type `T`), and calls [`InlineBox::new`] and
//! [`InlineBox::consume`]. Its vtable functions get the value back with [`LiveValue::take`],
//! [`LiveValue::drop_value`] or [`LiveValueRef::get`], the only `unsafe` they need.
//!
//! # Rules
//!
//! Every `// SAFETY:` comment here and in the vtables built on this store cites these:
//!
//! 1. **Fit, cell or box, by type.** A value of type `T` is kept in `data` itself when
//!    `fits::<T, N>()` (its size is at most the store's `N` words, [`Words`], and its alignment
//!    at most a word's); otherwise in a recycled cell (`spill.rs`, a pointer in `data`) when
//!    `spill::fits::<T>()` (up to 64 bytes), and as a `Box<T>` otherwise. The choice depends on
//!    `T` and `N` alone, so `InlineBox::new` (which stores) and `LiveValue`'s accessors (which
//!    read back) agree on the layout; it is a constant and compiles away.
//! 2. **One type per vtable.** `InlineBox::new::<T>` stores a `T` together with
//!    `<V as VTableFor<T>>::VTABLE`, and neither changes afterwards. A function of that vtable
//!    reads its slot as a `T` and as nothing else; [`VTable::drop_value`] is given the slot
//!    of the box whose vtable it belongs to.
//! 3. **Live until consumed, consumed once.** From `new` until it is consumed, `data` holds
//!    exactly one live value. It is consumed exactly once: either by `consume`, which hands
//!    its one [`LiveValue`] to one vtable function (the `InlineBox` is never dropped afterwards, and
//!    `LiveValue` is neither `Copy` nor `Clone`; its accessors take it by value), or by the
//!    `InlineBox`'s drop. A [`LiveValueRef`] only borrows the value of a live box.
//! 4. **Send only.** Only `Send` values are stored (`new`'s bound), so an `InlineBox` may move
//!    between threads. It is not `Sync` (the value need not be).

use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};

use super::spill;

/// Words of a value kept in place by default (a store may choose fewer: `N`).
pub(crate) const WORDS: usize = 4;

/// The in-place storage of `N` words.
pub(crate) type Words<const N: usize = WORDS> = [usize; N];

/// True if a `T` is kept in place in `N` words (rule 1).
pub(crate) const fn fits<T, const N: usize>() -> bool {
    size_of::<T>() <= size_of::<Words<N>>() && align_of::<T>() <= align_of::<usize>()
}

/// What every vtable of an [`InlineBox`] of `N` words can do: drop a value it was made for.
pub(crate) trait VTable<const N: usize = WORDS>: Sync + 'static {
    /// Drops the value in `slot`, which holds the type this vtable instance was made for.
    fn drop_value(&self, slot: LiveValue<'_, N>);
}

/// The instance of the vtable `Self` for stored values of type `T` (rule 2).
pub(crate) trait VTableFor<T, const N: usize = WORDS>: VTable<N> {
    /// The vtable of every `InlineBox` holding a `T`.
    const VTABLE: &'static Self;
}

/// One value of a type known to `vtable`, in place or boxed (see the module documentation),
/// with `N` words of place.
pub(crate) struct InlineBox<V: VTable<N>, const N: usize = WORDS> {
    vtable: &'static V,
    data: MaybeUninit<Words<N>>,
    /// Not `Sync` (the value need not be), and `Send` only through the impl below.
    _not_sync: PhantomData<*mut ()>,
}

// SAFETY: rule 4 — only `Send` values are stored; the vtable is `Sync` (`VTable`'s bound).
unsafe impl<V: VTable<N>, const N: usize> Send for InlineBox<V, N> {}

impl<V: VTable<N>, const N: usize> InlineBox<V, N> {
    /// Stores `value`: in place if it fits, boxed otherwise.
    #[inline]
    pub(crate) fn new<T: Send + 'static>(value: T) -> Self
    where
        V: VTableFor<T, N>,
    {
        let mut data = MaybeUninit::<Words<N>>::uninit();
        if fits::<T, N>() {
            // SAFETY: rule 1 — a `T` fits and is aligned for `Words` (just checked); `data` is
            // uninitialised, so nothing is overwritten.
            unsafe { data.as_mut_ptr().cast::<T>().write(value) };
        } else if spill::fits::<T>() {
            let cell = spill::alloc_cell::<T>();
            // SAFETY: rule 1 — the cell is this value's (S2), sized and aligned for a `T`; a
            // pointer fits and is aligned for `Words`.
            unsafe {
                cell.write(value);
                data.as_mut_ptr().cast::<*mut T>().write(cell);
            }
        } else {
            // SAFETY: rule 1 — a `Box` is one pointer, which fits and is aligned for `Words`;
            // `data` is uninitialised, so nothing is overwritten.
            unsafe { data.as_mut_ptr().cast::<Box<T>>().write(Box::new(value)) };
        }
        InlineBox {
            vtable: <V as VTableFor<T, N>>::VTABLE,
            data,
            _not_sync: PhantomData,
        }
    }

    /// The vtable of the stored value.
    #[inline]
    pub(crate) fn vtable(&self) -> &'static V {
        self.vtable
    }

    /// Borrows the stored value, for a vtable function that only looks at it.
    #[inline]
    pub(crate) fn slot_ref(&self) -> LiveValueRef<'_, N> {
        LiveValueRef {
            data: self.data.as_ptr(),
            _live: PhantomData,
        }
    }

    /// Consumes the store: `f` gets its vtable and the one [`LiveValue`] of its value, to pass to
    /// one function of that vtable (rules 2, 3). The store is not dropped afterwards, even if
    /// `f` unwinds.
    #[inline]
    pub(crate) fn consume<R>(self, f: impl FnOnce(&'static V, LiveValue<'_, N>) -> R) -> R {
        let mut this = ManuallyDrop::new(self);
        let vtable = this.vtable;
        f(
            vtable,
            LiveValue {
                data: this.data.as_mut_ptr(),
                _live: PhantomData,
            },
        )
    }
}

impl<V: VTable<N>, const N: usize> Drop for InlineBox<V, N> {
    fn drop(&mut self) {
        let slot = LiveValue {
            data: self.data.as_mut_ptr(),
            _live: PhantomData,
        };
        // Rule 3: not consumed (`consume` bypasses this drop), so the value is live; rule 2:
        // the slot goes to its own vtable.
        self.vtable.drop_value(slot);
    }
}

/// The live value of a consumed [`InlineBox`], owned: it must be taken or dropped by the one
/// vtable function it is given to (rule 3).
pub(crate) struct LiveValue<'a, const N: usize = WORDS> {
    data: *mut Words<N>,
    _live: PhantomData<&'a mut Words<N>>,
}

impl<const N: usize> LiveValue<'_, N> {
    /// Moves the value out (and frees its cell or box, if it had one).
    ///
    /// # Safety
    /// The slot holds a live `T` (rule 2: called from a function of `VTableFor<T>::VTABLE`).
    #[inline]
    pub(crate) unsafe fn take<T>(self) -> T {
        if fits::<T, N>() {
            // SAFETY: rules 1, 2 — a live `T` in place, read once (rule 3: `self` is consumed).
            unsafe { self.data.cast::<T>().read() }
        } else if spill::fits::<T>() {
            // SAFETY: rules 1, 2 — a live `T` in its cell, read once (rule 3), then the cell,
            // holding nothing, goes back (S2).
            unsafe {
                let cell = self.data.cast::<*mut T>().read();
                let value = cell.read();
                spill::free_cell(cell);
                value
            }
        } else {
            // SAFETY: rules 1, 2 — a live `Box<T>`, read once (rule 3: `self` is consumed).
            *unsafe { self.data.cast::<Box<T>>().read() }
        }
    }

    /// Drops the value in place (and frees its cell or box, if it had one).
    ///
    /// # Safety
    /// As for [`take`](LiveValue::take).
    #[inline]
    pub(crate) unsafe fn drop_value<T>(self) {
        if fits::<T, N>() {
            // SAFETY: rules 1, 2 — a live `T` in place, dropped once (rule 3).
            unsafe { self.data.cast::<T>().drop_in_place() }
        } else if spill::fits::<T>() {
            // The value is moved out of its cell first, so the cell goes back even if its
            // drop unwinds.
            // SAFETY: as in `take`.
            drop(unsafe { self.take::<T>() })
        } else {
            // SAFETY: rules 1, 2 — a live `Box<T>`, dropped once (rule 3).
            unsafe { self.data.cast::<Box<T>>().drop_in_place() }
        }
    }
}

/// The live value of an [`InlineBox`], borrowed.
pub(crate) struct LiveValueRef<'a, const N: usize = WORDS> {
    data: *const Words<N>,
    _live: PhantomData<&'a Words<N>>,
}

impl<'a, const N: usize> LiveValueRef<'a, N> {
    /// The value.
    ///
    /// # Safety
    /// The slot holds a live `T` (rule 2: called from a function of `VTableFor<T>::VTABLE`).
    #[inline]
    pub(crate) unsafe fn get<T>(self) -> &'a T {
        if fits::<T, N>() {
            // SAFETY: rules 1, 2, 3 — a live `T` in place, borrowed for as long as the box.
            unsafe { &*self.data.cast::<T>() }
        } else if spill::fits::<T>() {
            // SAFETY: rules 1, 2, 3 — a live `T` in its cell, borrowed for as long as the box.
            unsafe { &**self.data.cast::<*mut T>() }
        } else {
            // SAFETY: rules 1, 2, 3 — a live `Box<T>`, borrowed for as long as the box.
            unsafe { &*self.data.cast::<Box<T>>() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A vtable with one consuming and one borrowing operation.
    struct Ops {
        len: fn(LiveValueRef<'_>) -> usize,
        sum: fn(LiveValue<'_>) -> usize,
        drop: fn(LiveValue<'_>),
    }

    impl VTable for Ops {
        fn drop_value(&self, slot: LiveValue<'_>) {
            (self.drop)(slot)
        }
    }

    impl<const N: usize> VTableFor<Counted<N>> for Ops {
        const VTABLE: &'static Ops = &Ops {
            // SAFETY: rule 2 — this is `VTableFor<Counted<N>>::VTABLE`.
            len: |slot| unsafe { slot.get::<Counted<N>>() }.1.len(),
            // SAFETY: as for `len`.
            sum: |slot| unsafe { slot.take::<Counted<N>>() }.1.iter().sum(),
            // SAFETY: as for `len`.
            drop: |slot| unsafe { slot.drop_value::<Counted<N>>() },
        };
    }

    /// Counts its drops; `1 + N` words.
    struct Counted<const N: usize>(Arc<AtomicUsize>, [usize; N]);

    impl<const N: usize> Drop for Counted<N> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn check<const N: usize>(inline: bool) {
        assert_eq!(fits::<Counted<N>, WORDS>(), inline);
        let drops = Arc::new(AtomicUsize::new(0));
        let make = || InlineBox::<Ops>::new(Counted(drops.clone(), [2; N]));
        let b = make();
        assert_eq!((b.vtable().len)(b.slot_ref()), N);
        assert_eq!(b.consume(|v, slot| (v.sum)(slot)), 2 * N);
        drop(make());
        assert_eq!(drops.load(Ordering::SeqCst), 2, "each value dropped once");
        assert_eq!(Arc::strong_count(&drops), 1, "a value leaked");
    }

    #[test]
    fn inline_and_boxed_values_are_read_consumed_and_dropped_once() {
        check::<1>(true);
        check::<3>(true); // exactly fills the storage
        check::<4>(false); // 40 bytes: a recycled cell
        check::<8>(false); // 72 bytes: a box
        check::<40>(false);
        assert_eq!(
            size_of::<InlineBox<Ops>>(),
            (WORDS + 1) * size_of::<usize>()
        );
    }

    /// 40 bytes (a recycled cell) whose drop panics after counting, as a closure's capture may.
    struct PanicsInDrop(Arc<AtomicUsize>, [usize; 4]);

    impl Drop for PanicsInDrop {
        fn drop(&mut self) {
            self.0.fetch_add(self.1[0], Ordering::SeqCst);
            std::panic::resume_unwind(Box::new("a capture's drop panicked"));
        }
    }

    /// A vtable that only drops.
    struct Drops(fn(LiveValue<'_>));

    impl VTable for Drops {
        fn drop_value(&self, slot: LiveValue<'_>) {
            (self.0)(slot)
        }
    }

    impl VTableFor<PanicsInDrop> for Drops {
        // SAFETY: rule 2 — this is `VTableFor<PanicsInDrop>::VTABLE`.
        const VTABLE: &'static Drops = &Drops(|slot| unsafe { slot.drop_value::<PanicsInDrop>() });
    }

    /// A value in a recycled cell whose drop panics (a closure's capture) gives its cell back
    /// all the same, dropped with its box or consumed and dropped by its vtable: it is moved
    /// out of the cell and the cell freed before the value's drop runs, and the panic goes on to
    /// the dropper (a lane entry's drop contains it). The next value of its class then takes
    /// the same cell, and no cell is allocated anew.
    #[test]
    fn a_value_whose_drop_panics_gives_its_cell_back() {
        let drops = Arc::new(AtomicUsize::new(0));
        let make = || InlineBox::<Drops>::new(PanicsInDrop(drops.clone(), [1; 4]));
        // SAFETY: the box's value is in a cell (40 bytes, more than `WORDS`), and `data` holds
        // its pointer (rule 1).
        let cell = |b: &InlineBox<Drops>| unsafe { b.data.as_ptr().cast::<*const u8>().read() };
        let first = make();
        let at = cell(&first);
        let fresh = spill::fresh_cells();
        assert!(catch_unwind(AssertUnwindSafe(|| drop(first))).is_err());
        let second = make();
        assert_eq!(
            cell(&second),
            at,
            "dropped with its box: the cell went back"
        );
        let consumed = catch_unwind(AssertUnwindSafe(|| second.consume(|v, slot| (v.0)(slot))));
        assert!(consumed.is_err());
        let third = make();
        assert_eq!(
            cell(&third),
            at,
            "dropped by its vtable: the cell went back"
        );
        assert_eq!(spill::fresh_cells(), fresh, "no cell allocated anew");
        assert!(catch_unwind(AssertUnwindSafe(|| drop(third))).is_err());
        assert_eq!(drops.load(Ordering::SeqCst), 3, "each value dropped once");
        assert_eq!(Arc::strong_count(&drops), 1, "a value leaked");
    }
}
