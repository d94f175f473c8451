//! The producer: where tasks come from (a selector's ready keys, a connection's frames, …).

use super::invocation::Invocable;

/// Yields the tasks an [`AdaptiveStrategy`](crate::AdaptiveStrategy) consumes.
///
/// The strategy calls [`produce`](Producer::produce) from one thread at a time (a thread that
/// wants production while another has it never waits: it asks the owner to call the producer
/// once more), so the producer needs no lock of its own; it is `Send` because
/// production moves between threads. `None` means "nothing to do right now": production stops
/// until someone calls [`AdaptiveStrategy::produce`](crate::AdaptiveStrategy::produce) or
/// [`dispatch`](crate::AdaptiveStrategy::dispatch) again (for example when new data arrives).
///
/// `produce` itself should not block for long: while it runs, nothing else is produced.
///
/// Any `FnMut() -> Option<T> + Send + 'static` closure is a producer of `T`s.
///
/// ```
/// use keyway::{DeclaredTask, Producer};
///
/// struct Countdown(u32);
/// impl Producer for Countdown {
///     type Task = DeclaredTask<Box<dyn FnOnce() + Send>>;
///     fn produce(&mut self) -> Option<Self::Task> {
///         self.0 = self.0.checked_sub(1)?;
///         Some(DeclaredTask::boxed(keyway::InvocationType::NonBlocking, || ()))
///     }
/// }
/// let mut countdown = Countdown(2);
/// assert!(countdown.produce().is_some());
/// assert!(countdown.produce().is_some());
/// assert!(countdown.produce().is_none());
/// ```
pub trait Producer: Send + 'static {
    /// The tasks this producer yields.
    type Task: Invocable;

    /// The next task, or `None` if there is nothing to do right now.
    ///
    /// See [`Producer`]'s example.
    fn produce(&mut self) -> Option<Self::Task>;
}

impl<F, T> Producer for F
where
    F: FnMut() -> Option<T> + Send + 'static,
    T: Invocable,
{
    type Task = T;

    fn produce(&mut self) -> Option<T> {
        self()
    }
}
