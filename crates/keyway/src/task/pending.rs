//! What a task handed back by `shutdown_now` knows: the context(s) it was queued in, and, for a
//! typed lane's message, the message itself.

use std::any::{Any, TypeId};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use smallvec::SmallVec;

use super::{Abandon, PanicReport, PendingTask, Task};

/// A lane, as a task handed back from it sees it.
pub(crate) trait ContextOf: Send + Sync {
    /// The hash the lane's table gave its key.
    fn context_hash(&self) -> u64;
    /// The key the user gave (not any wrapper the table stores).
    fn context_key(&self) -> &(dyn Any + Send + Sync);
}

/// The lanes a pending task was queued in: none (a plain task), one (a lane task), or every lane
/// of a multi-key task.
pub(crate) type LaneRefs = SmallVec<[Arc<dyn ContextOf>; 1]>;

/// A typed lane's message handed back: run as the lane would run it, or taken out as itself.
pub(crate) trait PendingMessage: Send {
    /// Runs the lane's handler on the message (never unwinds: a panic comes back as a report).
    fn run(self: Box<Self>) -> Result<(), PanicReport>;
    /// The `TypeId` of the message type `M`.
    fn message_type(&self) -> TypeId;
    /// The message, as a `Box<M>`.
    fn into_message(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// What a pending task holds.
pub(crate) enum Unstarted {
    Task(Task),
    Message(Box<dyn PendingMessage>),
}

impl Unstarted {
    pub(crate) fn run(self) -> Result<(), PanicReport> {
        match self {
            Unstarted::Task(task) => task.run(),
            Unstarted::Message(msg) => msg.run(),
        }
    }

    pub(crate) fn abandon(self, why: Abandon) {
        match self {
            Unstarted::Task(task) => task.abandon(why),
            Unstarted::Message(msg) => {
                if catch_unwind(AssertUnwindSafe(move || drop(msg))).is_err() {
                    tracing::error!("keyway: dropping a handed-back message panicked (contained)");
                }
            }
        }
    }
}

impl PendingTask {
    /// A task queued in the lanes `contexts`.
    pub(crate) fn in_contexts(task: Task, contexts: LaneRefs) -> Self {
        PendingTask {
            task: Some(Unstarted::Task(task)),
            contexts,
        }
    }

    /// A typed lane's message (or a flush queued in a typed lane).
    pub(crate) fn from_work(work: Unstarted, context: Arc<dyn ContextOf>) -> Self {
        PendingTask {
            task: Some(work),
            contexts: SmallVec::from_elem(context, 1),
        }
    }

    /// The [context hash](crate::Pool::context_hash) of the lane this task was queued in; `None`
    /// for a plain task and for a multi-key task (see [`context_hashes`](Self::context_hashes)).
    ///
    /// For a [`TypedLanes`](crate::TypedLanes) message, this is the hash its own lanes use
    /// ([`LaneDepth::context_hash`](crate::LaneDepth::context_hash) reports the same).
    ///
    /// ```
    /// # let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// # let (go, wait) = std::sync::mpsc::channel::<()>();
    /// # let stopper = pool.clone();
    /// # let first = pool.submit_sequential("first", move || { wait.recv().unwrap(); stopper.shutdown_now() }).unwrap();
    /// // `first` runs on the only thread; while it waits, these queue up:
    /// pool.execute_sequential("orders", || ()).unwrap();
    /// pool.execute(|| ()).unwrap();
    /// # go.send(()).unwrap();
    /// let pending = first.join().unwrap(); // `first` called `shutdown_now`
    /// let hashes: Vec<_> = pending.iter().map(|t| t.context_hash()).collect();
    /// assert!(hashes.contains(&Some(pool.context_hash(&"orders"))));
    /// assert!(hashes.contains(&None)); // the plain task
    /// ```
    pub fn context_hash(&self) -> Option<u64> {
        match self.contexts.as_slice() {
            [one] => Some(one.context_hash()),
            _ => None,
        }
    }

    /// The context this task was queued in, if it was queued in exactly one and its key is a `K`
    /// (the key's type is part of a context: `"a"` is a `&str`, not a `String`).
    ///
    /// ```
    /// # let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// # let (go, wait) = std::sync::mpsc::channel::<()>();
    /// # let stopper = pool.clone();
    /// # let first = pool.submit_sequential(0u64, move || { wait.recv().unwrap(); stopper.shutdown_now() }).unwrap();
    /// let accounts = pool.contexts::<u64>();
    /// accounts.execute_sequential(7, || ()).unwrap(); // queued behind `first`
    /// # go.send(()).unwrap();
    /// let pending = first.join().unwrap(); // `first` called `shutdown_now`
    /// assert_eq!(pending[0].context::<u64>(), Some(&7));
    /// assert_eq!(pending[0].context::<u32>(), None); // another type, another context
    /// ```
    pub fn context<K: 'static>(&self) -> Option<&K> {
        match self.contexts.as_slice() {
            [one] => one.context_key().downcast_ref::<K>(),
            _ => None,
        }
    }

    /// Every key of type `K` this task was queued under: one for a lane task, each key of a
    /// multi-key task ([`Pool::execute_keyed`](crate::Pool::execute_keyed)), none for a plain
    /// task.
    ///
    /// ```
    /// # let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// # let (go, wait) = std::sync::mpsc::channel::<()>();
    /// # let stopper = pool.clone();
    /// # let first = pool.submit_sequential(0u64, move || { wait.recv().unwrap(); stopper.shutdown_now() }).unwrap();
    /// let accounts = pool.contexts::<u64>();
    /// accounts.execute_keyed([0, 2], || ()).unwrap(); // a transfer, queued behind `first`
    /// # go.send(()).unwrap();
    /// let pending = first.join().unwrap(); // `first` called `shutdown_now`
    /// let mut keys: Vec<u64> = pending[0].keys::<u64>().copied().collect();
    /// keys.sort();
    /// assert_eq!(keys, [0, 2]);
    /// ```
    pub fn keys<K: 'static>(&self) -> impl Iterator<Item = &K> + '_ {
        self.contexts
            .iter()
            .filter_map(|c| c.context_key().downcast_ref::<K>())
    }

    /// The context hash of every lane this task was queued in (see
    /// [`context_hash`](Self::context_hash)); several for a multi-key task.
    ///
    /// ```
    /// # let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// # let (go, wait) = std::sync::mpsc::channel::<()>();
    /// # let stopper = pool.clone();
    /// # let first = pool.submit_sequential(0u64, move || { wait.recv().unwrap(); stopper.shutdown_now() }).unwrap();
    /// pool.execute_keyed([0u64, 2], || ()).unwrap(); // queued behind `first`
    /// # go.send(()).unwrap();
    /// let pending = first.join().unwrap(); // `first` called `shutdown_now`
    /// let hashes: Vec<u64> = pending[0].context_hashes().collect();
    /// assert!(hashes.contains(&pool.context_hash(&2u64)));
    /// assert_eq!(pending[0].context_hash(), None); // not one context
    /// ```
    pub fn context_hashes(&self) -> impl Iterator<Item = u64> + '_ {
        self.contexts.iter().map(|c| c.context_hash())
    }

    /// The message, when this is a message of a [`TypedLanes<K, M>`](crate::TypedLanes) that
    /// was sent but not handled; otherwise the task is handed back unchanged. Taking the message
    /// out means the handler never sees it (nothing else is told).
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// let (go, wait) = std::sync::mpsc::channel::<()>();
    /// let wait = std::sync::Mutex::new(wait);
    /// let chat = pool.typed_lanes(move |_user: &u32, text: String| {
    ///     if text == "first" { wait.lock().unwrap().recv().unwrap(); } // holds the only thread
    /// });
    /// chat.send(1, "first".to_string()).unwrap();
    /// chat.send(1, "saved for later".to_string()).unwrap();
    /// let stopper = { let pool = pool.clone(); std::thread::spawn(move || pool.shutdown_now()) };
    /// while !pool.is_shutdown() { std::thread::yield_now(); }
    /// go.send(()).unwrap();
    /// let mut pending = stopper.join().unwrap();
    /// // "first" may not have started before the stop: then it is handed back too.
    /// let last = pending.pop().unwrap();
    /// assert_eq!(last.context::<u32>(), Some(&1));
    /// assert_eq!(last.into_message::<String>().unwrap(), "saved for later");
    /// ```
    pub fn into_message<M: 'static>(mut self) -> Result<M, PendingTask> {
        match self.task.take() {
            Some(Unstarted::Message(msg)) if msg.message_type() == TypeId::of::<M>() => {
                match msg.into_message().downcast::<M>() {
                    Ok(m) => Ok(*m),
                    Err(_) => unreachable!("the message type was just checked"),
                }
            }
            other => {
                self.task = other;
                Err(self)
            }
        }
    }
}
