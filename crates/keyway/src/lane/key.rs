//! A lane's key, kept in the lane itself when it is small, dropped with any panic of its `Drop`
//! contained: a lane may be freed on a worker, the monitor or a submitter, none of which may
//! unwind because of a user's key.
//!
//! A key of up to [`KEY_WORDS`] words (alignment at most a word's: an integer, a pair of them,
//! a `&'static str`) is kept in place, on the lane's own line; a larger one in a recycled cell
//! or a box (`task::InlineBox`). A key looked up is compared on every submit by key, so a key
//! behind a box was one more dependent load per submit, on a line of its own.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::task::{drop_quietly, InlineBox, LiveValue, LiveValueRef, VTable, VTableFor};

/// Words of a key kept in the lane itself.
const KEY_WORDS: usize = 2;

/// What a lane does with its key, whatever its type: borrow it as `Any`, drop it.
struct KeyOps {
    get: for<'a> fn(LiveValueRef<'a, KEY_WORDS>) -> &'a (dyn Any + Send + Sync),
    drop: fn(LiveValue<'_, KEY_WORDS>),
}

impl VTable<KEY_WORDS> for KeyOps {
    fn drop_value(&self, slot: LiveValue<'_, KEY_WORDS>) {
        (self.drop)(slot)
    }
}

impl<K: Send + Sync + 'static> VTableFor<K, KEY_WORDS> for KeyOps {
    const VTABLE: &'static KeyOps = &KeyOps {
        // SAFETY: the store's rule 2 — this is `VTableFor<K>::VTABLE`, so the slot holds a `K`.
        get: |slot| unsafe { slot.get::<K>() },
        // SAFETY: as for `get`; the value is taken once (the store's own drop).
        drop: |slot| drop_quietly(unsafe { slot.take::<K>() }),
    };
}

/// A type-erased key whose drop never unwinds.
pub(crate) struct LaneKey(InlineBox<KeyOps, KEY_WORDS>);

// SAFETY: only `Send + Sync` keys are stored (`new`'s bound), and a shared `LaneKey` hands out
// only shared references to its key.
unsafe impl Sync for LaneKey {}

impl LaneKey {
    pub(crate) fn new<K: Send + Sync + 'static>(key: K) -> Self {
        LaneKey(InlineBox::new(key))
    }

    #[inline]
    pub(crate) fn get(&self) -> &(dyn Any + Send + Sync) {
        (self.0.vtable().get)(self.0.slot_ref())
    }
}

/// Runs user code on a key (`Hash`, `Eq`), turning a panic into `Err(KeyPanicked)`.
///
/// Inlined into each look-up: an out-of-line call per use cost about 20 instructions a task
/// (two uses on every send by key), the report of a panic stays out of line.
#[inline(always)]
pub(crate) fn catch_key<R>(f: impl FnOnce() -> R) -> Result<R, KeyPanicked> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Ok(r),
        Err(payload) => Err(key_panicked(payload)),
    }
}

/// Reports a key's panic (its payload is dropped without unwinding).
#[cold]
#[inline(never)]
fn key_panicked(payload: Box<dyn Any + Send>) -> KeyPanicked {
    tracing::error!("keyway: a context key's Hash, Eq or Drop panicked; task handed back");
    drop_quietly(payload);
    KeyPanicked
}

/// A context key's `Hash`, `Eq` or `Drop` panicked during a look-up.
pub(crate) struct KeyPanicked;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its drops (and panics in its drop if `panics`), with `N` words of padding.
    struct Counted<const N: usize> {
        drops: Arc<AtomicUsize>,
        panics: bool,
        pad: [usize; N],
    }

    impl<const N: usize> Drop for Counted<N> {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
            if self.panics {
                panic!("a key's drop panicked");
            }
        }
    }

    /// A key of `N` words of padding (one more for its counter) is read back as itself, and
    /// dropped once without unwinding, panicking drop or not.
    fn check<const N: usize>(panics: bool) {
        let drops = Arc::new(AtomicUsize::new(0));
        let key = LaneKey::new(Counted::<N> {
            drops: drops.clone(),
            panics,
            pad: [N; N],
        });
        let got = key
            .get()
            .downcast_ref::<Counted<N>>()
            .expect("its own type");
        assert_eq!(got.pad, [N; N]);
        assert!(key.get().downcast_ref::<u64>().is_none());
        drop(key);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
        assert_eq!(Arc::strong_count(&drops), 1, "nothing leaked");
    }

    /// In the lane (two words), in a recycled cell (up to 64 bytes) and in a box (larger).
    #[test]
    fn a_key_of_any_size_is_read_back_and_dropped_once_without_unwinding() {
        for panics in [false, true] {
            check::<1>(panics); // two words: in place
            check::<4>(panics); // 40 bytes: a recycled cell
            check::<10>(panics); // 88 bytes: a box
        }
        let small = LaneKey::new(7u32);
        assert_eq!(small.get().downcast_ref::<u32>(), Some(&7));
        let text = LaneKey::new("account-1");
        assert_eq!(text.get().downcast_ref::<&str>(), Some(&"account-1"));
        let string = LaneKey::new(String::from("account-2"));
        assert_eq!(string.get().downcast_ref::<String>().unwrap(), "account-2");
    }
}
