//! The task that runs one entry in its key's lane: wait for the start (the lease must be
//! held and fresh), run the handler with panics contained, retry in place with backoff, and
//! settle (ack or dead letter) or abandon. One path for both kinds of handler: a sync
//! handler's entry is a closure ([`run`]), an async handler's a future ([`run_async`]) that
//! awaits the handler's future where the closure calls the handler.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::stream::acks;
use crate::stream::contain::contain;
use crate::stream::context::{bump, Ctx, DeadInfo, Shard};
use crate::stream::delivery::{Handler, HandlerFuture};
use crate::stream::reply::RawEntry;
use crate::stream::state::{Finish, Retry, Start};
use crate::stream::{Delivery, EntryId, FailurePolicy, HandlerError};

/// How long a task waits between two looks at a lease that was not confirmed lately.
const LOOK_AGAIN: Duration = Duration::from_millis(20);

/// Runs entry `e` delivered at `epoch`, whose Redis delivery count is `deliveries`, with a
/// handler that returns when it is done.
pub(crate) fn run(ctx: &Ctx, shard: &Shard, e: RawEntry, epoch: u64, deliveries: u64) {
    let Handler::Sync(handler) = &*ctx.handler else {
        return; // not dispatched so: an async handler's entries go through `run_async`
    };
    let Some(mut delivery) = begin(ctx, shard, &e, epoch, deliveries) else {
        return;
    };
    let how = loop {
        if let Some(how) = too_many(ctx, &delivery, &e) {
            break how;
        }
        // Protocol rule H: the handler's panic (and its payload's) is contained.
        let outcome = contain(ctx.instance, || handler(&delivery, &e.payload));
        if let Some(how) = judge(ctx, shard, &mut delivery, outcome, &e) {
            break how;
        }
    };
    end(ctx, shard, &delivery, how);
}

/// As [`run`], with a handler that returns a future: the entry is done when that future is.
/// Dropped before it is done (the pool shut down under it), the entry is given up: it stays
/// pending in Redis, for this member's next epoch or the next owner.
pub(crate) async fn run_async(
    ctx: Arc<Ctx>,
    shard: Arc<Shard>,
    e: RawEntry,
    epoch: u64,
    deliveries: u64,
) {
    let Handler::Async(handler) = &*ctx.handler else {
        return; // not dispatched so: a sync handler's entries go through `run`
    };
    let Some(mut delivery) = begin(&ctx, &shard, &e, epoch, deliveries) else {
        return;
    };
    let mut unfinished = GiveUp {
        shard: &shard,
        id: delivery.id,
        epoch,
        armed: true,
    };
    let how = loop {
        if let Some(how) = too_many(&ctx, &delivery, &e) {
            break how;
        }
        // Protocol rule H: the handler's panic, its future's (while polled or dropped) and
        // their payloads' are contained.
        let call = contain(ctx.instance, || {
            handler(delivery.clone(), e.payload.clone())
        });
        let outcome = match call {
            Ok(fut) => {
                Contained {
                    fut: Some(fut),
                    instance: ctx.instance,
                }
                .await
            }
            Err(panic) => Err(panic),
        };
        if let Some(how) = judge(&ctx, &shard, &mut delivery, outcome, &e) {
            break how;
        }
    };
    unfinished.armed = false;
    end(&ctx, &shard, &delivery, how);
}

/// Waits for the start of entry `e` (protocol rule F: the lease must be held and fresh) and
/// counts its delivery; `None` if it is not to run (released or lost before it started: it
/// stays pending; or its key is quarantined: it is held).
fn begin(ctx: &Ctx, shard: &Shard, e: &RawEntry, epoch: u64, deliveries: u64) -> Option<Delivery> {
    {
        let mut st = shard.state.lock();
        loop {
            match st.start_unless_held(e.id, epoch, Instant::now(), &e.key, || e.clone()) {
                Start::Run => break,
                Start::Skip => return None,
                Start::Held => {
                    drop(st);
                    shard.cv.notify_all(); // it left the window: the reader may read on
                    tracing::debug!(shard = shard.index, id = %e.id, "key quarantined: entry held");
                    return None;
                }
                Start::Wait => {
                    keyway::blocking(|| shard.cv.wait_for(&mut st, LOOK_AGAIN));
                }
            }
        }
    }
    // Counted when it starts: an entry a release hands back unstarted was not delivered here.
    bump(&ctx.totals.delivered, 1);
    if deliveries > 1 {
        bump(&ctx.totals.redeliveries, 1);
    }
    Some(Delivery {
        key: e.key.clone(),
        shard: shard.index,
        id: e.id,
        epoch,
        attempt: u32::try_from(deliveries.max(1)).unwrap_or(u32::MAX),
    })
}

/// The entry's end if it was delivered more than `max_attempts` times already.
fn too_many(ctx: &Ctx, d: &Delivery, e: &RawEntry) -> Option<Finish<DeadInfo, RawEntry>> {
    (d.attempt > ctx.cfg.max_attempts).then(|| {
        let reason = format!("delivered {} times, more than max_attempts", d.attempt);
        exhausted(ctx, d, e, reason)
    })
}

/// Weighs one attempt's outcome (`Err`: the handler panicked, with this message): the
/// entry's end, or `None` once the backoff has passed and the next attempt may start.
fn judge(
    ctx: &Ctx,
    shard: &Shard,
    d: &mut Delivery,
    outcome: Result<Result<(), HandlerError>, String>,
    e: &RawEntry,
) -> Option<Finish<DeadInfo, RawEntry>> {
    let reason = match outcome {
        Ok(Ok(())) => {
            ctx.handled.record(d.id);
            return Some(Finish::Settle(None));
        }
        Ok(Err(err)) => contain(ctx.instance, move || err.to_string())
            .unwrap_or_else(|p| format!("the error's Display panicked: {p}")),
        Err(panic) => {
            bump(&ctx.totals.panics, 1);
            format!("handler panicked: {panic}")
        }
    };
    tracing::debug!(shard = shard.index, id = %d.id, attempt = d.attempt, %reason, "handler failed");
    if d.attempt >= ctx.cfg.max_attempts {
        return Some(exhausted(ctx, d, e, reason));
    }
    bump(&ctx.totals.retries, 1);
    if !back_off(ctx, shard, d.epoch, d.attempt) {
        return Some(Finish::Abandon);
    }
    d.attempt += 1;
    None
}

/// Records the entry's end (to be acked, dead-lettered or given up) and sends a full batch
/// of acks.
fn end(ctx: &Ctx, shard: &Shard, delivery: &Delivery, how: Finish<DeadInfo, RawEntry>) {
    let epoch = delivery.epoch;
    let mut st = shard.state.lock();
    if st.finish(delivery.id, epoch, how) {
        bump(&ctx.totals.refused_acks, 1);
        tracing::debug!(shard = shard.index, id = %delivery.id, epoch, "finished after the lease was lost: not acknowledged");
    }
    shard.progress.fetch_add(1, Ordering::Relaxed);
    let flush = acks::full(&st, ctx.cfg.ack_batch);
    // This entry's ack starts the queue: the timer sends it (and those joining it) at most
    // an interval from now.
    let first = st.acks_waiting() == 1 && !flush;
    let wake = flush || st.running() == 0; // a hand-off waits for the running ones
    drop(st);
    if wake {
        shard.cv.notify_all();
    }
    if first {
        ctx.ack_timer.arm(Instant::now() + ctx.cfg.ack_interval);
    }
    if flush {
        // The reader may be blocked in a read for a while: send the batch from here, unless
        // another thread is sending one (it looks again once it has sent, so it sees ours).
        let Some(mut conn) = shard.acks.try_lock() else {
            return;
        };
        if let Err(e) = keyway::blocking(|| acks::flush_full(ctx, shard, &mut conn)) {
            tracing::debug!(shard = shard.index, error = %e, "acks not sent; the timer retries");
        }
    }
}

/// Gives a started entry up if its task is dropped before it ends (its future cancelled by
/// a pool shut down under it): the entry leaves the window unacknowledged and stays pending
/// in Redis, and a hand-off waiting for the running entries is woken.
struct GiveUp<'a> {
    shard: &'a Shard,
    id: EntryId,
    epoch: u64,
    armed: bool,
}

impl Drop for GiveUp<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut st = self.shard.state.lock();
        st.finish(self.id, self.epoch, Finish::Abandon);
        self.shard.progress.fetch_add(1, Ordering::Relaxed);
        drop(st);
        self.shard.cv.notify_all();
        tracing::debug!(shard = self.shard.index, id = %self.id, epoch = self.epoch, "handler's future dropped before it completed: the entry stays pending");
    }
}

/// An async handler's future, polled (and dropped) with its panics contained: `Err` with
/// the panic's message.
struct Contained {
    fut: Option<HandlerFuture>,
    instance: u64,
}

impl Future for Contained {
    type Output = Result<Result<(), HandlerError>, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let instance = self.instance;
        let Some(fut) = self.fut.as_mut() else {
            return Poll::Ready(Err("polled after it completed".to_owned()));
        };
        let polled = contain(instance, || fut.as_mut().poll(cx));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(result)) => {
                self.drop_future();
                Poll::Ready(Ok(result))
            }
            Err(panic) => {
                self.drop_future();
                Poll::Ready(Err(panic))
            }
        }
    }
}

impl Contained {
    fn drop_future(&mut self) {
        if let Some(fut) = self.fut.take() {
            let _ = contain(self.instance, move || drop(fut));
        }
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        self.drop_future();
    }
}

/// The end of an entry that used up its attempts, by the failure policy: dead-lettered, or
/// held with its key quarantined.
fn exhausted(ctx: &Ctx, d: &Delivery, e: &RawEntry, reason: String) -> Finish<DeadInfo, RawEntry> {
    let hold = ctx.cfg.failure_policy == FailurePolicy::Quarantine;
    let info = DeadInfo {
        key: d.key.clone(),
        payload: if hold { Vec::new() } else { e.payload.clone() },
        attempts: d.attempt,
        reason,
        hold,
    };
    if hold {
        tracing::warn!(shard = d.shard, id = %d.id, attempts = d.attempt, reason = %info.reason, "entry exhausted its attempts: its key is quarantined");
        return Finish::Hold {
            key: d.key.clone(),
            entry: e.clone(),
            note: info,
        };
    }
    tracing::warn!(shard = d.shard, id = %d.id, attempts = d.attempt, reason = %info.reason, "entry goes to the dead letters");
    Finish::Settle(Some(info))
}

/// Waits before attempt `attempt + 1`: `backoff * 2^(attempt - 1)`, at most `max_backoff`,
/// and then for as long as the lease is not confirmed (protocol rule F: no attempt starts
/// unless the lease is confirmed). False if the shard is released or lost meanwhile (the
/// entry stays pending for the next owner).
fn back_off(ctx: &Ctx, shard: &Shard, epoch: u64, attempt: u32) -> bool {
    let factor = 1u32
        .checked_shl(attempt.saturating_sub(1))
        .unwrap_or(u32::MAX);
    let wait = ctx
        .cfg
        .backoff
        .checked_mul(factor)
        .map_or(ctx.cfg.max_backoff, |w| w.min(ctx.cfg.max_backoff));
    let deadline = Instant::now().checked_add(wait);
    let mut st = shard.state.lock();
    loop {
        let now = Instant::now();
        match st.may_retry(epoch, now) {
            Retry::Stop => return false,
            Retry::Wait => {
                keyway::blocking(|| shard.cv.wait_for(&mut st, LOOK_AGAIN));
                continue;
            }
            Retry::Go => {}
        }
        let Some(deadline) = deadline else {
            return true;
        };
        if now >= deadline {
            return true;
        }
        keyway::blocking(|| shard.cv.wait_until(&mut st, deadline));
    }
}
