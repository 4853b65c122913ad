//! `/v1/peers`: the Diameter side as the runtime's counters show it.

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

/// `GET /v1/peers`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Peers {
    /// Diameter connections open now, all workers.
    pub open_connections: u64,
    /// Per worker.
    pub workers: Vec<WorkerPeers>,
}

/// Diameter connections, per worker.
#[utoipa::path(get, path = "/v1/peers", tag = "peers",
    responses((status = 200, description = "Connections per worker", body = Peers)))]
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
    Ok(Json(Peers {
        open_connections: workers.iter().map(|w| w.open_connections).sum(),
        workers,
    }))
}
