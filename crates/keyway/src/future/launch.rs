//! A submitted future before it starts: what a lane entry, a multi-key task or a plain job holds,
//! and what `shutdown_now` hands back when it had not started.
//!
//! This side is the future with its handle and runtime (a `Spawned`) and what can be done with
//! it: start it on the pool, run it on the calling thread, abandon it, or poll it in place in
//! a lane's driver; and the plain jobs of `Pool::spawn` and `Pool::execute_async`. Where it
//! lives meanwhile (a recycled cell, and the rules that make owning it there sound) is
//! `stored`'s.

mod stored;

use std::future::Future;
use std::mem::needs_drop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::driver::{self, Release};
use super::probe::poll_resuming;
use super::runtime::Runtime;
use crate::engine::{refused, with_pool, Registry, Work};
use crate::error::{panic_message, panic_text, SubmitError, TaskError};
use crate::task::{contain, Abandon, Completer, PanicReport, Runnable, Task, TaskHandle};
use stored::{Launch, Stored};
pub(crate) use stored::{Started, Step, Unsent};

/// A future not yet started, type-erased.
pub(crate) struct Launcher(Stored);

/// In this order (`repr(C)`): a poll reads the handle first, then the future, so the handle
/// shares the future's first cache line instead of one past its end.
#[repr(C)]
struct Spawned<F: Future> {
    handle: Option<Completer<F::Output>>,
    /// The tokio runtime current at spawn (`tokio` feature; none for a bound pool), entered
    /// around each poll.
    runtime: Runtime,
    /// Structurally pinned once started in place ([`Started`]); `None` once done.
    fut: Option<F>,
}

impl<F: Future> Spawned<F> {
    /// Drops the future in place (its drop is user code: contained).
    fn drop_fut(&mut self) {
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| self.fut = None)) {
            tracing::error!(
                panic = panic_message(&*p),
                "keyway: a future's drop panicked"
            );
        }
    }

    /// Gives the handle its outcome and drops it (user code: the awaiting executor's waker,
    /// the output's drop; contained).
    fn finish(&mut self, outcome: Result<F::Output, TaskError>) {
        let handle = self.handle.take();
        if handle.is_none() && outcome.is_ok() && !needs_drop::<F::Output>() {
            // Nobody to tell and nothing to drop (a detached future's `()`).
            return;
        }
        contain("a future's output or handle waker", move || {
            if let Some(handle) = &handle {
                handle.finish(outcome);
            }
            drop(handle);
        });
    }
}

impl<F> Launch for Spawned<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    unsafe fn launch(&mut self, registry: &Arc<Registry>, release: Release) {
        // SAFETY: L2 — moved out once, first thing; the caller neither uses nor drops it again.
        let Spawned {
            fut,
            handle,
            runtime,
        } = unsafe { ptr::read(self) };
        if let Some(fut) = fut {
            driver::launch(registry, fut, handle, release, runtime);
        }
    }

    unsafe fn run_here(&mut self, bound: Option<Runtime>) -> Result<(), PanicReport> {
        // SAFETY: as in `launch`.
        let Spawned {
            fut,
            handle,
            runtime,
        } = unsafe { ptr::read(self) };
        let runtime = bound.unwrap_or(runtime);
        match fut {
            Some(fut) => driver::run_here(fut, handle, &runtime),
            None => Ok(()),
        }
    }

    unsafe fn abandon(&mut self, why: Abandon) {
        // SAFETY: as in `launch`.
        let Spawned { fut, handle, .. } = unsafe { ptr::read(self) };
        driver::abandon(fut, handle, why);
    }

    fn poll_step(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        may_resume: &dyn Fn() -> bool,
        pool: &Registry,
    ) -> Step {
        // SAFETY: `fut` is never moved once started: it is polled in place and dropped in place
        // (`fut = None`); no other field is pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(handle) = &this.handle {
            if !handle.keep_going(cx.waker()) {
                // Cancelled: before it started (it never runs), or at this await point.
                this.drop_fut();
                this.handle = None;
                return Step::Done(None);
            }
        }
        let Some(fut) = this.fut.as_mut() else {
            return Step::Done(None);
        };
        // SAFETY: structural pinning of `fut` (see above).
        let mut fut = unsafe { Pin::new_unchecked(fut) };
        // A self-wake is resumed here while allowed, unless the handle was cancelled meanwhile
        // (the next poll drops the future then).
        let handle = &this.handle;
        let may_resume = || handle.as_ref().is_none_or(Completer::is_live) && may_resume();
        let runtime = &this.runtime;
        let polled = catch_unwind(AssertUnwindSafe(|| {
            runtime.enter_in(pool, || {
                poll_resuming(cx, may_resume, |cx| fut.as_mut().poll(cx))
            })
        }));
        match polled {
            Ok((Poll::Pending, woke_itself)) => Step::Waits { woke_itself },
            Ok((Poll::Ready(value), _)) => {
                this.drop_fut();
                this.finish(Ok(value));
                Step::Done(None)
            }
            Err(payload) => {
                this.drop_fut();
                // The payload is the handle's if there is one, else the panic hook's.
                if this.handle.is_some() {
                    let report = PanicReport::new(panic_text(&*payload));
                    this.finish(Err(TaskError::panicked(payload)));
                    Step::Done(Some(report))
                } else {
                    Step::Done(Some(PanicReport::from_payload(payload)))
                }
            }
        }
    }

    fn cancel(self: Pin<&mut Self>, pool: Option<&Registry>) {
        // SAFETY: as in `poll_step`: the future is dropped in place.
        let this = unsafe { self.get_unchecked_mut() };
        // Inside the runtime its polls enter, wherever the cancel comes from (`shutdown_now`
        // from a thread in no runtime): its drop may use tokio as its polls did.
        this.runtime.clone().enter_for(pool, || this.drop_fut());
        if this.handle.is_some() {
            this.finish(Err(TaskError::Cancelled));
        }
    }
}

impl Launcher {
    /// `fut` with its handle's completer, keeping `runtime` (`Runtime::for_pool`).
    pub(crate) fn new<F>(fut: F, handle: Option<Completer<F::Output>>, runtime: Runtime) -> Self
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Unsent::new(fut, runtime).into_launcher(handle)
    }

    /// Started in place, in the driver of its lane (its first poll is the driver's to make).
    pub(crate) fn start(self) -> Started {
        self.0.prefetch();
        Started(self.0)
    }

    /// Starts the future on the pool (first poll here); `release` is let go once it is done.
    pub(crate) fn launch(self, registry: &Arc<Registry>, release: Release) {
        // SAFETY: L2 — `consume` frees the storage without dropping the value moved out.
        self.0
            .consume(|fut| unsafe { fut.launch(registry, release) })
    }

    /// Runs the future to completion on the calling thread (the pool is stopping, or gone),
    /// inside `bound` (the runtime its pool is bound to) if given.
    fn run_here(self, bound: Option<Runtime>) -> Result<(), PanicReport> {
        // SAFETY: as in `launch`.
        self.0.consume(|fut| unsafe { fut.run_here(bound) })
    }

    /// Drops the future unstarted, telling its handle why (its drop may panic: the caller
    /// contains it).
    pub(crate) fn abandon(self, why: Abandon) {
        // SAFETY: as in `launch`.
        self.0.consume(|fut| unsafe { fut.abandon(why) })
    }

    /// Handed back by `shutdown_now` from a lane, unstarted ([`HandedBack`]): `bound` is the
    /// runtime the lane's pool is bound to, if any.
    pub(crate) fn handed_back(self, bound: Option<Runtime>) -> HandedBack {
        HandedBack {
            launcher: self,
            bound,
        }
    }

    /// As a task: started on the pool of `registry` if it still runs, else run to completion on
    /// the calling thread (a future handed back by `shutdown_now`).
    pub(crate) fn into_runnable(self, registry: Weak<Registry>) -> LaunchTask {
        LaunchTask {
            launcher: self,
            registry,
        }
    }
}

/// A lane's future handed back by `shutdown_now` unstarted: run, it runs to completion on the
/// calling thread (there is no lane to hold any more), inside the runtime its pool is bound to
/// (kept from its lanes, as the pool may be gone by then), else inside the one it kept.
pub(crate) struct HandedBack {
    launcher: Launcher,
    bound: Option<Runtime>,
}

impl Runnable for HandedBack {
    fn run(self) -> Result<(), PanicReport> {
        self.launcher.run_here(self.bound)
    }

    fn abandon(self, why: Abandon) {
        self.launcher.abandon(why)
    }
}

/// A future as a plain task of the pool (or handed back by `shutdown_now`).
pub(crate) struct LaunchTask {
    launcher: Launcher,
    registry: Weak<Registry>,
}

impl Runnable for LaunchTask {
    fn run(self) -> Result<(), PanicReport> {
        let LaunchTask { launcher, registry } = self;
        // On the pool (a worker that took the job just as `shutdown_now` began included: it is
        // then cancelled at its first await), or run to completion here.
        with_pool(&registry, |pool| match pool {
            Some(pool) if pool.may_start_future() => {
                launcher.launch(pool.registry, Release::None);
                Ok(())
            }
            pool => launcher.run_here(pool.and_then(|pool| Runtime::bound_of(pool.registry))),
        })
    }

    fn abandon(self, why: Abandon) {
        self.launcher.abandon(why)
    }
}

/// `Pool::spawn`: runs `fut` on the pool of `registry`, with no ordering against other tasks.
pub(crate) fn spawn<F>(
    registry: &Arc<Registry>,
    fut: F,
) -> Result<TaskHandle<F::Output>, SubmitError<F>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    start(registry, fut, |fut, runtime| {
        let (handle, completer) = TaskHandle::for_future();
        (handle, Launcher::new(fut, Some(completer), runtime))
    })
}

/// `Pool::execute_async`: [`spawn`] with no handle (none is allocated).
pub(crate) fn execute<F>(registry: &Arc<Registry>, fut: F) -> Result<(), SubmitError<F>>
where
    F: Future<Output = ()> + Send + 'static,
{
    start(registry, fut, |fut, runtime| {
        ((), Launcher::new(fut, None, runtime))
    })
}

/// Admits `fut`, then queues the launcher `wrap` makes of it (keeping the runtime
/// `Runtime::for_pool` gives) as a plain job.
fn start<F, T>(
    registry: &Arc<Registry>,
    fut: F,
    wrap: impl FnOnce(F, Runtime) -> (T, Launcher),
) -> Result<T, SubmitError<F>> {
    if let Err(why) = registry.admit() {
        return Err(refused(why, fut));
    }
    let (out, launcher) = wrap(fut, Runtime::for_pool(registry));
    let task = launcher.into_runnable(Arc::downgrade(registry));
    registry.schedule(Work::Task(Task::new(task)));
    Ok(out)
}
