//! The `ordered` scenario's output: a running hash of the written checksums
//! and a write counter that proves every item was written in input order.

use std::sync::atomic::{AtomicU64, Ordering};

/// FNV-1a 64 offset basis.
pub const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
/// FNV-1a 64 prime.
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01B3;

/// Folds one written checksum into the running output hash.
#[inline]
pub fn fold(hash: u64, checksum: u64) -> u64 {
    (hash ^ checksum).wrapping_mul(FNV_PRIME)
}

/// The output "file": items must arrive numbered 0, 1, 2, …, one at a time.
/// A correct system writes from one thread at a time (whichever), each write
/// happening before the next, so the record is plain loads and stores.
#[derive(Debug)]
#[repr(align(128))]
pub struct Output {
    /// Items written so far; the next item must carry this number.
    written: AtomicU64,
    /// Running hash of the checksums written, in write order.
    hash: AtomicU64,
    /// Writes that did not carry the expected item number.
    misordered: AtomicU64,
    /// The first such write, packed as (expected, seen).
    first_bad: AtomicU64,
}

impl Default for Output {
    fn default() -> Self {
        Self {
            written: AtomicU64::new(0),
            hash: AtomicU64::new(FNV_OFFSET),
            misordered: AtomicU64::new(0),
            first_bad: AtomicU64::new(0),
        }
    }
}

/// Packs (expected, seen) item numbers into one word for reporting.
fn pack(expected: u64, seen: u64) -> u64 {
    (expected.min(u64::from(u32::MAX)) << 32) | seen.min(u64::from(u32::MAX))
}

impl Output {
    /// Appends `item`'s checksum; returns how many items are written now.
    #[inline]
    pub fn append(&self, item: u64, checksum: u64) -> u64 {
        let at = self.written.load(Ordering::Relaxed);
        if item != at {
            self.mark_misordered(at, item);
        }
        let hash = self.hash.load(Ordering::Relaxed);
        self.hash.store(fold(hash, checksum), Ordering::Relaxed);
        self.written.store(at + 1, Ordering::Relaxed);
        at + 1
    }

    #[cold]
    #[inline(never)]
    fn mark_misordered(&self, expected: u64, seen: u64) {
        if self.misordered.fetch_add(1, Ordering::Relaxed) == 0 {
            self.first_bad
                .store(pack(expected, seen), Ordering::Relaxed);
        }
    }

    /// Checks that exactly `items` items were written, in order, and that
    /// their checksums hash to `expected_hash`.
    pub fn verify(&self, items: u64, expected_hash: u64) -> Result<(), String> {
        let misordered = self.misordered.load(Ordering::Acquire);
        if misordered > 0 {
            let bad = self.first_bad.load(Ordering::Acquire);
            return Err(format!(
                "output order broken {misordered} time(s); first: item {} written where item {} was due",
                bad & u64::from(u32::MAX),
                bad >> 32
            ));
        }
        let written = self.written.load(Ordering::Acquire);
        if written != items {
            return Err(format!("{written} of {items} items were written"));
        }
        let hash = self.hash.load(Ordering::Acquire);
        if hash != expected_hash {
            return Err(format!(
                "output hash {hash:#018x} differs from the expected {expected_hash:#018x} \
                 (wrong checksums)"
            ));
        }
        Ok(())
    }
}

/// The hash a correct run's output has for these checksums, in item order.
pub fn expected_hash(checksums: impl IntoIterator<Item = u64>) -> u64 {
    checksums.into_iter().fold(FNV_OFFSET, fold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_output_passes() {
        let out = Output::default();
        for (i, c) in [10, 20, 30].into_iter().enumerate() {
            assert_eq!(out.append(i as u64, c), i as u64 + 1);
        }
        out.verify(3, expected_hash([10, 20, 30])).unwrap();
    }

    #[test]
    fn out_of_order_writes_are_caught() {
        let out = Output::default();
        for (i, c) in [(0, 10), (2, 30), (1, 20)] {
            out.append(i, c);
        }
        let err = out.verify(3, expected_hash([10, 20, 30])).unwrap_err();
        assert!(
            err.contains("order broken 2 time(s); first: item 2 written where item 1 was due"),
            "{err}"
        );
    }

    #[test]
    fn missing_writes_are_caught() {
        let out = Output::default();
        out.append(0, 10);
        let err = out.verify(2, expected_hash([10, 20])).unwrap_err();
        assert!(err.contains("1 of 2 items"), "{err}");
    }

    #[test]
    fn wrong_checksums_are_caught() {
        let out = Output::default();
        out.append(0, 10);
        out.append(1, 21);
        let err = out.verify(2, expected_hash([10, 20])).unwrap_err();
        assert!(err.contains("wrong checksums"), "{err}");
        // The hash depends on order too.
        assert_ne!(expected_hash([1, 2]), expected_hash([2, 1]));
    }
}
