//! A lean HTTP/1.1 keep-alive client: one connection per client, one
//! request in flight on it, requests written as ready-made bytes, and of
//! each answer only the status line, `Content-Length` and the body read.
//! prioq always sends `Content-Length`, so nothing else is supported: the
//! client costs the shared core a few microseconds per request, where a
//! general client costs tens.

use std::io;
use std::net::SocketAddr;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::measure::REQUEST_TIMEOUT;

/// A POST as it goes on the wire.
pub fn post(authority: &str, path: &str, body: &str) -> Bytes {
    let mut wire = Vec::with_capacity(128 + path.len() + body.len());
    wire.extend_from_slice(b"POST ");
    wire.extend_from_slice(path.as_bytes());
    wire.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    wire.extend_from_slice(authority.as_bytes());
    wire.extend_from_slice(b"\r\ncontent-type: application/json\r\ncontent-length: ");
    wire.extend_from_slice(body.len().to_string().as_bytes());
    wire.extend_from_slice(b"\r\n\r\n");
    wire.extend_from_slice(body.as_bytes());
    wire.into()
}

#[derive(Debug)]
pub struct Connection {
    addr: SocketAddr,
    stream: Option<TcpStream>,
    buf: BytesMut,
}

impl Connection {
    /// Connects on first use, and again after a failed request.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            stream: None,
            buf: BytesMut::with_capacity(16 * 1024),
        }
    }

    /// Sends one request; its status and body.
    pub async fn send(&mut self, wire: &[u8]) -> io::Result<(u16, Bytes)> {
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(wire))
            .await
            .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "no answer")));
        if answer.is_err() {
            self.stream = None;
        }
        answer
    }

    async fn exchange(&mut self, wire: &[u8]) -> io::Result<(u16, Bytes)> {
        let stream = match &mut self.stream {
            Some(stream) => stream,
            slot @ None => {
                let stream = TcpStream::connect(self.addr).await?;
                stream.set_nodelay(true)?;
                self.buf.clear();
                slot.insert(stream)
            }
        };
        stream.write_all(wire).await?;
        let mut searched = 0;
        let head_len = loop {
            if let Some(at) = self.buf[searched..]
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
            {
                break searched + at + 4;
            }
            searched = self.buf.len().saturating_sub(3);
            read_more(stream, &mut self.buf).await?;
        };
        let head = Head::parse(&self.buf[..head_len])?;
        self.buf.advance(head_len);
        while self.buf.len() < head.content_length {
            read_more(stream, &mut self.buf).await?;
        }
        let body = self.buf.split_to(head.content_length).freeze();
        if head.close {
            self.stream = None;
        }
        Ok((head.status, body))
    }
}

async fn read_more(stream: &mut TcpStream, buf: &mut BytesMut) -> io::Result<()> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
    if stream.read_buf(buf).await? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// What the bench reads of an answer's head.
#[derive(Debug)]
struct Head {
    status: u16,
    content_length: usize,
    close: bool,
}

impl Head {
    fn parse(head: &[u8]) -> io::Result<Self> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
        let text = std::str::from_utf8(head).map_err(|_| bad("answer head is not UTF-8"))?;
        let mut lines = text.split("\r\n");
        let status = lines
            .next()
            .and_then(|line| line.strip_prefix("HTTP/1.1 "))
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| bad("no HTTP/1.1 status line"))?;
        let mut content_length = None;
        let mut close = false;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                content_length = Some(value.parse().map_err(|_| bad("bad content-length"))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(bad("answer without content-length"));
            } else if name.eq_ignore_ascii_case("connection") {
                close = value.eq_ignore_ascii_case("close");
            }
        }
        let content_length = match (content_length, status) {
            (Some(n), _) => n,
            // No body by definition.
            (None, 204 | 304 | 100..=199) => 0,
            (None, _) => return Err(bad("answer without content-length")),
        };
        Ok(Self {
            status,
            content_length,
            close,
        })
    }
}
