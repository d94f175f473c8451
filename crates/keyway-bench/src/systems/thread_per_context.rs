//! `thread-per-context`: one std thread and one crossbeam-channel unbounded
//! channel per context. The channel carries the message itself (the sequence
//! number), not a boxed closure: that is how a user of this design writes a
//! per-client message loop, and it spares the peer an allocation per task.

use std::thread::JoinHandle;

use crossbeam_channel::Sender;

use super::ContextsSystem;
use crate::work::{context_task, ContextsRun};

/// The most contexts `thread-per-context` is run with: beyond this many
/// threads a process meets the OS's limits, not the system's design.
pub const THREAD_LIMIT: usize = 4_096;

/// A thread and a channel per context.
#[derive(Debug)]
pub struct ThreadPerContext {
    run: &'static ContextsRun,
    senders: Vec<Sender<u64>>,
    threads: Vec<JoinHandle<()>>,
}

impl ContextsSystem for ThreadPerContext {
    const NAME: &'static str = "thread-per-context";

    fn setup(run: &'static ContextsRun, _threads: usize) -> Result<Self, String> {
        let mut senders = Vec::with_capacity(run.contexts());
        let mut threads = Vec::with_capacity(run.contexts());
        for ctx in 0..run.contexts() {
            let (tx, rx) = crossbeam_channel::unbounded::<u64>();
            let thread = std::thread::Builder::new()
                .name(format!("ctx-{ctx}"))
                .spawn(move || {
                    for seq in rx {
                        context_task(run, ctx, seq);
                    }
                })
                .map_err(|e| format!("spawning the thread of context {ctx}: {e}"))?;
            senders.push(tx);
            threads.push(thread);
        }
        Ok(Self {
            run,
            senders,
            threads,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let senders = &self.senders;
        self.run.produce(|ctx, seq| {
            senders[ctx]
                .send(seq)
                .map_err(|_| format!("the thread of context {ctx} is gone"))
        })
    }

    fn teardown(self) -> Result<(), String> {
        drop(self.senders);
        for thread in self.threads {
            thread
                .join()
                .map_err(|_| "a context thread panicked".to_string())?;
        }
        Ok(())
    }
}
