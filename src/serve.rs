//! The HTTP server: accepts connections, at most `max_connections` served
//! at once (the others wait in the listen queue), each served over HTTP/1.1
//! or HTTP/2 (prior knowledge) and closed when it is slow or idle:
//!
//! - a request head not sent whole within the header timeout of its first
//!   byte (or of the connection's opening), a slow client holding a
//!   connection with half a head;
//! - a connection that sent and was sent nothing for the idle timeout, a
//!   keep-alive connection forgotten by its client.
//!
//! The timers run only while the server waits to read. While a request is
//! answered (its body read, its handler run, a long poll waiting) and on
//! an HTTP/2 connection, the answer timeout holds instead: the idle
//! timeout, and never less than the longest wait a request may ask for
//! and the Redis timeout, so a long poll is never cut. On shutdown the
//! listener stops and every connection is closed once its requests are
//! answered.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

/// How connections are served.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    /// See the module's doc: at least `idle_timeout`.
    pub answer_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` resolves, then until the
/// connections' requests are answered.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut shutdown = std::pin::pin!(shutdown);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    // Each connection holds a receiver: all are gone once all are closed.
    let (closing, closed) = watch::channel(());
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => permit.map_err(io::Error::other)?,
            () = &mut shutdown => break,
        };
        let (tcp, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors, a connection reset before it
                // was accepted: the next one may do.
                Err(error) => {
                    tracing::debug!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Answers go out at once: with Nagle's algorithm, an answer
        // written while an earlier one is unacknowledged waits for the
        // client's delayed ACK (40 ms).
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "cannot set TCP_NODELAY");
        }
        let service = TowerToHyperService::new(
            router
                .clone()
                .map_request(|request: Request<Incoming>| request.map(Body::new)),
        );
        let mut closing = closing.subscribe();
        let closed = closed.clone();
        tokio::spawn(async move {
            let io = TokioIo::new(Watched::new(tcp, limits));
            let builder = Builder::new(TokioExecutor::new());
            let mut connection = std::pin::pin!(builder.serve_connection(io, service));
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(error = %error, "connection ended");
                    }
                }
                _ = closing.changed() => {
                    connection.as_mut().graceful_shutdown();
                    if let Err(error) = connection.await {
                        tracing::debug!(error = %error, "connection ended");
                    }
                }
            }
            drop((permit, closed));
        });
    }
    drop(listener);
    // Tell every connection to finish, then wait for the last.
    let _ = closing.send(());
    drop(closed);
    closing.closed().await;
    Ok(())
}

/// Where a connection is, as its bytes tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Between requests (or before the first): its next byte starts a head.
    Idle,
    /// Reading a request head that has not ended yet.
    Head,
    /// A request's head was read; its answer goes out.
    Answering,
    /// HTTP/2: frames, no heads to watch; only the idle timeout holds.
    Frames,
}

/// A TCP connection whose reads fail (closing it) when its request head
/// takes too long or when it stays idle too long.
struct Watched {
    tcp: TcpStream,
    limits: Limits,
    phase: Phase,
    /// The last bytes of the head read so far, to find its end across
    /// reads.
    tail: [u8; 3],
    /// Bytes of the connection read so far, all of them the start of
    /// HTTP/2's preface, or `None` once one was not.
    preface: Option<usize>,
    deadline: Pin<Box<Sleep>>,
}

/// What an HTTP/2 connection opens with.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

/// What ends an HTTP/1 request head, and its searcher (SIMD, made once).
const HEAD_END: &[u8; 4] = b"\r\n\r\n";
static HEAD_END_FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(HEAD_END));

impl Watched {
    fn new(tcp: TcpStream, limits: Limits) -> Self {
        let deadline = Box::pin(tokio::time::sleep(limits.header_timeout));
        Self {
            tcp,
            limits,
            // A new connection owes a head within the header timeout.
            phase: Phase::Head,
            tail: [0; 3],
            preface: Some(0),
            deadline,
        }
    }

    fn wait(&mut self, timeout: Duration) {
        self.deadline.as_mut().reset(Instant::now() + timeout);
    }

    /// Follows the bytes read: a head starts, a head ends (CRLF CRLF), or
    /// the connection speaks HTTP/2.
    fn read(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if let Some(at) = self.preface {
            let compare = bytes.len().min(H2_PREFACE.len() - at);
            self.preface =
                (bytes[..compare] == H2_PREFACE[at..at + compare]).then_some(at + compare);
            if self.preface == Some(H2_PREFACE.len()) {
                self.phase = Phase::Frames;
                self.preface = None;
            }
        }
        match self.phase {
            Phase::Frames | Phase::Answering => self.wait(self.limits.answer_timeout),
            Phase::Idle | Phase::Head => {
                if self.phase == Phase::Idle {
                    self.phase = Phase::Head;
                    self.tail = [0; 3];
                    self.wait(self.limits.header_timeout);
                }
                // The head's end is in this read, or begins in the last
                // bytes of the ones before.
                let tail = self.tail;
                let at = |i: usize| if i < 3 { tail[i] } else { bytes[i - 3] };
                let crossing =
                    (0..bytes.len().min(3)).any(|i| (0..4).all(|k| at(i + k) == HEAD_END[k]));
                let ended = crossing || HEAD_END_FINDER.find(bytes).is_some();
                let keep = bytes.len().min(3);
                self.tail.rotate_left(keep);
                self.tail[3 - keep..].copy_from_slice(&bytes[bytes.len() - keep..]);
                if ended {
                    self.phase = Phase::Answering;
                    self.wait(self.limits.answer_timeout);
                }
            }
        }
    }

    /// Bytes went out: an answer, after which a new head may come.
    fn wrote(&mut self) {
        if self.phase == Phase::Answering {
            self.phase = Phase::Idle;
        }
        match self.phase {
            Phase::Head => {}
            Phase::Idle => self.wait(self.limits.idle_timeout),
            Phase::Frames | Phase::Answering => self.wait(self.limits.answer_timeout),
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.tcp).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.read(&buf.filled()[before..]);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => {
                // Waiting to read is when a slow or idle client is cut off.
                ready!(this.deadline.as_mut().poll(cx));
                let why = match this.phase {
                    Phase::Head => "no whole request head within the header timeout",
                    _ => "idle for the idle timeout",
                };
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, why)))
            }
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = ready!(Pin::new(&mut this.tcp).poll_write(cx, buf))?;
        if written > 0 {
            this.wrote();
        }
        Poll::Ready(Ok(written))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = ready!(Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs))?;
        if written > 0 {
            this.wrote();
        }
        Poll::Ready(Ok(written))
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn watched() -> Watched {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let address = listener.local_addr().expect("address");
        let (client, server) = tokio::join!(TcpStream::connect(address), listener.accept());
        drop(client);
        let limits = Limits {
            max_connections: 1,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            answer_timeout: Duration::from_secs(60),
        };
        Watched::new(server.expect("accepts").0, limits)
    }

    #[tokio::test]
    async fn a_head_ends_at_its_blank_line_even_across_reads() {
        let mut watched = watched().await;
        watched.read(b"GET / HTTP/1.1\r\nHost: x\r\n\r");
        assert_eq!(watched.phase, Phase::Head);
        watched.read(b"\n");
        assert_eq!(watched.phase, Phase::Answering);
        watched.wrote();
        assert_eq!(watched.phase, Phase::Idle);
        watched.read(b"GET");
        assert_eq!(watched.phase, Phase::Head);
    }

    #[tokio::test]
    async fn a_head_ends_wherever_its_blank_line_is_split() {
        for split in 0..4 {
            let mut conn = watched().await;
            let (first, rest) = b"\r\n\r\n".split_at(split);
            conn.read(&[b"POST / HTTP/1.1\r\nHost: x".as_slice(), first].concat());
            assert_eq!(conn.phase, Phase::Head, "split at {split}");
            conn.read(&[rest, b"{\"body\": 1}".as_slice()].concat());
            assert_eq!(conn.phase, Phase::Answering, "split at {split}");
        }
        // Byte by byte: the end spans four reads.
        let mut conn = watched().await;
        conn.read(b"GET / HTTP/1.1");
        for byte in b"\r\n\r\n" {
            assert_eq!(conn.phase, Phase::Head);
            conn.read(&[*byte]);
        }
        assert_eq!(conn.phase, Phase::Answering);
        // A line break alone, or CR LF CR without its LF, ends nothing.
        let mut conn = watched().await;
        conn.read(b"GET / HTTP/1.1\r\nHost: x\r\n\rX\r\n");
        assert_eq!(conn.phase, Phase::Head);
    }

    #[tokio::test]
    async fn http2_is_told_by_its_preface() {
        let mut watched = watched().await;
        watched.read(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        assert_eq!(watched.phase, Phase::Frames);
        watched.wrote();
        assert_eq!(watched.phase, Phase::Frames);
    }
}
