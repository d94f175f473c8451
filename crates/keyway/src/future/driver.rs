//! How a future runs on the pool: wrapped in a [`PoolFuture`] that contains its panics, obeys its
//! handle's `cancel`, and — exactly once, however it ends (completes, panics, is cancelled or
//! dropped by `shutdown_now`) — gives its handle the outcome, releases the context(s) it held and
//! counts its task finished.
//!
//! The driver is an `async-task` task whose schedule function queues its `Runnable` on the pool
//! as a `Work::Poll`: a future is polled only when woken. A future that wakes itself during its
//! poll (a yield) is polled again at once by the same worker, within the worker's continuation
//! streak (`probe`), as its queued poll would have been.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::probe::poll_resuming;
use super::runtime::Runtime;
use super::wake::spawn_on;
use crate::engine::holding::launching;
use crate::engine::{with_pool, OnPool, Registry};
use crate::error::{panic_message, panic_text, TaskError};
use crate::task::{contain, drop_quietly, Abandon, Completer, PanicReport};

/// What a future held while it ran, given back once it is done: the lane it suspended (a lane
/// stays scheduled without a job meanwhile), or every lane of a multi-key future.
pub(crate) trait Resume: Send + Sync {
    /// The future is done: let the lane(s) go on (unless the pool is stopping: `shutdown_now`'s
    /// drain takes them).
    fn resume(self: Arc<Self>, pool: &OnPool<'_>);
    /// The context hash its panic report carries, if it held one context.
    fn context_hash(&self) -> Option<u64>;
}

/// What a finished future lets go of (its context or contexts).
pub(crate) enum Release {
    /// Nothing: a plain future, or one run outside the pool.
    None,
    /// What it held (see [`Resume`]).
    Resume(Arc<dyn Resume>),
}

/// What happens once, when the future is done.
struct Finish<T> {
    handle: Option<Completer<T>>,
    release: Release,
    registry: Weak<Registry>,
    /// Its key in the pool's set of waiting futures, once it suspended.
    live: Option<u64>,
}

/// A future as the pool runs it.
pub(crate) struct PoolFuture<F: Future> {
    /// Structurally pinned; set to `None` (dropped in place) when done.
    fut: Option<F>,
    /// The tokio runtime it was spawned from (`tokio` feature; none for a bound pool), entered
    /// around each poll.
    runtime: Runtime,
    finish: Option<Finish<F::Output>>,
}

/// Drops the future in `fut` in place (its drop is user code: contained).
fn drop_fut<F>(fut: &mut Option<F>) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| *fut = None)) {
        tracing::error!(
            panic = panic_message(&*p),
            "keyway: a future's drop panicked"
        );
    }
}

impl<F: Future> PoolFuture<F> {
    fn done(&mut self, outcome: Option<Result<F::Output, TaskError>>, report: Option<PanicReport>) {
        drop_fut(&mut self.fut);
        let Some(Finish {
            handle,
            release,
            registry,
            live,
        }) = self.finish.take()
        else {
            return;
        };
        // User code, contained so that the bookkeeping below always runs: the awaiting
        // executor's waker, and the drop of the output when nobody holds the handle any more
        // (the handle's, or the outcome's with no handle).
        contain("a future's output or handle waker", move || {
            if let (Some(handle), Some(outcome)) = (&handle, outcome) {
                handle.finish(outcome);
            }
            drop(handle);
        });
        with_pool(&registry, |pool| {
            let Some(pool) = pool else {
                return;
            };
            if let Some(id) = live {
                pool.registry.futures.remove(id);
            }
            if let Some(report) = report {
                let context = match &release {
                    Release::Resume(held) => held.context_hash(),
                    Release::None => None,
                };
                pool.registry.report_panic_in(context, report);
            }
            if let Release::Resume(held) = release {
                held.resume(&pool);
            }
            pool.finished(1);
        });
    }
}

impl<F: Future> PoolFuture<F> {
    /// The poll returned `Pending` (`woke_itself`: by waking itself, its task already queued
    /// again): it waits, registered once in the pool's set of waiting futures, or it is
    /// cancelled at this await point if the pool is stopping.
    fn pending(&mut self, cx: &Context<'_>, woke_itself: bool) -> Poll<()> {
        let Some(finish) = self.finish.as_mut() else {
            return Poll::Pending;
        };
        let stopping = with_pool(&finish.registry, |pool| {
            let pool = pool?;
            if pool.stopping() {
                return Some(true);
            }
            // A future that woke itself is queued again: only a real wait is registered for
            // `shutdown_now` (`probe.rs`).
            if finish.live.is_none() && !woke_itself {
                finish.live = Some(pool.registry.futures.insert(cx.waker().clone()));
            }
            Some(false)
        });
        if stopping == Some(true) {
            // Shutdown step 2 (engine README): `shutdown_now` may have cancelled the waiting
            // set already: this await point is where the future is cancelled.
            self.done(Some(Err(TaskError::Cancelled)), None);
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// The poll panicked with `payload`: the handle's outcome if there is one (its report says
    /// the panic's text), else the panic hook's report.
    fn panicked(&mut self, payload: Box<dyn Any + Send>) {
        let has_handle = self.finish.as_ref().is_some_and(|f| f.handle.is_some());
        if has_handle {
            let report = PanicReport::new(panic_text(&*payload));
            self.done(Some(Err(TaskError::panicked(payload))), Some(report));
        } else {
            self.done(None, Some(PanicReport::from_payload(payload)));
        }
    }
}

/// One poll of `fut`, a future of the pool `finish` points to, inside the runtime it belongs in
/// (`Runtime::enter_for`: the pool's bound one, else `runtime`, the one it kept), its panic
/// caught. A self-wake (a yield) is resumed here while the worker's streak allows, unless the
/// handle was cancelled meanwhile (the next poll drops the future then). With the outcome:
/// whether a `Pending` future woke itself (see `poll_resuming`).
fn poll_caught<F: Future>(
    mut fut: Pin<&mut F>,
    finish: &Finish<F::Output>,
    runtime: &Runtime,
    cx: &mut Context<'_>,
) -> std::thread::Result<(Poll<F::Output>, bool)> {
    let may_resume = || {
        finish.handle.as_ref().is_none_or(Completer::is_live)
            && with_pool(&finish.registry, |pool| {
                pool.is_some_and(|p| p.may_resume())
            })
    };
    let poll = || poll_resuming(cx, may_resume, |cx| fut.as_mut().poll(cx));
    catch_unwind(AssertUnwindSafe(|| {
        with_pool(&finish.registry, |pool| {
            runtime.enter_for(pool.map(|p| &**p.registry), poll)
        })
    }))
}

impl<F: Future> Future for PoolFuture<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `fut` is never moved out of the driver: it is polled in place and dropped in
        // place (`self.fut = None`); no other field is pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(finish) = &this.finish else {
            return Poll::Ready(());
        };
        if let Some(handle) = &finish.handle {
            if !handle.keep_going(cx.waker()) {
                // Cancelled: before it started (it never runs), or at this await point.
                this.done(None, None);
                return Poll::Ready(());
            }
        }
        let Some(fut) = this.fut.as_mut() else {
            return Poll::Ready(());
        };
        // SAFETY: structural pinning of `fut` (see above).
        let fut = unsafe { Pin::new_unchecked(fut) };
        match poll_caught(fut, finish, &this.runtime, cx) {
            Ok((Poll::Ready(value), _)) => {
                this.done(Some(Ok(value)), None);
                Poll::Ready(())
            }
            Ok((Poll::Pending, woke_itself)) => this.pending(cx, woke_itself),
            Err(payload) => {
                this.panicked(payload);
                Poll::Ready(())
            }
        }
    }
}

impl<F: Future> Drop for PoolFuture<F> {
    fn drop(&mut self) {
        // Dropped unfinished: the pool cancelled it (`shutdown_now`) at an await point, or is
        // gone. The future is dropped inside the runtime its polls enter, wherever this runs
        // (`shutdown_now` from a thread in no runtime): its drop may use tokio as its polls did.
        let PoolFuture {
            fut,
            runtime,
            finish,
        } = self;
        if let (true, Some(finish)) = (fut.is_some(), finish.as_ref()) {
            with_pool(&finish.registry, |pool| {
                runtime.enter_for(pool.map(|p| &**p.registry), || drop_fut(fut))
            });
        }
        self.done(Some(Err(TaskError::Cancelled)), None);
    }
}

/// Starts `fut` on the pool: its first poll runs here, at once; later polls run on the pool's
/// workers when it is woken. Its task stays pending until the future is done.
pub(crate) fn launch<F>(
    registry: &Arc<Registry>,
    fut: F,
    handle: Option<Completer<F::Output>>,
    release: Release,
    runtime: Runtime,
) where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    registry.extend_task();
    let driver = PoolFuture {
        fut: Some(fut),
        runtime,
        finish: Some(Finish {
            handle,
            release,
            registry: Arc::downgrade(registry),
            live: None,
        }),
    };
    let first = spawn_on(registry, driver);
    launching(|| first.run());
}

/// Tells a future's handle that it was dropped without starting.
pub(crate) fn abandon<T, F>(fut: F, handle: Option<Completer<T>>, why: Abandon) {
    drop_quietly(fut);
    if let Some(handle) = handle {
        handle.abandon(why);
    }
}

/// Runs a future to completion on the calling thread (a future handed back by `shutdown_now`
/// and run by the caller). Its panic is caught and comes back as its report.
pub(crate) fn run_here<F: Future>(
    fut: F,
    handle: Option<Completer<F::Output>>,
    runtime: &Runtime,
) -> Result<(), PanicReport> {
    if let Some(handle) = &handle {
        if !handle.start() {
            drop_quietly(fut);
            return Ok(());
        }
    }
    let mut fut = std::pin::pin!(fut);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        runtime.enter(|| super::block::block_on(fut.as_mut()))
    }));
    match outcome {
        Ok(value) => {
            if let Some(handle) = handle {
                handle.finish(Ok(value));
            }
            Ok(())
        }
        Err(payload) => match handle {
            Some(handle) => {
                let report = PanicReport::new(panic_text(&*payload));
                handle.finish(Err(TaskError::panicked(payload)));
                Err(report)
            }
            None => Err(PanicReport::from_payload(payload)),
        },
    }
}
