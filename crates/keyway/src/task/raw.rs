//! `Task`: a type-erased runnable stored inline when small, boxed otherwise.
//!
//! Profiling the lane hot path showed `malloc`/`free` at ~20% of all cycles (a task is
//! allocated by the producer and freed by a worker, glibc's worst case). Most closures capture a
//! few words, so a task keeps up to `INLINE_WORDS` words in place and only larger ones go to the
//! heap.
//!
//! Invariants (cited by the `SAFETY` comments):
//! 1. `data` holds exactly one live value of the type `vtable` was made for (inline: the value
//!    itself; boxed: a `Box` of it), from `Task::new` until one of `run`, `abandon` or `drop`
//!    consumes it. `ManuallyDrop` plus taking `self` by value makes each happen at most once.
//! 2. Inline values fit: `size_of::<R>() <= size_of::<Storage>()` and
//!    `align_of::<R>() <= align_of::<Storage>()`, checked in `Task::new`.
//! 3. Every value stored is `Send` (the `Runnable` bound), so the task may move between threads.

use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{Abandon, PanicReport, Runnable};
use crate::error::panic_message;

const INLINE_WORDS: usize = 4;
type Storage = [usize; INLINE_WORDS];

struct VTable {
    run: unsafe fn(*mut Storage) -> Result<(), PanicReport>,
    abandon: unsafe fn(*mut Storage, Abandon),
    drop: unsafe fn(*mut Storage),
}

/// One task, run once or abandoned once (or dropped, which counts as abandoned unannounced).
pub(crate) struct Task {
    vtable: &'static VTable,
    data: MaybeUninit<Storage>,
}

// SAFETY: rule 3 — only `Send` values are ever stored.
unsafe impl Send for Task {}

struct Inline<R>(std::marker::PhantomData<R>);
struct Boxed<R>(std::marker::PhantomData<R>);

impl<R: Runnable> Inline<R> {
    const VTABLE: &'static VTable = &VTable {
        run: Self::run,
        abandon: Self::abandon,
        drop: Self::drop,
    };

    /// # Safety
    /// `p` holds a live inline `R` (rules 1, 2); it is consumed.
    unsafe fn run(p: *mut Storage) -> Result<(), PanicReport> {
        // SAFETY: per this function's contract.
        unsafe { p.cast::<R>().read() }.run()
    }

    /// # Safety
    /// As for `run`.
    unsafe fn abandon(p: *mut Storage, why: Abandon) {
        // SAFETY: per this function's contract.
        unsafe { p.cast::<R>().read() }.abandon(why)
    }

    /// # Safety
    /// As for `run`.
    unsafe fn drop(p: *mut Storage) {
        // SAFETY: per this function's contract.
        unsafe { p.cast::<R>().drop_in_place() }
    }
}

impl<R: Runnable> Boxed<R> {
    const VTABLE: &'static VTable = &VTable {
        run: Self::run,
        abandon: Self::abandon,
        drop: Self::drop,
    };

    /// # Safety
    /// `p` holds a live `Box<R>` (rule 1); it is consumed.
    unsafe fn run(p: *mut Storage) -> Result<(), PanicReport> {
        // SAFETY: per this function's contract.
        let r: Box<R> = unsafe { p.cast::<Box<R>>().read() };
        (*r).run()
    }

    /// # Safety
    /// As for `run`.
    unsafe fn abandon(p: *mut Storage, why: Abandon) {
        // SAFETY: per this function's contract.
        let r: Box<R> = unsafe { p.cast::<Box<R>>().read() };
        (*r).abandon(why)
    }

    /// # Safety
    /// As for `run`.
    unsafe fn drop(p: *mut Storage) {
        // SAFETY: per this function's contract.
        unsafe { p.cast::<Box<R>>().drop_in_place() }
    }
}

impl Task {
    pub(crate) fn new<R: Runnable + 'static>(r: R) -> Task {
        let mut data = MaybeUninit::<Storage>::uninit();
        let vtable =
            if size_of::<R>() <= size_of::<Storage>() && align_of::<R>() <= align_of::<Storage>() {
                // SAFETY: rule 2 was just checked; `data` is ours and uninitialised.
                unsafe { data.as_mut_ptr().cast::<R>().write(r) };
                Inline::<R>::VTABLE
            } else {
                // SAFETY: a `Box` is one pointer, which fits and is aligned for `Storage`.
                unsafe { data.as_mut_ptr().cast::<Box<R>>().write(Box::new(r)) };
                Boxed::<R>::VTABLE
            };
        Task { vtable, data }
    }

    /// Runs the task. Never unwinds: this is the containment boundary for everything user code
    /// does while a task runs — the closure, and the drops of its captures and of its result
    /// (on the cancelled path too). A panic in any of them comes back as a report.
    pub(crate) fn run(self) -> Result<(), PanicReport> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: rule 1 — the value is live and `this` is never used or dropped again (if the
        // call unwinds, the value was consumed by it: `run` takes it by value).
        let run = || unsafe { (this.vtable.run)(this.data.as_mut_ptr()) };
        match catch_unwind(AssertUnwindSafe(run)) {
            Ok(outcome) => outcome,
            Err(payload) => Err(PanicReport::new(panic_message(&*payload).to_owned())),
        }
    }

    /// Drops the task unrun, telling its handle why. Never unwinds: a panicking capture drop
    /// is logged.
    pub(crate) fn abandon(self, why: Abandon) {
        if let Err(report) = self.try_abandon(why) {
            log_drop_panic(report.message());
        }
    }

    /// Drops the task unrun, telling its handle why; a panicking capture drop comes back as a
    /// report (for the callers that count it as a task panic).
    pub(crate) fn try_abandon(self, why: Abandon) -> Result<(), PanicReport> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: rule 1, as in `run`.
        let abandon = || unsafe { (this.vtable.abandon)(this.data.as_mut_ptr(), why) };
        catch_unwind(AssertUnwindSafe(abandon))
            .map_err(|payload| PanicReport::new(panic_message(&*payload).to_owned()))
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // SAFETY: rule 1 — `run` and `abandon` bypass this drop, so the value is still live.
        let drop = || unsafe { (self.vtable.drop)(self.data.as_mut_ptr()) };
        if let Err(payload) = catch_unwind(AssertUnwindSafe(drop)) {
            log_drop_panic(panic_message(&*payload));
        }
    }
}

#[cold]
fn log_drop_panic(panic: &str) {
    tracing::error!(panic, "keyway: dropping a task that did not run panicked");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Probe<const N: usize> {
        pad: [u8; N],
        log: Arc<AtomicUsize>,
    }

    impl<const N: usize> Runnable for Probe<N> {
        fn run(self) -> Result<(), PanicReport> {
            std::hint::black_box(self.pad);
            self.log.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn abandon(self, _why: Abandon) {
            self.log.fetch_add(100, Ordering::SeqCst);
        }
    }

    impl<const N: usize> Drop for Probe<N> {
        fn drop(&mut self) {
            self.log.fetch_add(10_000, Ordering::SeqCst);
        }
    }

    fn check<const N: usize>() {
        let log = Arc::new(AtomicUsize::new(0));
        let mk = || {
            Task::new(Probe::<N> {
                pad: [7; N],
                log: log.clone(),
            })
        };
        mk().run().unwrap();
        mk().abandon(Abandon::Rejected);
        drop(mk());
        // Each value dropped exactly once; run and abandon each happened once.
        assert_eq!(log.load(Ordering::SeqCst), 1 + 100 + 3 * 10_000);
        assert_eq!(Arc::strong_count(&log), 1, "a captured value leaked");
    }

    #[test]
    fn inline_and_boxed_tasks_run_abandon_and_drop_once() {
        check::<1>(); // inline
        check::<24>(); // exactly fills the storage with the Arc
        check::<200>(); // boxed
    }
}
