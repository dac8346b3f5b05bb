//! An HTTP/2 client speaking cleartext with prior knowledge (h2c), as prioq
//! serves it beside HTTP/1.1: many clients' requests multiplexed as streams
//! over a few connections.

use std::net::SocketAddr;

use anyhow::{Context, Result, anyhow};
use bytes::{Bytes, BytesMut};
use h2::client::SendRequest;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use tokio::net::TcpStream;

use crate::measure::REQUEST_TIMEOUT;

/// One connection; clones share it, each request on a stream of its own.
#[derive(Debug, Clone)]
pub struct Client {
    send: SendRequest<Bytes>,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Result<Self> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (send, connection) = h2::client::Builder::new()
            // Answers of 100 jobs are larger than the default window.
            .initial_window_size(1 << 20)
            .initial_connection_window_size(1 << 24)
            .handshake(tcp)
            .await
            .context("HTTP/2 handshake")?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                eprintln!("# HTTP/2 connection ended: {error}");
            }
        });
        Ok(Self { send })
    }

    /// Sends one POST; its status and body.
    pub async fn send(&self, uri: &http::Uri, body: Bytes) -> Result<(u16, Bytes)> {
        tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(uri, body))
            .await
            .map_err(|_| anyhow!("no answer in {REQUEST_TIMEOUT:?}"))?
    }

    async fn exchange(&self, uri: &http::Uri, body: Bytes) -> Result<(u16, Bytes)> {
        let mut send = self.send.clone().ready().await?;
        let mut request = http::Request::post(uri.clone()).body(())?;
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        let (response, mut stream) = send.send_request(request, false)?;
        stream.send_data(body, true)?;
        let response = response.await?;
        let status = response.status().as_u16();
        let mut recv = response.into_body();
        let mut first: Option<Bytes> = None;
        let mut joined = BytesMut::new();
        while let Some(chunk) = recv.data().await {
            let chunk = chunk?;
            recv.flow_control().release_capacity(chunk.len())?;
            // Most answers come in one DATA frame: no copy then.
            match first.take() {
                None if joined.is_empty() => first = Some(chunk),
                earlier => {
                    if let Some(earlier) = earlier {
                        joined.extend_from_slice(&earlier);
                    }
                    joined.extend_from_slice(&chunk);
                }
            }
        }
        Ok((status, first.unwrap_or_else(|| joined.freeze())))
    }
}
