//! Interval buckets: where scheduled tasks wait until their interval starts.
//!
//! A task lands in the bucket of the interval holding its due time. Buckets are kept in
//! shards, each behind its own lock, and a thread always uses the same shard, so schedulers on
//! different threads do not contend: there is no global lock on the schedule path and no timer
//! per task. A shard keys its buckets by interval number in a `BTreeMap` (a handful of keys for
//! short delays; any delay, however far, fits without a second wheel level).
//!
//! When an interval starts the driver takes, from every shard, the buckets up to it and marks
//! the shard "open from" the next interval. A task arriving later for an interval already taken
//! is *late*: it goes to the shard's late list, which the driver takes at its next step (and is
//! woken for), so the task is admitted into the running interval if quota is left.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use super::job::Entry;

pub(crate) struct Buckets {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    late: AtomicBool,
}

#[derive(Default)]
struct Shard {
    /// Buckets of intervals before this one have been taken by the driver.
    open_from: u64,
    by_interval: BTreeMap<u64, Vec<Entry>>,
    late: Vec<Entry>,
}

/// Where a pushed entry went.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Placed {
    /// Into the bucket of its interval.
    Bucket,
    /// Into a late list, and it is the first since the driver last looked: wake the driver.
    LateFirst,
    /// Into a late list the driver already has to look at.
    Late,
}

thread_local! {
    static SHARD_HINT: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

impl Buckets {
    pub(crate) fn new() -> Self {
        let n = std::thread::available_parallelism().map_or(4, |n| n.get() * 4);
        Buckets {
            shards: (0..n.next_power_of_two())
                .map(|_| CachePadded::new(Mutex::new(Shard::default())))
                .collect(),
            late: AtomicBool::new(false),
        }
    }

    fn shard(&self) -> &Mutex<Shard> {
        let i = SHARD_HINT.with(|h| *h) & (self.shards.len() - 1);
        &self.shards[i]
    }

    /// Puts `entry`, due in interval `k`, in its bucket, or in a late list if that interval
    /// was already taken.
    pub(crate) fn push(&self, k: u64, entry: Entry) -> Placed {
        {
            let mut shard = self.shard().lock();
            if k >= shard.open_from {
                shard.by_interval.entry(k).or_default().push(entry);
                return Placed::Bucket;
            }
            shard.late.push(entry);
        }
        if self.late.swap(true, Ordering::AcqRel) {
            Placed::Late
        } else {
            Placed::LateFirst
        }
    }

    /// Takes every bucket of an interval up to `k` (and every late entry) into `out`, one
    /// vector per bucket; from now on entries for `k` or earlier are late.
    pub(crate) fn take_upto(&self, k: u64, out: &mut Vec<Vec<Entry>>) {
        self.late.store(false, Ordering::Release);
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.open_from = shard.open_from.max(k.saturating_add(1));
            let later = match k.checked_add(1) {
                Some(next) => shard.by_interval.split_off(&next),
                None => BTreeMap::new(),
            };
            let due = std::mem::replace(&mut shard.by_interval, later);
            out.extend(due.into_values());
            if !shard.late.is_empty() {
                out.push(std::mem::take(&mut shard.late));
            }
        }
    }

    /// Takes the late entries, if any arrived since the last look.
    pub(crate) fn take_late(&self, out: &mut Vec<Entry>) {
        if !self.late.swap(false, Ordering::AcqRel) {
            return;
        }
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            out.append(&mut shard.late);
        }
    }

    /// Takes everything (shutdown).
    pub(crate) fn take_all(&self, out: &mut Vec<Vec<Entry>>) {
        self.take_upto(u64::MAX, out);
    }
}
