//! A `redis-server` of an example's own (shared by the keyway-redis examples through
//! `#[path]`).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A `redis-server` of the example's own, on a free loopback port, without persistence.
pub struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    /// Starts one, or `None` (after saying so) when there is no `redis-server` on `PATH`
    /// and `KEYWAY_REQUIRE_REDIS=1` is not set.
    pub fn start() -> Result<Option<Self>, Error> {
        let found = std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("redis-server"))
                .find(|p| p.is_file())
        });
        let Some(binary) = found else {
            if std::env::var("KEYWAY_REQUIRE_REDIS").as_deref() == Ok("1") {
                return Err("KEYWAY_REQUIRE_REDIS=1 but no redis-server on PATH".into());
            }
            println!("no redis-server on PATH: nothing to demonstrate (see the keyway-redis docs)");
            return Ok(None);
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()?;
        let redis = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ready = redis::Client::open(redis.url())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if ready.is_ok() {
                return Ok(Some(redis));
            }
            if Instant::now() > deadline {
                return Err("redis-server did not start".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
