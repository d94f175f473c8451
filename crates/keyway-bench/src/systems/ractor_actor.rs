//! `ractor`: an actor per context from the ractor crate, spawned on a multi-thread tokio
//! runtime (worker threads = available parallelism), each task a `u64` message sent with
//! `cast` and handled by the actor's `handle`.

use ractor::concurrency::JoinHandle;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::runtime::Runtime;

use super::{tokio_runtime, ContextsSystem};
use crate::work::{context_task, ContextsRun};

/// The actor of one context: the run's state and its context number.
pub struct ContextActor {
    run: &'static ContextsRun,
    ctx: usize,
}

impl Actor for ContextActor {
    type Msg = u64;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<u64>, (): ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<u64>,
        seq: u64,
        (): &mut (),
    ) -> Result<(), ActorProcessingErr> {
        context_task(self.run, self.ctx, seq);
        Ok(())
    }
}

/// One ractor actor per context.
pub struct Ractor {
    run: &'static ContextsRun,
    runtime: Runtime,
    actors: Vec<ActorRef<u64>>,
    handles: Vec<JoinHandle<()>>,
}

impl ContextsSystem for Ractor {
    const NAME: &'static str = "ractor";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let runtime = tokio_runtime(threads)?;
        let (actors, handles) = runtime.block_on(async {
            let mut actors = Vec::with_capacity(run.contexts());
            let mut handles = Vec::with_capacity(run.contexts());
            for ctx in 0..run.contexts() {
                let (actor, handle) = Actor::spawn(None, ContextActor { run, ctx }, ())
                    .await
                    .map_err(|e| format!("spawning a ractor actor: {e}"))?;
                actors.push(actor);
                handles.push(handle);
            }
            Ok::<_, String>((actors, handles))
        })?;
        Ok(Self {
            run,
            runtime,
            actors,
            handles,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let actors = &self.actors;
        self.run.produce(|ctx, seq| {
            actors[ctx]
                .cast(seq)
                .map_err(|e| format!("ractor refused message {seq} of context {ctx}: {e}"))
        })
    }

    fn teardown(self) -> Result<(), String> {
        for actor in &self.actors {
            // Every message ran already (the run's latch opened): stop at once.
            actor.stop(None);
        }
        let handles = self.handles;
        self.runtime.block_on(async move {
            for handle in handles {
                handle
                    .await
                    .map_err(|e| format!("a ractor actor failed: {e}"))?;
            }
            Ok(())
        })
    }
}
