//! `/v1/peers`: every connected Diameter peer (identity, address, state,
//! counters), as its event loop sees it, and the connections per worker.

use std::sync::atomic::Ordering::Relaxed;

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::problem::Problem;
use crate::state::AppState;

/// One worker's connections.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerPeers {
    /// Worker index.
    pub worker: usize,
    /// Connections open now.
    pub open_connections: u64,
    /// Connections accepted since start.
    pub connections_accepted: u64,
    /// Connections closed for a framing error, a size limit or a timeout.
    pub connections_aborted: u64,
    /// Application requests its shard handled.
    pub requests: u64,
}

/// One connected Diameter peer (one connection).
#[derive(Debug, Serialize, ToSchema)]
pub struct Peer {
    /// Its Origin-Host (null until its CER has been accepted).
    pub origin_host: Option<String>,
    /// Its Origin-Realm (likewise).
    pub origin_realm: Option<String>,
    /// Its address and port.
    pub remote_address: Option<String>,
    /// The connection's state: handshake (waiting for the CER), open,
    /// closing (DPR sent or received) or closed.
    pub state: String,
    /// When it connected, Unix milliseconds.
    pub connected_since: u64,
    /// Application requests received on this connection.
    pub requests: u64,
    /// Answers to them written back.
    pub answers: u64,
    /// The worker (event loop) serving it.
    pub worker: usize,
}

/// `GET /v1/peers`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Peers {
    /// Diameter connections open now, all workers.
    pub open_connections: u64,
    /// Each connected peer, oldest connection first.
    pub peers: Vec<Peer>,
    /// Per worker.
    pub workers: Vec<WorkerPeers>,
}

/// Connected Diameter peers, and connections per worker.
#[utoipa::path(get, path = "/v1/peers", tag = "peers",
    responses((status = 200, description = "Connected peers and connections per worker", body = Peers)))]
pub async fn peers(State(state): State<AppState>) -> Result<Json<Peers>, Problem> {
    let backend = state.backend()?;
    let workers: Vec<WorkerPeers> = backend
        .control
        .worker_stats()
        .iter()
        .enumerate()
        .map(|(worker, s)| WorkerPeers {
            worker,
            open_connections: s.open_connections.load(Relaxed),
            connections_accepted: s.connections.load(Relaxed),
            connections_aborted: s.aborted_connections.load(Relaxed),
            requests: s.requests.load(Relaxed),
        })
        .collect();
    let mut peers: Vec<Peer> = backend
        .control
        .telemetry()
        .peers()
        .await
        .into_iter()
        .map(|p| Peer {
            origin_host: p.origin_host,
            origin_realm: p.origin_realm,
            remote_address: p.remote.map(|a| a.to_string()),
            state: p.state.to_string(),
            connected_since: p.connected_since_unix_ms,
            requests: p.requests,
            answers: p.answers,
            worker: p.worker,
        })
        .collect();
    peers.sort_by_key(|p| p.connected_since);
    Ok(Json(Peers {
        open_connections: workers.iter().map(|w| w.open_connections).sum(),
        peers,
        workers,
    }))
}
