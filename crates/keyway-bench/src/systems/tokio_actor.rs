//! `tokio-actor`: a multi-thread tokio runtime (worker threads = available
//! parallelism), one task and one unbounded mpsc per context. The producer is
//! an ordinary std thread using the non-async `send`; the channel carries the
//! message itself, as an actor's mailbox would.

use tokio::runtime::Runtime;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::task::JoinHandle;

use super::{tokio_runtime, ContextsSystem};
use crate::work::{context_task, ContextsRun};

/// One actor task and mailbox per context.
#[derive(Debug)]
pub struct TokioActor {
    run: &'static ContextsRun,
    runtime: Runtime,
    senders: Vec<UnboundedSender<u64>>,
    actors: Vec<JoinHandle<()>>,
}

impl ContextsSystem for TokioActor {
    const NAME: &'static str = "tokio-actor";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let runtime = tokio_runtime(threads)?;
        let mut senders = Vec::with_capacity(run.contexts());
        let mut actors = Vec::with_capacity(run.contexts());
        for ctx in 0..run.contexts() {
            let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
            actors.push(runtime.spawn(async move {
                while let Some(seq) = rx.recv().await {
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
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        send_to_mailboxes(self.run, &self.senders)
    }

    fn teardown(self) -> Result<(), String> {
        close_mailboxes(&self.runtime, self.senders, self.actors)
    }
}

/// Sends every task of `run` to its context's mailbox, in the run's order.
pub(crate) fn send_to_mailboxes(
    run: &ContextsRun,
    senders: &[UnboundedSender<u64>],
) -> Result<(), String> {
    run.produce(|ctx, seq| {
        senders[ctx]
            .send(seq)
            .map_err(|_| format!("the actor of context {ctx} is gone"))
    })
}

/// Closes every mailbox and waits until each actor has drained its own.
pub(crate) fn close_mailboxes<M>(
    runtime: &Runtime,
    senders: Vec<UnboundedSender<M>>,
    actors: Vec<JoinHandle<()>>,
) -> Result<(), String> {
    drop(senders);
    runtime.block_on(async move {
        for actor in actors {
            actor.await.map_err(|e| format!("an actor failed: {e}"))?;
        }
        Ok::<(), String>(())
    })
}
