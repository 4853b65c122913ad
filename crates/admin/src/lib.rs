//! gyro's operator API: an HTTP server (axum) that `gyro serve` runs on
//! its own thread beside the Diameter event loops.
//!
//! * `GET /healthz`, `GET /readyz` (503 until every shard has recovered
//!   and the Diameter listeners are open), `GET /metrics` (Prometheus).
//! * `POST /v1/accounts`, `GET|PATCH|DELETE /v1/accounts/{subscriber}`,
//!   `POST /v1/accounts/{subscriber}/top-ups`, `GET /v1/sessions`,
//!   `DELETE /v1/sessions/{session-id}` (Abort-Session-Request),
//!   `GET /v1/peers`, `POST /v1/tls/reload` (the Diameter over TLS
//!   certificate, as SIGHUP), `POST /v1/rate` (what usage would cost
//!   and which rate prices it, charging nothing), `GET /v1/openapi.json`.
//! * A top-up sends a Re-Auth-Request to the account's sessions waiting
//!   for credit, a change of the account (PATCH) to all its sessions, or
//!   an Abort-Session-Request when it blocks the account (`sessions`).
//!
//! Every account operation goes to the shard that owns the account as a
//! control operation ([`gyro_server::control`]): the shard's event loop
//! applies it like a CCR, its effects join the same group commit, and the
//! HTTP answer leaves only once they are durable. JSON in and out; errors
//! are `application/problem+json` ([`Problem`]). Configured by `[admin]`
//! ([`gyro_server::config::AdminSection`]); with a token file every
//! request but the probes needs `Authorization: Bearer <token>`.
//!
//! On a node serving on the Redis Cluster ledger
//! ([`AdminServer::ready_redis`]) accounts are listed, shown, topped up,
//! changed (status, credit limit) and deleted through
//! [`gyro_ocs::RedisAccounts`] (the top-up's idempotency key is the ledger
//! step's request key); creating an account, a plan change and every
//! session, peer, rate and TLS operation answer 501 Not Implemented.

mod accounts;
mod error;
mod health;
mod metrics;
mod metrics_families;
pub mod model;
mod openapi;
mod peers;
mod problem;
pub mod rate;
mod sessions;
mod state;
mod tls;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use gyro_server::config::AdminSection;
use tokio::sync::oneshot;
use tracing::{info, warn};

pub use error::Error;
pub use openapi::ApiDoc;
pub use problem::Problem;
pub use state::Backend;

use state::{AppState, Inner};

/// The running admin API.
pub struct AdminServer {
    addr: SocketAddr,
    inner: Arc<Inner>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AdminServer {
    /// Starts the admin API as `[admin]` says: `None` when it is disabled,
    /// or when the default address is taken (another gyro runs here; a
    /// WARN says so). An explicitly configured address that cannot be
    /// listened on, or a non-loopback one without a token, is an error.
    pub fn start_configured(section: &AdminSection) -> Result<Option<AdminServer>, Error> {
        if !section.enabled {
            info!("admin API disabled (admin.enabled = false)");
            return Ok(None);
        }
        match AdminServer::start(section) {
            Ok(s) => Ok(Some(s)),
            Err(Error::Bind { addr, source }) if *section == AdminSection::default() => {
                warn!(
                    %addr,
                    error = %source,
                    "admin API NOT started: its default address is taken; set [admin] listen"
                );
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Starts the admin API on `section.listen`; it answers 503 (but
    /// `/healthz`) until [`AdminServer::ready`].
    pub fn start(section: &AdminSection) -> Result<AdminServer, Error> {
        let token = match &section.token_file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| Error::Token {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
                let t = text.trim().to_string();
                if t.is_empty() {
                    return Err(Error::Token {
                        path: path.clone(),
                        reason: "empty".into(),
                    });
                }
                Some(t)
            }
            None if !section.listen.ip().is_loopback() => {
                return Err(Error::NoToken(section.listen))
            }
            None => None,
        };
        let listener =
            std::net::TcpListener::bind(section.listen).map_err(|source| Error::Bind {
                addr: section.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(Error::Start)?;
        listener.set_nonblocking(true).map_err(Error::Start)?;
        let inner = Arc::new(Inner {
            backend: OnceLock::new(),
            redis: OnceLock::new(),
            token,
        });
        let app = router(inner.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Start)?;
        let thread = std::thread::Builder::new()
            .name("gyro-admin".into())
            .spawn(move || {
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            warn!(error = %e, "admin API cannot use its listener");
                            return;
                        }
                    };
                    let served = axum::serve(listener, app).with_graceful_shutdown(async {
                        let _ = stopped.await;
                    });
                    if let Err(e) = served.await {
                        warn!(error = %e, "admin API stopped");
                    }
                })
            })
            .map_err(Error::Start)?;
        info!(
            %addr,
            token = inner.token.is_some(),
            "admin API listening (HTTP; GET /v1/openapi.json describes it)"
        );
        Ok(AdminServer {
            addr,
            inner,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server is serving: account operations and `/readyz` answer.
    pub fn ready(&self, backend: Backend) {
        let _ = self.inner.backend.set(backend);
    }

    /// The server is serving on the Redis Cluster ledger: `/metrics`
    /// shows the ledger's families (`gyro_redis_*`) and the answers by
    /// Result-Code (`gyro_diameter_requests_total`); `GET /v1/accounts`,
    /// `GET`, `PATCH` (status, credit limit) and `DELETE
    /// /v1/accounts/{subscriber}` and its `top-ups` work through
    /// `accounts`. Creating accounts and the session, peer, rate and TLS
    /// operations answer 501: they need the embedded store's runtime.
    pub fn ready_redis(
        &self,
        telemetry: std::sync::Arc<gyro_ocs::RedisTelemetry>,
        totals: std::sync::Arc<[gyro_ocs::ShardTotals]>,
        accounts: std::sync::Arc<gyro_ocs::RedisAccounts>,
    ) {
        let _ = self.inner.redis.set(state::Redis {
            telemetry,
            totals,
            accounts,
        });
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn router(inner: AppState) -> Router {
    let api = Router::new()
        .route("/metrics", get(metrics::metrics))
        .route("/v1/accounts", post(accounts::create).get(accounts::list))
        .route(
            "/v1/accounts/{subscriber}",
            get(accounts::show)
                .patch(accounts::update)
                .delete(accounts::delete),
        )
        .route("/v1/accounts/{subscriber}/top-ups", post(accounts::top_up))
        .route("/v1/sessions", get(accounts::sessions))
        .route(
            "/v1/sessions/{session_id}",
            axum::routing::delete(sessions::abort),
        )
        .route("/v1/rate", post(rate::rate))
        .route("/v1/peers", get(peers::peers))
        .route("/v1/tls/reload", post(tls::reload))
        .route("/v1/openapi.json", get(openapi::openapi))
        .route_layer(axum::middleware::from_fn_with_state(inner.clone(), auth));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .merge(api)
        .fallback(not_found)
        .layer(axum::middleware::map_response(as_problem))
        .with_state(inner)
}

/// Bytes of an error body read to turn it into a problem's detail.
const ERROR_BODY_MAX: usize = 16 * 1024;

/// Every error is `application/problem+json` (RFC 9457), also those the
/// framework answers before a handler runs: a method the path does not
/// take (405, its Allow header kept), a query string that does not
/// parse (400), a body over the size limit (413), a missing or wrong
/// content type (415). Their text becomes the problem's detail.
async fn as_problem(response: Response) -> Response {
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, ERROR_BODY_MAX)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let detail =
        match (text.is_empty(), status) {
            (false, _) => text,
            (true, axum::http::StatusCode::METHOD_NOT_ALLOWED) => {
                match parts.headers.get(header::ALLOW).and_then(|v| v.to_str().ok()) {
                Some(allow) if !allow.is_empty() => format!("this path takes {allow}"),
                _ => "this path does not take this method (its Allow header lists those it takes)"
                    .to_string(),
            }
            }
            (true, _) => status.canonical_reason().unwrap_or("error").to_string(),
        };
    let mut r = Problem::for_status(status, detail).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            r.headers_mut().insert(name.clone(), value.clone());
        }
    }
    r
}

async fn not_found() -> Problem {
    Problem::not_found("no such endpoint; GET /v1/openapi.json lists them")
}

/// Asks for the bearer token when one is configured.
async fn auth(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(token) = &state.token else {
        return next.run(request).await;
    };
    // RFC 9110 section 11.1: the scheme name is case-insensitive.
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    if given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
        return next.run(request).await;
    }
    let mut r = Problem::new(
        axum::http::StatusCode::UNAUTHORIZED,
        "unauthorized",
        "Unauthorized",
        "this endpoint needs Authorization: Bearer <token> (admin.token_file)",
    )
    .into_response();
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    r
}

/// Compares without leaking where the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
