//! `floor`: the least a consumer can do on the redis client, as a lower bound for the open
//! loop's latency on this machine: one thread blocked in one `XREADGROUP … NOACK` over every
//! shard, running what it reads and reading again, one round trip per wake-up. It keeps no
//! pending list (nothing to acknowledge, so nothing survives a crash): not a consumer anyone
//! should ship, only what Redis, the client and the machine cost without any bookkeeping.

use std::sync::Arc;

use keyway_redis::stream::Topic;
use redis::Value;

use super::batched::BATCH;
use super::{connect, parse_read, read_cmd, Plumbing, StreamSystem, BLOCK_MS};
use crate::work::stream::StreamRun;

/// One thread, one blocking read per wake-up, no acks.
pub struct Floor(Plumbing);

impl StreamSystem for Floor {
    const NAME: &'static str = "floor";
    const ORDERED: bool = true;

    fn setup(url: &str, topic: &Topic, run: Arc<StreamRun>) -> Result<Self, String> {
        Plumbing::setup(url, topic, run).map(Self)
    }

    fn start(&mut self) -> Result<(), String> {
        let p = &mut self.0;
        let mut conn = connect(&p.url)?;
        let (run, streams) = (Arc::clone(&p.run), p.streams.clone());
        let read = read_cmd(Self::NAME, &streams, BATCH, Some(BLOCK_MS), true);
        p.loops.spawn(Arc::clone(&run), move || {
            let reply: Value = read.query(&mut conn).map_err(|e| e.to_string())?;
            let entries = parse_read(&reply, &streams)?;
            for entry in &entries {
                run.handle(&entry.payload)?;
            }
            run.acked(entries.len());
            Ok(())
        })
    }

    fn teardown(self) -> Result<(), String> {
        self.0.loops.stop()
    }
}
