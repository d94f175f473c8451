//! `reorder-thread`: the `crossbeam-pool` peer processes the items in
//! parallel and sends each result over a crossbeam-channel to one dedicated
//! consumer thread, which re-orders them with a min-heap on the item number
//! and writes them in order (an item that is already due skips the heap).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::thread::JoinHandle;

use crossbeam_channel::Sender;

use super::crossbeam_pool::CrossbeamPool;
use super::{OrderedSystem, TaskPool};
use crate::work::{process, write, OrderedRun};

/// Processing pool plus re-ordering consumer thread.
#[derive(Debug)]
pub struct ReorderThread {
    run: &'static OrderedRun,
    pool: CrossbeamPool,
    /// The results channel. Leaked (the sender and a drained channel, a few
    /// hundred bytes per run) so that tasks use it without cloning a sender
    /// per item; the consumer stops after the last item instead of on
    /// disconnection.
    results: &'static Sender<(u64, u64)>,
    consumer: JoinHandle<()>,
}

/// The consumer loop: writes items in order as they become due.
fn consume(run: &'static OrderedRun, results: crossbeam_channel::Receiver<(u64, u64)>) {
    let mut heap = BinaryHeap::new();
    let mut due = 0u64;
    while due < run.items {
        let Ok((item, checksum)) = results.recv() else {
            return; // every sender gone: the run fails its check
        };
        if item != due {
            heap.push(Reverse((item, checksum)));
            continue;
        }
        write(run, item, checksum);
        due += 1;
        while let Some(&Reverse((item, checksum))) = heap.peek() {
            if item != due {
                break;
            }
            heap.pop();
            write(run, item, checksum);
            due += 1;
        }
    }
}

impl OrderedSystem for ReorderThread {
    const NAME: &'static str = "reorder-thread";

    fn setup(run: &'static OrderedRun, threads: usize) -> Result<Self, String> {
        let pool = CrossbeamPool::build(threads)?;
        let (sender, receiver) = crossbeam_channel::unbounded();
        let consumer = std::thread::Builder::new()
            .name("reorder-consumer".into())
            .spawn(move || consume(run, receiver))
            .map_err(|e| format!("spawning the re-order consumer: {e}"))?;
        Ok(Self {
            run,
            pool,
            results: Box::leak(Box::new(sender)),
            consumer,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let (run, results) = (self.run, self.results);
        for item in 0..run.items {
            self.pool.submit(move || {
                let checksum = process(item);
                // A send fails only if the consumer is gone; the check catches it.
                let _ = results.send((item, checksum));
            })?;
        }
        Ok(())
    }

    fn teardown(self) -> Result<(), String> {
        self.pool.shutdown();
        self.consumer
            .join()
            .map_err(|_| "the re-order consumer panicked".to_string())
    }
}
