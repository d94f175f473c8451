//! Acknowledging: each shard's finished entries are acked (or dead-lettered) in batches,
//! fenced by the epoch that delivered them, on a connection of the shard's own that only acks
//! use. Its lock is held from taking a batch until it is settled in the shard's state, so a
//! hand-off that holds it sees no batch in flight. A full batch is sent by the task whose
//! entry fills it (or, if another thread is sending, by that thread: the sender looks again
//! before it lets go of the lock; the shard's reader also looks between reads); a batch that
//! is not full waits for the [ack timer](crate::stream::ack_timer), at most the interval.
//! Holding that lock is also what lets the reader scan the pending list (protocol rule R in
//! the [module docs](crate::stream)): no ack is in flight meanwhile.

use std::collections::HashMap;

use redis::Connection;

use crate::stream::contain::contain;
use crate::stream::context::State;
use crate::stream::context::{bump, evalsha, Ctx, DeadInfo, Shard};
use crate::stream::state::ToAck;
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
    due: impl FnOnce(&State) -> bool,
) -> Result<bool, StreamError> {
    if shard.state.lock().acks_waiting() == 0 {
        return Ok(false);
    }
    let c = match conn {
        Some(c) => c,
        None => conn.insert(ctx.connect("ack")?),
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
            // Whoever sends next, the timer tries again after an interval at the latest.
            ctx.ack_timer
                .arm(std::time::Instant::now() + ctx.cfg.ack_interval);
            Err(e)
        }
    }
}

/// Whether the acks waiting in `st` make a full batch, to be sent now.
pub(crate) fn full(st: &State, batch: usize) -> bool {
    st.acks_waiting() >= batch
}

/// Sends batches while they are [`full`] (the caller holds the ack connection's lock).
pub(crate) fn flush_full(
    ctx: &Ctx,
    shard: &Shard,
    conn: &mut Option<Connection>,
) -> Result<(), StreamError> {
    let batch = ctx.cfg.ack_batch;
    while flush(ctx, shard, conn, |st| full(st, batch))? {}
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
    let keys_hold = [shard.lease.as_str(), shard.held.as_str()];
    for (epoch, (ok, failed)) in by_epoch {
        let (holds, dead): (Vec<_>, Vec<_>) = failed.into_iter().partition(|(_, d)| d.hold);
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
        for (id, d) in &holds {
            let mut cmd = evalsha(&ctx.scripts.hold, &keys_hold);
            cmd.arg(&ctx.member)
                .arg(epoch)
                .arg(&d.key)
                .arg(id.to_string());
            pipe.add_command(cmd);
        }
        let results: Vec<i64> = pipe.query(conn)?;
        let refused = results.iter().any(|&r| r < 0);
        let all = ok.iter().copied().chain(dead.iter().map(|(id, _)| *id));
        let mut st = shard.state.lock();
        // Held entries are not settled: they stay in the window's map, held.
        st.settled(epoch, all);
        if !refused {
            for (_, d) in &holds {
                st.hold_stored(epoch, &d.key);
            }
        }
        if refused {
            let n = (ok.len() + dead.len() + holds.len()) as u64;
            bump(&ctx.totals.refused_acks, n);
            // Rule 6 of the shard state: an old epoch's batch refused after this member took
            // the shard again is no loss of the new epoch; a loss is counted once.
            let dropped = st.refused(epoch);
            drop(st);
            shard.cv.notify_all();
            if let Some(dropped) = dropped {
                bump(&ctx.totals.leases_lost, 1);
                tracing::warn!(
                    shard = shard.index,
                    epoch,
                    refused = n,
                    dropped,
                    "acks refused: another member holds the shard now"
                );
            }
            continue;
        }
        drop(st);
        shard.cv.notify_all(); // the reader may wait for room in the window
        shard
            .progress
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // What XACK acknowledged: an entry acknowledged by someone else meanwhile (an
        // operator) is not counted again.
        let acked = results.first().copied().unwrap_or(0).max(0) as u64;
        bump(&ctx.totals.acked, acked);
        bump(&ctx.totals.dead_lettered, dead.len() as u64);
        bump(&ctx.totals.quarantined, holds.len() as u64);
        for (id, d) in &holds {
            tracing::warn!(shard = shard.index, epoch, %id, key = %String::from_utf8_lossy(&d.key), "key quarantined: its entries are held until it is released");
        }
        if let Some(hook) = &ctx.cfg.on_ack {
            let acked = Acked {
                shard: shard.index,
                epoch,
                succeeded: ok,
                dead_lettered: dead.iter().map(|(id, _)| *id).collect(),
            };
            // Protocol rule H: a panicking hook loses nothing but its own call.
            if let Err(panic) = contain(ctx.instance, || hook(&acked)) {
                tracing::error!(shard = shard.index, epoch, %panic, "the on_ack hook panicked; acknowledging goes on");
            }
        }
    }
    Ok(())
}
