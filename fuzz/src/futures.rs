//! Futures spawned every way the pool takes them, handles and room waiters polled with a waker
//! whose `wake` panics, and the check of a future's outcome against what it did.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use keyway::{Pool, SubmitError, TaskError, TaskHandle, WaitForRoom};

use crate::input::{FutBody, SpawnKind};
use crate::probes::{key, Fate, FateProbe, Out, PANICKED, RETURNED};

/// Pending once after waking itself (not keyway's `yield_now`: any executor's future).
pub struct PendingOnce(pub bool);

impl Future for PendingOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// A future doing `body`, carrying `probe` (dropped with it, completed or not); its output's
/// drop panics if `bomb`.
pub async fn future(body: FutBody, probe: FateProbe, bomb: bool) -> Out {
    probe.start();
    act(body, || probe.end(PANICKED)).await;
    probe.end(RETURNED);
    Out(bomb)
}

/// What a fuzz future does (`pool_mixed`'s and `pool_batches`'): completes at once, after 1 to 3
/// yields, or after waking itself and returning `Pending` once, or panics, at once or after a
/// yield; `panics` is called just before it panics.
pub async fn act(body: FutBody, panics: impl FnOnce()) {
    match body {
        FutBody::Ready => {}
        FutBody::Yield(n) => {
            for _ in 0..=n % 3 {
                keyway::yield_now().await;
            }
        }
        FutBody::PendingOnce => PendingOnce(false).await,
        FutBody::Panic => {
            panics();
            panic!("fuzz: future panics");
        }
        FutBody::YieldThenPanic => {
            keyway::yield_now().await;
            panics();
            panic!("fuzz: future panics after a yield");
        }
    }
}

/// Spawns `fut` as `kind`: its handle if accepted, `None` if refused (the future comes back in
/// the error and is dropped here).
pub fn spawn<F>(pool: &Pool, kind: SpawnKind, fut: F) -> Option<TaskHandle<Out>>
where
    F: Future<Output = Out> + Send + 'static,
{
    match kind {
        SpawnKind::Spawn => pool.spawn(fut).ok(),
        SpawnKind::Sequential(k) => pool.spawn_sequential(key(k), fut).ok(),
        SpawnKind::Coalescing(k) => pool.spawn_coalescing(key(k), fut).ok(),
        SpawnKind::Keyed(a, b) => pool.spawn_keyed([key(a), key(b)], fut).ok(),
        SpawnKind::Lane(id) => pool.lane(u32::from(id % 4)).spawn(fut).ok(),
        SpawnKind::LaneCoalescing(id) => pool.lane(u32::from(id % 4)).spawn_coalescing(fut).ok(),
    }
}

/// What a future's handle said against what the future did. `cancelled`: a `cancel()` on its
/// handle returned true (a started future may then complete in the poll that was running).
pub fn check_future(
    fate: &Fate,
    outcome: &Result<Out, TaskError>,
    cancelled: bool,
    coalescing: bool,
) {
    let (started, ended) = (fate.started(), fate.ended());
    match outcome {
        Ok(_) => assert_eq!(
            ended, RETURNED,
            "a future's handle says Ok, it did not return"
        ),
        Err(TaskError::Panicked(_)) => {
            assert_eq!(
                ended, PANICKED,
                "a future's handle says Panicked, it did not panic"
            )
        }
        // By `cancel()`, or by `shutdown_now` at an await point (the end of every run calls it).
        Err(TaskError::Cancelled) => assert!(
            ended == 0 || cancelled,
            "a future that ended says Cancelled, and no cancel() returned true"
        ),
        Err(TaskError::Coalesced) => assert!(
            coalescing && !started,
            "coalesced: a future that started, or was not coalescing"
        ),
        Err(TaskError::Rejected) => assert!(!started, "a future that started says Rejected"),
        Err(other) => panic!("a future's handle says {other:?}"),
    }
}

/// Every probe dropped exactly once: nothing leaked, nothing dropped twice.
pub fn check_dropped_once(fates: &[Arc<Fate>], what: &str) {
    for fate in fates {
        let drops = fate.drops.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(drops, 1, "{what}: a probe dropped {drops} times: {fate:?}");
    }
}

/// Polls `fut` once with `waker`.
pub fn poll_once<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

/// A closure task as a room waiter submits it.
pub type Job = Box<dyn FnOnce() -> Out + Send>;
/// How a room waiter submits: `submit`, or `submit_sequential` in a context.
pub type Attempt<'p> = Box<dyn FnMut(Job) -> Result<TaskHandle<Out>, SubmitError<Job>> + 'p>;
/// A `wait_for_room_async` future of the run.
pub type Waiter<'p> = WaitForRoom<'p, Job, Attempt<'p>>;

pub fn waiter(pool: &Pool, job: Job, context: Option<u8>) -> Waiter<'_> {
    let attempt: Attempt<'_> = match context {
        None => Box::new(move |job| pool.submit(job)),
        Some(c) => Box::new(move |job| pool.submit_sequential(u16::from(c % 4), job)),
    };
    pool.wait_for_room_async(job, attempt)
}
