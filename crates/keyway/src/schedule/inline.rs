//! A type-erased job stored inline in its bucket entry: a job of up to [`WORDS`] words (a
//! closure capturing a few values, the common case) is kept in the entry itself, a larger one
//! behind one box. Scheduling a small task therefore allocates nothing: the entry is pushed by
//! value into its bucket's vector, and the job is moved out again when it is released.
//!
//! Measured (callgrind, `keyway-bench schedule`): the box per task cost 190 instructions in
//! `malloc` on the schedule path and as many again in `free` on the driver's; this is why the
//! job is not simply a `Box<dyn Job>`.

use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};
use std::sync::Arc;

use super::executor::ExecCore;
use super::job::Job;
use crate::task::{Abandon, PendingTask};

/// Words of job kept inline.
pub(crate) const WORDS: usize = 4;

type Storage = MaybeUninit<[usize; WORDS]>;

/// A job of any type, stored inline when it fits (see the module documentation).
pub(crate) struct InlineJob {
    vtable: &'static VTable,
    data: Storage,
    /// Not `Sync` (the job need not be), and `Send` only through the impl below.
    _not_sync: PhantomData<*mut ()>,
}

// SAFETY: `data` holds a value of a type implementing `Job`, which requires `Send`; the vtable
// is plain function pointers.
unsafe impl Send for InlineJob {}

/// The operations of the stored type `S` (`S` is the job itself, or [`Boxed`] when it is too
/// large). Every function is given a pointer to `data` holding a live `S`; the consuming ones
/// (`dispatch`, `abandon`, `into_pending`, `drop`) move or drop it, after which `data` is dead.
struct VTable {
    repeating: bool,
    batchable: bool,
    is_live: unsafe fn(*const u8) -> bool,
    dispatch: unsafe fn(*mut u8, &Arc<ExecCore>, u64, i64),
    run_here: unsafe fn(*mut u8, &Arc<ExecCore>, u64, i64),
    abandon: unsafe fn(*mut u8, Abandon),
    into_pending: unsafe fn(*mut u8) -> Option<PendingTask>,
    drop: unsafe fn(*mut u8),
}

struct VTableOf<S>(PhantomData<S>);

impl<S: Job> VTableOf<S> {
    const VTABLE: VTable = VTable {
        repeating: S::REPEATING,
        batchable: S::BATCHABLE,
        // SAFETY (all six): the caller passes a pointer to a live, aligned `S` (the type this
        // vtable was made for, see `InlineJob::store`); the consuming ones read it out once,
        // and their caller never touches `data` again.
        is_live: |p| unsafe { (*p.cast::<S>()).is_live() },
        dispatch: |p, exec, due, priority| {
            unsafe { p.cast::<S>().read() }.dispatch(exec, due, priority)
        },
        run_here: |p, exec, due, priority| {
            unsafe { p.cast::<S>().read() }.run_here(exec, due, priority)
        },
        abandon: |p, why| unsafe { p.cast::<S>().read() }.abandon(why),
        into_pending: |p| unsafe { p.cast::<S>().read() }.into_pending(),
        drop: |p| unsafe { p.cast::<S>().drop_in_place() },
    };
}

/// A job too large to store inline, behind a box.
struct Boxed<J>(Box<J>);

impl<J: Job> Job for Boxed<J> {
    const REPEATING: bool = J::REPEATING;
    const BATCHABLE: bool = J::BATCHABLE;

    fn is_live(&self) -> bool {
        self.0.is_live()
    }
    fn dispatch(self, exec: &Arc<ExecCore>, due: u64, priority: i64) {
        (*self.0).dispatch(exec, due, priority);
    }
    fn run_here(self, exec: &Arc<ExecCore>, due: u64, priority: i64) {
        (*self.0).run_here(exec, due, priority);
    }
    fn abandon(self, why: Abandon) {
        (*self.0).abandon(why);
    }
    fn into_pending(self) -> Option<PendingTask> {
        (*self.0).into_pending()
    }
}

impl InlineJob {
    /// Stores `job`: inline if it fits, boxed otherwise.
    pub(crate) fn new<J: Job>(job: J) -> Self {
        if size_of::<J>() <= size_of::<Storage>() && align_of::<J>() <= align_of::<Storage>() {
            Self::store(job)
        } else {
            Self::store(Boxed(Box::new(job)))
        }
    }

    fn store<S: Job>(job: S) -> Self {
        assert!(size_of::<S>() <= size_of::<Storage>() && align_of::<S>() <= align_of::<Storage>());
        let mut data = Storage::uninit();
        // SAFETY: `data` is large and aligned enough for `S` (asserted above; the check is
        // constant and compiled out), and uninitialised, so nothing is overwritten.
        unsafe { data.as_mut_ptr().cast::<S>().write(job) };
        InlineJob {
            vtable: &VTableOf::<S>::VTABLE,
            data,
            _not_sync: PhantomData,
        }
    }

    /// Takes the job out of `self` for a consuming operation: the caller must consume it.
    fn take(self) -> (&'static VTable, Storage) {
        let this = ManuallyDrop::new(self);
        (this.vtable, this.data)
    }

    /// False once its handle was cancelled: it will not run.
    pub(crate) fn is_live(&self) -> bool {
        // SAFETY: `data` holds the live job `vtable` was made for.
        unsafe { (self.vtable.is_live)(self.data.as_ptr().cast()) }
    }

    /// True for a repeating task.
    pub(crate) fn is_repeating(&self) -> bool {
        self.vtable.repeating
    }

    /// See [`Job::dispatch`].
    pub(crate) fn dispatch(self, exec: &Arc<ExecCore>, due: u64, priority: i64) {
        let (vtable, mut data) = self.take();
        // SAFETY: `data` holds the live job `vtable` was made for; it is consumed here and
        // `data` is not used again.
        unsafe { (vtable.dispatch)(data.as_mut_ptr().cast(), exec, due, priority) }
    }

    /// True if it may be handed to the pool in a batch (see [`Job::BATCHABLE`]).
    pub(crate) fn is_batchable(&self) -> bool {
        self.vtable.batchable
    }

    /// See [`Job::run_here`].
    pub(crate) fn run_here(self, exec: &Arc<ExecCore>, due: u64, priority: i64) {
        let (vtable, mut data) = self.take();
        // SAFETY: as in `dispatch`.
        unsafe { (vtable.run_here)(data.as_mut_ptr().cast(), exec, due, priority) }
    }

    /// See [`Job::abandon`].
    pub(crate) fn abandon(self, why: Abandon) {
        let (vtable, mut data) = self.take();
        // SAFETY: as in `dispatch`.
        unsafe { (vtable.abandon)(data.as_mut_ptr().cast(), why) }
    }

    /// See [`Job::into_pending`].
    pub(crate) fn into_pending(self) -> Option<PendingTask> {
        let (vtable, mut data) = self.take();
        // SAFETY: as in `dispatch`.
        unsafe { (vtable.into_pending)(data.as_mut_ptr().cast()) }
    }
}

impl Drop for InlineJob {
    fn drop(&mut self) {
        // SAFETY: a job not consumed by one of the methods above is still live in `data`;
        // this is its one drop.
        unsafe { (self.vtable.drop)(self.data.as_mut_ptr().cast()) }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A job that counts its drops, of `N` words.
    struct Counted<const N: usize>(Arc<AtomicUsize>, [usize; N]);

    impl<const N: usize> Drop for Counted<N> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl<const N: usize> Job for Counted<N> {
        fn is_live(&self) -> bool {
            self.1.len() == N
        }
        fn dispatch(self, _: &Arc<ExecCore>, _: u64, _: i64) {}
        fn run_here(self, _: &Arc<ExecCore>, _: u64, _: i64) {}
        fn abandon(self, _: Abandon) {}
        fn into_pending(self) -> Option<PendingTask> {
            None
        }
    }

    #[test]
    fn small_and_large_jobs_are_dropped_exactly_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        // Inline (1 + 2 words) and boxed (1 + 8 words); dropped unconsumed, or consumed.
        let small = InlineJob::new(Counted(drops.clone(), [7; 2]));
        let large = InlineJob::new(Counted(drops.clone(), [7; 8]));
        assert!(small.is_live() && large.is_live());
        assert!(!small.is_repeating());
        drop(small);
        drop(large);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        assert!(InlineJob::new(Counted(drops.clone(), [0; 3]))
            .into_pending()
            .is_none());
        InlineJob::new(Counted(drops.clone(), [0; 9])).abandon(Abandon::Rejected);
        assert_eq!(drops.load(Ordering::SeqCst), 4);
        assert_eq!(size_of::<InlineJob>(), (WORDS + 1) * size_of::<usize>());
    }
}
