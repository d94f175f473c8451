//! A submitted future before it starts: what a lane entry, a multi-key task or a plain job holds,
//! and what `shutdown_now` hands back when it had not started.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::driver::{self, Release};
use super::probe::poll_resuming;
use super::runtime::Runtime;
use crate::engine::{refused, with_pool, Registry, Work};
use crate::error::{panic_message, panic_text, SubmitError, TaskError};
use crate::task::{contain, Abandon, Completer, PanicReport, Runnable, Task, TaskHandle};

/// A future not yet started, type-erased.
pub(crate) struct Launcher(Box<dyn Launch>);

trait Launch: Send {
    fn launch(self: Box<Self>, registry: &Arc<Registry>, release: Release);
    fn run_here(self: Box<Self>) -> Result<(), PanicReport>;
    fn abandon(self: Box<Self>, why: Abandon);
    /// One poll in place, in a driver that polls the futures of a lane one after another
    /// ([`Started`]).
    fn poll_step(self: Pin<&mut Self>, cx: &mut Context<'_>, may_resume: &dyn Fn() -> bool)
        -> Step;
    /// Dropped at its await point (or before its first poll), its handle told it was cancelled.
    fn cancel(self: Pin<&mut Self>);
}

struct Spawned<F: Future> {
    /// Structurally pinned once started in place ([`Started`]); `None` once done.
    fut: Option<F>,
    handle: Option<Completer<F::Output>>,
    /// The tokio runtime current at spawn (`tokio` feature), entered around each poll.
    runtime: Runtime,
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
        contain("a future's output or handle waker", move || {
            if let Some(handle) = &handle {
                handle.finish(outcome);
            }
            drop(handle);
        });
    }
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
pub(crate) struct Started(Pin<Box<dyn Launch>>);

impl Started {
    /// Polls it (inside the runtime it was spawned from); a self-wake is resumed in place while
    /// `may_resume` allows.
    #[inline]
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>, may_resume: &dyn Fn() -> bool) -> Step {
        self.0.as_mut().poll_step(cx, may_resume)
    }

    /// Cancels it at its await point (`shutdown_now`, or the pool is gone).
    pub(crate) fn cancel(&mut self) {
        self.0.as_mut().cancel()
    }
}

impl<F> Launch for Spawned<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn launch(self: Box<Self>, registry: &Arc<Registry>, release: Release) {
        let Spawned {
            fut,
            handle,
            runtime,
        } = *self;
        if let Some(fut) = fut {
            driver::launch(registry, fut, handle, release, runtime);
        }
    }

    fn run_here(self: Box<Self>) -> Result<(), PanicReport> {
        let Spawned {
            fut,
            handle,
            runtime,
        } = *self;
        match fut {
            Some(fut) => driver::run_here(fut, handle, &runtime),
            None => Ok(()),
        }
    }

    fn abandon(self: Box<Self>, why: Abandon) {
        let Spawned { fut, handle, .. } = *self;
        driver::abandon(fut, handle, why);
    }

    fn poll_step(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        may_resume: &dyn Fn() -> bool,
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
            runtime.enter(|| poll_resuming(cx, may_resume, |cx| fut.as_mut().poll(cx)))
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

    fn cancel(self: Pin<&mut Self>) {
        // SAFETY: as in `poll_step`: the future is dropped in place.
        let this = unsafe { self.get_unchecked_mut() };
        this.drop_fut();
        if this.handle.is_some() {
            this.finish(Err(TaskError::Cancelled));
        }
    }
}

impl Launcher {
    pub(crate) fn new<F>(fut: F, handle: Option<Completer<F::Output>>) -> Self
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let runtime = Runtime::current();
        let mut spawned = Box::<Spawned<F>>::new_uninit();
        let at = spawned.as_mut_ptr();
        // SAFETY: `at` is the box's allocation, aligned and sized for a `Spawned<F>`; each field
        // is written once, with nothing between the writes that can panic, before the box is
        // taken as initialised. Written in place, the future is copied once (from `fut`), not
        // into a `Spawned` on the stack and then into the box.
        let spawned = unsafe {
            std::ptr::addr_of_mut!((*at).fut).write(Some(fut));
            std::ptr::addr_of_mut!((*at).handle).write(handle);
            std::ptr::addr_of_mut!((*at).runtime).write(runtime);
            spawned.assume_init()
        };
        Launcher(spawned)
    }

    /// Started in place, in the driver of its lane (its first poll is the driver's to make).
    pub(crate) fn start(self) -> Started {
        Started(Box::into_pin(self.0))
    }

    /// Starts the future on the pool (first poll here); `release` is let go once it is done.
    pub(crate) fn launch(self, registry: &Arc<Registry>, release: Release) {
        self.0.launch(registry, release)
    }

    /// Drops the future unstarted, telling its handle why (its drop may panic: the caller
    /// contains it).
    pub(crate) fn abandon(self, why: Abandon) {
        self.0.abandon(why)
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
        let started = with_pool(&registry, |pool| match pool {
            Some(pool) if pool.may_start_future() => {
                launcher.launch(pool.registry, Release::None);
                None
            }
            _ => Some(launcher),
        });
        match started {
            None => Ok(()),
            Some(launcher) => launcher.0.run_here(),
        }
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
    start(registry, fut, |fut| {
        let (handle, completer) = TaskHandle::for_future();
        (handle, Launcher::new(fut, Some(completer)))
    })
}

/// `Pool::execute_async`: [`spawn`] with no handle (none is allocated).
pub(crate) fn execute<F>(registry: &Arc<Registry>, fut: F) -> Result<(), SubmitError<F>>
where
    F: Future<Output = ()> + Send + 'static,
{
    start(registry, fut, |fut| ((), Launcher::new(fut, None)))
}

/// Admits `fut`, then queues the launcher `wrap` makes of it as a plain job.
fn start<F, T>(
    registry: &Arc<Registry>,
    fut: F,
    wrap: impl FnOnce(F) -> (T, Launcher),
) -> Result<T, SubmitError<F>> {
    if let Err(why) = registry.admit() {
        return Err(refused(why, fut));
    }
    let (out, launcher) = wrap(fut);
    let task = launcher.into_runnable(Arc::downgrade(registry));
    registry.schedule(Work::Task(Task::new(task)));
    Ok(out)
}
