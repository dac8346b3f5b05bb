//! A TCP proxy between one prioq instance and Redis, run in this process:
//! it can drop every connection through it, hold each chunk of bytes for
//! a while (a slow network), or turn to another Redis (a failover).

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Debug)]
pub struct Proxy {
    pub port: u16,
    target: Arc<AtomicU16>,
    delay_ms: Arc<AtomicU64>,
    cut: watch::Sender<u64>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free port to Redis on `target`.
    pub async fn start(target: u16) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let target = Arc::new(AtomicU16::new(target));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let (cut, _) = watch::channel(0);
        let accept = tokio::spawn(accept(
            listener,
            target.clone(),
            delay_ms.clone(),
            cut.clone(),
        ));
        Ok(Self {
            port,
            target,
            delay_ms,
            cut,
            accept,
        })
    }

    /// Closes every connection through the proxy, both ways.
    pub fn drop_connections(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    /// New connections go to Redis on `target`; those open now are
    /// dropped, so that their clients reconnect there.
    pub fn set_target(&self, target: u16) {
        self.target.store(target, Ordering::Relaxed);
        self.drop_connections();
    }

    /// Holds each chunk `ms` before passing it on (0: none).
    pub fn set_delay(&self, ms: u64) {
        self.delay_ms.store(ms, Ordering::Relaxed);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.drop_connections();
    }
}

async fn accept(
    listener: TcpListener,
    target: Arc<AtomicU16>,
    delay_ms: Arc<AtomicU64>,
    cut: watch::Sender<u64>,
) {
    while let Ok((inbound, _)) = listener.accept().await {
        // Redis down: the instance sees its connection closed at once.
        let Ok(outbound) = TcpStream::connect(("127.0.0.1", target.load(Ordering::Relaxed))).await
        else {
            continue;
        };
        let (in_read, in_write) = inbound.into_split();
        let (out_read, out_write) = outbound.into_split();
        tokio::spawn(pipe(in_read, out_write, delay_ms.clone(), cut.subscribe()));
        tokio::spawn(pipe(out_read, in_write, delay_ms.clone(), cut.subscribe()));
    }
}

async fn pipe(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    delay_ms: Arc<AtomicU64>,
    mut cut: watch::Receiver<u64>,
) {
    let mut buf = vec![0; 64 * 1024];
    let copy = async {
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let delay = delay_ms.load(Ordering::Relaxed);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            if to.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = copy => {}
        _ = cut.changed() => {}
    }
}
