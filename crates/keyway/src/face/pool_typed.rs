//! [`Pool`]'s typed lanes: one handler for every key, sync, with state, or async (with state
//! loaded and saved by futures too).

use std::future::Future;
use std::hash::Hash;

use super::pool::Pool;
use super::typed_lanes::TypedLanes;
use crate::error::StateError;
use crate::lane::typed::{self, TypedHandler};
use crate::lane::{split_loaded, AsyncKeyState, KeyState, Loaded};

impl Pool {
    /// Lanes of messages of type `M`, keyed by `K`, all handled by `handler` (see
    /// [`TypedLanes`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let lanes = pool.typed_lanes(move |key: &&str, n: u32| tx.send((*key, n)).unwrap());
    /// lanes.send("a", 1).unwrap();
    /// assert_eq!(rx.recv().unwrap(), ("a", 1));
    /// ```
    pub fn typed_lanes<K, M, H>(&self, handler: H) -> TypedLanes<K, M>
    where
        K: Hash + Eq + Send + Sync + 'static,
        M: Send + 'static,
        H: Fn(&K, M) + Send + Sync + 'static,
    {
        self.typed(
            KeyState::new(|_| ()),
            TypedHandler::Stateless(Box::new(handler)),
        )
    }

    /// Typed lanes whose handler also gets the key's state, `handler(&key, &mut state, msg)`;
    /// `state` says how a key's state is made and let go of. See [`TypedLanes`], "Keyed state",
    /// for how long a state lives.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let counters = pool.typed_lanes_with_state(
    ///     keyway::KeyState::new(|_: &u8| 0u32),
    ///     |_: &u8, count: &mut u32, add: u32| *count += add,
    /// );
    /// counters.send(1, 5).unwrap();
    /// counters.send(1, 6).unwrap();
    /// # counters.flush(1).unwrap().join().unwrap();
    /// ```
    pub fn typed_lanes_with_state<K, M, S, H>(
        &self,
        state: KeyState<K, S>,
        handler: H,
    ) -> TypedLanes<K, M, S>
    where
        K: Hash + Eq + Send + Sync + 'static,
        M: Send + 'static,
        S: Send + 'static,
        H: Fn(&K, &mut S, M) + Send + Sync + 'static,
    {
        self.typed(state, TypedHandler::Sync(Box::new(handler)))
    }

    /// Lanes of messages of type `M`, keyed by `K`, handled by an async `handler`: the future
    /// `handler(&key, msg)` returns runs on the pool, and the key's next message is handled only
    /// once it completed, awaits included. Other keys go on meanwhile; a waiting handler holds
    /// no thread. A panic of the handler or of its future is reported (see
    /// [`TypedLanes::send`]) and the key goes on.
    ///
    /// With keyway's `tokio` feature, lanes made from inside a tokio runtime poll their
    /// handlers' futures inside it (and call the handler there), so they may await its timers
    /// and sockets directly; see [`actors`](crate::actors).
    ///
    /// A busy key's messages are handled one after another by one task, holding each message's
    /// future in place: no allocation per message.
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
        self.typed(KeyState::new(|_| ()), TypedHandler::new_async(handler))
    }

    /// Async typed lanes whose handler owns its key's state: `handler(&key, state, msg)` takes
    /// the state by value and its future gives it back, for the key's next message. `state`
    /// says how a key's state is made and let go of (see [`TypedLanes`], "Keyed state", for how
    /// long it lives). The rules of [`typed_lanes_async`](Pool::typed_lanes_async) hold: one
    /// message of a key at a time, in order, awaits included.
    ///
    /// If a message's handler or future panics, the state it held is dropped with it, and the
    /// key's next message starts from a new one (`init`); at
    /// [`shutdown_now`](Pool::shutdown_now), a future cancelled at an await point drops the
    /// state it held.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let (saved, rx) = std::sync::mpsc::channel();
    /// let state = keyway::KeyState::new(|_: &&str| Vec::<u32>::new())
    ///     .on_idle(move |account: &&str, log: Vec<u32>| saved.send((*account, log)).unwrap());
    /// let accounts = pool.typed_lanes_async_with_state(state, |_: &&str, mut log, amount: u32| {
    ///     async move {
    ///         futures::future::ready(()).await; // e.g. a database write
    ///         log.push(amount);
    ///         log // the state, for the next message
    ///     }
    /// });
    /// for amount in [10, 20, 30] {
    ///     accounts.send("acct-1", amount).unwrap();
    /// }
    /// pool.shutdown(); // frees every lane: each state goes to `on_idle`
    /// assert_eq!(rx.recv().unwrap(), ("acct-1", vec![10, 20, 30]));
    /// ```
    pub fn typed_lanes_async_with_state<K, M, S, H, Fut>(
        &self,
        state: KeyState<K, S>,
        handler: H,
    ) -> TypedLanes<K, M, S>
    where
        K: Hash + Eq + Send + Sync + 'static,
        M: Send + 'static,
        S: Send + 'static,
        H: Fn(&K, S, M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = S> + Send + 'static,
    {
        self.typed(state, TypedHandler::new_async_with_state(handler))
    }

    /// Async typed lanes whose key's state is loaded and saved by futures: `state` (an
    /// [`AsyncKeyState`]) loads it before the key's first message, and saves it when the key's
    /// lane is freed, in the key's order (a load waits for a save of the same key still under
    /// way). `handler(&key, state, msg)` gets the state by value, or why there is none
    /// ([`StateError`]: the message is handled all the same), and its future gives back the
    /// state to keep (`None`: nothing to keep; the key's next message loads again). The rules
    /// of [`typed_lanes_async_with_state`](Pool::typed_lanes_async_with_state) hold.
    ///
    /// A loading key holds no thread. A key's first message costs one allocation for its load;
    /// its later messages, none.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use std::sync::{Arc, Mutex};
    /// let db = Arc::new(Mutex::new(HashMap::new()));
    /// let (reader, writer) = (db.clone(), db.clone());
    /// let state = keyway::AsyncKeyState::new(move |account: &&str| {
    ///     let stored = reader.lock().unwrap().get(account).copied();
    ///     async move { Ok::<i64, String>(stored.unwrap_or(0)) }
    /// })
    /// .on_idle(move |account: &&str, balance: i64| {
    ///     writer.lock().unwrap().insert(*account, balance);
    ///     async { Ok(()) }
    /// });
    /// let pool = keyway::Pool::new().unwrap();
    /// let accounts = pool.typed_lanes_async_loaded(state, |_, balance, deposit: i64| async move {
    ///     balance.ok().map(|b| b + deposit) // keep the new balance
    /// });
    /// for deposit in [5, 10, 20] {
    ///     accounts.send("acct-7", deposit).unwrap();
    /// }
    /// pool.shutdown(); // frees every lane: each balance is saved, and waited for
    /// assert_eq!(db.lock().unwrap()["acct-7"], 35);
    /// ```
    pub fn typed_lanes_async_loaded<K, M, S, E, H, Fut>(
        &self,
        state: AsyncKeyState<K, S, E>,
        handler: H,
    ) -> TypedLanes<K, M, Loaded<S>>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        M: Send + 'static,
        S: Send + 'static,
        E: Send + 'static,
        H: Fn(&K, Result<S, StateError<E>>, M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<S>> + Send + 'static,
    {
        let (key_state, call) = split_loaded(state, handler, self.registry());
        self.typed(key_state, TypedHandler::new_async_with_state(call))
    }

    fn typed<K, M, S>(
        &self,
        state: KeyState<K, S>,
        handler: TypedHandler<K, M, S>,
    ) -> TypedLanes<K, M, S>
    where
        K: Hash + Eq + Send + Sync + 'static,
        M: Send + 'static,
        S: Send + 'static,
    {
        TypedLanes {
            pool: self.clone(),
            table: typed::new_table(self.registry(), state, handler),
        }
    }
}
