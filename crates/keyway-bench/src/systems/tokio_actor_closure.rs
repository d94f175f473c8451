//! `tokio-actor-closure`: the `tokio-actor` runtime and mailboxes, but each mailbox carries a
//! boxed closure (`Box<dyn FnOnce() + Send>`), not a message: the shape of keyway's
//! `execute_sequential`, where the user hands each context a closure. The actor task runs the
//! closures it receives in order; each closure does the context's task and order check.

use tokio::runtime::Runtime;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::task::JoinHandle;

use super::tokio_actor::close_mailboxes;
use super::{tokio_runtime, ContextsSystem};
use crate::work::{context_task, ContextsRun};

/// A boxed task, as a closure-carrying mailbox holds it.
type Job = Box<dyn FnOnce() + Send>;

/// One actor task per context, its mailbox carrying boxed closures.
#[derive(Debug)]
pub struct TokioActorClosure {
    run: &'static ContextsRun,
    runtime: Runtime,
    senders: Vec<UnboundedSender<Job>>,
    actors: Vec<JoinHandle<()>>,
}

impl ContextsSystem for TokioActorClosure {
    const NAME: &'static str = "tokio-actor-closure";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let runtime = tokio_runtime(threads)?;
        let mut senders = Vec::with_capacity(run.contexts());
        let mut actors = Vec::with_capacity(run.contexts());
        for _ in 0..run.contexts() {
            let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
            actors.push(runtime.spawn(async move {
                while let Some(job) = rx.recv().await {
                    job();
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
        let (run, senders) = (self.run, &self.senders);
        run.produce(|ctx, seq| {
            senders[ctx]
                .send(Box::new(move || context_task(run, ctx, seq)))
                .map_err(|_| format!("the actor of context {ctx} is gone"))
        })
    }

    fn teardown(self) -> Result<(), String> {
        close_mailboxes(&self.runtime, self.senders, self.actors)
    }
}
