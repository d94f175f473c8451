//! `naive`: one consumer thread taking one entry at a time: `XREADGROUP COUNT 1` over every
//! shard, then for each entry read the handler and its own `XACK`. Two round trips per
//! message; serial, so each key's order holds.

use std::sync::Arc;

use keyway_redis::stream::Topic;
use redis::Value;

use super::{ack_cmd, connect, parse_read, read_cmd, Plumbing, StreamSystem, BLOCK_MS};
use crate::work::stream::StreamRun;

/// One thread, one entry per read, one ack per entry.
pub struct Naive(Plumbing);

impl StreamSystem for Naive {
    const NAME: &'static str = "naive";
    const ORDERED: bool = true;

    fn setup(url: &str, topic: &Topic, run: Arc<StreamRun>) -> Result<Self, String> {
        Plumbing::setup(url, topic, run).map(Self)
    }

    fn start(&mut self) -> Result<(), String> {
        let p = &mut self.0;
        let mut conn = connect(&p.url)?;
        let (run, streams) = (Arc::clone(&p.run), p.streams.clone());
        let read = read_cmd("naive", &streams, 1, Some(BLOCK_MS), false);
        p.loops.spawn(Arc::clone(&run), move || {
            let reply: Value = read.query(&mut conn).map_err(|e| e.to_string())?;
            for entry in parse_read(&reply, &streams)? {
                run.handle(&entry.payload)?;
                let acked: u64 = ack_cmd(&streams[entry.stream], [entry.id.as_slice()])
                    .query(&mut conn)
                    .map_err(|e| e.to_string())?;
                run.acked(acked as usize);
            }
            Ok(())
        })
    }

    fn teardown(self) -> Result<(), String> {
        self.0.loops.stop()
    }
}
