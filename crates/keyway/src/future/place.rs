//! A future's pinned place that a driver fills with one future after another ([`FuturePlace`]),
//! its storage a recycled cell.
//!
//! An async typed lane's driver pins each message's future in a place of its activation; a key
//! sent one message at a time has one-message activations, so a `Box` there was a `malloc` and
//! a `free` per message. The place takes its storage from the recycled cells that tasks and
//! submitted futures use (`task::alloc_recycled`): a freed place's cell is the next one of its
//! size class the thread takes, so the next activation on that thread allocates nothing. A
//! future larger than the largest class is allocated as a `Box` would be.

use std::alloc::Layout;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::{self, NonNull};

use crate::task::{alloc_recycled, free_recycled};

/// A heap place for a future, pinned there while it is `Some` (as `Pin<Box<Option<T>>>`), in a
/// recycled cell (see the module documentation).
pub(crate) struct FuturePlace<T> {
    place: NonNull<Option<T>>,
    _owns: PhantomData<Option<T>>,
}

// SAFETY: it owns its value alone, as a `Box` does.
unsafe impl<T: Send> Send for FuturePlace<T> {}
// SAFETY: as for `Send`: shared, it lends only `&Option<T>`.
unsafe impl<T: Sync> Sync for FuturePlace<T> {}
// The value is pinned in its cell, not in the `FuturePlace`: moving the owner moves no value.
impl<T> Unpin for FuturePlace<T> {}

impl<T> FuturePlace<T> {
    /// An empty place (`None`).
    #[inline]
    pub(crate) fn new() -> Self {
        let place = NonNull::new(alloc_recycled(Layout::new::<Option<T>>()))
            .expect("recycled storage is never null")
            .cast::<Option<T>>();
        // SAFETY: `place` is valid for a write of an `Option<T>` (storage of its layout, or
        // dangling and well aligned for a zero-sized one).
        unsafe { place.as_ptr().write(None) };
        FuturePlace {
            place,
            _owns: PhantomData,
        }
    }

    /// Whether it holds a future.
    #[inline]
    pub(crate) fn is_some(&self) -> bool {
        // SAFETY: `place` holds an initialised `Option<T>` for the owner's whole life.
        unsafe { self.place.as_ref() }.is_some()
    }

    /// The place, pinned: a value in it is never moved until it is dropped in place (set to
    /// `None`, or the `FuturePlace` dropped).
    #[inline]
    pub(crate) fn as_mut(&mut self) -> Pin<&mut Option<T>> {
        // SAFETY: the value lives in its cell, which does not move while the `FuturePlace` lives,
        // and is only ever dropped in place (`Pin::set`, or `drop` below), never moved out.
        unsafe { Pin::new_unchecked(self.place.as_mut()) }
    }
}

impl<T> Drop for FuturePlace<T> {
    fn drop(&mut self) {
        /// Gives the storage back however the value's drop ends (a panic included).
        struct GiveUp(NonNull<u8>, Layout);
        impl Drop for GiveUp {
            fn drop(&mut self) {
                // SAFETY: the storage of a `FuturePlace` being dropped, from `alloc_recycled` with
                // this layout, its value dropped.
                unsafe { free_recycled(self.0.as_ptr(), self.1) }
            }
        }
        let _give_up = GiveUp(self.place.cast(), Layout::new::<Option<T>>());
        // SAFETY: the value is initialised and dropped here once, in place.
        unsafe { ptr::drop_in_place(self.place.as_ptr()) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Adds its second field to the count when dropped.
    struct Counted(Arc<AtomicUsize>, usize);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(self.1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_freed_place_is_the_next_one_of_its_layout_on_the_thread() {
        std::thread::spawn(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let mut first = FuturePlace::<Counted>::new();
            first.as_mut().set(Some(Counted(drops.clone(), 1)));
            let at = first.place.cast::<u8>();
            drop(first);
            assert_eq!(drops.load(Ordering::SeqCst), 1, "the value dropped once");
            let second = FuturePlace::<Counted>::new();
            assert_eq!(second.place.cast::<u8>(), at, "the cell reused");
            assert!(!second.is_some());
            let other = FuturePlace::<[u8; 3]>::new();
            assert_ne!(
                other.place.cast::<u8>(),
                at,
                "a place in use is not handed out again"
            );
            drop(other);
            drop(second);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_panicking_drop_still_gives_the_cell_back() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("boom");
            }
        }
        std::thread::spawn(|| {
            let mut place = FuturePlace::<(Bomb, u64)>::new();
            place.as_mut().set(Some((Bomb, 1)));
            let at = place.place.cast::<u8>();
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(place)));
            assert!(dropped.is_err());
            let next = FuturePlace::<(Bomb, u64)>::new();
            assert_eq!(next.place.cast::<u8>(), at, "the cell was given back");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn zero_sized_places_allocate_nothing() {
        let place = FuturePlace::<std::convert::Infallible>::new();
        assert_eq!(place.place, NonNull::dangling());
        assert!(!place.is_some());
    }
}
