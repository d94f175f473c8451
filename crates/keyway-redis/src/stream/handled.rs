//! The time from an entry's append to its handling: a stream entry's id carries the time Redis
//! appended it (milliseconds since the Unix epoch, by the Redis server's clock), and an entry
//! is handled when its handler returned success. Kept in a [`keyway::Histogram`] for
//! [`StreamStats::append_to_handled`](crate::stream::StreamStats::append_to_handled) and, with
//! the `metrics` feature, recorded through the `metrics` facade as it happens.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keyway::Histogram;
use parking_lot::Mutex;

use crate::stream::EntryId;

/// One consumer's append-to-handled times.
pub(crate) struct Handled {
    times: Mutex<Histogram>,
    #[cfg(feature = "metrics")]
    export: metrics::Histogram,
}

impl Handled {
    /// For a consumer of `topic` in `group` (the labels of the exported series).
    pub(crate) fn new(_topic: &str, _group: &str) -> Self {
        Handled {
            times: Mutex::new(Histogram::default()),
            #[cfg(feature = "metrics")]
            export: crate::metrics::append_to_handled(_topic, _group),
        }
    }

    /// Entry `id` was handled now.
    pub(crate) fn record(&self, id: EntryId) {
        let age = since_append(id, SystemTime::now());
        self.times.lock().record(age);
        #[cfg(feature = "metrics")]
        self.export.record(age.as_secs_f64());
    }

    /// The times so far.
    pub(crate) fn snapshot(&self) -> Histogram {
        self.times.lock().clone()
    }
}

/// How long before `now` entry `id` was appended (0 if its time is not before `now`: the
/// clocks of Redis and of this host differ, or the id was given by the producer).
pub(crate) fn since_append(id: EntryId, now: SystemTime) -> Duration {
    UNIX_EPOCH
        .checked_add(Duration::from_millis(id.ms))
        .and_then(|appended| now.duration_since(appended).ok())
        .unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_age_comes_from_the_ids_milliseconds_and_never_goes_below_zero() {
        let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        let id = EntryId {
            ms: 1_700_000_000_000,
            seq: 4,
        };
        assert_eq!(since_append(id, now), Duration::from_millis(250));
        let later = EntryId {
            ms: 1_700_000_001_000,
            seq: 0,
        };
        assert_eq!(since_append(later, now), Duration::ZERO);
        let far = EntryId {
            ms: u64::MAX,
            seq: 0,
        };
        assert_eq!(since_append(far, now), Duration::ZERO);
        let h = Handled::new("t", "g");
        h.record(id);
        h.record(id);
        assert_eq!(h.snapshot().count(), 2);
    }
}
