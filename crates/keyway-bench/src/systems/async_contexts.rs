//! `contexts --async`: each task awaits first (a yield, a short tokio timer, a reply that
//! another thread completes, or tokio's own: a timer or a reply from another tokio task), then
//! runs the
//! `contexts` task body. Four systems:
//!
//! * `keyway` — `Pool::typed_lanes_async`: each task is a message `seq` sent through its
//!   context's `TypedLane` handle (like the actor's sender), handled by an async handler (like
//!   the actor's loop body); a one-thread tokio runtime drives the timers when the wait is a
//!   timer, keyway polls the futures. The pool is bound to that runtime
//!   (`PoolBuilder::tokio_runtime`): its threads live inside it, so a handler awaits tokio with
//!   no handle, as a tokio actor's loop does;
//! * `keyway-spawn` — `Lane::spawn(future)` on a pool lane per context, one future per task (the
//!   pool bound to the runtime too);
//! * `tokio-actor` — one tokio task and unbounded mpsc mailbox per context, awaiting in its loop;
//! * `tokio-mutex` — a tokio task per message holding its context's `tokio::sync::Mutex` across
//!   the await. Tasks of one context exclude each other, but tokio does not start them in
//!   submission order, so this peer numbers each context's tasks in the order they got the lock
//!   (its order check then checks exclusion and completeness, not submission order).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use keyway::{Lane, Pool, TypedLane};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::tokio_actor::{close_mailboxes, send_to_mailboxes};
use super::ContextsSystem;
use crate::work::{context_task, ContextsRun};

/// The timer a task awaits (`--wait timer`).
pub const TIMER: Duration = Duration::from_micros(100);

/// What each task awaits before its work.
pub trait Wait: Send + Sync + 'static {
    /// `yield` or `timer`.
    const NAME: &'static str;
    /// The wait's future (a named type: it borrows nothing).
    type Fut: Future<Output = ()> + Send + 'static;
    /// The wait, for a task polled by any executor; `rt` drives tokio timers, entered here
    /// (`None`: the caller is inside it already, as a thread of a bound pool is).
    fn wait(rt: Option<&Handle>) -> Self::Fut;
}

/// A single yield: the task returns `Pending` once, waking itself.
pub struct Yield;

/// A tokio timer of [`TIMER`].
pub struct Timer;

/// The yield's future.
impl Wait for Yield {
    const NAME: &'static str = "yield";
    type Fut = keyway::YieldNow;
    fn wait(_rt: Option<&Handle>) -> keyway::YieldNow {
        keyway::yield_now()
    }
}

/// A reply completed by the remote thread (`--wait remote`): the task sends a request and
/// awaits a one-shot reply that a separate thread fills, as a database client's reply would be.
/// The task's waker is thus woken from a thread outside the executor.
pub struct Remote;

impl Wait for Remote {
    const NAME: &'static str = "remote";
    type Fut = Reply;
    fn wait(_rt: Option<&Handle>) -> Reply {
        let (tx, rx) = oneshot::channel();
        // The remote thread lives as long as the process; a send cannot fail while it does.
        if remote().send(tx).is_err() {
            unreachable!("the remote thread never stops");
        }
        Reply(rx)
    }
}

/// The reply to one request to the remote thread.
pub struct Reply(oneshot::Receiver<()>);

impl Future for Reply {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // A dropped sender (never: the remote thread answers every request) ends the wait too.
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// The remote thread's request queue: it answers each request at once, in arrival order, and
/// sleeps in `recv` when there is none (started once, on first use).
fn remote() -> &'static crossbeam_channel::Sender<oneshot::Sender<()>> {
    static REMOTE: OnceLock<crossbeam_channel::Sender<oneshot::Sender<()>>> = OnceLock::new();
    REMOTE.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::unbounded::<oneshot::Sender<()>>();
        let spawned = std::thread::Builder::new()
            .name("remote".into())
            .spawn(move || {
                for reply in rx {
                    let _ = reply.send(());
                }
            });
        if let Err(e) = spawned {
            panic!("spawning the remote thread: {e}");
        }
        tx
    })
}

impl Wait for Timer {
    const NAME: &'static str = "timer";
    type Fut = tokio::time::Sleep;
    fn wait(rt: Option<&Handle>) -> tokio::time::Sleep {
        let _enter = rt.map(Handle::enter);
        tokio::time::sleep(TIMER)
    }
}

/// tokio's own wake-ups (`--wait tokio`): every other task awaits a tokio timer of [`TIMER`],
/// the rest a tokio oneshot that another task of the runtime fills (a reply from a client task,
/// as a database driver's would be). Either way the wake comes from inside the tokio runtime:
/// its timer driver, or one of its workers.
pub struct Tokio;

/// The wait of one task under `--wait tokio`.
pub enum TokioWait {
    /// A tokio timer.
    Timer(Pin<Box<tokio::time::Sleep>>),
    /// A reply filled by a task spawned on the runtime.
    Reply(oneshot::Receiver<()>),
}

impl Wait for Tokio {
    const NAME: &'static str = "tokio";
    type Fut = TokioWait;
    fn wait(rt: Option<&Handle>) -> TokioWait {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        if NEXT.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
            return TokioWait::Timer(Box::pin(Timer::wait(rt)));
        }
        let (tx, rx) = oneshot::channel();
        let reply = async move {
            let _ = tx.send(());
        };
        drop(match rt {
            Some(rt) => rt.spawn(reply),
            None => tokio::spawn(reply),
        });
        TokioWait::Reply(rx)
    }
}

impl Future for TokioWait {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &mut *self {
            TokioWait::Timer(sleep) => sleep.as_mut().poll(cx),
            // A dropped sender (the runtime shutting down) ends the wait too.
            TokioWait::Reply(rx) => Pin::new(rx).poll(cx).map(|_| ()),
        }
    }
}

fn runtime(threads: usize) -> Result<Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_time()
        .build()
        .map_err(|e| format!("building the tokio runtime: {e}"))
}

/// A keyway pool of `threads` core threads bound to `timers` (its threads live inside it).
fn bound_pool(threads: usize, timers: &Runtime) -> Result<Pool, String> {
    Pool::builder()
        .core_threads(threads)
        .tokio_runtime(timers.handle().clone())
        .build()
        .map_err(|e| format!("building the keyway pool: {e}"))
}

/// keyway: async typed lanes, a message per task.
pub struct KeywayAsync<W> {
    run: &'static ContextsRun,
    pool: Pool,
    /// One held-open lane per context (as the actor's sender per context).
    lanes: Vec<TypedLane<usize, u64>>,
    timers: Runtime,
    _wait: std::marker::PhantomData<W>,
}

impl<W: Wait> ContextsSystem for KeywayAsync<W> {
    const NAME: &'static str = "keyway";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let timers = runtime(1)?;
        let pool = bound_pool(threads, &timers)?;
        let lanes = pool.typed_lanes_async(move |ctx: &usize, seq: u64| {
            // The handler runs when the message starts: so does the wait (as in the peers),
            // inside the pool's runtime.
            let (wait, ctx) = (W::wait(None), *ctx);
            async move {
                wait.await;
                context_task(run, ctx, seq);
            }
        });
        let lanes = (0..run.contexts()).map(|ctx| lanes.lane(ctx)).collect();
        Ok(Self {
            run,
            pool,
            lanes,
            timers,
            _wait: std::marker::PhantomData,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let lanes = &self.lanes;
        self.run.produce(|ctx, seq| {
            lanes[ctx]
                .send(seq)
                .map_err(|_| format!("keyway rejected task {seq} of context {ctx}"))
        })
    }

    fn teardown(self) -> Result<(), String> {
        drop(self.lanes);
        self.pool.shutdown();
        drop(self.timers);
        Ok(())
    }
}

/// keyway: a lane handle per context, one future per task (`Lane::spawn`).
pub struct KeywaySpawnAsync<W> {
    run: &'static ContextsRun,
    pool: Pool,
    lanes: Vec<Lane<usize>>,
    timers: Runtime,
    _wait: std::marker::PhantomData<W>,
}

impl<W: Wait> ContextsSystem for KeywaySpawnAsync<W> {
    const NAME: &'static str = "keyway-spawn";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let timers = runtime(1)?;
        let pool = bound_pool(threads, &timers)?;
        let lanes = (0..run.contexts()).map(|ctx| pool.lane(ctx)).collect();
        Ok(Self {
            run,
            pool,
            lanes,
            timers,
            _wait: std::marker::PhantomData,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let (run, lanes) = (self.run, &self.lanes);
        run.produce(|ctx, seq| {
            // The wait starts when the task starts (as in the peers), not when it is queued;
            // it is polled inside the pool's runtime.
            let fut = async move {
                W::wait(None).await;
                context_task(run, ctx, seq);
            };
            match lanes[ctx].spawn(fut) {
                Ok(handle) => {
                    drop(handle);
                    Ok(())
                }
                Err(_) => Err(format!("keyway rejected task {seq} of context {ctx}")),
            }
        })
    }

    fn teardown(self) -> Result<(), String> {
        drop(self.lanes);
        self.pool.shutdown();
        drop(self.timers);
        Ok(())
    }
}

/// tokio: one actor task and mailbox per context, awaiting in its loop.
pub struct TokioActorAsync<W> {
    run: &'static ContextsRun,
    runtime: Runtime,
    senders: Vec<UnboundedSender<u64>>,
    actors: Vec<JoinHandle<()>>,
    _wait: std::marker::PhantomData<W>,
}

impl<W: Wait> ContextsSystem for TokioActorAsync<W> {
    const NAME: &'static str = "tokio-actor";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let runtime = runtime(threads)?;
        let mut senders = Vec::with_capacity(run.contexts());
        let mut actors = Vec::with_capacity(run.contexts());
        for ctx in 0..run.contexts() {
            let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
            actors.push(runtime.spawn(async move {
                while let Some(seq) = rx.recv().await {
                    // A tokio task is inside its runtime: nothing to enter.
                    W::wait(None).await;
                    context_task(run, ctx, seq);
                }
            }));
            senders.push(tx);
        }
        Ok(Self {
            run,
            runtime,
            senders,
            actors,
            _wait: std::marker::PhantomData,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        send_to_mailboxes(self.run, &self.senders)
    }

    fn teardown(self) -> Result<(), String> {
        close_mailboxes(&self.runtime, self.senders, self.actors)
    }
}

/// tokio: a task per message, holding its context's mutex across the await.
pub struct TokioMutexAsync<W> {
    run: &'static ContextsRun,
    runtime: Runtime,
    /// Per context: the number of tasks that held the lock so far.
    locks: Arc<[tokio::sync::Mutex<u64>]>,
    _wait: std::marker::PhantomData<W>,
}

impl<W: Wait> ContextsSystem for TokioMutexAsync<W> {
    const NAME: &'static str = "tokio-mutex";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        Ok(Self {
            run,
            runtime: runtime(threads)?,
            locks: (0..run.contexts())
                .map(|_| tokio::sync::Mutex::new(0))
                .collect(),
            _wait: std::marker::PhantomData,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let (run, rt) = (self.run, self.runtime.handle());
        self.run.produce(|ctx, _seq| {
            let locks = self.locks.clone();
            drop(rt.spawn(async move {
                let mut held = locks[ctx].lock().await;
                W::wait(None).await;
                *held += 1;
                context_task(run, ctx, *held);
            }));
            Ok(())
        })
    }

    fn teardown(self) -> Result<(), String> {
        drop(self.runtime);
        Ok(())
    }
}
