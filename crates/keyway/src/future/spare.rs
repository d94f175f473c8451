//! A future's pinned place that a driver fills with one future after another ([`SpareBox`]),
//! its block kept by the thread that frees it for the next one it makes of the same layout.
//!
//! An async typed lane's driver pins each message's future in a box of its activation; a key
//! sent one message at a time has one-message activations, so that box was a `malloc` and a
//! `free` per message. Freed, the block becomes its thread's spare (one per thread, freed with
//! the thread); the next activation on that thread whose futures have the same layout takes it
//! instead of allocating. A block of another layout is freed as before.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::Cell;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::{self, NonNull};

/// A thread's spare block and its layout.
struct Spare(Cell<Option<(NonNull<u8>, Layout)>>);

impl Drop for Spare {
    fn drop(&mut self) {
        if let Some((block, layout)) = self.0.take() {
            // SAFETY: a spare block was allocated with `layout` and is owned by the spare alone.
            unsafe { dealloc(block.as_ptr(), layout) }
        }
    }
}

thread_local! {
    static SPARE: Spare = const { Spare(Cell::new(None)) };
}

/// A block of `layout` (non-zero size): the thread's spare if it has that layout, else a new one.
fn take_block(layout: Layout) -> NonNull<u8> {
    let spare = SPARE
        .try_with(|s| match s.0.get() {
            Some((block, kept)) if kept == layout => {
                s.0.set(None);
                Some(block)
            }
            _ => None,
        })
        .ok()
        .flatten();
    if let Some(block) = spare {
        return block;
    }
    // SAFETY: `layout` has a non-zero size (the caller's).
    NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout))
}

/// `block` (of `layout`, holding no value) becomes the thread's spare if it has none, else it
/// is freed.
///
/// # Safety
/// `block` was allocated with `layout` by the global allocator, and is the caller's to give up.
unsafe fn give_block(block: NonNull<u8>, layout: Layout) {
    let kept = SPARE
        .try_with(|s| {
            let empty = s.0.get().is_none();
            if empty {
                s.0.set(Some((block, layout)));
            }
            empty
        })
        .unwrap_or(false);
    if !kept {
        // SAFETY: the caller's.
        unsafe { dealloc(block.as_ptr(), layout) }
    }
}

/// A heap place for a future, pinned there while it is `Some` (as `Pin<Box<Option<T>>>`), its
/// block reused across activations on a thread (see the module documentation).
pub(crate) struct SpareBox<T> {
    place: NonNull<Option<T>>,
    _owns: PhantomData<Option<T>>,
}

// SAFETY: it owns its value alone, as a `Box` does.
unsafe impl<T: Send> Send for SpareBox<T> {}
// SAFETY: as for `Send`: shared, it lends only `&Option<T>`.
unsafe impl<T: Sync> Sync for SpareBox<T> {}
// The value is pinned in its block, not in the `SpareBox`: moving the owner moves no value.
impl<T> Unpin for SpareBox<T> {}

impl<T> SpareBox<T> {
    /// An empty place (`None`).
    #[inline]
    pub(crate) fn new() -> Self {
        let layout = Layout::new::<Option<T>>();
        let place = if layout.size() == 0 {
            NonNull::<Option<T>>::dangling()
        } else {
            take_block(layout).cast::<Option<T>>()
        };
        // SAFETY: `place` is valid for a write of an `Option<T>` (a block of its layout, or
        // dangling and well aligned for a zero-sized one).
        unsafe { place.as_ptr().write(None) };
        SpareBox {
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
    /// `None`, or the `SpareBox` dropped).
    #[inline]
    pub(crate) fn as_mut(&mut self) -> Pin<&mut Option<T>> {
        // SAFETY: the value lives in its block, which does not move while the `SpareBox` lives,
        // and is only ever dropped in place (`Pin::set`, or `drop` below), never moved out.
        unsafe { Pin::new_unchecked(self.place.as_mut()) }
    }
}

impl<T> Drop for SpareBox<T> {
    fn drop(&mut self) {
        /// Gives the block up however the value's drop ends (a panic included).
        struct GiveUp(NonNull<u8>, Layout);
        impl Drop for GiveUp {
            fn drop(&mut self) {
                if self.1.size() != 0 {
                    // SAFETY: the block of a `SpareBox` being dropped, of its layout.
                    unsafe { give_block(self.0, self.1) }
                }
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
            let mut first = SpareBox::<Counted>::new();
            first.as_mut().set(Some(Counted(drops.clone(), 1)));
            let at = first.place.cast::<u8>();
            drop(first);
            assert_eq!(drops.load(Ordering::SeqCst), 1, "the value dropped once");
            let second = SpareBox::<Counted>::new();
            assert_eq!(second.place.cast::<u8>(), at, "the block reused");
            assert!(!second.is_some());
            let other = SpareBox::<[u8; 3]>::new();
            assert_ne!(
                other.place.cast::<u8>(),
                at,
                "another layout: a block of its own"
            );
            drop(other);
            drop(second);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_panicking_drop_still_gives_the_block_up() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("boom");
            }
        }
        std::thread::spawn(|| {
            let mut place = SpareBox::<(Bomb, u64)>::new();
            place.as_mut().set(Some((Bomb, 1)));
            let at = place.place.cast::<u8>();
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(place)));
            assert!(dropped.is_err());
            let next = SpareBox::<(Bomb, u64)>::new();
            assert_eq!(next.place.cast::<u8>(), at, "the block was kept");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn zero_sized_places_allocate_nothing() {
        let place = SpareBox::<std::convert::Infallible>::new();
        assert_eq!(place.place, NonNull::dangling());
        assert!(!place.is_some());
    }
}
