//! A submitted future before it starts: what a lane entry, a multi-key task or a plain job holds,
//! and what `shutdown_now` hands back when it had not started.

use std::future::Future;
use std::sync::{Arc, Weak};

use super::driver::{self, Release};
use super::runtime::Runtime;
use crate::engine::{refused, with_pool, Registry, Work};
use crate::error::SubmitError;
use crate::task::{Abandon, Completer, PanicReport, Runnable, Task, TaskHandle};

/// A future not yet started, type-erased.
pub(crate) struct Launcher(Box<dyn Launch>);

trait Launch: Send {
    fn launch(self: Box<Self>, registry: &Arc<Registry>, release: Release);
    fn run_here(self: Box<Self>) -> Result<(), PanicReport>;
    fn abandon(self: Box<Self>, why: Abandon);
}

struct Spawned<F: Future> {
    fut: F,
    handle: Option<Completer<F::Output>>,
    /// The tokio runtime current at spawn (`tokio` feature), entered around each poll.
    runtime: Runtime,
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
        driver::launch(registry, fut, handle, release, runtime);
    }

    fn run_here(self: Box<Self>) -> Result<(), PanicReport> {
        let Spawned {
            fut,
            handle,
            runtime,
        } = *self;
        driver::run_here(fut, handle, &runtime)
    }

    fn abandon(self: Box<Self>, why: Abandon) {
        let Spawned { fut, handle, .. } = *self;
        driver::abandon(fut, handle, why);
    }
}

impl Launcher {
    pub(crate) fn new<F>(fut: F, handle: Option<Completer<F::Output>>) -> Self
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Launcher(Box::new(Spawned {
            fut,
            handle,
            runtime: Runtime::current(),
        }))
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
