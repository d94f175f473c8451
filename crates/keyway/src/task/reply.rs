//! `Reply`: the answering side of a request made with `TypedLanes::ask`.

use std::fmt;

use super::{Completer, TaskHandle};
use crate::error::TaskError;

/// The way back to whoever made a request with [`TypedLanes::ask`](crate::TypedLanes::ask):
/// the handler answers with [`send`](Reply::send), and the asker's [`TaskHandle`] completes
/// with the value.
///
/// A reply is answered at most once. One dropped unanswered — by the handler, by the
/// handler's panic, or with its message when the message is dropped unhandled (a coalescing
/// message replaced, or a message handed back by [`Pool::shutdown_now`](crate::Pool::shutdown_now)
/// and dropped) — completes the handle with [`TaskError::Unanswered`], so an asker never waits
/// for an answer that cannot come.
///
/// ```
/// enum Msg {
///     Add(i64),
///     Balance(keyway::Reply<i64>),
/// }
/// let pool = keyway::Pool::new().unwrap();
/// let accounts = pool.typed_lanes_with_state(
///     keyway::KeyState::new(|_: &u32| 0i64),
///     |_: &u32, balance: &mut i64, msg: Msg| match msg {
///         Msg::Add(amount) => *balance += amount,
///         Msg::Balance(reply) => reply.send(*balance),
///     },
/// );
/// accounts.send(7, Msg::Add(40)).unwrap();
/// accounts.send(7, Msg::Add(2)).unwrap();
/// let balance = accounts.ask(7, Msg::Balance).unwrap(); // after both adds
/// assert_eq!(balance.join().unwrap(), 42);
/// ```
#[must_use = "a reply dropped unanswered completes the asker's handle with TaskError::Unanswered"]
pub struct Reply<T> {
    completer: Option<Completer<T>>,
}

impl<T> Reply<T> {
    /// A reply and the handle its answer completes. The handle starts as a running task's:
    /// the request is on its way, so `cancel` cannot take it back.
    pub(crate) fn pair() -> (TaskHandle<T>, Reply<T>) {
        let (handle, completer) = TaskHandle::for_future();
        completer.start();
        let reply = Reply {
            completer: Some(completer),
        };
        (handle, reply)
    }

    /// Answers the request: the asker's handle completes with `value`. If nobody holds the
    /// handle any more, `value` is dropped.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let doubler = pool.typed_lanes(|_: &u8, (n, reply): (u32, keyway::Reply<u32>)| {
    ///     reply.send(2 * n)
    /// });
    /// let answer = doubler.ask(0, |reply| (21, reply)).unwrap();
    /// assert_eq!(answer.join().unwrap(), 42);
    /// ```
    pub fn send(mut self, value: T) {
        if let Some(completer) = self.completer.take() {
            completer.finish(Ok(value));
        }
    }

    /// False once the asker dropped its handle (and every
    /// [`AbortHandle`](crate::AbortHandle) made from it): nobody would see an answer, so
    /// costly work for it may be skipped.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let lanes = pool.typed_lanes(move |_: &u8, reply: keyway::Reply<()>| {
    ///     tx.send(reply.is_wanted()).unwrap();
    /// });
    /// lanes.ask(0, |reply| reply).unwrap().join().unwrap_err(); // unanswered, but wanted
    /// drop(lanes.ask(0, |reply| reply).unwrap()); // nobody waits for this one
    /// pool.shutdown();
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [true, false]);
    /// ```
    pub fn is_wanted(&self) -> bool {
        self.completer.as_ref().is_some_and(Completer::has_waiter)
    }
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if let Some(completer) = self.completer.take() {
            completer.finish(Err(TaskError::Unanswered));
        }
    }
}

impl<T> fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reply")
            .field("wanted", &self.is_wanted())
            .finish()
    }
}
