//! Interval buckets: where scheduled tasks wait until their interval starts.
//!
//! A task lands in the bucket of the interval holding its due time. Buckets are kept in
//! shards, each behind its own lock, and a thread always uses the same shard, so schedulers on
//! different threads do not contend: there is no global lock on the schedule path and no timer
//! per task. A shard keeps the next [`NEAR`] intervals' buckets in a ring indexed by interval
//! number (one index, no search), and buckets further out in a `BTreeMap` keyed by interval
//! number (any delay, however far, fits without cascading wheel levels).
//!
//! A bucket is a list of chunks of at most [`CHUNK`] entries: the first grows as a vector
//! does, later ones are allocated full size. A full bucket is never copied to grow, and the
//! driver frees each chunk as soon as it has released its entries, so memory freed by the
//! released tasks is reused by the next scheduled (measured with `keyway-bench schedule` at
//! 20,000,000 tasks: one vector per bucket spent its time copying on growth and faulting in
//! the fresh pages of each larger copy).
//!
//! When an interval starts the driver takes, from every shard, the buckets up to it and marks
//! the shard "open from" the next interval. A task arriving later for an interval already taken
//! is *late*: it goes to the shard's late list, which the driver takes at its next step (and is
//! woken for), so the task is admitted into the running interval if quota is left.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use super::entry::Entry;

pub(crate) struct Buckets {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    late: AtomicBool,
}

/// How many intervals ahead a shard keeps in its ring.
const NEAR: u64 = 256;

/// Entries per chunk of a bucket (16 KiB).
pub(crate) const CHUNK: usize = 256;

/// One interval's entries, in chunks (see the module documentation).
type Bucket = Vec<Vec<Entry>>;

/// Appends `entry` to the bucket's last chunk, or to a new chunk once that one is full.
#[inline]
fn push_chunked(bucket: &mut Bucket, entry: Entry) {
    match bucket.last_mut() {
        Some(chunk) if chunk.len() < chunk.capacity() || chunk.capacity() < CHUNK => {
            chunk.push(entry);
        }
        _ => {
            let mut chunk = Vec::with_capacity(CHUNK);
            chunk.push(entry);
            bucket.push(chunk);
        }
    }
}

struct Shard {
    /// Buckets of intervals before this one have been taken by the driver.
    open_from: u64,
    /// `near[k % NEAR]` holds interval `k`, for `open_from <= k < open_from + NEAR`.
    near: Box<[Bucket]>,
    /// Intervals further out (and, after the window moved, some inside it).
    far: BTreeMap<u64, Bucket>,
    /// Entries for intervals already taken, chunked like a bucket: the driver takes them every
    /// step, and a list that regrew from empty each time cost a copy per entry.
    late: Bucket,
}

impl Default for Shard {
    fn default() -> Self {
        Shard {
            open_from: 0,
            near: (0..NEAR).map(|_| Vec::new()).collect(),
            far: BTreeMap::new(),
            late: Bucket::new(),
        }
    }
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

    #[inline]
    fn shard(&self) -> &Mutex<Shard> {
        let i = SHARD_HINT.with(|h| *h) & (self.shards.len() - 1);
        &self.shards[i]
    }

    /// Puts `entry`, due in interval `k`, in its bucket, or in a late list if that interval
    /// was already taken.
    #[inline]
    pub(crate) fn push(&self, k: u64, entry: Entry) -> Placed {
        {
            let mut shard = self.shard().lock();
            if k >= shard.open_from {
                if k - shard.open_from < NEAR {
                    push_chunked(&mut shard.near[(k % NEAR) as usize], entry);
                } else {
                    push_chunked(shard.far.entry(k).or_default(), entry);
                }
                return Placed::Bucket;
            }
            push_chunked(&mut shard.late, entry);
        }
        // Read first: the flag's line is shared with the driver, and a late arrival whose
        // flag is already up need not write it.
        if self.late.load(Ordering::Acquire) || self.late.swap(true, Ordering::AcqRel) {
            Placed::Late
        } else {
            Placed::LateFirst
        }
    }

    /// Takes every bucket of an interval up to `k` (and every late entry) into `out`, as
    /// chunks; from now on entries for `k` or earlier are late.
    pub(crate) fn take_upto(&self, k: u64, out: &mut Vec<Vec<Entry>>) {
        self.late.store(false, Ordering::Release);
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let shard = &mut *shard;
            if k >= shard.open_from {
                let last = k.min(shard.open_from.saturating_add(NEAR - 1));
                for j in shard.open_from..=last {
                    out.append(&mut shard.near[(j % NEAR) as usize]);
                }
                shard.open_from = k.saturating_add(1);
            }
            if shard
                .far
                .first_key_value()
                .is_some_and(|(&first, _)| first <= k)
            {
                let later = match k.checked_add(1) {
                    Some(next) => shard.far.split_off(&next),
                    None => BTreeMap::new(),
                };
                let due = std::mem::replace(&mut shard.far, later);
                out.extend(due.into_values().flatten());
            }
            out.append(&mut shard.late);
        }
    }

    /// Takes the late entries, if any arrived since the last look.
    pub(crate) fn take_late(&self, out: &mut Vec<Entry>) {
        if !self.late.swap(false, Ordering::AcqRel) {
            return;
        }
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            out.extend(shard.late.drain(..).flatten());
        }
    }

    /// Takes out every entry (bucketed or late) for which `remove` says true.
    pub(crate) fn remove_if(&self, remove: impl Fn(&Entry) -> bool, out: &mut Vec<Entry>) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let shard = &mut *shard;
            let lists = shard
                .near
                .iter_mut()
                .flatten()
                .chain(shard.far.values_mut().flatten())
                .chain(shard.late.iter_mut());
            for list in lists {
                if list.iter().any(&remove) {
                    let (gone, kept) = std::mem::take(list).into_iter().partition(&remove);
                    *list = kept;
                    out.extend::<Vec<Entry>>(gone);
                }
            }
        }
    }

    /// Takes everything (shutdown).
    pub(crate) fn take_all(&self, out: &mut Vec<Vec<Entry>>) {
        self.take_upto(u64::MAX, out);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::schedule::job_kinds::{Anywhere, Detached};
    use crate::schedule::scheduled_job::InlineJob;

    fn entry(due: u64) -> Entry {
        let job = InlineJob::new(Detached::new(Anywhere, || ()));
        Entry {
            job,
            due,
            deadline: crate::schedule::clock::NEVER,
            priority: 0,
            seq: 0,
        }
    }

    fn take(b: &Buckets, k: u64) -> Vec<u64> {
        let mut out = Vec::new();
        b.take_upto(k, &mut out);
        let mut dues: Vec<u64> = out.into_iter().flatten().map(|e| e.due).collect();
        dues.sort_unstable();
        dues
    }

    #[test]
    fn near_far_and_late_entries_come_out_in_their_interval() {
        let n = NEAR;
        let b = Buckets::new();
        for k in [0, 1, 5, n - 1, n, n + 1, 3 * n, 1_000_000, u64::MAX] {
            assert_eq!(b.push(k, entry(k)), Placed::Bucket);
        }
        assert_eq!(take(&b, 0), vec![0]);
        assert_eq!(take(&b, 4), vec![1]);
        // Interval 3 is already taken: late, handed over with the next take.
        assert_eq!(b.push(3, entry(3)), Placed::LateFirst);
        assert_eq!(b.push(2, entry(2)), Placed::Late);
        let mut late = Vec::new();
        b.take_late(&mut late);
        assert_eq!(late.len(), 2);
        assert_eq!(take(&b, n), vec![5, n - 1, n]);
        // Inside the moved window, from the ring and from the far map alike.
        assert_eq!(b.push(n + 36, entry(n + 36)), Placed::Bucket);
        assert_eq!(take(&b, 3 * n - 1), vec![n + 1, n + 36]);
        assert_eq!(take(&b, 3 * n), vec![3 * n]);
        let mut all = Vec::new();
        b.take_all(&mut all);
        let dues: Vec<u64> = all.into_iter().flatten().map(|e| e.due).collect();
        assert_eq!(dues, vec![1_000_000, u64::MAX]);
    }

    #[test]
    fn a_full_bucket_grows_by_whole_chunks() {
        let b = Buckets::new();
        for _ in 0..3 * CHUNK + 1 {
            b.push(7, entry(7));
        }
        let mut out = Vec::new();
        b.take_upto(7, &mut out);
        let sizes: Vec<(usize, usize)> = out.iter().map(|c| (c.len(), c.capacity())).collect();
        assert_eq!(
            sizes,
            vec![(CHUNK, CHUNK), (CHUNK, CHUNK), (CHUNK, CHUNK), (1, CHUNK)]
        );
    }
}
