//! The task that runs one entry in its key's lane: wait for the start (the lease must be
//! held and fresh), run the handler with panics contained, retry in place with backoff, and
//! settle (ack or dead letter) or abandon.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::stream::acks;
use crate::stream::contain::contain;
use crate::stream::context::{bump, Ctx, DeadInfo, Shard};
use crate::stream::reply::RawEntry;
use crate::stream::state::{Finish, Retry, Start};
use crate::stream::Delivery;

/// How long a task waits between two looks at a lease that was not confirmed lately.
const LOOK_AGAIN: Duration = Duration::from_millis(20);

/// Runs entry `e` delivered at `epoch`, whose Redis delivery count is `deliveries`.
pub(crate) fn run(ctx: &Ctx, shard: &Shard, e: RawEntry, epoch: u64, deliveries: u64) {
    {
        let mut st = shard.state.lock();
        loop {
            match st.start(e.id, epoch, Instant::now()) {
                Start::Run => break,
                Start::Skip => return, // released or lost before it started: still pending
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
    let max = ctx.cfg.max_attempts;
    let mut delivery = Delivery {
        key: e.key,
        shard: shard.index,
        id: e.id,
        epoch,
        attempt: u32::try_from(deliveries.max(1)).unwrap_or(u32::MAX),
    };
    let how = loop {
        if delivery.attempt > max {
            let reason = format!(
                "delivered {} times, more than max_attempts",
                delivery.attempt
            );
            break dead(&delivery, e.payload, reason);
        }
        // Protocol rule H: the handler's panic (and its payload's) is contained.
        let outcome = contain(ctx.instance, || (ctx.handler)(&delivery, &e.payload));
        let reason = match outcome {
            Ok(Ok(())) => break Finish::Settle(None),
            Ok(Err(err)) => contain(ctx.instance, move || err.to_string())
                .unwrap_or_else(|p| format!("the error's Display panicked: {p}")),
            Err(panic) => {
                bump(&ctx.totals.panics, 1);
                format!("handler panicked: {panic}")
            }
        };
        tracing::debug!(shard = shard.index, id = %delivery.id, attempt = delivery.attempt, %reason, "handler failed");
        if delivery.attempt >= max {
            break dead(&delivery, e.payload, reason);
        }
        bump(&ctx.totals.retries, 1);
        if !back_off(ctx, shard, epoch, delivery.attempt) {
            break Finish::Abandon;
        }
        delivery.attempt += 1;
    };
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

fn dead(d: &Delivery, payload: Vec<u8>, reason: String) -> Finish<DeadInfo> {
    tracing::warn!(shard = d.shard, id = %d.id, attempts = d.attempt, %reason, "entry goes to the dead letters");
    Finish::Settle(Some(DeadInfo {
        key: d.key.clone(),
        payload,
        attempts: d.attempt,
        reason,
    }))
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
