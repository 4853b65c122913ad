//! Connecting, TLS (with `--tls`) and the capabilities exchange (CER/CEA).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use gyro_diameter::connection::{self, Connection, Event};
use gyro_diameter::peer::PeerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::{now_ms, Plan, MAX_MESSAGE, READ_CHUNK};
use crate::args::LoadArgs;

/// The socket of one connection: plain TCP, or TLS over TCP.
pub(crate) enum Stream {
    /// Diameter over TCP.
    Plain(TcpStream),
    /// Diameter over TLS/TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

/// A stream the connection driver reads and writes at once, through
/// borrowed halves: a `TcpStream`'s own (no lock), or `tokio::io::split`'s
/// for TLS (both halves share the TLS session).
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin + Send {
    /// The read half.
    type Read<'a>: AsyncRead + Unpin + Send
    where
        Self: 'a;
    /// The write half.
    type Write<'a>: AsyncWrite + Unpin + Send
    where
        Self: 'a;
    /// Splits the stream for a while.
    fn split(&mut self) -> (Self::Read<'_>, Self::Write<'_>);
}

impl Transport for TcpStream {
    type Read<'a> = tokio::net::tcp::ReadHalf<'a>;
    type Write<'a> = tokio::net::tcp::WriteHalf<'a>;
    fn split(&mut self) -> (Self::Read<'_>, Self::Write<'_>) {
        TcpStream::split(self)
    }
}

impl Transport for TlsStream<TcpStream> {
    type Read<'a> = tokio::io::ReadHalf<&'a mut Self>;
    type Write<'a> = tokio::io::WriteHalf<&'a mut Self>;
    fn split(&mut self) -> (Self::Read<'_>, Self::Write<'_>) {
        tokio::io::split(self)
    }
}

/// What every TLS connection of a run uses: the rustls client
/// configuration and the name the server's certificate must carry.
pub(crate) struct TlsClient {
    connector: tokio_rustls::TlsConnector,
    server_name: ServerName<'static>,
}

/// The TLS client of `--tls` (`None` without it): the CA bundle of
/// `--ca`, the client certificate of `--cert` and `--key` if given, the
/// server name of `--server-name` or else `--target`'s host.
pub(crate) fn tls_client(args: &LoadArgs) -> anyhow::Result<Option<TlsClient>> {
    tls_client_offering(args, Vec::new())
}

/// [`tls_client`] offering the application protocols `alpn` (e.g. `h2`).
pub(crate) fn tls_client_offering(
    args: &LoadArgs,
    alpn: Vec<Vec<u8>>,
) -> anyhow::Result<Option<TlsClient>> {
    let t = &args.tls;
    if !t.enabled {
        return Ok(None);
    }
    let ca =
        t.ca.as_ref()
            .context("--tls needs --ca (the server's CA)")?;
    let read = |path: &std::path::Path| {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))
    };
    let mut roots = rustls::RootCertStore::empty();
    let pem = read(ca)?;
    for c in CertificateDer::pem_slice_iter(&pem) {
        let c = c.with_context(|| format!("--ca {}", ca.display()))?;
        roots
            .add(c)
            .with_context(|| format!("--ca {}", ca.display()))?;
    }
    anyhow::ensure!(
        !roots.is_empty(),
        "--ca {}: no certificate in it",
        ca.display()
    );
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_root_certificates(roots);
    let mut config = match (&t.cert, &t.key) {
        (Some(cert), Some(key)) => {
            let pem = read(cert)?;
            let chain = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("--cert {}", cert.display()))?;
            anyhow::ensure!(
                !chain.is_empty(),
                "--cert {}: no certificate in it",
                cert.display()
            );
            let pem = read(key)?;
            let key_der = PrivateKeyDer::from_pem_slice(&pem)
                .with_context(|| format!("--key {}: no private key in it", key.display()))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .with_context(|| format!("--key {} does not go with --cert", key.display()))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn;
    let name = match &t.server_name {
        Some(n) => n.clone(),
        None => target_host(&args.target).to_string(),
    };
    let server_name = ServerName::try_from(name.clone())
        .with_context(|| format!("--server-name {name:?} is not a DNS name or an address"))?;
    Ok(Some(TlsClient {
        connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        server_name,
    }))
}

impl TlsClient {
    /// The TLS handshake over `tcp`, with the server name of the run.
    pub(crate) async fn handshake(&self, tcp: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        self.connector.connect(self.server_name.clone(), tcp).await
    }
}

/// The host part of `host:port` (`[v6]:port` too).
fn target_host(target: &str) -> &str {
    let host = target.rsplit_once(':').map_or(target, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Connects, does the TLS handshake with `--tls` (its time is returned),
/// and exchanges capabilities. Whatever arrived after the CEA stays
/// buffered in the returned connection.
pub(super) async fn open(
    idx: u32,
    plan: &Plan,
) -> Result<(Stream, Connection, Option<Duration>), String> {
    let t = plan.args.timeout;
    let addr = plan.addr;
    let stream = match tokio::time::timeout(t, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("connect to {addr}: {e}")),
        Err(_) => return Err(format!("connect to {addr}: timed out")),
    };
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr();
    let host = plan.args.connection_origin_host(idx);
    let mut pcfg = PeerConfig::new(&host, &plan.args.origin_realm);
    if let Ok(local) = local {
        pcfg.host_ip_addresses = vec![local.ip()];
    }
    pcfg.product_name = "gyro-load".to_string();
    pcfg.origin_state_id = plan.session_high;
    pcfg.watchdog_ms = plan.args.watchdog.as_millis().max(1) as u64;
    pcfg.watchdog_jitter_ms = pcfg.watchdog_ms.min(2_000) / 3;
    pcfg.handshake_timeout_ms = t.as_millis().max(1) as u64;
    let mut config = connection::Config::new(pcfg);
    config.max_message_size = MAX_MESSAGE;
    config.message_timeout_ms = t.as_millis().max(1) as u64;
    let mut conn = Connection::connect(
        Arc::new(config),
        now_ms(plan),
        plan.seed ^ (u64::from(idx) << 32) ^ 0x9e37_79b9,
    )
    .map_err(|e| format!("encoding CER: {e}"))?;
    conn.read_buffer().reserve(READ_CHUNK);
    let (mut stream, took) = match &plan.tls {
        None => (Stream::Plain(stream), None),
        Some(tls) => {
            let started = Instant::now();
            let handshake = tls.connector.connect(tls.server_name.clone(), stream);
            match tokio::time::timeout(t, handshake).await {
                Ok(Ok(s)) => (Stream::Tls(Box::new(s)), Some(started.elapsed())),
                Ok(Err(e)) => return Err(format!("TLS handshake with {addr}: {e}")),
                Err(_) => return Err(format!("TLS handshake with {addr}: timed out")),
            }
        }
    };
    let exchanged = match &mut stream {
        Stream::Plain(s) => tokio::time::timeout(t, exchange(s, &mut conn, plan)).await,
        Stream::Tls(s) => tokio::time::timeout(t, exchange(s.as_mut(), &mut conn, plan)).await,
    };
    match exchanged {
        Ok(Ok(())) => Ok((stream, conn, took)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("no CEA within the timeout".to_string()),
    }
}

/// Sends the CER and waits for the CEA.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    conn: &mut Connection,
    plan: &Plan,
) -> Result<(), String> {
    loop {
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Opened { .. } => return Ok(()),
                Event::Closed(r) => return Err(format!("capabilities exchange failed: {r:?}")),
                _ => {}
            }
        }
        if let Some(out) = conn.poll_transmit() {
            stream
                .write_all(&out)
                .await
                .map_err(|e| format!("sending CER: {e}"))?;
        }
        let n = stream
            .read_buf(conn.read_buffer())
            .await
            .map_err(|e| format!("waiting for CEA: {e}"))?;
        if n == 0 {
            return Err("connection closed before the CEA".to_string());
        }
        conn.handle_read(now_ms(plan));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_host_names_the_server_by_default() {
        assert_eq!(target_host("ocs.gyro.test:5658"), "ocs.gyro.test");
        assert_eq!(target_host("127.0.0.1:5658"), "127.0.0.1");
        assert_eq!(target_host("[::1]:5658"), "::1");
    }
}
