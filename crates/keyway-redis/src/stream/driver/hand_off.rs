//! The shard reader's acks and its release of the shard: fenced acks flushed on the shard's
//! ack connection, and the hand-off that waits for running entries, gives back the queued
//! ones and frees the lease.

use std::sync::Arc;
use std::time::Instant;

use redis::Value;

use super::ShardReader;
use crate::stream::acks;
use crate::stream::context::{bump, evalsha};
use crate::stream::reply;
use crate::stream::state::Phase;
use crate::stream::StreamError;

impl ShardReader {
    /// Sends the waiting acks and dead letters: all of them if `now`, else the full batches
    /// (those waiting for their interval are the [ack timer](crate::stream::ack_timer)'s),
    /// fenced by the epoch, on the shard's ack connection. Unless `now`, a thread sending
    /// acks meanwhile is left to it (it looks again before it lets go), and the reader goes
    /// on reading.
    pub(super) fn flush(&mut self, now: bool) -> Result<(), StreamError> {
        let shard = Arc::clone(&self.shard);
        if now {
            let mut conn = shard.acks.lock();
            acks::flush(&self.ctx, &shard, &mut conn, |_| true)?;
            return Ok(());
        }
        let Some(mut conn) = shard.acks.try_lock() else {
            return Ok(());
        };
        acks::flush_full(&self.ctx, &shard, &mut conn)
    }

    /// Release: nothing new starts (the queued entries stay pending for the next owner); wait
    /// for the running ones, flush their acks, then free the lease.
    pub(super) fn hand_off(mut self) {
        let deadline = Instant::now() + self.ctx.cfg.lease;
        let shard = Arc::clone(&self.shard);
        // Held from the last look at the state to the release: no task's batch is in flight.
        let _acks = loop {
            let flushed = self.flush(true);
            let acks = shard.acks.lock();
            let mut st = shard.state.lock();
            if st.phase() != Phase::Releasing {
                return; // lost meanwhile
            }
            if st.drained() {
                break acks;
            }
            if flushed.is_err() && st.running() == 0 && Instant::now() >= deadline {
                break acks; // Redis is down: the acks are lost, the entries will run again
            }
            drop(acks);
            shard.cv.wait_for(&mut st, self.ctx.cfg.ack_interval);
        };
        let epoch = self.epoch;
        let ctx = Arc::clone(&self.ctx);
        let returned = {
            let mut st = shard.state.lock();
            // Rule 6 of the shard state: a renewal refused from now on is the answer to
            // this release, not a lost lease.
            st.sending_release();
            st.take_returned()
        };
        let released = self.conn().and_then(|conn| {
            let keys = [shard.lease.as_str(), shard.stream.as_str()];
            let mut pipe = redis::pipe();
            if !returned.is_empty() {
                let mut give_back = evalsha(&ctx.scripts.give_back, &keys);
                give_back.arg(ctx.group()).arg(&ctx.member).arg(epoch);
                for (id, deliveries) in &returned {
                    give_back
                        .arg(id.to_string())
                        .arg(deliveries.saturating_sub(1));
                }
                pipe.add_command(give_back);
            }
            let mut release = evalsha(&ctx.scripts.release, &[shard.lease.as_str()]);
            release.arg(&ctx.member).arg(epoch);
            pipe.add_command(release);
            pipe.query::<Vec<Value>>(conn).map_err(StreamError::from)
        });
        if let Ok(replies) = &released {
            if !returned.is_empty() {
                // Entries trimmed while pending could not be given back: reported here.
                match replies.first().map(|v| reply::fenced_claim(v, false)) {
                    Some(Ok(given)) => self.report_trimmed(&given.trimmed),
                    Some(Err(e)) => {
                        tracing::warn!(shard = shard.index, error = %e, "give-back reply")
                    }
                    None => {}
                }
            }
        }
        let mut st = self.shard.state.lock();
        st.released();
        drop(st);
        self.shard.cv.notify_all();
        bump(&self.ctx.totals.releases, 1);
        match released {
            Ok(_) => tracing::info!(shard = self.shard.index, epoch, "shard released"),
            Err(e) => {
                tracing::warn!(shard = self.shard.index, epoch, error = %e, "could not release the lease; it expires by itself")
            }
        }
    }
}
