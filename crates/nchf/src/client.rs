//! A small HTTP/2 client of Nchf_ConvergedCharging (on the `h2` crate),
//! for the load generator and the tests: one connection, any number of
//! requests on it at once (the handle is cheap to clone).

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::model::ChargingDataRequest;
use crate::server::API;

/// Any failure of the transport (the connection, HTTP/2, TLS).
pub type ClientError = Box<dyn std::error::Error + Send + Sync>;

/// An answer.
#[derive(Clone, Debug)]
pub struct Answer {
    /// HTTP status code.
    pub status: u16,
    /// The Location header (Create).
    pub location: Option<String>,
    /// The Content-Type header.
    pub content_type: Option<String>,
    /// The body.
    pub body: Bytes,
}

impl Answer {
    /// The ChargingDataRef at the end of the Location of a Create.
    pub fn reference(&self) -> Option<&str> {
        self.location.as_deref()?.rsplit('/').next()
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// One HTTP/2 connection to the service.
#[derive(Clone)]
pub struct Client {
    send: h2::client::SendRequest<Bytes>,
    scheme: &'static str,
    authority: String,
}

impl Client {
    /// HTTP/2 with prior knowledge (h2c) to `addr`.
    pub async fn connect(addr: SocketAddr) -> Result<Client, ClientError> {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        Client::over(tcp, false, addr.to_string()).await
    }

    /// HTTP/2 over an established stream (TLS with ALPN `h2`, or TCP),
    /// naming the server `authority`.
    pub async fn over<I>(io: I, https: bool, authority: String) -> Result<Client, ClientError>
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (send, connection) = h2::client::Builder::new()
            .initial_window_size(1 << 20)
            .handshake(io)
            .await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Client {
            send,
            scheme: if https { "https" } else { "http" },
            authority,
        })
    }

    /// POSTs `body` (as application/json) to `path` and reads the answer.
    pub async fn post(&self, path: &str, body: Bytes) -> Result<Answer, ClientError> {
        self.request("POST", path, Some("application/json"), body)
            .await
    }

    /// Sends any request.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<Answer, ClientError> {
        let mut send = self.send.clone().ready().await?;
        let mut b = http::Request::builder()
            .method(method)
            .uri(format!("{}://{}{}", self.scheme, self.authority, path));
        if let Some(ct) = content_type {
            b = b.header(http::header::CONTENT_TYPE, ct);
        }
        let request = b.body(())?;
        let empty = body.is_empty();
        let (response, mut stream) = send.send_request(request, empty)?;
        if !empty {
            stream.send_data(body, true)?;
        }
        let response = response.await?;
        let (parts, mut body) = response.into_parts();
        let mut buf = BytesMut::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            let _ = body.flow_control().release_capacity(chunk.len());
            buf.extend_from_slice(&chunk);
        }
        let header = |h: http::header::HeaderName| {
            parts
                .headers
                .get(h)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Ok(Answer {
            status: parts.status.as_u16(),
            location: header(http::header::LOCATION),
            content_type: header(http::header::CONTENT_TYPE),
            body: buf.freeze(),
        })
    }

    /// Nchf_ConvergedCharging_Create.
    pub async fn create(&self, r: &ChargingDataRequest) -> Result<Answer, ClientError> {
        self.post(&format!("{API}/chargingdata"), json(r)).await
    }

    /// Nchf_ConvergedCharging_Update of `reference`.
    pub async fn update(
        &self,
        reference: &str,
        r: &ChargingDataRequest,
    ) -> Result<Answer, ClientError> {
        self.post(&format!("{API}/chargingdata/{reference}/update"), json(r))
            .await
    }

    /// Nchf_ConvergedCharging_Release of `reference`.
    pub async fn release(
        &self,
        reference: &str,
        r: &ChargingDataRequest,
    ) -> Result<Answer, ClientError> {
        self.post(&format!("{API}/chargingdata/{reference}/release"), json(r))
            .await
    }
}

fn json(r: &ChargingDataRequest) -> Bytes {
    Bytes::from(serde_json::to_vec(r).unwrap_or_default())
}
