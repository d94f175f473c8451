//! `kameo`: an actor per context from the kameo crate, spawned on a multi-thread tokio runtime
//! (worker threads = available parallelism) with an unbounded mailbox, each task a `u64`
//! message sent with `tell` (`try_send`, as a producer outside the runtime does) and handled
//! by the actor's `Message<u64>` handler.

use kameo::actor::{ActorRef, Spawn};
use kameo::error::Infallible;
use kameo::mailbox;
use kameo::message::{Context, Message};
use kameo::Actor;
use tokio::runtime::Runtime;

use super::{tokio_runtime, ContextsSystem};
use crate::work::{context_task, ContextsRun};

/// The actor of one context: the run's state and its context number.
pub struct ContextActor {
    run: &'static ContextsRun,
    ctx: usize,
}

impl Actor for ContextActor {
    type Args = Self;
    type Error = Infallible;

    async fn on_start(state: Self, _: ActorRef<Self>) -> Result<Self, Self::Error> {
        Ok(state)
    }
}

impl Message<u64> for ContextActor {
    type Reply = ();

    async fn handle(&mut self, seq: u64, _: &mut Context<Self, ()>) {
        context_task(self.run, self.ctx, seq);
    }
}

/// One kameo actor per context.
pub struct Kameo {
    run: &'static ContextsRun,
    runtime: Runtime,
    actors: Vec<ActorRef<ContextActor>>,
}

impl ContextsSystem for Kameo {
    const NAME: &'static str = "kameo";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let runtime = tokio_runtime(threads)?;
        let actors = {
            let _inside = runtime.enter();
            (0..run.contexts())
                .map(|ctx| {
                    ContextActor::spawn_with_mailbox(
                        ContextActor { run, ctx },
                        mailbox::unbounded(),
                    )
                })
                .collect::<Vec<_>>()
        };
        runtime.block_on(async {
            for actor in &actors {
                actor.wait_for_startup().await;
            }
        });
        Ok(Self {
            run,
            runtime,
            actors,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let actors = &self.actors;
        self.run.produce(|ctx, seq| {
            actors[ctx]
                .tell(seq)
                .try_send()
                .map_err(|e| format!("kameo refused message {seq} of context {ctx}: {e}"))
        })
    }

    fn teardown(self) -> Result<(), String> {
        let actors = self.actors;
        self.runtime.block_on(async move {
            for actor in &actors {
                actor
                    .stop_gracefully()
                    .await
                    .map_err(|e| format!("stopping a kameo actor: {e}"))?;
            }
            for actor in &actors {
                actor.wait_for_shutdown().await;
            }
            Ok(())
        })
    }
}
