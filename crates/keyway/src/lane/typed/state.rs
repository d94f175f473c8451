//! Keyed state for typed lanes: the lane of a key owns that key's state.
//!
//! A typed lane stores its key as a [`Keyed`]: the user's key plus a slot for the key's state.
//! The table looks lanes up by the key alone (`Hash` and `Eq` ignore the slot), so the state is
//! made once per lane, on its first message, and lives exactly as long as the lane: when the
//! lane is freed, its `Keyed` is dropped, and the state with it (or handed to `on_idle`).
//! Lanes are freed outside the table's locks, so the state's `Drop` and `on_idle` may send to
//! the very same lanes.
//!
//! The slot is behind a mutex only because messages handed back by `shutdown_now` may be run on
//! any threads at once; the lane's own runner never contends for it (one runner per lane).

use std::cell::Cell;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::task::PanicReport;

pub(crate) type Init<K, S> = dyn Fn(&K) -> S + Send + Sync + 'static;
pub(crate) type OnIdle<K, S> = dyn Fn(&K, S) + Send + Sync + 'static;

/// How [`TypedLanes`](crate::TypedLanes) make each key's state, and what they do with it when the
/// key's lane is freed: the first argument of
/// [`Pool::typed_lanes_with_state`](crate::Pool::typed_lanes_with_state).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// let pool = keyway::Pool::new().unwrap();
/// let saved = Arc::new(Mutex::new(Vec::new()));
/// let store = saved.clone();
/// let state = keyway::KeyState::new(|_user: &u32| 0u64) // a message count per user
///     .on_idle(move |user: &u32, count: u64| store.lock().unwrap().push((*user, count)));
/// let lanes = pool.typed_lanes_with_state(state, |_user: &u32, count: &mut u64, _msg: &str| {
///     *count += 1;
/// });
/// for _ in 0..3 {
///     lanes.send(7, "hi").unwrap();
/// }
/// pool.shutdown(); // frees every lane: each state goes to `on_idle`
/// assert_eq!(*saved.lock().unwrap(), vec![(7, 3)]);
/// ```
pub struct KeyState<K, S> {
    pub(crate) init: Box<Init<K, S>>,
    pub(crate) on_idle: Option<Arc<OnIdle<K, S>>>,
}

impl<K, S> KeyState<K, S> {
    /// State made by `init(&key)` on a key's first message (first since its lane was last
    /// freed), and dropped when the lane is freed.
    ///
    /// ```
    /// let state = keyway::KeyState::new(|name: &String| format!("hello, {name}"));
    /// # let _ = state;
    /// ```
    pub fn new(init: impl Fn(&K) -> S + Send + Sync + 'static) -> Self {
        KeyState {
            init: Box::new(init),
            on_idle: None,
        }
    }

    /// Hands a key's state to `on_idle(&key, state)` when its lane is freed (idle, or at
    /// shutdown) instead of dropping it: the place to save it. It runs on whichever thread frees
    /// the lane, holding no lock of the pool. A panic in it is contained (and logged).
    ///
    /// `on_idle` of a lane may still be running when a new message for the same key starts a
    /// new lane, whose `init` then runs: to save and reload state, make `init` read what
    /// `on_idle` wrote under a lock of your own, or keep the key's lane busy (see
    /// [`TypedLanes`](crate::TypedLanes)).
    ///
    /// ```
    /// let state = keyway::KeyState::new(|_: &u8| Vec::<String>::new())
    ///     .on_idle(|key: &u8, log: Vec<String>| println!("{key}: {} messages", log.len()));
    /// # let _ = state;
    /// ```
    pub fn on_idle(mut self, on_idle: impl Fn(&K, S) + Send + Sync + 'static) -> Self {
        self.on_idle = Some(Arc::new(on_idle));
        self
    }
}

impl<K, S> std::fmt::Debug for KeyState<K, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyState")
            .field("on_idle", &self.on_idle.is_some())
            .finish_non_exhaustive()
    }
}

/// A typed lane's key as the table stores it: the user's key and the key's state.
pub(crate) struct Keyed<K, S> {
    pub(crate) key: K,
    slot: Mutex<Slot<K, S>>,
}

/// A key's state (none before its first message, nor while an async handler's future holds
/// it), and the table's `on_idle` hook, its count taken once, with the lane's first state, and
/// kept until the lane is freed. (Taken and dropped with the state as an async handler's future
/// took and gave back the state, that count, one line shared by every key, went from thread to
/// thread twice per message.)
struct Slot<K, S> {
    state: Option<S>,
    on_idle: Option<Arc<OnIdle<K, S>>>,
}

impl<K, S> Slot<K, S> {
    /// Puts `state` in the slot, with the table's hook if the slot has none yet; the state the
    /// slot held comes back.
    fn fill(&mut self, spec: &KeyState<K, S>, state: S) -> Option<S> {
        if self.on_idle.is_none() {
            self.on_idle.clone_from(&spec.on_idle);
        }
        self.state.replace(state)
    }
}

impl<K, S> Keyed<K, S> {
    /// A key to look a lane up with (or to make one with): no state yet.
    pub(crate) fn new(key: K) -> Self {
        Keyed {
            key,
            slot: Mutex::new(Slot {
                state: None,
                on_idle: None,
            }),
        }
    }

    /// Runs `f` on the key's state, made first by `spec.init` if the lane has none. A panic of
    /// `init` or `f` is contained and comes back as its report; after a panic of `f` the state
    /// (maybe half updated) is dropped, not handed to `on_idle`, and the next message makes a
    /// new one.
    pub(crate) fn with_state(
        &self,
        spec: &KeyState<K, S>,
        f: impl FnOnce(&K, &mut S),
    ) -> Result<(), PanicReport> {
        let me = self as *const Self as *const ();
        let mut slot = match self.slot.try_lock() {
            Some(slot) => slot,
            // Busy: another thread runs a handed-back message of this key (wait for it), or this
            // very thread is inside this key's handler, which ran one of its own handed-back
            // messages (waiting would deadlock: refused instead).
            None if IN_HANDLER.with(|h| h.get()) == me => {
                if catch_unwind(AssertUnwindSafe(move || drop(f))).is_err() {
                    tracing::error!("keyway: dropping a message panicked (contained)");
                }
                return Err(PanicReport::new(REENTERED.to_owned()));
            }
            None => self.slot.lock(),
        };
        if slot.state.is_none() {
            match catch_unwind(AssertUnwindSafe(|| (spec.init)(&self.key))) {
                Ok(state) => drop(slot.fill(spec, state)),
                Err(payload) => {
                    // The message (in `f`) is dropped unhandled; its `Drop` is user code too.
                    if catch_unwind(AssertUnwindSafe(move || drop(f))).is_err() {
                        tracing::error!("keyway: dropping a message panicked (contained)");
                    }
                    return Err(PanicReport::from_payload(payload));
                }
            }
        }
        let Some(state) = slot.state.as_mut() else {
            unreachable!("a state was made above if the slot had none")
        };
        let outer = IN_HANDLER.with(|h| h.replace(me));
        let ran = catch_unwind(AssertUnwindSafe(|| f(&self.key, state)));
        IN_HANDLER.with(|h| h.set(outer));
        match ran {
            Ok(()) => Ok(()),
            Err(payload) => {
                let broken = slot.state.take();
                drop(slot); // unlocked before user code runs again
                if catch_unwind(AssertUnwindSafe(move || drop(broken))).is_err() {
                    tracing::error!("keyway: dropping a key's state panicked (contained)");
                }
                Err(PanicReport::from_payload(payload))
            }
        }
    }
}

impl<K, S> Keyed<K, S> {
    /// Takes the key's state out of its slot for an async handler (`Stateful`), made first by
    /// `spec.init` if the lane has none (a panic of `init` comes back as its report).
    pub(crate) fn take_state(&self, spec: &KeyState<K, S>) -> Result<S, PanicReport> {
        let taken = self.slot.lock().state.take();
        match taken {
            Some(state) => Ok(state),
            None => catch_unwind(AssertUnwindSafe(|| (spec.init)(&self.key)))
                .map_err(PanicReport::from_payload),
        }
    }

    /// Puts the state an async handler's future gave back into the slot, where the next message
    /// takes it (and `on_idle` gets it when the lane is freed).
    pub(crate) fn put_state(&self, spec: &KeyState<K, S>, state: S) {
        self.place_state(spec, state).drop_contained();
    }

    /// [`put_state`](Self::put_state), under a lock of the caller's: the state the slot held is
    /// given back, for the caller to drop once it holds no lock (user code).
    pub(crate) fn place_state(&self, spec: &KeyState<K, S>, state: S) -> Displaced<S> {
        // Empty unless a handed-back message of this key ran meanwhile on another thread and
        // made a state of its own: that one is dropped.
        Displaced(self.slot.lock().fill(spec, state))
    }
}

/// A key's state displaced from its slot by [`Keyed::place_state`], if there was one.
pub(crate) struct Displaced<S>(Option<S>);

impl<S> Displaced<S> {
    /// Drops the displaced state (its `Drop` is user code: contained).
    pub(crate) fn drop_contained(self) {
        let old = self.0;
        if old.is_some() && catch_unwind(AssertUnwindSafe(move || drop(old))).is_err() {
            tracing::error!("keyway: dropping a key's state panicked (contained)");
        }
    }
}

/// What a message run from inside its own key's handler gets (see `with_state`).
const REENTERED: &str =
    "keyway: a key's message was run inside that key's own handler, which holds its state";

thread_local! {
    /// The `Keyed` whose handler runs on this thread now (innermost), to tell a re-entrant run.
    static IN_HANDLER: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
}

impl<K, S> Drop for Keyed<K, S> {
    fn drop(&mut self) {
        // Most `Keyed`s dropped are look-up keys of a send, with no state: keep that path short.
        // (A hook with no state is released too: its drop, if the last, is user code.)
        let slot = self.slot.get_mut();
        if slot.state.is_some() || slot.on_idle.is_some() {
            self.release();
        }
    }
}

impl<K, S> Keyed<K, S> {
    /// The lane is freed: its state goes to `on_idle`, or is dropped.
    #[cold]
    #[inline(never)]
    fn release(&mut self) {
        let slot = self.slot.get_mut();
        let (state, on_idle) = (slot.state.take(), slot.on_idle.take());
        let key = &self.key;
        let released = catch_unwind(AssertUnwindSafe(move || match (state, on_idle) {
            (Some(state), Some(on_idle)) => on_idle(key, state),
            (state, on_idle) => drop((state, on_idle)),
        }));
        if released.is_err() {
            tracing::error!("keyway: a key's on_idle or its state's Drop panicked (contained)");
        }
    }
}

impl<K: Hash, S> Hash for Keyed<K, S> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.key.hash(h)
    }
}

impl<K: PartialEq, S> PartialEq for Keyed<K, S> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<K: Eq, S> Eq for Keyed<K, S> {}
