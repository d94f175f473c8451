//! The shared limit with separate processes: this test binary runs itself as the members
//! (the ignored `member_process` test, steered through environment, stdin and stdout).

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

use common::*;
use keyway::Coordinator;

const CHILD_URL: &str = "KEYWAY_REDIS_TEST_CHILD_URL";

/// A member process: joins, prints `member=ID` then `share=X` whenever its share changes;
/// on `drop` from stdin (or when stdin closes) it drops its coordinator (which leaves) and prints `dropped`.
#[test]
#[ignore = "run as a child process by the other tests of this file"]
fn member_process() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let coordinator = coordinator(&url, 0.0);
    coordinator.join(EXECUTOR, LIMIT);
    println!("member={}", coordinator.member_id());
    let (tx, commands) = channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
        // The test that started this process is gone: stop too.
        let _ = tx.send("drop".to_owned());
    });
    let mut last = f64::NAN;
    loop {
        if let Ok(command) = commands.try_recv() {
            if command == "drop" {
                drop(coordinator);
                println!("dropped");
                return;
            }
        }
        let share = coordinator.share(EXECUTOR, LIMIT);
        if share != last {
            println!("share={share:?}");
            last = share;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A member process seen from the test.
struct Member {
    child: Child,
    stdin: ChildStdin,
    id: String,
}

/// What the members say: (member index, line).
type Said = Receiver<(usize, String)>;

/// Starts `n` members numbered from `first`.
fn spawn_members(url: &str, n: usize, first: usize) -> (Vec<Member>, Said) {
    let (tx, rx): (Sender<(usize, String)>, _) = channel();
    let mut members = Vec::new();
    for i in first..first + n {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "processes::member_process",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_URL, url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run this test binary as a member");
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let id = loop {
            let line = lines.next().expect("member output").unwrap();
            // The test harness may print its "test member_process ... " before it.
            if let Some((_, id)) = line.split_once("member=") {
                break id.to_owned();
            }
        };
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if tx.send((i, line)).is_err() {
                    return;
                }
            }
        });
        members.push(Member { child, stdin, id });
    }
    (members, rx)
}

/// What the members reported last: each one's share (`None` until it reports one) and
/// whether it said `dropped`.
struct Shares {
    share: Vec<Option<f64>>,
    dropped: Vec<bool>,
}

impl Shares {
    fn new(n: usize) -> Self {
        Self {
            share: vec![None; n],
            dropped: vec![false; n],
        }
    }

    /// Reads what the members said until `cond` holds; fails after [`PATIENCE`]. The shares of
    /// the `live` members must never sum to more than the limit.
    fn until(&mut self, said: &Said, live: &[usize], what: &str, cond: impl Fn(&Self) -> bool) {
        let deadline = std::time::Instant::now() + PATIENCE;
        while !cond(self) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let (i, line) = said.recv_timeout(left).unwrap_or_else(|_| {
                panic!("timed out waiting for {what}; shares {:?}", self.share)
            });
            if let Some(share) = line.strip_prefix("share=") {
                self.share[i] = Some(share.parse().unwrap());
                let sum: f64 = live.iter().filter_map(|&j| self.share[j]).sum();
                assert!(
                    sum <= LIMIT + 1e-6,
                    "shares {:?} sum to {sum} > {LIMIT}",
                    self.share
                );
            } else if line == "dropped" {
                self.dropped[i] = true;
            }
        }
    }

    fn each(&self, members: &[usize], value: f64) -> bool {
        members
            .iter()
            .all(|&i| self.share[i].is_some_and(|s| close(s, value)))
    }
}

fn stop(members: Vec<Member>) {
    for mut m in members {
        let _ = m.child.kill();
        let _ = m.child.wait();
    }
}

fn is_member(conn: &mut redis::Connection, id: &str) -> bool {
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(format!("test:{{{EXECUTOR}}}:members"))
        .arg(id)
        .query(conn)
        .unwrap();
    score.is_some()
}

/// Three member processes, once each reports a third; `slots` members may report later.
fn three_at_a_third(server: &RedisServer, slots: usize) -> (Vec<Member>, Said, Shares) {
    let (members, said) = spawn_members(&server.url(), 3, 0);
    let mut shares = Shares::new(slots);
    shares.until(&said, &[0, 1, 2], "a third each", |s| {
        s.each(&[0, 1, 2], LIMIT / 3.0)
    });
    (members, said, shares)
}

/// Three processes on one limit get a third each (sum = the limit), and a
/// fourth joining lowers them to a quarter, the sum never above the limit on the way.
#[test]
fn three_processes_get_a_third_each() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (mut members, said, mut shares) = three_at_a_third(&server, 4);
    let (fourth, said4) = spawn_members(&server.url(), 1, 3);
    // Both receivers into one.
    let (tx, all) = channel();
    for rx in [said, said4] {
        let tx = tx.clone();
        std::thread::spawn(move || rx.into_iter().try_for_each(|m| tx.send(m)));
    }
    shares.until(&all, &[0, 1, 2, 3], "a quarter each", |s| {
        s.each(&[0, 1, 2, 3], LIMIT / 4.0)
    });
    members.extend(fourth);
    stop(members);
}

/// A member killed with SIGKILL is dropped once its last heartbeat is a TTL old
/// (by Redis's clock), and then the others share its part; a member stopped cleanly is
/// removed from Redis before its process even exits, and the last one takes the whole limit.
#[test]
fn killed_process_expires_after_the_ttl_and_stopped_one_leaves_at_once() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (mut members, said, mut shares) = three_at_a_third(&server, 3);
    let mut conn = server.connection();

    members[0].child.kill().unwrap();
    members[0].child.wait().unwrap();
    let last_beat: f64 = redis::cmd("ZSCORE")
        .arg(format!("test:{{{EXECUTOR}}}:members"))
        .arg(&members[0].id)
        .query(&mut conn)
        .unwrap();
    shares.until(&said, &[1, 2], "a half each after the kill", |s| {
        s.each(&[1, 2], LIMIT / 2.0)
    });
    let age = redis_time_us(&mut conn) - last_beat;
    assert!(
        age >= TTL.as_micros() as f64,
        "dropped {age} µs after its last heartbeat"
    );
    assert!(!is_member(&mut conn, &members[0].id));

    writeln!(members[1].stdin, "drop").unwrap();
    shares.until(&said, &[2], "member 1 to stop", |s| s.dropped[1]);
    assert!(
        !is_member(&mut conn, &members[1].id),
        "a member stopped cleanly is gone from Redis at once"
    );
    shares.until(&said, &[2], "the whole limit for the last one", |s| {
        s.each(&[2], LIMIT)
    });
    stop(members);
}
