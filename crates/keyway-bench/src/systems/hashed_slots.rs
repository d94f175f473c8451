//! `hashed-slots`: the common "N single-thread executors, key hash mod N" pattern. `threads`
//! (= available parallelism) threads, each draining its own crossbeam-channel queue of boxed
//! closures in order; a context's tasks all go to slot `hash(context) mod N`, so they keep
//! their order, and contexts that hash to the same slot wait behind each other's tasks.

use std::thread::JoinHandle;

use crossbeam_channel::Sender;

use super::ContextsSystem;
use crate::keys::splitmix64;
use crate::work::{context_task, ContextsRun};

/// A boxed task.
type Job = Box<dyn FnOnce() + Send>;

/// The slot a key's tasks run on, of `slots`.
#[inline]
pub fn slot_of(key: usize, slots: usize) -> usize {
    (splitmix64(key as u64) % slots as u64) as usize
}

/// N single-thread executors; each context is pinned to one by its hash.
#[derive(Debug)]
pub struct HashedSlots {
    run: &'static ContextsRun,
    /// The slot of each context, computed once (untimed).
    slot: Vec<usize>,
    senders: Vec<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl ContextsSystem for HashedSlots {
    const NAME: &'static str = "hashed-slots";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let slots = threads.max(1);
        let mut senders = Vec::with_capacity(slots);
        let mut handles = Vec::with_capacity(slots);
        for i in 0..slots {
            let (tx, rx) = crossbeam_channel::unbounded::<Job>();
            let thread = std::thread::Builder::new()
                .name(format!("slot-{i}"))
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .map_err(|e| format!("spawning slot thread {i}: {e}"))?;
            senders.push(tx);
            handles.push(thread);
        }
        Ok(Self {
            run,
            slot: (0..run.contexts()).map(|c| slot_of(c, slots)).collect(),
            senders,
            threads: handles,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let (run, slot, senders) = (self.run, &self.slot, &self.senders);
        run.produce(|ctx, seq| {
            senders[slot[ctx]]
                .send(Box::new(move || context_task(run, ctx, seq)))
                .map_err(|_| format!("slot {} is gone", slot[ctx]))
        })
    }

    fn teardown(self) -> Result<(), String> {
        drop(self.senders);
        for thread in self.threads {
            thread
                .join()
                .map_err(|_| "a slot thread panicked".to_string())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_spread_over_every_slot() {
        let mut seen = [0u32; 4];
        for key in 0..4_000 {
            seen[slot_of(key, 4)] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1_200).contains(&n)), "{seen:?}");
        assert_eq!(slot_of(7, 1), 0);
    }
}
