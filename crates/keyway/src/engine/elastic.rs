//! The pool's elastic threads: a worker started in a free slot (up to `max_threads`), an
//! auxiliary one added when work waits while too few workers can take it (the core grows after
//! `core_growth_after` of them), a worker retired after `keep_alive` idle, a slot given back.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_deque::Worker;
use crossbeam_utils::sync::Parker;

use super::registry::Registry;
use super::threads;
use super::work::Work;
use super::worker::{self, WorkerCtx};

impl Registry {
    /// Adds an auxiliary thread if work waits while fewer than `core` threads can take it.
    pub(crate) fn ensure_threads(self: &Arc<Self>) {
        if self.stop_now.load(Ordering::Acquire) || !self.has_work() || self.sleep.sleepers() > 0 {
            return;
        }
        let live = self.live.load(Ordering::Acquire);
        let runnable = live.saturating_sub(self.blocked_threads());
        if runnable < self.core_target.load(Ordering::Acquire) {
            match self.spawn_worker() {
                Ok(true) => {
                    let n = self.aux_spawned.fetch_add(1, Ordering::AcqRel) + 1;
                    tracing::debug!(
                        pool = self.name(),
                        live = live + 1,
                        "keyway added an auxiliary thread"
                    );
                    if n % self.config.core_growth_after as u64 == 0 {
                        let grown = self.core_target.fetch_update(
                            Ordering::AcqRel,
                            Ordering::Acquire,
                            |c| (c < self.config.max_threads).then_some(c + 1),
                        );
                        if let Ok(old) = grown {
                            tracing::info!(
                                pool = self.name(),
                                core = old + 1,
                                "keyway grew its core threads"
                            );
                        }
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(
                    pool = self.name(),
                    error = %e,
                    "keyway could not add an auxiliary thread"
                ),
            }
        }
    }

    /// Starts a worker if `max_threads` allows; `Ok(false)` when it does not.
    pub(crate) fn spawn_worker(self: &Arc<Self>) -> std::io::Result<bool> {
        let reserved = self
            .live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| {
                (l < self.config.max_threads).then_some(l + 1)
            });
        if reserved.is_err() {
            return Ok(false);
        }
        let Some(slot) = self.free_slots.lock().pop() else {
            self.live.fetch_sub(1, Ordering::AcqRel);
            return Ok(false);
        };
        self.high_water.fetch_max(slot + 1, Ordering::AcqRel);
        let registry = self.clone();
        let spawned = threads::builder(&self.config)
            .name(format!("{}-{}", self.config.thread_name, slot))
            .spawn(move || {
                let _span = registry.span.clone().entered();
                // The slot's parts are always home while the slot is free (see `slot_vacated`).
                let Some((deque, parker)) = registry.slots[slot].parts.lock().take() else {
                    registry.free_slots.lock().push(slot);
                    registry.live.fetch_sub(1, Ordering::AcqRel);
                    return;
                };
                let cx = WorkerCtx::new(registry.clone(), slot, deque);
                let retired = worker::run(&cx, &parker);
                let deque = cx.into_deque();
                registry.slot_vacated(slot, deque, parker, retired);
            });
        match spawned {
            Ok(handle) => {
                self.keep_handle(handle);
                Ok(true)
            }
            Err(e) => {
                self.free_slots.lock().push(slot);
                self.live.fetch_sub(1, Ordering::AcqRel);
                Err(e)
            }
        }
    }

    fn slot_vacated(
        &self,
        slot: usize,
        deque: Option<Worker<Work>>,
        parker: Parker,
        retired: bool,
    ) {
        let s = &self.slots[slot];
        s.blocking.store(false, Ordering::Release);
        s.progress.reset();
        // The deque always comes back (the worker's context is unique once its loop ended);
        // were it ever lost, the slot would stay out of use rather than pair a new deque with
        // the old stealer.
        if let Some(deque) = deque {
            *s.parts.lock() = Some((deque, parker));
            self.free_slots.lock().push(slot);
        }
        // A retiring thread already gave up its place in `live`.
        let left = if retired {
            self.live.load(Ordering::Acquire)
        } else {
            self.live.fetch_sub(1, Ordering::AcqRel) - 1
        };
        self.thread_exited();
        if left == 0 {
            self.monitor.unpark();
        }
    }

    /// Gives up a place in `live` if more threads live than the core needs.
    pub(crate) fn try_retire(&self) -> bool {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| {
                (l > self.core_target.load(Ordering::Acquire)).then(|| l - 1)
            })
            .is_ok()
    }
}
