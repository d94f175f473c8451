//! The batched hand-written consumers, one loop on the redis client serving both: read up
//! to 100 entries per stream with one `XREADGROUP`, run them one after the other, and
//! acknowledge them in the same round trip as the next read (waiting for new entries only
//! when none came, after the acks were counted).
//!
//! - `consumer-per-shard`: the strongest baseline without a library: a thread per shard,
//!   each running this loop over its shard. Serial per shard, so each key's order holds; as
//!   parallel as there are shards holding keys.
//! - `raw`: the ceiling of one member on the client itself: one thread running this loop
//!   over every shard at once (one round trip per read of up to 100 entries per shard).

use std::sync::Arc;

use keyway_redis::stream::Topic;
use redis::{Connection, Value};

use super::{ack_cmd, connect, parse_read, read_cmd, Plumbing, StreamSystem, BLOCK_MS};
use crate::work::stream::StreamRun;

/// Entries per stream per read.
pub const BATCH: usize = 100;

/// One round of the loop as a closure over its connection and the ids to acknowledge.
fn batched_loop(
    mut conn: Connection,
    name: String,
    streams: Vec<String>,
    run: &Arc<StreamRun>,
) -> impl FnMut() -> Result<(), String> + Send + 'static {
    let run = Arc::clone(run);
    let mut done: Vec<Vec<Vec<u8>>> = vec![Vec::new(); streams.len()];
    move || {
        let mut pipe = redis::pipe();
        let mut acks = 0;
        for (stream, ids) in streams.iter().zip(&done) {
            if !ids.is_empty() {
                pipe.add_command(ack_cmd(stream, ids.iter().map(Vec::as_slice)));
                acks += 1;
            }
        }
        pipe.add_command(read_cmd(&name, &streams, BATCH, None, false));
        let replies: Vec<Value> = pipe.query(&mut conn).map_err(|e| e.to_string())?;
        for r in &replies[..acks] {
            if let Value::Int(n) = r {
                run.acked(*n as usize);
            }
        }
        done.iter_mut().for_each(Vec::clear);
        let mut entries = parse_read(&replies[acks], &streams)?;
        if entries.is_empty() {
            let reply: Value = read_cmd(&name, &streams, BATCH, Some(BLOCK_MS), false)
                .query(&mut conn)
                .map_err(|e| e.to_string())?;
            entries = parse_read(&reply, &streams)?;
        }
        for entry in entries {
            run.handle(&entry.payload)?;
            done[entry.stream].push(entry.id);
        }
        Ok(())
    }
}

/// A thread per shard.
pub struct PerShard(Plumbing);

impl StreamSystem for PerShard {
    const NAME: &'static str = "consumer-per-shard";
    const ORDERED: bool = true;

    fn setup(url: &str, topic: &Topic, run: Arc<StreamRun>) -> Result<Self, String> {
        Plumbing::setup(url, topic, run).map(Self)
    }

    fn start(&mut self) -> Result<(), String> {
        let p = &mut self.0;
        for (i, stream) in p.streams.iter().enumerate() {
            let name = format!("shard-{i}");
            let one = batched_loop(connect(&p.url)?, name, vec![stream.clone()], &p.run);
            p.loops.spawn(Arc::clone(&p.run), one)?;
        }
        Ok(())
    }

    fn teardown(self) -> Result<(), String> {
        self.0.loops.stop()
    }
}

/// One thread over every shard.
pub struct Raw(Plumbing);

impl StreamSystem for Raw {
    const NAME: &'static str = "raw";
    const ORDERED: bool = true;

    fn setup(url: &str, topic: &Topic, run: Arc<StreamRun>) -> Result<Self, String> {
        Plumbing::setup(url, topic, run).map(Self)
    }

    fn start(&mut self) -> Result<(), String> {
        let p = &mut self.0;
        let all = batched_loop(connect(&p.url)?, "raw".into(), p.streams.clone(), &p.run);
        p.loops.spawn(Arc::clone(&p.run), all)
    }

    fn teardown(self) -> Result<(), String> {
        self.0.loops.stop()
    }
}
