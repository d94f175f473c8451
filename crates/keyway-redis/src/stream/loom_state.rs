//! loom model of the shard state machine (written next).
