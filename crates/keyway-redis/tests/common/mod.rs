//! A `redis-server` of the test's own on a free loopback port, which the test may kill, pause
//! and restart; and waiting for conditions with a deadline.
#![allow(dead_code)] // each test file uses part of it

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use keyway_redis::RedisCoordinator;

pub mod cluster;
pub mod journal;
pub mod kinds;
pub mod local;
pub mod member;
pub mod proxy;

/// The executor every test shares, and its limit.
pub const EXECUTOR: &str = "payments";
pub const LIMIT: f64 = 3_000.0;
/// Test settings: heartbeat 100 ms, TTL 1 s, I/O timeout 300 ms.
pub const HEARTBEAT: Duration = Duration::from_millis(100);
pub const TTL: Duration = Duration::from_secs(1);
pub const IO_TIMEOUT: Duration = Duration::from_millis(300);

/// A coordinator with the test settings, its local clock off by `skew_s` seconds.
pub fn coordinator(url: &str, skew_s: f64) -> RedisCoordinator {
    RedisCoordinator::builder(url)
        .namespace("test")
        .heartbeat(HEARTBEAT)
        .ttl(TTL)
        .connect_timeout(IO_TIMEOUT)
        .local_clock_skew(skew_s)
        .build()
        .expect("build a coordinator")
}

/// Generous bound for a condition that should hold within a few heartbeats; only reached when
/// something is broken (then the test fails with the message).
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Finds `redis-server` on `PATH`. Without one the test prints a note and is skipped, unless
/// `KEYWAY_REQUIRE_REDIS=1`, which makes it fail.
pub fn redis_server_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("redis-server"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("KEYWAY_REQUIRE_REDIS").as_deref() != Ok("1"),
            "KEYWAY_REQUIRE_REDIS=1 but no redis-server on PATH"
        );
        // Straight to stderr, past the test harness's capture: a skip must be seen.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"NOTE: no redis-server on PATH: this Redis test is skipped (see the crate docs)\n",
        );
    }
    found
}

/// A free loopback port (nothing listens on it once this returns).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("local address").port()
}

/// A running `redis-server` owned by the test; killed when dropped.
pub struct RedisServer {
    binary: PathBuf,
    port: u16,
    extra: Vec<String>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts one on a free port, or `None` (test skipped) without `redis-server`.
    pub fn start() -> Option<Self> {
        Self::start_with(&[])
    }

    /// Starts one with extra command-line arguments (e.g. `--requirepass`).
    pub fn start_with(extra: &[&str]) -> Option<Self> {
        let binary = redis_server_binary()?;
        let mut server = Self {
            binary,
            port: free_port(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        server.spawn();
        Some(server)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    fn spawn(&mut self) {
        let child = Command::new(&self.binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .args(["--dir", &std::env::temp_dir().to_string_lossy()])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let url = self.url();
        let pass = self
            .extra
            .iter()
            .position(|a| a == "--requirepass")
            .and_then(|i| self.extra.get(i + 1));
        let url = match pass {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}", self.port),
            None => url,
        };
        wait_for("redis-server to accept connections", || {
            redis::Client::open(url.as_str())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok()
        });
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("server running").id()
    }

    /// SIGKILL: Redis is gone with all its data.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port (empty: it saved nothing).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// SIGSTOP: Redis holds its connections but answers nothing.
    pub fn pause(&self) {
        signal("-STOP", self.pid());
    }

    /// SIGCONT.
    pub fn resume(&self) {
        signal("-CONT", self.pid());
    }

    /// A plain connection for the test's own checks.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url().as_str())
            .and_then(|c| c.get_connection())
            .expect("connect to the test's redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill(); // SIGKILL ends a stopped process too
    }
}

fn signal(which: &str, pid: u32) {
    let status = Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {which} {pid} failed");
}

/// Waits until `cond` holds, checking every 5 ms; fails the test after [`PATIENCE`].
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Lets `d` pass (e.g. longer than the TTL): nothing to wait for, the point is that time
/// passes while the test's monitors watch.
pub fn let_time_pass(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Makes `namespace`'s group of [`EXECUTOR`] old, as after a long run: members settle at once
/// (the first member of a new group waits one TTL before it takes a share).
pub fn age_group(server: &RedisServer, namespace: &str) {
    let _: () = redis::cmd("HSET")
        .arg(format!("{namespace}:{{{EXECUTOR}}}:clock"))
        .arg("created")
        .arg(0)
        .query(&mut server.connection())
        .expect("HSET created");
}

/// Redis `TIME` in µs.
pub fn redis_time_us(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 * 1e6 + us as f64
}

/// Equal up to floating-point rounding.
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}
