//! The ack timer of a consumer: a thread of its own that sends the acks waiting for their
//! interval. An entry task whose ack starts a shard's queue arms it for `interval` from then;
//! when it fires, every shard's waiting acks go out (one fenced batch per shard). So acks of
//! entries finishing one after another while a shard is otherwise idle go out together, at
//! most `interval` after the first, instead of one round trip each; and they go out though
//! the shard's reader is blocked in a read (which Redis 7.0 lets time out only on its `hz`
//! tick, 100 ms by default). Full batches do not wait for it: the task that fills one sends it.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::stream::acks;
use crate::stream::context::Ctx;
use crate::stream::StreamError;

/// When the timer fires next, and whether it should stop.
#[derive(Debug, Default)]
struct Due {
    at: Option<Instant>,
    stop: bool,
}

/// The timer's shared half (in [`Ctx`]).
#[derive(Debug, Default)]
pub(crate) struct AckTimer {
    due: Mutex<Due>,
    cv: Condvar,
}

impl AckTimer {
    /// Makes the timer fire by `at` (an earlier deadline stands). Wakes its thread only when
    /// it was not armed, so arming costs a lock, not a wake-up, while acks pile up.
    pub(crate) fn arm(&self, at: Instant) {
        let mut due = self.due.lock();
        if due.at.is_none_or(|earlier| at < earlier) {
            due.at = Some(at);
            self.cv.notify_one();
        }
    }

    /// Stops the timer's thread (the control thread does, once every shard is handed off).
    pub(crate) fn stop(&self) {
        self.due.lock().stop = true;
        self.cv.notify_one();
    }
}

/// The timer's thread; stopped (and joined) on drop.
pub(crate) struct AckTimerThread {
    ctx: Arc<Ctx>,
    thread: Option<JoinHandle<()>>,
}

impl AckTimerThread {
    /// Starts `ctx`'s timer thread.
    pub(crate) fn start(ctx: &Arc<Ctx>) -> Result<Self, StreamError> {
        let run = Arc::clone(ctx);
        let thread = std::thread::Builder::new()
            .name("keyway-stream-acks".to_owned())
            .spawn(move || fire_when_due(&run))
            .map_err(StreamError::Thread)?;
        Ok(Self {
            ctx: Arc::clone(ctx),
            thread: Some(thread),
        })
    }
}

impl AckTimerThread {
    /// Lets the thread go without waiting for it (it stops when the control thread ends):
    /// for a `shutdown` called by the consumer's own user code, which that thread may run.
    pub(crate) fn detach(mut self) {
        drop(self.thread.take());
    }
}

impl Drop for AckTimerThread {
    fn drop(&mut self) {
        self.ctx.ack_timer.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn fire_when_due(ctx: &Ctx) {
    let timer = &ctx.ack_timer;
    let mut due = timer.due.lock();
    loop {
        if due.stop {
            return;
        }
        match due.at {
            None => timer.cv.wait(&mut due),
            Some(at) if Instant::now() < at => {
                timer.cv.wait_until(&mut due, at);
            }
            Some(_) => {
                due.at = None;
                drop(due);
                if !send_all(ctx) {
                    // Redis failed: try again an interval later.
                    timer.arm(Instant::now() + ctx.cfg.ack_interval);
                }
                due = timer.due.lock();
            }
        }
    }
}

/// Sends every shard's waiting acks; false if a shard's batch could not be sent.
fn send_all(ctx: &Ctx) -> bool {
    let mut sent = true;
    for shard in &ctx.shards {
        if shard.state.lock().acks_waiting() == 0 {
            continue;
        }
        let mut conn = shard.acks.lock();
        if let Err(e) = acks::flush(ctx, shard, &mut conn, |_| true) {
            tracing::debug!(shard = shard.index, error = %e, "acks not sent; trying again");
            sent = false;
        }
    }
    sent
}
