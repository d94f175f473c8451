//! Invocation types: what a produced task declares about itself, and the thread-local
//! "non-blocking invocation" mode that chained strategies read (Jetty's `Invocable`).
//!
//! A task says whether running it may block ([`InvocationType`]); the strategy uses that to decide
//! where the task runs (README.md, Rule 7). While a task declared [`InvocationType::Either`] runs in
//! place on the producing thread, the thread is in *non-blocking mode*: the task, and any strategy
//! it runs in turn, must not block (Rule 8).

use std::cell::Cell;
use std::fmt;

/// Whether running a task may block its thread.
///
/// The adaptive strategy runs a task on the producing thread only when that cannot starve
/// production; the declared type is what it goes by (the table on
/// [`AdaptiveStrategy`](crate::AdaptiveStrategy) gives the mode each type gets).
///
/// ```
/// use keyway::InvocationType;
/// // A plain closure is assumed to block: the safe default, as in Jetty.
/// let task = || ();
/// assert_eq!(keyway::Invocable::invocation_type(&task), InvocationType::Blocking);
/// assert_eq!(InvocationType::default(), InvocationType::Blocking);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum InvocationType {
    /// The task never waits for anything (no lock held long, no I/O wait, no waiting for another
    /// task). It may run on the producing thread, which then goes on producing (produce-consume).
    NonBlocking,
    /// The task may wait: for I/O, a lock, or for something a later produced task delivers. It
    /// runs on the producing thread only after production was handed to another thread
    /// (execute-produce-consume); otherwise it goes to the executor (produce-execute-consume).
    #[default]
    Blocking,
    /// The task can run either way: blocking when its thread may block, otherwise in non-blocking
    /// mode ([`is_non_blocking_invocation`] is `true` while it runs), where it must not block.
    Either,
}

/// A task that declares its [`InvocationType`] and can be run once.
///
/// Any `FnOnce() + Send + 'static` closure is `Invocable` and declares
/// [`InvocationType::Blocking`]; wrap a closure in [`DeclaredTask`] to declare another type, or
/// implement the trait on your own task type.
///
/// ```
/// use keyway::{Invocable, InvocationType};
///
/// struct Frame(u32);
/// impl Invocable for Frame {
///     fn invocation_type(&self) -> InvocationType {
///         InvocationType::NonBlocking // parsing a frame never waits
///     }
///     fn run(self) {
///         assert_eq!(self.0, 7);
///     }
/// }
/// let frame = Frame(7);
/// assert_eq!(frame.invocation_type(), InvocationType::NonBlocking);
/// frame.run();
/// ```
pub trait Invocable: Send + 'static {
    /// Whether running this task may block.
    ///
    /// See [`Invocable`]'s example.
    fn invocation_type(&self) -> InvocationType;

    /// Runs the task.
    ///
    /// See [`Invocable`]'s example.
    fn run(self);
}

impl<F> Invocable for F
where
    F: FnOnce() + Send + 'static,
{
    /// A plain closure may block.
    fn invocation_type(&self) -> InvocationType {
        InvocationType::Blocking
    }

    fn run(self) {
        self()
    }
}

/// A closure with a declared [`InvocationType`].
///
/// The default type parameter is a boxed closure, so that a producer whose tasks are different
/// closures can name one task type: `DeclaredTask` (see [`DeclaredTask::boxed`]).
///
/// ```
/// use keyway::{DeclaredTask, Invocable, InvocationType};
/// let (tx, rx) = std::sync::mpsc::channel();
/// let task = DeclaredTask::non_blocking(move || tx.send("parsed").unwrap());
/// assert_eq!(task.invocation_type(), InvocationType::NonBlocking);
/// task.run();
/// assert_eq!(rx.recv().unwrap(), "parsed");
/// ```
pub struct DeclaredTask<F = Box<dyn FnOnce() + Send + 'static>> {
    invocation_type: InvocationType,
    f: F,
}

impl<F> DeclaredTask<F>
where
    F: FnOnce() + Send + 'static,
{
    /// `f`, declared as `invocation_type`.
    ///
    /// ```
    /// use keyway::{DeclaredTask, Invocable, InvocationType};
    /// let task = DeclaredTask::new(InvocationType::Either, || ());
    /// assert_eq!(task.invocation_type(), InvocationType::Either);
    /// ```
    pub fn new(invocation_type: InvocationType, f: F) -> Self {
        DeclaredTask { invocation_type, f }
    }

    /// `f`, declared [`InvocationType::NonBlocking`].
    ///
    /// ```
    /// use keyway::{DeclaredTask, Invocable, InvocationType};
    /// assert_eq!(DeclaredTask::non_blocking(|| ()).invocation_type(), InvocationType::NonBlocking);
    /// ```
    pub fn non_blocking(f: F) -> Self {
        DeclaredTask::new(InvocationType::NonBlocking, f)
    }

    /// `f`, declared [`InvocationType::Blocking`].
    ///
    /// ```
    /// use keyway::{DeclaredTask, Invocable, InvocationType};
    /// assert_eq!(DeclaredTask::blocking(|| ()).invocation_type(), InvocationType::Blocking);
    /// ```
    pub fn blocking(f: F) -> Self {
        DeclaredTask::new(InvocationType::Blocking, f)
    }

    /// `f`, declared [`InvocationType::Either`].
    ///
    /// ```
    /// use keyway::{DeclaredTask, Invocable, InvocationType};
    /// assert_eq!(DeclaredTask::either(|| ()).invocation_type(), InvocationType::Either);
    /// ```
    pub fn either(f: F) -> Self {
        DeclaredTask::new(InvocationType::Either, f)
    }
}

impl DeclaredTask {
    /// `f` boxed, declared as `invocation_type`: one task type for closures of any type.
    ///
    /// ```
    /// use keyway::{DeclaredTask, Invocable, InvocationType};
    /// let tasks: Vec<DeclaredTask> = vec![
    ///     DeclaredTask::boxed(InvocationType::NonBlocking, || ()),
    ///     DeclaredTask::boxed(InvocationType::Blocking, move || drop(String::from("other type"))),
    /// ];
    /// assert_eq!(tasks[1].invocation_type(), InvocationType::Blocking);
    /// ```
    pub fn boxed(invocation_type: InvocationType, f: impl FnOnce() + Send + 'static) -> Self {
        DeclaredTask {
            invocation_type,
            f: Box::new(f),
        }
    }
}

impl<F> Invocable for DeclaredTask<F>
where
    F: FnOnce() + Send + 'static,
{
    fn invocation_type(&self) -> InvocationType {
        self.invocation_type
    }

    fn run(self) {
        (self.f)()
    }
}

impl<F> fmt::Debug for DeclaredTask<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeclaredTask")
            .field("invocation_type", &self.invocation_type)
            .finish_non_exhaustive()
    }
}

#[cfg(not(loom))]
thread_local! {
    /// Rule 8: true while this thread runs something in non-blocking mode.
    static NON_BLOCKING: Cell<bool> = const { Cell::new(false) };
}

// Under loom, model threads share an OS thread: the flag must be loom's thread-local.
#[cfg(loom)]
loom::thread_local! {
    static NON_BLOCKING: Cell<bool> = Cell::new(false);
}

/// True while the current thread runs a task in non-blocking mode: an [`InvocationType::Either`]
/// task consumed in place by produce-invoke-consume, or anything inside [`invoke_non_blocking`].
///
/// Code that would block should not, and a strategy started on this thread never consumes a
/// blocking task in place nor hands production off (a `Blocking` task goes to the executor, an
/// `Either` one runs here in non-blocking mode): chained strategies stay non-blocking all the
/// way down.
///
/// ```
/// assert!(!keyway::is_non_blocking_invocation());
/// keyway::invoke_non_blocking(|| assert!(keyway::is_non_blocking_invocation()));
/// assert!(!keyway::is_non_blocking_invocation());
/// ```
pub fn is_non_blocking_invocation() -> bool {
    NON_BLOCKING.with(Cell::get)
}

/// Runs `f` on this thread in non-blocking mode: [`is_non_blocking_invocation`] is `true` until
/// `f` returns (or panics), then back to what it was.
///
/// ```
/// let inside = keyway::invoke_non_blocking(|| keyway::is_non_blocking_invocation());
/// assert!(inside);
/// assert!(!keyway::is_non_blocking_invocation());
/// ```
pub fn invoke_non_blocking<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the previous mode back, on return or unwind.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            NON_BLOCKING.with(|flag| flag.set(self.0));
        }
    }
    let _restore = Restore(NON_BLOCKING.with(|flag| flag.replace(true)));
    f()
}
