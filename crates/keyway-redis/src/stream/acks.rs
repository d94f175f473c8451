//! Acknowledging: each shard's finished entries are acked (or dead-lettered) in batches,
//! fenced by the epoch that delivered them, on a connection of the shard's own that only acks
//! use. Its lock is held from taking a batch until it is settled in the shard's state, so a
//! hand-off that holds it sees no batch in flight. Both the shard's reader and the entry tasks
//! flush: the reader when a batch is due by count or interval, and a task when its entry
//! brings the batch to its count or leaves nothing running or queued in the shard (so the
//! last acks of a burst go out at once, not when the reader's blocking read times out, which
//! Redis rounds up to its `hz` tick: 100 ms by default). A task finding another thread
//! sending leaves its ack to it: the sender looks again before it lets go of the lock.

use std::collections::HashMap;

use redis::Connection;

use crate::stream::context::{bump, evalsha, Ctx, DeadInfo, Shard};
use crate::stream::state::{ShardState, ToAck};
use crate::stream::{Acked, EntryId, StreamError};

/// One epoch's acks: entries that succeeded, and entries to dead-letter.
type Batch<'a> = (Vec<EntryId>, Vec<(EntryId, &'a DeadInfo)>);

/// Sends `shard`'s waiting acks and dead letters if `due` says so (looked at under the
/// state's lock), on the ack connection `conn` (the caller holds its lock; connected here if
/// need be). True if a batch was sent. On failure the batch goes back to the front of the
/// queue and the connection is dropped (the next flush reconnects).
pub(crate) fn flush(
    ctx: &Ctx,
    shard: &Shard,
    conn: &mut Option<Connection>,
    due: impl FnOnce(&ShardState<DeadInfo>) -> bool,
) -> Result<bool, StreamError> {
    if shard.state.lock().acks_waiting() == 0 {
        return Ok(false);
    }
    let c = match conn {
        Some(c) => c,
        None => conn.insert(ctx.connect()?),
    };
    let acks = {
        let mut st = shard.state.lock();
        if st.acks_waiting() == 0 || !due(&st) {
            return Ok(false);
        }
        st.take_acks()
    };
    match send(ctx, shard, c, &acks) {
        Ok(()) => Ok(true),
        Err(e) => {
            *conn = None;
            shard.state.lock().requeue_acks(acks);
            Err(e)
        }
    }
}

/// Whether the acks waiting in `st` should go now: a full batch, or nothing else in the window.
pub(crate) fn urgent(st: &ShardState<DeadInfo>, batch: usize) -> bool {
    st.acks_waiting() >= batch || st.all_done()
}

/// Sends batches while they are [`urgent`] (the caller holds the ack connection's lock).
pub(crate) fn flush_urgent(
    ctx: &Ctx,
    shard: &Shard,
    conn: &mut Option<Connection>,
) -> Result<(), StreamError> {
    let batch = ctx.cfg.ack_batch;
    while flush(ctx, shard, conn, |st| urgent(st, batch))? {}
    Ok(())
}

/// Sends `acks`, a pipeline per epoch, each checked against the lease: a refused batch means
/// another member holds the shard now, so the shard is lost here.
fn send(
    ctx: &Ctx,
    shard: &Shard,
    conn: &mut Connection,
    acks: &[ToAck<DeadInfo>],
) -> Result<(), StreamError> {
    let mut by_epoch: HashMap<u64, Batch<'_>> = HashMap::new();
    for a in acks {
        let slot = by_epoch.entry(a.epoch).or_default();
        match &a.dead {
            None => slot.0.push(a.id),
            Some(d) => slot.1.push((a.id, d)),
        }
    }
    let keys_ack = [shard.lease.as_str(), shard.stream.as_str()];
    let keys_dead = [
        shard.lease.as_str(),
        shard.stream.as_str(),
        shard.dead.as_str(),
    ];
    for (epoch, (ok, dead)) in by_epoch {
        let mut pipe = redis::pipe();
        let mut ack = evalsha(&ctx.scripts.ack, &keys_ack);
        ack.arg(ctx.group()).arg(&ctx.member).arg(epoch);
        for id in &ok {
            ack.arg(id.to_string());
        }
        pipe.add_command(ack);
        for (id, d) in &dead {
            let mut cmd = evalsha(&ctx.scripts.dead_letter, &keys_dead);
            cmd.arg(ctx.group())
                .arg(&ctx.member)
                .arg(epoch)
                .arg(id.to_string())
                .arg(&d.key)
                .arg(&d.payload)
                .arg(d.attempts)
                .arg(&d.reason);
            pipe.add_command(cmd);
        }
        let results: Vec<i64> = pipe.query(conn)?;
        let refused = results.iter().any(|&r| r < 0);
        let all = ok.iter().copied().chain(dead.iter().map(|(id, _)| *id));
        let mut st = shard.state.lock();
        st.settled(epoch, all);
        if refused {
            let n = (ok.len() + dead.len()) as u64;
            bump(&ctx.totals.refused_acks, n);
            let dropped = st.lose();
            drop(st);
            shard.cv.notify_all();
            bump(&ctx.totals.leases_lost, 1);
            tracing::warn!(
                shard = shard.index,
                epoch,
                refused = n,
                dropped,
                "acks refused: another member holds the shard now"
            );
            continue;
        }
        drop(st);
        shard.cv.notify_all(); // the reader may wait for room in the window
        shard
            .progress
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bump(&ctx.totals.acked, ok.len() as u64);
        bump(&ctx.totals.dead_lettered, dead.len() as u64);
        if let Some(hook) = &ctx.cfg.on_ack {
            hook(&Acked {
                shard: shard.index,
                epoch,
                succeeded: ok,
                dead_lettered: dead.iter().map(|(id, _)| *id).collect(),
            });
        }
    }
    Ok(())
}
