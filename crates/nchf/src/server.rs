//! The HTTP/2 server: listeners, connections, routes, limits, and the way
//! a request reaches the shard that charges it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use gyro_charging::{CcAnswer, CcRequest};
use gyro_ocs::{CreditShard, Subscribers};
use gyro_server::config::NchfSection;
use gyro_server::tls::TlsContext;
use gyro_server::Control;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{oneshot, watch, Semaphore};
use tracing::{debug, info, warn};

use crate::decode::decode_request;
use crate::mapping::{self, Operation, Reply};
use crate::metrics::Metrics;
use crate::model::ChargingDataRequest;
use crate::problem::{cause, Problem};
use crate::reference;

/// The API root path (TS 32.291 clause 6.1.1: `{apiRoot}/nchf-convergedcharging/v3`).
pub const API: &str = "/nchf-convergedcharging/v3";

/// Resets of streams not yet accepted that a connection may have pending
/// before it is closed with GOAWAY ENHANCE_YOUR_CALM (the HTTP/2 rapid
/// reset attack, CVE-2023-44487).
const MAX_PENDING_RESETS: usize = 20;
/// Streams a connection may make gyro reset for its errors (malformed
/// frames) before it is closed with GOAWAY.
const MAX_ERROR_RESETS: usize = 256;

/// The running server, as the Nchf listener reaches it.
#[derive(Clone)]
pub struct Backend {
    /// Hands operations to shards.
    pub control: Control<CreditShard>,
    /// Routes subscribers to accounts.
    pub subscribers: Arc<Subscribers>,
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An address could not be listened on.
    #[error("nchf: cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// `nchf.tls_listen` without TLS settings.
    #[error("nchf.tls_listen needs [tls] cert and key")]
    NoTls,
    /// The runtime or its thread could not start.
    #[error("nchf: cannot start: {0}")]
    Start(std::io::Error),
}

/// Counters of answers, by kind.
#[derive(Debug, Default)]
pub struct Stats {
    /// Answers 2xx.
    pub charged: AtomicU64,
    /// Answers 4xx.
    pub refused: AtomicU64,
    /// Answers 5xx.
    pub failed: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections closed at once (over `max_connections`).
    pub refused_connections: AtomicU64,
    /// Answers by operation and status, and their latency (`/metrics`).
    pub metrics: Metrics,
}

struct State {
    backend: Backend,
    service_context: String,
    max_body: usize,
    request_timeout: Duration,
    max_queue_wait: Duration,
    inflight: Arc<Semaphore>,
    stats: Arc<Stats>,
}

/// The running Nchf listener(s).
pub struct NchfServer {
    addr: Option<SocketAddr>,
    tls_addr: Option<SocketAddr>,
    stats: Arc<Stats>,
    stop: Option<watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, Error> {
    let l = std::net::TcpListener::bind(addr).map_err(|source| Error::Bind { addr, source })?;
    l.set_nonblocking(true)
        .map_err(|source| Error::Bind { addr, source })?;
    Ok(l)
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl NchfServer {
    /// Starts serving `section`'s addresses on `threads` threads
    /// (`section.threads` when not 0). TLS uses `tls` (the `[tls]`
    /// certificate); a request that waited longer than `max_queue_wait_ms`
    /// for its shard is answered 503 without being charged.
    pub fn start(
        section: &NchfSection,
        threads: usize,
        tls: Option<Arc<TlsContext>>,
        backend: Backend,
        max_queue_wait_ms: u64,
    ) -> Result<NchfServer, Error> {
        let plain = section.listen.map(bind).transpose()?;
        let secure = match section.tls_listen {
            Some(addr) => Some((bind(addr)?, tls.ok_or(Error::NoTls)?)),
            None => None,
        };
        let addr = plain
            .as_ref()
            .map(|l| l.local_addr().map_err(Error::Start))
            .transpose()?;
        let tls_addr = secure
            .as_ref()
            .map(|(l, _)| l.local_addr().map_err(Error::Start))
            .transpose()?;
        let threads = if section.threads > 0 {
            section.threads
        } else {
            threads.max(1)
        };
        let stats = Arc::new(Stats::default());
        let state = Arc::new(State {
            backend,
            service_context: section.service_context.clone(),
            max_body: section.max_body_bytes,
            request_timeout: Duration::from_millis(section.request_timeout_ms),
            max_queue_wait: Duration::from_millis(max_queue_wait_ms.max(1)),
            inflight: Arc::new(Semaphore::new(section.max_inflight)),
            stats: stats.clone(),
        });
        let limits = ConnLimits {
            max_concurrent_streams: section.max_concurrent_streams,
            max_header_list_size: section.max_header_list_size,
            handshake_timeout: Duration::from_millis(section.request_timeout_ms),
            connections: Arc::new(Semaphore::new(section.max_connections)),
            total: u32::try_from(section.max_connections).unwrap_or(u32::MAX),
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("gyro-nchf")
            .enable_all()
            .build()
            .map_err(Error::Start)?;
        let (stop, stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("gyro-nchf-main".into())
            .spawn(move || {
                rt.block_on(async move {
                    let mut tasks = Vec::new();
                    if let Some(l) = plain {
                        let (state, limits, stopped) =
                            (state.clone(), limits.clone(), stopped.clone());
                        tasks.push(tokio::spawn(accept_loop(l, None, state, limits, stopped)));
                    }
                    if let Some((l, tls)) = secure {
                        let acceptor = Acceptor::new(tls);
                        let (state, limits, stopped) =
                            (state.clone(), limits.clone(), stopped.clone());
                        tasks.push(tokio::spawn(accept_loop(
                            l,
                            Some(acceptor),
                            state,
                            limits,
                            stopped,
                        )));
                    }
                    for t in tasks {
                        let _ = t.await;
                    }
                    // Open connections got GOAWAY; give them a moment to
                    // finish what is in flight.
                    let all = limits.connections.clone();
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        all.acquire_many(limits.total),
                    )
                    .await;
                });
                rt.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(Error::Start)?;
        if let Some(a) = addr {
            info!(%a, threads, "Nchf_ConvergedCharging (TS 32.291) listening: HTTP/2 with prior knowledge (h2c)");
        }
        if let Some(a) = tls_addr {
            info!(%a, threads, "Nchf_ConvergedCharging (TS 32.291) listening: HTTP/2 over TLS (ALPN h2)");
        }
        Ok(NchfServer {
            addr,
            tls_addr,
            stats,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The h2c address, if any.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The TLS address, if any.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// Answers so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The counters, shared: for `/metrics` to read while this serves.
    pub fn shared_stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Stops accepting, sends GOAWAY on every connection and waits (a
    /// few seconds at most) for what is in flight.
    pub fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for NchfServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[derive(Clone)]
struct ConnLimits {
    max_concurrent_streams: u32,
    max_header_list_size: u32,
    handshake_timeout: Duration,
    connections: Arc<Semaphore>,
    /// Permits of `connections`: taking them all waits for every
    /// connection to end.
    total: u32,
}

/// TLS with ALPN `h2`, from the `[tls]` certificate in use (a reload is
/// picked up by the next connection).
struct Acceptor {
    tls: Arc<TlsContext>,
    cached: Mutex<Option<(Arc<rustls::ServerConfig>, tokio_rustls::TlsAcceptor)>>,
}

impl Acceptor {
    fn new(tls: Arc<TlsContext>) -> Acceptor {
        Acceptor {
            tls,
            cached: Mutex::new(None),
        }
    }

    fn get(&self) -> tokio_rustls::TlsAcceptor {
        let base = self.tls.server_config();
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((b, a)) = &*cached {
            if Arc::ptr_eq(b, &base) {
                return a.clone();
            }
        }
        let mut config = (*base).clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        *cached = Some((base, acceptor.clone()));
        acceptor
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    tls: Option<Acceptor>,
    state: Arc<State>,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            warn!(error = %e, "nchf: cannot use the listener");
            return;
        }
    };
    let tls = tls.map(Arc::new);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.changed() => break,
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                debug!(error = %e, "nchf: accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = limits.connections.clone().try_acquire_owned() else {
            state.stats.refused_connections.fetch_add(1, Relaxed);
            drop(stream);
            continue;
        };
        state.stats.connections.fetch_add(1, Relaxed);
        let _ = stream.set_nodelay(true);
        let (state, limits, stop, tls) = (state.clone(), limits.clone(), stop.clone(), tls.clone());
        tokio::spawn(async move {
            // A client that connects and says nothing, or not enough to
            // start HTTP/2, is dropped: its TLS handshake, the connection
            // preface and its first SETTINGS must all arrive within the
            // handshake timeout of the connection being accepted.
            let deadline = tokio::time::Instant::now() + limits.handshake_timeout;
            match tls {
                None => match start_http2(stream, deadline).await {
                    Ok(io) => serve_connection(io, false, state, &limits, stop).await,
                    Err(e) => debug!(%peer, error = %e, "nchf: HTTP/2 did not start"),
                },
                Some(tls) => {
                    let handshake = tokio::time::timeout_at(deadline, tls.get().accept(stream));
                    match handshake.await {
                        Ok(Ok(s)) => match start_http2(s, deadline).await {
                            Ok(io) => serve_connection(io, true, state, &limits, stop).await,
                            Err(e) => debug!(%peer, error = %e, "nchf: HTTP/2 did not start"),
                        },
                        Ok(Err(e)) => debug!(%peer, error = %e, "nchf: TLS handshake failed"),
                        Err(_) => debug!(%peer, "nchf: TLS handshake timed out"),
                    }
                }
            }
            drop(permit);
        });
    }
}

/// The client connection preface (RFC 9113 section 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The largest first SETTINGS payload waited for (SETTINGS_MAX_FRAME_SIZE's
/// initial value); a larger frame is left to HTTP/2 to refuse.
const MAX_FIRST_FRAME: usize = 16_384;

/// How many bytes starting HTTP/2 takes, given what arrived so far: the
/// preface and the whole first frame when that is a SETTINGS frame of a
/// sane size. `Some(n)` with `n <= buf.len()` once enough arrived, or
/// once what arrived is not HTTP/2 (which the HTTP/2 layer then refuses
/// with GOAWAY); `None` while more is needed.
fn http2_start_len(buf: &[u8]) -> Option<usize> {
    let n = buf.len().min(PREFACE.len());
    if buf[..n] != PREFACE[..n] {
        return Some(n);
    }
    let header = PREFACE.len() + 9;
    let h = buf.get(PREFACE.len()..header)?;
    let length = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
    if h[3] != 0x4 || length > MAX_FIRST_FRAME {
        return Some(header);
    }
    (buf.len() >= header + length).then_some(header + length)
}

/// Reads the start of HTTP/2 (preface and first SETTINGS) from `io`
/// before `deadline`, and gives back `io` with what was read put back in
/// front of it. An error when the deadline passed or the client closed
/// first.
async fn start_http2<I>(
    mut io: I,
    deadline: tokio::time::Instant,
) -> std::io::Result<impl AsyncRead + AsyncWrite + Unpin + Send + 'static>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::with_capacity(64);
    let read = async {
        loop {
            if http2_start_len(&buf).is_some_and(|n| n <= buf.len()) {
                return Ok::<(), std::io::Error>(());
            }
            if io.read_buf(&mut buf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    };
    match tokio::time::timeout_at(deadline, read).await {
        Ok(r) => r?,
        Err(_) => return Err(std::io::ErrorKind::TimedOut.into()),
    }
    let (r, w) = tokio::io::split(io);
    Ok(tokio::io::join(std::io::Cursor::new(buf).chain(r), w))
}

async fn serve_connection<I>(
    io: I,
    https: bool,
    state: Arc<State>,
    limits: &ConnLimits,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_concurrent_streams)
        .max_header_list_size(limits.max_header_list_size)
        .max_pending_accept_reset_streams(Some(MAX_PENDING_RESETS))
        .max_local_error_reset_streams(Some(MAX_ERROR_RESETS))
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(10));
    let service = service_fn(move |req| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(handle(&state, req, https).await) }
    });
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                debug!(error = %e, "nchf: connection ended with an error");
            }
        }
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
        }
    }
}

/// Which operation a path names, and the ChargingDataRef it holds; the
/// method is checked apart ([`not_allowed`]), so that a request with the
/// wrong method on an operation's path is still that operation's.
fn route(path: &str) -> Result<(Operation, Option<String>), Problem> {
    let Some(rest) = path.strip_prefix(API) else {
        return Err(Problem::bad_request(
            cause::INVALID_API,
            format!("unsupported API name or version; this is {API}"),
        ));
    };
    let (op, reference) = match rest.strip_prefix("/chargingdata") {
        Some("") => (Operation::Create, None),
        Some(r) => {
            let r = r.strip_prefix('/').unwrap_or("\u{0}");
            match r.rsplit_once('/') {
                Some((reference, "update"))
                    if !reference.is_empty() && !reference.contains('/') =>
                {
                    (Operation::Update, Some(reference.to_string()))
                }
                Some((reference, "release"))
                    if !reference.is_empty() && !reference.contains('/') =>
                {
                    (Operation::Release, Some(reference.to_string()))
                }
                _ => return Err(no_such_resource()),
            }
        }
        None => return Err(no_such_resource()),
    };
    Ok((op, reference))
}

/// 405 for a method other than POST, which is all the operations take.
fn not_allowed(method: &Method) -> Problem {
    Problem::new(
        405,
        None,
        format!("{method} is not allowed here; the operations are POST"),
    )
}

fn no_such_resource() -> Problem {
    Problem::new(
        404,
        Some(cause::RESOURCE_URI_STRUCTURE_NOT_FOUND),
        format!(
            "no such resource: {API}/chargingdata, .../chargingdata/{{ChargingDataRef}}/update \
             and .../release"
        ),
    )
}

fn is_json(req: &Request<Incoming>) -> bool {
    let Some(ct) = req.headers().get(header::CONTENT_TYPE) else {
        return false;
    };
    let Ok(ct) = ct.to_str() else { return false };
    let essence = ct.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

fn response(status: u16, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn problem_response(p: Problem, path: &str) -> Response<Full<Bytes>> {
    let status = p.status;
    let mut r = response(status, "application/problem+json", p.instance(path).body());
    if status == 405 {
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
    }
    r
}

async fn handle(state: &State, req: Request<Incoming>, https: bool) -> Response<Full<Bytes>> {
    let started = Instant::now();
    let path = req.uri().path().to_string();
    let head = req.method() == Method::HEAD;
    let mut op = None;
    let r = answer(state, req, https, &mut op).await;
    let status = r.status().as_u16();
    state.stats.metrics.record(op, status, started.elapsed());
    let class = status / 100;
    match class {
        2 => state.stats.charged.fetch_add(1, Relaxed),
        4 => state.stats.refused.fetch_add(1, Relaxed),
        _ => state.stats.failed.fetch_add(1, Relaxed),
    };
    let mut r = match r {
        Answer::Done(r) => r,
        Answer::Problem(p) => problem_response(p, &path),
    };
    if head {
        // RFC 9110 section 9.3.2: the status and headers a GET would get,
        // without content (HEADERS with END_STREAM).
        let length = r.body().size_hint().exact().unwrap_or(0);
        r.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        *r.body_mut() = Full::new(Bytes::new());
    }
    r
}

enum Answer {
    Done(Response<Full<Bytes>>),
    Problem(Problem),
}

impl Answer {
    fn status(&self) -> StatusCode {
        match self {
            Answer::Done(r) => r.status(),
            Answer::Problem(p) => {
                StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
        }
    }
}

impl From<Problem> for Answer {
    fn from(p: Problem) -> Self {
        Answer::Problem(p)
    }
}

/// Answers `req`; `operation` is set to the operation its path names as
/// soon as it is known.
async fn answer(
    state: &State,
    req: Request<Incoming>,
    https: bool,
    operation: &mut Option<Operation>,
) -> Answer {
    let (op, reference) = match route(req.uri().path()) {
        Ok(r) => r,
        Err(p) => return p.into(),
    };
    *operation = Some(op);
    if req.method() != Method::POST {
        return not_allowed(req.method()).into();
    }
    if !is_json(&req) {
        return Problem::new(415, None, "the body must be application/json").into();
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.max_body as u64) {
        return too_large(state.max_body).into();
    }
    let authority = req.uri().authority().map(|a| a.to_string()).or_else(|| {
        req.headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_string)
    });
    let body = Limited::new(req.into_body(), state.max_body);
    let bytes = match tokio::time::timeout(state.request_timeout, body.collect()).await {
        Err(_) => return Problem::new(408, None, "the request body did not arrive in time").into(),
        Ok(Err(e)) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                return too_large(state.max_body).into();
            }
            return Problem::bad_request(
                cause::INVALID_MSG_FORMAT,
                format!("reading the body: {e}"),
            )
            .into();
        }
        Ok(Ok(b)) => b.to_bytes(),
    };
    let request = match decode_request(&bytes) {
        Ok(r) => r,
        Err(p) => return p.into(),
    };
    let (reference, reply) = match charge(state, op, reference, &request).await {
        Ok(r) => r,
        Err(p) => return p.into(),
    };
    match reply {
        Reply::Charged(body) => {
            let json = serde_json::to_vec(&body).unwrap_or_default();
            let mut r = response(
                if op == Operation::Create { 201 } else { 200 },
                "application/json",
                json,
            );
            if op == Operation::Create {
                let scheme = if https { "https" } else { "http" };
                let location = match &authority {
                    Some(a) => format!("{scheme}://{a}{API}/chargingdata/{reference}"),
                    None => format!("{API}/chargingdata/{reference}"),
                };
                if let Ok(v) = HeaderValue::from_str(&location) {
                    r.headers_mut().insert(header::LOCATION, v);
                }
            }
            Answer::Done(r)
        }
        Reply::Released => {
            let mut r = Response::new(Full::new(Bytes::new()));
            *r.status_mut() = StatusCode::NO_CONTENT;
            Answer::Done(r)
        }
        Reply::Refused(p) => p.into(),
    }
}

fn too_large(max: usize) -> Problem {
    Problem::new(413, None, format!("the body is larger than {max} bytes"))
}

/// Charges `request` on the shard that owns its account and waits until
/// what it changed is durable. Returns the ChargingDataRef and the reply.
async fn charge(
    state: &State,
    op: Operation,
    reference: Option<String>,
    request: &ChargingDataRequest,
) -> Result<(String, Reply), Problem> {
    if request.one_time_event == Some(true) {
        return Err(Problem::bad_request(
            cause::CHARGING_FAILED,
            "event based charging (oneTimeEvent) is not served over Nchf by gyro; \
             use Diameter CCR-Event",
        )
        .param("/oneTimeEvent", "not supported"));
    }
    let Ok(_permit) = state.inflight.clone().try_acquire_owned() else {
        return Err(Problem::congestion(
            "too many requests in flight (nchf.max_inflight); nothing was charged",
        ));
    };
    let backend = &state.backend;
    let (account, reference) = match (op, reference) {
        (Operation::Create, _) => {
            let ids = mapping::subscription_ids(request);
            if ids.is_empty() {
                return Err(Problem::bad_request(
                    cause::CHARGING_FAILED,
                    "no subscriber: subscriberIdentifier (imsi-, nai-) or \
                     pDUSessionChargingInformation.userInformation.servedGPSI (msisdn-) is needed",
                )
                .param("/subscriberIdentifier", "missing or of an unknown form"));
            }
            let Some(account) = ids
                .iter()
                .find_map(|id| backend.subscribers.lookup(id.kind, &id.data))
            else {
                return Err(Problem::new(
                    404,
                    Some(cause::USER_UNKNOWN),
                    "no account for the subscriber (subscriberIdentifier, servedGPSI)",
                )
                .param("/subscriberIdentifier", "unknown"));
            };
            (account, reference::new_reference(account, unix_ms()))
        }
        (_, Some(r)) => match reference::account_of(&r) {
            Some(account) => (account, r),
            None => return Err(Problem::no_context(&r)),
        },
        (_, None) => return Err(no_such_resource()),
    };
    let mut cc = CcRequest::default();
    mapping::to_cc_request(request, op, &reference, &state.service_context, &mut cc);
    let shard = account.shard(backend.control.shards());
    let (tx, rx) = oneshot::channel::<Option<CcAnswer>>();
    let sent = Instant::now();
    let max_wait = state.max_queue_wait;
    backend
        .control
        .send(
            shard,
            Box::new(move |s: &mut CreditShard, now_ms| {
                if sent.elapsed() > max_wait {
                    // Waited too long for its shard: not charged.
                    return Box::new(move |_| {
                        let _ = tx.send(None);
                    });
                }
                let mut answer = CcAnswer::default();
                let ok = s.charge(&cc, now_ms, &mut answer);
                Box::new(move |durable| {
                    let _ = tx.send((ok && durable).then_some(answer));
                })
            }),
        )
        .map_err(|_| Problem::congestion("gyro is stopping; nothing was charged"))?;
    match rx.await {
        Ok(Some(answer)) => Ok((reference, mapping::reply(op, request, &answer, unix_ms()))),
        Ok(None) => Err(Problem::congestion(
            "overloaded, or the charging could not be made durable; nothing was charged",
        )),
        Err(_) => Err(Problem::congestion("gyro is stopping; nothing was charged")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_to_operations_or_to_the_errors_ts_29_500_names() {
        assert_eq!(
            route("/nchf-convergedcharging/v3/chargingdata").unwrap(),
            (Operation::Create, None)
        );
        assert_eq!(
            route("/nchf-convergedcharging/v3/chargingdata/nchf-1-ab/update").unwrap(),
            (Operation::Update, Some("nchf-1-ab".into()))
        );
        assert_eq!(
            route("/nchf-convergedcharging/v3/chargingdata/nchf-1-ab/release").unwrap(),
            (Operation::Release, Some("nchf-1-ab".into()))
        );
        let e = route("/nchf-convergedcharging/v2/chargingdata").unwrap_err();
        assert_eq!((e.status, e.cause()), (400, Some(cause::INVALID_API)));
        for p in [
            "/nchf-convergedcharging/v3/chargingdata/",
            "/nchf-convergedcharging/v3/chargingdata/x/delete",
            "/nchf-convergedcharging/v3/chargingdata//update",
            "/nchf-convergedcharging/v3/chargingdata/a/b/update",
            "/nchf-convergedcharging/v3/other",
        ] {
            let e = route(p).unwrap_err();
            assert_eq!(
                e.cause(),
                Some(cause::RESOURCE_URI_STRUCTURE_NOT_FOUND),
                "{p}"
            );
        }
        assert_eq!(not_allowed(&Method::GET).status, 405);
    }

    #[test]
    fn http2_starts_with_the_preface_and_a_whole_first_settings_frame() {
        // The preface, then SETTINGS with one setting (6 bytes): needed
        // whole, and no more.
        let mut start = PREFACE.to_vec();
        start.extend([0, 0, 6, 0x4, 0, 0, 0, 0, 0]);
        start.extend([0, 3, 0, 0, 0, 100]);
        for cut in 0..start.len() {
            assert_eq!(http2_start_len(&start[..cut]), None, "{cut} bytes");
        }
        assert_eq!(http2_start_len(&start), Some(start.len()));
        let mut more = start.clone();
        more.extend([0, 0, 0, 0x4, 0x1, 0, 0, 0, 0]);
        assert_eq!(http2_start_len(&more), Some(start.len()));
        // Not HTTP/2 (HTTP/1.1, a wrong first frame): handed on at once
        // for the HTTP/2 layer to refuse.
        for not_h2 in [&b"G"[..], b"GET / HTTP/1.1\r\n", b"PRI * HTTP/1.1\r\n"] {
            assert!(http2_start_len(not_h2).is_some_and(|n| n <= not_h2.len()));
        }
        let mut ping = PREFACE.to_vec();
        ping.extend([0, 0, 8, 0x6, 0, 0, 0, 0, 0]);
        assert_eq!(http2_start_len(&ping), Some(PREFACE.len() + 9));
    }
}
