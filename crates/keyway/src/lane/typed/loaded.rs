//! State per key that loads and saves asynchronously ([`AsyncKeyState`]), for async typed lanes
//! (`Pool::typed_lanes_async_loaded`). Built on the lanes' own keyed state (`state.rs`) and
//! their async handlers, with no change to either:
//!
//! * the key's slot holds a [`Loaded`]: the state, or nothing yet;
//! * a message that finds nothing yet runs the load first, inside its own future: the key's later
//!   messages wait behind it as they wait behind any future of the key, so none runs before the
//!   load finishes;
//! * when the key's lane is freed, its state goes to the save, started as a future of the pool
//!   (an accepted task: a graceful shutdown waits for it), registered under the key until it
//!   finishes; a load of the same key waits for that save first;
//! * a failed load, or a failed save found by the next load, is given to the message as its
//!   state's `Err`: the message is handled, not dropped.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use super::state::KeyState;
use crate::engine::Registry;
use crate::error::StateError;
use crate::future::{execute, run_here, Runtime};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
type LoadFn<K, S, E> = dyn Fn(&K) -> BoxFuture<Result<S, E>> + Send + Sync + 'static;
type SaveFn<K, S, E> = dyn Fn(&K, S) -> BoxFuture<Result<(), E>> + Send + Sync + 'static;

/// How async typed lanes load a key's state before its first message and save it when the
/// key's lane is freed, each as a future: the first argument of
/// [`Pool::typed_lanes_async_loaded`](crate::Pool::typed_lanes_async_loaded).
///
/// The load runs in the key's order: no message of the key is handled before it finished. The
/// save starts when the key's lane is freed (idle, see
/// [`PoolBuilder::keep_idle`](crate::PoolBuilder::keep_idle), or at shutdown), and a later load
/// of the same key starts only once that save finished. A failed load or save is handed to the
/// key's next message as [`StateError`].
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::{Arc, Mutex};
/// let db = Arc::new(Mutex::new(HashMap::from([(1u32, 100i64)])));
/// let (reader, writer) = (db.clone(), db.clone());
/// let state = keyway::AsyncKeyState::new(move |account: &u32| {
///     let balance = reader.lock().unwrap().get(account).copied().unwrap_or(0);
///     async move { Ok::<i64, String>(balance) } // e.g. a database read
/// })
/// .on_idle(move |account: &u32, balance: i64| {
///     writer.lock().unwrap().insert(*account, balance);
///     async { Ok(()) } // e.g. a database write
/// });
/// # let _ = state;
/// ```
pub struct AsyncKeyState<K, S, E> {
    load: Arc<LoadFn<K, S, E>>,
    save: Option<Arc<SaveFn<K, S, E>>>,
}

impl<K, S, E> AsyncKeyState<K, S, E> {
    /// State loaded by the future `load(&key)` before a key's first message (first since its
    /// lane was last freed). A load that fails gives its error to that message (as
    /// [`StateError::Load`]); the key's next message loads again.
    ///
    /// ```
    /// let state = keyway::AsyncKeyState::new(|user: &String| {
    ///     let greeting = format!("hello, {user}");
    ///     async move { Ok::<_, std::io::Error>(greeting) }
    /// });
    /// # let _ = state;
    /// ```
    pub fn new<L, Fut>(load: L) -> Self
    where
        L: Fn(&K) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<S, E>> + Send + 'static,
    {
        AsyncKeyState {
            load: Arc::new(move |key: &K| -> BoxFuture<Result<S, E>> { Box::pin(load(key)) }),
            save: None,
        }
    }

    /// Saves a key's state with the future `save(&key, state)` when its lane is freed, instead
    /// of dropping it. The future runs on the pool (with the `tokio` feature, inside the tokio
    /// runtime the pool is bound to, else the one the lanes were made in), and
    /// [`Pool::shutdown`](crate::Pool::shutdown) waits for it; a save started once the pool has
    /// stopped its threads runs on the thread that freed the lane (inside the same runtime). A
    /// save that fails gives its error to the key's next message (as [`StateError::Save`]),
    /// whose load is skipped; the failure is logged too.
    ///
    /// ```
    /// let state = keyway::AsyncKeyState::new(|_: &u8| async { Ok::<u64, String>(0) })
    ///     .on_idle(|key: &u8, count: u64| {
    ///         let line = format!("{key}: {count}");
    ///         async move { if line.is_empty() { Err(line) } else { Ok(()) } }
    ///     });
    /// # let _ = state;
    /// ```
    pub fn on_idle<F, Fut>(mut self, save: F) -> Self
    where
        F: Fn(&K, S) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
    {
        self.save = Some(Arc::new(
            move |key: &K, state: S| -> BoxFuture<Result<(), E>> { Box::pin(save(key, state)) },
        ));
        self
    }
}

impl<K, S, E> fmt::Debug for AsyncKeyState<K, S, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncKeyState")
            .field("on_idle", &self.save.is_some())
            .finish_non_exhaustive()
    }
}

/// A key's state as lanes with an [`AsyncKeyState`] keep it: loaded, or not (yet). It appears
/// only as the state type of their [`TypedLanes`](crate::TypedLanes).
///
/// ```
/// let pool = keyway::Pool::new().unwrap();
/// let state = keyway::AsyncKeyState::new(|_: &u8| async { Ok::<u32, String>(1) });
/// let lanes: keyway::TypedLanes<u8, u32, keyway::Loaded<u32>> =
///     pool.typed_lanes_async_loaded(state, |_, total, add: u32| async move {
///         total.ok().map(|t| t + add)
///     });
/// lanes.send(1, 2).unwrap();
/// ```
pub struct Loaded<S>(Option<S>);

impl<S> fmt::Debug for Loaded<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Loaded").field(&self.0.is_some()).finish()
    }
}

/// The saves under way, per key, and the outcome of a failed one until a load takes it.
struct Saves<K, E> {
    by_key: Mutex<HashMap<K, Arc<Saving<E>>>>,
}

/// One save: done once its future finished (or was dropped), with its error if it failed.
struct Saving<E> {
    state: Mutex<SavingState<E>>,
}

struct SavingState<E> {
    done: bool,
    error: Option<E>,
    wakers: Vec<Waker>,
}

impl<E> Saving<E> {
    fn finish(&self, error: Option<E>) {
        let wakers = {
            let mut st = self.state.lock();
            st.done = true;
            st.error = error;
            std::mem::take(&mut st.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }
}

/// Marks its save finished when dropped: completed, panicked, or cancelled by `shutdown_now`
/// (a load of the key waiting for it goes on).
struct Finish<K: Hash + Eq, E> {
    key: Option<K>,
    saving: Arc<Saving<E>>,
    saves: Arc<Saves<K, E>>,
    outcome: Option<Result<(), E>>,
}

impl<K: Hash + Eq, E> Drop for Finish<K, E> {
    fn drop(&mut self) {
        let error = match self.outcome.take() {
            Some(Err(e)) => {
                tracing::error!("keyway: a key's save failed (its next message gets the error)");
                Some(e)
            }
            Some(Ok(())) => None,
            None => {
                tracing::error!("keyway: a key's save did not finish (panicked or cancelled)");
                None
            }
        };
        if error.is_none() {
            // Nothing for a load to learn: forget it (unless a newer save took its place).
            if let Some(key) = self.key.take() {
                let mut by_key = self.saves.by_key.lock();
                if by_key
                    .get(&key)
                    .is_some_and(|s| Arc::ptr_eq(s, &self.saving))
                {
                    by_key.remove(&key);
                }
            }
        }
        self.saving.finish(error);
    }
}

impl<K: Hash + Eq + Clone, E> Saves<K, E> {
    /// Waits for the save of `key` under way, if any; its error, if it failed (taken: reported
    /// once).
    async fn finished(&self, key: &K) -> Result<(), E> {
        let saving = self.by_key.lock().get(key).cloned();
        let Some(saving) = saving else {
            return Ok(());
        };
        std::future::poll_fn(|cx| {
            let mut st = saving.state.lock();
            if st.done {
                return Poll::Ready(());
            }
            if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                st.wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await;
        let error = saving.state.lock().error.take();
        let mut by_key = self.by_key.lock();
        if by_key.get(key).is_some_and(|s| Arc::ptr_eq(s, &saving)) {
            by_key.remove(key);
        }
        match error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// What the typed lane runs for each message: the user's handler future with the state at
/// hand, or (nothing loaded yet) the wait for a save, the load, then the handler, boxed (once
/// per load).
pub(crate) enum Step<F, S> {
    Ready(F),
    Loading(BoxFuture<Loaded<S>>),
}

impl<F, S> Future for Step<F, S>
where
    F: Future<Output = Option<S>>,
{
    type Output = Loaded<S>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Loaded<S>> {
        // SAFETY: the variant's future is never moved out of the pinned `Step` (it is polled in
        // place, and a `Step` never changes variant).
        match unsafe { self.get_unchecked_mut() } {
            // SAFETY: structural pinning of `Ready`'s future (see above).
            Step::Ready(fut) => unsafe { Pin::new_unchecked(fut) }.poll(cx).map(Loaded),
            Step::Loading(fut) => fut.as_mut().poll(cx),
        }
    }
}

/// Splits `state` and `handler` into what async typed lanes with state take: the key state (an
/// empty [`Loaded`] made on the first message; the save started when the lane is freed) and the
/// handler of a message with its [`Loaded`] state.
#[allow(clippy::type_complexity)]
pub(crate) fn split<K, M, S, E, H, Fut>(
    state: AsyncKeyState<K, S, E>,
    handler: H,
    registry: &Arc<Registry>,
) -> (
    KeyState<K, Loaded<S>>,
    impl Fn(&K, Loaded<S>, M) -> Step<Fut, S> + Send + Sync + 'static,
)
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    E: Send + 'static,
    H: Fn(&K, Result<S, StateError<E>>, M) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<S>> + Send + 'static,
{
    let saves = Arc::new(Saves {
        by_key: Mutex::new(HashMap::new()),
    });
    // Where a save the pool refuses runs (here, or on the thread that freed the lane).
    let runtime = Runtime::for_lanes(registry);
    let AsyncKeyState { load, save } = state;
    let mut key_state = KeyState::new(|_: &K| Loaded(None));
    if let Some(save) = save {
        let (saves, registry, runtime) = (saves.clone(), Arc::downgrade(registry), runtime);
        key_state = key_state.on_idle(move |key: &K, loaded: Loaded<S>| {
            if let Some(state) = loaded.0 {
                start_save(&saves, key, save(key, state), &registry, &runtime);
            }
        });
    }
    let handler = Arc::new(handler);
    let call = move |key: &K, loaded: Loaded<S>, msg: M| match loaded.0 {
        Some(state) => Step::Ready(handler(key, Ok(state), msg)),
        None => {
            let (key, handler, saves, load) =
                (key.clone(), handler.clone(), saves.clone(), load.clone());
            Step::Loading(Box::pin(async move {
                let state = match saves.finished(&key).await {
                    Err(e) => Err(StateError::Save(e)),
                    Ok(()) => load(&key).await.map_err(StateError::Load),
                };
                Loaded(handler(&key, state, msg).await)
            }))
        }
    };
    (key_state, call)
}

/// Registers the save of `key` and starts it on the pool, or (the pool no longer running
/// tasks) runs it here.
fn start_save<K, E>(
    saves: &Arc<Saves<K, E>>,
    key: &K,
    save: BoxFuture<Result<(), E>>,
    registry: &Weak<Registry>,
    runtime: &Runtime,
) where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    E: Send + 'static,
{
    let saving = Arc::new(Saving {
        state: Mutex::new(SavingState {
            done: false,
            error: None,
            wakers: Vec::new(),
        }),
    });
    saves.by_key.lock().insert(key.clone(), saving.clone());
    let mut finish = Finish {
        key: Some(key.clone()),
        saving,
        saves: saves.clone(),
        outcome: None,
    };
    let fut = async move {
        finish.outcome = Some(save.await);
        drop(finish);
    };
    let refused = match registry.upgrade() {
        Some(registry) => runtime
            .enter(|| execute(&registry, fut))
            .err()
            .map(|e| e.into_inner()),
        None => Some(fut),
    };
    if let Some(fut) = refused {
        if let Err(report) = run_here(fut, None, runtime) {
            tracing::error!(panic = report.message(), "keyway: a key's save panicked");
        }
    }
}
