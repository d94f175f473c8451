//! How the pool starts its threads: name, stack size, and the user's start and stop hooks.
//!
//! Every thread the pool starts gets the configured stack size. The hooks run on the threads
//! that run tasks — core and auxiliary workers, reserved threads — once at start, before the
//! first task, and once at exit, after the last; the monitor runs no task and gets no hooks.
//! A panic in a hook is caught and reported to the panic hook (not counted as a panicked task);
//! the thread goes on.
//!
//! A pool bound to a tokio runtime (`PoolBuilder::tokio_runtime`, the `tokio` feature): each of
//! those threads enters the runtime once, before its start hook, and leaves it after its stop
//! hook, so its hooks, tasks and polls all run inside it; a poll there enters nothing more
//! ([`lives_in_runtime_of`]).

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::config::{Config, ThreadHook};
use super::registry::Registry;
use crate::error::panic_message;
use crate::task::PanicReport;

/// A thread builder with the pool's settings (the caller names the thread).
pub(crate) fn builder(config: &Config) -> std::thread::Builder {
    let builder = std::thread::Builder::new();
    match config.stack_size {
        Some(size) => builder.stack_size(size),
        None => builder,
    }
}

/// Runs the start hook now and the stop hook when dropped, both inside the pool's bound
/// runtime if it has one (entered first, left last). Made by a task-running thread once it is
/// known as the pool's own (so that `shutdown` called from a hook does not wait for it).
pub(crate) struct Hooks<'a> {
    registry: &'a Registry,
    /// Dropped after the stop hook ran (a field drops after `Drop::drop`).
    _inside: Inside<'a>,
}

impl<'a> Hooks<'a> {
    pub(crate) fn start(registry: &'a Registry) -> Self {
        let inside = Inside::enter(registry);
        run_hook(
            registry,
            registry.config.on_thread_start.as_ref(),
            "on_thread_start",
        );
        Hooks {
            registry,
            _inside: inside,
        }
    }
}

#[cfg(feature = "tokio")]
thread_local! {
    /// The pool whose bound runtime this thread lives inside (null: none). Compared, never
    /// dereferenced; a const-initialised `Cell` with no destructor: one load to read.
    static INSIDE: std::cell::Cell<*const Registry> = const { std::cell::Cell::new(std::ptr::null()) };
}

/// True if this thread is one of the threads of the pool of `registry` and lives inside the
/// runtime the pool is bound to: a poll made here for that pool has nothing to enter.
#[cfg(feature = "tokio")]
#[inline]
pub(crate) fn lives_in_runtime_of(registry: &Registry) -> bool {
    INSIDE.with(|inside| std::ptr::eq(inside.get(), registry))
}

/// A pool thread's stay inside its pool's bound runtime (nothing for an unbound pool).
struct Inside<'a> {
    #[cfg(feature = "tokio")]
    entered: Option<tokio::runtime::EnterGuard<'a>>,
    _registry: std::marker::PhantomData<&'a Registry>,
}

impl<'a> Inside<'a> {
    fn enter(registry: &'a Registry) -> Self {
        #[cfg(feature = "tokio")]
        let entered = registry.config.runtime.as_ref().map(|runtime| {
            let entered = runtime.enter();
            INSIDE.with(|inside| inside.set(registry));
            entered
        });
        #[cfg(not(feature = "tokio"))]
        let _ = registry;
        Inside {
            #[cfg(feature = "tokio")]
            entered,
            _registry: std::marker::PhantomData,
        }
    }
}

#[cfg(feature = "tokio")]
impl Drop for Inside<'_> {
    fn drop(&mut self) {
        let Some(entered) = self.entered.take() else {
            return;
        };
        INSIDE.with(|inside| inside.set(std::ptr::null()));
        // tokio panics if a guard of a runtime entered later on this thread (by a task, and
        // never dropped) is still in place: the thread ends all the same.
        if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(entered))) {
            tracing::error!(
                panic = panic_message(&*payload),
                "keyway: leaving the pool's tokio runtime panicked"
            );
        }
    }
}

impl Drop for Hooks<'_> {
    fn drop(&mut self) {
        let registry = self.registry;
        run_hook(
            registry,
            registry.config.on_thread_stop.as_ref(),
            "on_thread_stop",
        );
    }
}

fn run_hook(registry: &Registry, hook: Option<&ThreadHook>, which: &str) {
    let Some(hook) = hook else { return };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| hook())) {
        let message = format!("{which} panicked: {}", panic_message(&*payload));
        // Dropping the payload is user code too; a payload whose drop panics is leaked.
        if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            std::mem::forget(again);
        }
        registry.notify_panic(PanicReport::new(message));
    }
}
