//! A TCP proxy between one member and Redis that the test steers: pass traffic, delay each
//! chunk (a slow network), hold it all (a partition whose packets arrive late, once healed),
//! or cut every connection.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Faults {
    delay: Duration,
    held: bool,
    /// Bumped by `cut`: connections opened before are shut down.
    generation: u64,
}

struct Shared {
    faults: Mutex<Faults>,
    cv: Condvar,
    conns: Mutex<Vec<(u64, TcpStream)>>,
    stop: AtomicBool,
}

/// A proxy listening on a free loopback port, forwarding to `127.0.0.1:target`.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    pub fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            faults: Mutex::new(Faults::default()),
            cv: Condvar::new(),
            conns: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let accept = Arc::clone(&shared);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accept.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let generation = accept.faults.lock().unwrap().generation;
                {
                    let mut conns = accept.conns.lock().unwrap();
                    conns.retain(|(_, s)| s.peer_addr().is_ok());
                    conns.push((generation, client.try_clone().unwrap()));
                    conns.push((generation, server.try_clone().unwrap()));
                }
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let shared = Arc::clone(&accept);
                    std::thread::spawn(move || pump(&shared, from, to));
                }
            }
        });
        Self { port, shared }
    }

    /// `redis://127.0.0.1:PORT` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Each chunk, each way, waits `d` before it is passed on.
    pub fn delay(&self, d: Duration) {
        self.shared.faults.lock().unwrap().delay = d;
        self.shared.cv.notify_all();
    }

    /// Holds all traffic (a partition) until [`heal`](Self::heal): then it arrives, late.
    pub fn hold(&self) {
        self.shared.faults.lock().unwrap().held = true;
    }

    /// Ends a hold and any delay.
    pub fn heal(&self) {
        let mut f = self.shared.faults.lock().unwrap();
        f.held = false;
        f.delay = Duration::ZERO;
        self.shared.cv.notify_all();
    }

    /// Shuts every open connection down (the member sees its connections drop).
    pub fn cut(&self) {
        let generation = {
            let mut f = self.shared.faults.lock().unwrap();
            f.generation += 1;
            f.generation
        };
        self.shared.cv.notify_all();
        let mut conns = self.shared.conns.lock().unwrap();
        for (g, s) in conns.iter() {
            if *g < generation {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        conns.retain(|(g, _)| *g >= generation);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.heal();
        self.cut();
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // wakes the accept loop
    }
}

/// Copies `from` to `to`, each chunk after the delay and while not held.
fn pump(shared: &Shared, mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let read_at = Instant::now();
        let mut f = shared.faults.lock().unwrap();
        loop {
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            let due = read_at + f.delay;
            let now = Instant::now();
            if !f.held && now >= due {
                break;
            }
            let wait = if f.held {
                Duration::from_millis(50)
            } else {
                due - now
            };
            f = shared.cv.wait_timeout(f, wait).unwrap().0;
        }
        drop(f);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}
