//! Typed lanes whose handler is async: `Pool::typed_lanes_async`. Each message's future holds
//! its key until it completes (rule 7), so a per-key handler can await I/O in order.

use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;

use super::state::KeyState;
use super::typed::TypedLanes;
use crate::pool::Pool;

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;
type SyncHandler<K, M, S> = dyn Fn(&K, &mut S, M) + Send + Sync + 'static;
type AsyncHandler<K, M> = dyn Fn(&K, M) -> BoxFuture + Send + Sync + 'static;

/// A typed lane table's handler: run to the end (with the key's state), or started as a future
/// (stateless: its table's state is `()`, kept in no slot).
pub(crate) enum TypedHandler<K, M, S> {
    Sync(Box<SyncHandler<K, M, S>>),
    Async(Box<AsyncHandler<K, M>>),
}

impl Pool {
    /// Lanes of messages of type `M`, keyed by `K`, handled by an async `handler`: the future
    /// `handler(&key, msg)` returns runs on the pool, and the key's next message is handled only
    /// once it completed, awaits included. Other keys go on meanwhile; a waiting handler holds
    /// no thread. A panic of the handler or of its future is reported and the key goes on.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = keyway::Pool::new().unwrap();
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let sink = log.clone();
    /// let frames = pool.typed_lanes_async(move |conn: &u32, frame: u32| {
    ///     let (sink, conn) = (sink.clone(), *conn);
    ///     async move {
    ///         let (tx, rx) = futures::channel::oneshot::channel();
    ///         std::thread::spawn(move || tx.send(()).unwrap());
    ///         rx.await.unwrap(); // e.g. a write to the connection
    ///         sink.lock().unwrap().push((conn, frame));
    ///     }
    /// });
    /// for frame in 0..10 {
    ///     frames.send(frame % 2, frame).unwrap();
    /// }
    /// pool.shutdown();
    /// let log = log.lock().unwrap();
    /// for conn in 0..2 {
    ///     let mine: Vec<_> = log.iter().filter(|(c, _)| *c == conn).map(|(_, f)| *f).collect();
    ///     assert_eq!(mine, (0..10).filter(|f| f % 2 == conn).collect::<Vec<_>>());
    /// }
    /// ```
    pub fn typed_lanes_async<K, M, H, Fut>(&self, handler: H) -> TypedLanes<K, M>
    where
        K: Hash + Eq + Send + Sync + 'static,
        M: Send + 'static,
        H: Fn(&K, M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let handler = move |key: &K, msg: M| -> BoxFuture { Box::pin(handler(key, msg)) };
        self.make_typed_lanes(
            KeyState::new(|_| ()),
            TypedHandler::Async(Box::new(handler)),
            true,
        )
    }
}
