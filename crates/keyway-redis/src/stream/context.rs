//! [`Ctx`]: what the control thread, the shard readers and the entry tasks of one consumer
//! share; and [`Shard`], one shard's state in this process.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use keyway::{Contexts, Pool};
use parking_lot::{Condvar, Mutex};
use redis::{Client, Cmd, Connection, Script};

use crate::stream::ack_timer::AckTimer;
use crate::stream::config::Config;
use crate::stream::delivery::Handler;
use crate::stream::handled::Handled;
use crate::stream::reply::RawEntry;
use crate::stream::scripts::Scripts;
use crate::stream::state::ShardState;
use crate::stream::StreamError;

/// The lane of a key: this consumer's instance number and the key's bytes (two consumers in
/// one process never share lanes). The bytes are shared, so a submission that waits for room
/// in the pool and tries again copies no key.
pub(crate) type LaneKey = (u64, Arc<[u8]>);

/// What an entry that exhausted its attempts carries to the ack sender: to the dead-letter
/// stream, or (`hold`, the quarantine policy) to the shard's hold hash.
#[derive(Debug)]
pub(crate) struct DeadInfo {
    pub(crate) key: Vec<u8>,
    pub(crate) payload: Vec<u8>,
    pub(crate) attempts: u32,
    pub(crate) reason: String,
    /// Quarantine the key instead of dead-lettering the entry.
    pub(crate) hold: bool,
}

/// One shard's state in this process: dead letters and holds carry [`DeadInfo`], held
/// entries are kept whole.
pub(crate) type State = ShardState<DeadInfo, RawEntry>;

/// The consumer's running totals.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    pub(crate) delivered: AtomicU64,
    pub(crate) redeliveries: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) panics: AtomicU64,
    pub(crate) acked: AtomicU64,
    pub(crate) dead_lettered: AtomicU64,
    pub(crate) quarantined: AtomicU64,
    pub(crate) released_keys: AtomicU64,
    pub(crate) refused_acks: AtomicU64,
    pub(crate) acquisitions: AtomicU64,
    pub(crate) takeovers: AtomicU64,
    pub(crate) releases: AtomicU64,
    pub(crate) leases_lost: AtomicU64,
    pub(crate) trimmed: AtomicU64,
    pub(crate) groups_recreated: AtomicU64,
    pub(crate) stalls: AtomicU64,
}

/// Adds `n` to a counter.
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// One shard in this process.
pub(crate) struct Shard {
    pub(crate) index: u32,
    pub(crate) stream: String,
    pub(crate) lease: String,
    pub(crate) dead: String,
    /// The hash of the shard's quarantined keys.
    pub(crate) held: String,
    pub(crate) state: Mutex<State>,
    /// Set by a release through this consumer: the reader looks at the holds in Redis now.
    pub(crate) check_holds: AtomicBool,
    /// Notified when the phase changes, acks pile up, or entries finish.
    pub(crate) cv: Condvar,
    /// Entries finished or settled so far (the stall detector watches it).
    pub(crate) progress: AtomicU64,
    /// The group was seen on this shard's stream (so creating it again means Redis lost it).
    pub(crate) group_seen: AtomicBool,
    /// The connection acks go through (see [`acks`](crate::stream::acks)); locked before
    /// `state` when both are.
    pub(crate) acks: Mutex<Option<Connection>>,
}

/// Everything one consumer's threads and tasks share.
pub(crate) struct Ctx {
    pub(crate) cfg: Config,
    pub(crate) member: String,
    pub(crate) client: Client,
    pub(crate) scripts: Scripts,
    pub(crate) lanes: Contexts<LaneKey>,
    /// Where entries go without key order ([`Config::key_order`] false).
    pub(crate) pool: Pool,
    pub(crate) instance: u64,
    pub(crate) handler: Arc<Handler>,
    pub(crate) totals: Totals,
    /// Append-to-handled times of the entries this member handled.
    pub(crate) handled: Handled,
    pub(crate) shards: Vec<Arc<Shard>>,
    /// Set by `shutdown`: release everything and stop.
    pub(crate) stopping: Mutex<bool>,
    pub(crate) stop_cv: Condvar,
    /// Set once the control thread has left the group.
    pub(crate) stopped: AtomicBool,
    /// Sends the acks that wait for their interval.
    pub(crate) ack_timer: AckTimer,
    /// Entries the shard readers reserved under [`Config::max_in_flight`] and have not yet
    /// put in their windows.
    pub(crate) reserved: Mutex<usize>,
}

impl Ctx {
    /// A new connection with the I/O timeout, the scripts loaded, named
    /// `keyway:MEMBER:ROLE` in `CLIENT LIST` (for operators).
    pub(crate) fn connect(&self, role: &str) -> Result<Connection, StreamError> {
        let t = self.cfg.io_timeout;
        let mut conn = self.client.get_connection_with_timeout(t)?;
        conn.set_read_timeout(Some(t))?;
        conn.set_write_timeout(Some(t))?;
        // One round trip for all of them.
        let mut pipe = redis::pipe();
        let name: String = format!("keyway:{}:{role}", self.member)
            .chars()
            .map(|c| if c.is_ascii_graphic() { c } else { '_' })
            .collect();
        pipe.cmd("CLIENT").arg("SETNAME").arg(name).ignore();
        for source in &self.scripts.sources {
            pipe.cmd("SCRIPT").arg("LOAD").arg(source).ignore();
        }
        pipe.query::<()>(&mut conn)?;
        Ok(conn)
    }

    /// The consumer group's name.
    pub(crate) fn group(&self) -> &str {
        &self.cfg.group
    }

    /// Reserves up to `want` entries under the consumer's in-flight cap: how many the caller
    /// may read. The caller gives them back with [`unreserve`](Self::unreserve) once what it
    /// read is in its window. Locks each shard's state in turn: never call it holding one.
    pub(crate) fn reserve(&self, want: usize) -> usize {
        let cap = self.cfg.max_in_flight;
        if cap == usize::MAX {
            return want;
        }
        let mut reserved = self.reserved.lock();
        let in_flight: usize = self.shards.iter().map(|s| s.state.lock().window()).sum();
        let free = cap.saturating_sub(in_flight.saturating_add(*reserved));
        let grant = want.min(free);
        *reserved += grant;
        grant
    }

    /// Gives back `n` entries [reserved](Self::reserve).
    pub(crate) fn unreserve(&self, n: usize) {
        if self.cfg.max_in_flight != usize::MAX {
            let mut reserved = self.reserved.lock();
            *reserved = reserved.saturating_sub(n);
        }
    }
}

/// `EVALSHA` of a loaded script with its keys, for pipelines (the caller adds the arguments).
pub(crate) fn evalsha(script: &Script, keys: &[&str]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len()).arg(keys);
    cmd
}
