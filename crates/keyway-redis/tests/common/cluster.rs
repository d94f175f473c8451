//! The stream tests' multi-process harness: member processes (this test binary run again as
//! its ignored `stream_member` test), a producer thread, fault injection, and the checks at
//! the end.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use keyway_redis::stream::{Producer, Topic};

use super::journal::{check, Report, Rules};
use super::proxy::Proxy;
use super::{RedisServer, PATIENCE};

pub const SHARDS: u32 = 8;
pub const KEYS: u64 = 16;
pub const WINDOW: usize = 32;
pub const LEASE: Duration = Duration::from_secs(1);

/// The environment a member process reads.
pub const ENV_URL: &str = "KW_STREAM_URL";
pub const ENV_NS: &str = "KW_STREAM_NS";
pub const ENV_ID: &str = "KW_STREAM_ID";
pub const ENV_JOURNAL: &str = "KW_STREAM_JOURNAL";
pub const ENV_POISON: &str = "KW_STREAM_POISON";
/// The capacity of the member's pool (unbounded when unset).
pub const ENV_CAPACITY: &str = "KW_STREAM_CAPACITY";

pub fn topic(ns: &str) -> Topic {
    Topic::new("events", SHARDS).unwrap().namespace(ns)
}

pub fn key_name(k: u64) -> String {
    format!("k{k}")
}

/// A producer thread appending `(key, seq)` messages round-robin over the keys, `per_tick`
/// every 10 ms, until stopped.
pub struct Feeder {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<HashMap<String, u64>>,
}

impl Feeder {
    pub fn start(url: &str, topic: Topic, mut seqs: HashMap<String, u64>, per_tick: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let mut producer = Producer::connect(url, topic).expect("producer");
        let thread = std::thread::spawn(move || {
            let mut k = 0;
            while !flag.load(Ordering::Relaxed) {
                let mut batch = Vec::new();
                for _ in 0..per_tick {
                    let key = key_name(k % KEYS);
                    k += 1;
                    let seq = seqs.entry(key.clone()).or_insert(0);
                    batch.push((key, seq.to_string()));
                    *seq += 1;
                }
                producer.send_batch(batch).expect("produce");
                std::thread::sleep(Duration::from_millis(10)); // pacing, not synchronisation
            }
            seqs
        });
        Self { stop, thread }
    }

    /// Stops and returns how many messages each key got.
    pub fn stop(self) -> HashMap<String, u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("feeder")
    }
}

struct Member {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

/// A Redis server, member processes and their journals.
pub struct Cluster {
    pub server: RedisServer,
    pub ns: String,
    pub dir: PathBuf,
    pub journals: Vec<PathBuf>,
    /// Journal files of each member id (one per incarnation).
    pub journals_of: HashMap<String, Vec<PathBuf>>,
    members: HashMap<String, Member>,
    pub poison: Option<(String, u64)>,
    /// Members started from now on reach Redis through a [`Proxy`] of their own.
    pub proxied: bool,
    /// Members started from now on get a pool of this capacity.
    pub capacity: Option<usize>,
    proxies: HashMap<String, Proxy>,
    /// Stats lines of members stopped cleanly.
    pub stats: Vec<HashMap<String, u64>>,
}

impl Cluster {
    pub fn new(server: RedisServer, name: &str) -> Self {
        let ns = format!("{name}-{}", std::process::id());
        let dir = std::env::temp_dir().join(format!("keyway-stream-{ns}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("journal dir");
        Self {
            server,
            ns,
            dir,
            journals: Vec::new(),
            journals_of: HashMap::new(),
            members: HashMap::new(),
            poison: None,
            proxied: false,
            capacity: None,
            proxies: HashMap::new(),
            stats: Vec::new(),
        }
    }

    pub fn topic(&self) -> Topic {
        topic(&self.ns)
    }

    pub fn feeder(&self, seqs: HashMap<String, u64>, per_tick: u64) -> Feeder {
        Feeder::start(&self.server.url(), self.topic(), seqs, per_tick)
    }

    /// Starts member `id` (a new incarnation if it ran before) and waits until it is built.
    pub fn spawn(&mut self, id: &str) {
        let n = self.journals_of.get(id).map_or(0, Vec::len);
        let journal = self.dir.join(format!("{id}-{n}.log"));
        let url = if self.proxied {
            let proxy = self
                .proxies
                .entry(id.to_owned())
                .or_insert_with(|| Proxy::start(self.server.port()));
            proxy.heal();
            proxy.url()
        } else {
            self.server.url()
        };
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "stream_member",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENV_URL, url)
        .env(ENV_NS, &self.ns)
        .env(ENV_ID, id)
        .env(ENV_JOURNAL, &journal)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
        if let Some((k, s)) = &self.poison {
            cmd.env(ENV_POISON, format!("{k}:{s}"));
        }
        if let Some(capacity) = self.capacity {
            cmd.env(ENV_CAPACITY, capacity.to_string());
        }
        let mut child = cmd.spawn().expect("run this test binary as a member");
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let member = Member {
            child,
            stdin,
            lines,
        };
        wait_line(&member, "ready", id);
        self.journals.push(journal.clone());
        self.journals_of
            .entry(id.to_owned())
            .or_default()
            .push(journal);
        self.members.insert(id.to_owned(), member);
    }

    /// Stops member `id` cleanly (it hands its shards off) and keeps its stats.
    pub fn stop(&mut self, id: &str) {
        let mut m = self.members.remove(id).expect("a running member");
        let _ = writeln!(m.stdin, "stop");
        let stats = wait_line(&m, "stats ", id);
        let parsed = stats
            .trim_start_matches("stats ")
            .split(' ')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.parse().unwrap_or(0)))
            .collect();
        self.stats.push(parsed);
        let _ = m.child.wait();
    }

    /// The proxy between member `id` and Redis (members started while `proxied`).
    pub fn proxy(&self, id: &str) -> &Proxy {
        &self.proxies[id]
    }

    /// The ids of the running members.
    pub fn running(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.members.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// SIGKILL.
    pub fn kill(&mut self, id: &str) {
        let mut m = self.members.remove(id).expect("a running member");
        m.child.kill().unwrap();
        m.child.wait().unwrap();
    }

    pub fn signal(&self, id: &str, sig: &str) {
        let pid = self.members[id].child.id();
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} {pid}");
    }

    /// Makes the handler runs that member `id` starts from now on last long (`true`), or
    /// short again (`false`): a flag file beside its journal, which its handler looks for
    /// after journaling each start (see [`SLOW_RUN`](super::member::SLOW_RUN)).
    pub fn slow_runs(&self, id: &str, on: bool) {
        let journal = self.journals_of[id].last().expect("a member that ran");
        let flag = super::member::slow_flag(journal);
        if on {
            std::fs::write(&flag, b"").expect("write the slow flag");
        } else {
            let _ = std::fs::remove_file(&flag);
        }
    }

    /// Lines of the journals of `id` (all incarnations).
    pub fn journal_lines(&self, id: &str) -> Vec<String> {
        self.journals_of
            .get(id)
            .into_iter()
            .flatten()
            .flat_map(|p| {
                std::fs::read_to_string(p)
                    .unwrap_or_default()
                    .lines()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Waits until member `id` has started at least `n` handlers.
    pub fn wait_starts(&self, id: &str, n: usize) {
        super::wait_for("member to start handlers", || {
            self.journal_lines(id)
                .iter()
                .filter(|l| l.starts_with("S "))
                .count()
                >= n
        });
    }

    /// Pending entries and undelivered entries over all shards (`None` if a group is missing).
    pub fn backlog(&self) -> Option<(u64, u64)> {
        let mut conn = self.server.connection();
        let topic = self.topic();
        let (mut pending, mut lag) = (0, 0);
        for s in 0..SHARDS {
            let summary: redis::Value = redis::cmd("XPENDING")
                .arg(topic.shard_key(s))
                .arg("keyway")
                .query(&mut conn)
                .ok()?;
            let redis::Value::Array(a) = summary else {
                return None;
            };
            let Some(redis::Value::Int(n)) = a.first() else {
                return None;
            };
            pending += *n as u64;
            let groups: Vec<HashMap<String, redis::Value>> = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(topic.shard_key(s))
                .query(&mut conn)
                .ok()?;
            let g = groups.first()?;
            match g.get("lag") {
                Some(redis::Value::Int(n)) => lag += *n as u64,
                _ => return None,
            }
        }
        Some((pending, lag))
    }

    /// Waits until every produced message was delivered and acknowledged.
    pub fn wait_done(&self) {
        let deadline = Instant::now() + PATIENCE * 3;
        loop {
            if self.backlog() == Some((0, 0)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out: backlog {:?}",
                self.backlog()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops every member cleanly.
    pub fn stop_all(&mut self) {
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            self.stop(&id);
        }
    }

    /// The sum of a stats field over the members stopped cleanly.
    pub fn total(&self, field: &str) -> u64 {
        self.stats
            .iter()
            .map(|s| s.get(field).copied().unwrap_or(0))
            .sum()
    }

    /// Stops everybody, checks the group's pending list is empty, runs the checker.
    pub fn finish(&mut self, produced: &HashMap<String, u64>, rules: &Rules) -> Report {
        self.wait_done();
        self.stop_all();
        assert_eq!(self.backlog(), Some((0, 0)), "pending entries left");
        let report = check(&self.journals, produced, rules);
        eprintln!("[{}] {report:?}", self.ns);
        report
    }

    /// The shards member `id` ran handlers on.
    pub fn shards_of(&self, id: &str) -> std::collections::HashSet<u32> {
        self.journal_lines(id)
            .iter()
            .filter(|l| l.starts_with("S "))
            .filter_map(|l| l.split(' ').nth(3)?.parse().ok())
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, mut m) in self.members.drain() {
            let _ = m.child.kill();
            let _ = m.child.wait();
        }
        // A failed test keeps its journals; `KW_STREAM_KEEP=1` keeps those of a passing one.
        if !std::thread::panicking() && std::env::var_os("KW_STREAM_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn wait_line(m: &Member, prefix: &str, id: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = m
            .lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("member {id} did not say {prefix:?}"));
        if let Some(at) = line.find(prefix) {
            return line[at..].to_owned();
        }
    }
}
