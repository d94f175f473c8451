//! The error of a configuration that cannot work ([`BuildError`]).

use std::fmt;
use std::time::Duration;

/// A [`PoolBuilder`](crate::PoolBuilder) was given a configuration that cannot work.
///
/// The message says which setting is wrong and why.
///
/// ```
/// let err = keyway::Pool::builder().core_threads(0).build().unwrap_err();
/// assert!(err.to_string().contains("core_threads"));
/// ```
#[derive(Debug)]
pub struct BuildError(BuildErrorKind);

impl BuildError {
    pub(crate) fn new(kind: BuildErrorKind) -> Self {
        BuildError(kind)
    }
}

#[derive(Debug)]
pub(crate) enum BuildErrorKind {
    ZeroCoreThreads,
    ZeroMaxThreads,
    CoreAboveMax {
        core: usize,
        max: usize,
    },
    ZeroDuration {
        setting: &'static str,
        value: Duration,
    },
    MinReservedAboveMax {
        min: usize,
        max: usize,
    },
    ZeroCount {
        setting: &'static str,
    },
    TooManyThreads {
        setting: &'static str,
        value: usize,
        limit: usize,
    },
    NulInThreadName,
    Spawn(std::io::Error),
    StackSize {
        value: usize,
        min: usize,
        max: usize,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

impl From<BuildErrorKind> for BuildError {
    fn from(kind: BuildErrorKind) -> Self {
        BuildError(kind)
    }
}

impl fmt::Display for BuildErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCoreThreads => f.write_str("core_threads must be at least 1"),
            Self::ZeroMaxThreads => f.write_str("max_threads must be at least 1"),
            Self::CoreAboveMax { core, max } => {
                write!(
                    f,
                    "core_threads ({core}) is greater than max_threads ({max})"
                )
            }
            Self::ZeroDuration { setting, value } => {
                write!(f, "{setting} must be longer than zero (got {value:?})")
            }
            Self::MinReservedAboveMax { min, max } => write!(
                f,
                "min_reserved_threads ({min}) is greater than reserved_threads ({max})"
            ),
            Self::ZeroCount { setting } => write!(f, "{setting} must be at least 1"),
            Self::TooManyThreads {
                setting,
                value,
                limit,
            } => write!(
                f,
                "{setting} ({value}) is more than the {limit} threads a pool may have"
            ),
            Self::NulInThreadName => f.write_str("thread_name must not contain a NUL byte"),
            Self::Spawn(_) => f.write_str("could not start a worker thread"),
            Self::StackSize { value, min, max } => write!(
                f,
                "stack_size ({value} bytes) must be between {min} and {max} bytes"
            ),
        }
    }
}

impl std::error::Error for BuildErrorKind {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn(e) => Some(e),
            _ => None,
        }
    }
}
