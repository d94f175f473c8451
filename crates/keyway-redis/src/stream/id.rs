//! [`EntryId`]: a Redis stream entry id, `milliseconds-sequence`.

use std::fmt;
use std::str::FromStr;

/// The id of a stream entry (`1700000000000-0`); ids order entries within one stream.
///
/// ```
/// use keyway_redis::stream::EntryId;
/// let id: EntryId = "1700000000000-3".parse().unwrap();
/// assert_eq!(id, EntryId { ms: 1_700_000_000_000, seq: 3 });
/// assert_eq!(id.to_string(), "1700000000000-3");
/// assert!(id < "1700000000001-0".parse().unwrap());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EntryId {
    /// The milliseconds part.
    pub ms: u64,
    /// The sequence part.
    pub seq: u64,
}

/// A string that is not a stream entry id.
///
/// ```
/// assert!("nope".parse::<keyway_redis::stream::EntryId>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a stream entry id: {0:?}")]
pub struct BadEntryId(pub String);

impl FromStr for EntryId {
    type Err = BadEntryId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadEntryId(s.to_owned());
        let (ms, seq) = s.split_once('-').ok_or_else(bad)?;
        Ok(Self {
            ms: ms.parse().map_err(|_| bad())?,
            seq: seq.parse().map_err(|_| bad())?,
        })
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}
