//! `Task`: a type-erased runnable, stored in an [`InlineBox`] (in place when small, boxed
//! otherwise; see [`super::inline`] for the store and the rules its `SAFETY` comments cite).
//!
//! This file only supplies the vtable (run, abandon, drop) and the containment of panics: a
//! task never unwinds into the pool.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::inline::{InlineBox, LiveValue, VTable, VTableFor};
use super::{Abandon, PanicReport, Runnable};
use crate::error::panic_message;

/// A task's operations, made for one [`Runnable`] type.
struct TaskVTable {
    run: fn(LiveValue<'_>) -> Result<(), PanicReport>,
    abandon: fn(LiveValue<'_>, Abandon),
    drop: fn(LiveValue<'_>),
}

impl VTable for TaskVTable {
    #[inline]
    fn drop_value(&self, slot: LiveValue<'_>) {
        (self.drop)(slot)
    }
}

impl<R: Runnable + 'static> VTableFor<R> for TaskVTable {
    const VTABLE: &'static TaskVTable = &TaskVTable {
        // SAFETY: rule 2 — this is `VTableFor<R>::VTABLE`, given the slot of an `R`.
        run: |slot| unsafe { slot.take::<R>() }.run(),
        // SAFETY: rule 2, as for `run`.
        abandon: |slot, why| unsafe { slot.take::<R>() }.abandon(why),
        // SAFETY: rule 2, as for `run`.
        drop: |slot| drop_contained(|| unsafe { slot.drop_value::<R>() }),
    };
}

/// One task, run once or abandoned once (or dropped, which counts as abandoned unannounced).
/// Dropping it never unwinds: a panicking capture drop is logged.
pub(crate) struct Task(InlineBox<TaskVTable>);

/// A stored task is itself runnable, so a wrapper made of one (the pool's sampled timing) can be
/// stored again, in a lane's entry say.
impl Runnable for Task {
    fn run(self) -> Result<(), PanicReport> {
        Task::run(self)
    }

    fn abandon(self, why: Abandon) {
        Task::abandon(self, why)
    }
}

impl Task {
    #[inline]
    pub(crate) fn new<R: Runnable + 'static>(r: R) -> Task {
        Task(InlineBox::new(r))
    }

    /// Runs the task. Never unwinds: this is the containment boundary for everything user code
    /// does while a task runs — the closure, and the drops of its captures and of its result
    /// (on the cancelled path too). A panic in any of them comes back as a report.
    pub(crate) fn run(self) -> Result<(), PanicReport> {
        // If the call unwinds, the value was consumed by it (`Runnable::run` takes it by value).
        run_contained(|| self.0.consume(|vtable, slot| (vtable.run)(slot)))
    }

    /// Drops the task unrun, telling its handle why. Never unwinds: a panicking capture drop
    /// is logged.
    pub(crate) fn abandon(self, why: Abandon) {
        if let Err(report) = self.abandon_reporting(why) {
            log_drop_panic(report.message());
        }
    }

    /// Drops the task unrun, telling its handle why. Never unwinds: a panicking capture drop
    /// comes back as its report, for the caller to report to the pool.
    pub(crate) fn abandon_reporting(self, why: Abandon) -> Result<(), PanicReport> {
        abandon_contained(|| self.0.consume(|vtable, slot| (vtable.abandon)(slot, why)))
    }
}

/// Runs `run` (which consumes a stored task and runs it), catching whatever unwinds out of it:
/// the containment boundary of every task the pool runs (a [`Task`], a lane's entry). A panic
/// comes back as a report.
#[inline]
pub(crate) fn run_contained(
    run: impl FnOnce() -> Result<(), PanicReport>,
) -> Result<(), PanicReport> {
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(outcome) => outcome,
        Err(payload) => {
            let report = PanicReport::new(panic_message(&*payload).to_owned());
            super::drop_quietly(payload);
            Err(report)
        }
    }
}

/// Runs `abandon` (which consumes a stored task unrun), catching whatever unwinds out of it: a
/// panicking capture drop comes back as its report.
#[inline]
pub(crate) fn abandon_contained(abandon: impl FnOnce()) -> Result<(), PanicReport> {
    catch_unwind(AssertUnwindSafe(abandon))
        .map_err(|payload| PanicReport::new(panic_message(&*payload).to_owned()))
}

/// Drops a stored value in place, logging a panic of its drop instead of unwinding.
#[inline]
pub(crate) fn drop_contained(drop: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(drop)) {
        log_drop_panic(panic_message(&*payload));
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

    #[test]
    fn a_task_is_five_words_and_option_uses_the_vtable_niche() {
        let word = std::mem::size_of::<usize>();
        assert_eq!(std::mem::size_of::<Task>(), 5 * word);
        assert_eq!(std::mem::size_of::<Option<Task>>(), 5 * word);
    }
}
