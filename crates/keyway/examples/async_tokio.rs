//! Per-key ordered async processing: keyway futures await tokio timers and a tokio socket
//! while each connection's messages stay in order.
//!
//! With keyway's `tokio` cargo feature on (as for this example), a future spawned from inside a
//! tokio runtime's context is polled inside it, wherever keyway polls it: tokio's timers and
//! sockets work in it with no wrapper.
//!
//! Run with `cargo run -p keyway --example async_tokio`; it checks its own result.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Runtime::new()?;
    // An echo server on tokio.
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    rt.spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });

    let pool = keyway::Pool::new()?;
    // Spawned inside the runtime's context: keyway captures it for each future.
    let in_runtime = rt.enter();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for msg in 0..12u32 {
        let conn = msg % 3;
        let log = log.clone();
        let work = async move {
            // A timer that makes later messages finish first, were order not kept.
            tokio::time::sleep(Duration::from_millis(u64::from(12 - msg))).await;
            let mut s = tokio::net::TcpStream::connect(addr).await?;
            s.write_all(&msg.to_le_bytes()).await?;
            let mut back = [0u8; 4];
            s.read_exact(&mut back).await?;
            log.lock().unwrap().push((conn, u32::from_le_bytes(back)));
            Ok::<_, std::io::Error>(())
        };
        handles.push(pool.spawn_sequential(conn, work)?);
    }
    drop(in_runtime);
    // Handles are futures: await them from tokio.
    rt.block_on(async {
        for h in handles {
            h.await.expect("the future ran").expect("the echo worked");
        }
    });
    pool.shutdown();

    let log = log.lock().unwrap();
    for conn in 0..3 {
        let got: Vec<u32> = log
            .iter()
            .filter(|(c, _)| *c == conn)
            .map(|(_, m)| *m)
            .collect();
        let want: Vec<u32> = (0..12).filter(|m| m % 3 == conn).collect();
        assert_eq!(got, want, "connection {conn} out of order");
    }
    println!("12 messages on 3 connections echoed in order per connection");
    Ok(())
}
