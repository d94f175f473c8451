//! How the pool starts its threads: name, stack size, and the user's start and stop hooks.
//!
//! Every thread the pool starts gets the configured stack size. The hooks run on the threads
//! that run tasks — core and auxiliary workers, reserved threads — once at start, before the
//! first task, and once at exit, after the last; the monitor runs no task and gets no hooks.
//! A panic in a hook is caught and reported to the panic hook (not counted as a panicked task);
//! the thread goes on.

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

/// Runs the start hook now and the stop hook when dropped. Made by a task-running thread once
/// it is known as the pool's own (so that `shutdown` called from a hook does not wait for it).
pub(crate) struct Hooks<'a> {
    registry: &'a Registry,
}

impl<'a> Hooks<'a> {
    pub(crate) fn start(registry: &'a Registry) -> Self {
        run_hook(
            registry,
            registry.config.on_thread_start.as_ref(),
            "on_thread_start",
        );
        Hooks { registry }
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
