//! `/healthz` and `/readyz`.

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::problem::Problem;
use crate::state::AppState;

/// A probe's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` or `ready`.
    pub status: &'static str,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process is up", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Every shard has recovered and the Diameter listeners are open.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Serving", body = Health),
        (status = 503, description = "Still starting", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, Problem> {
    if state.redis.get().is_none() {
        state.backend()?;
    }
    Ok(Json(Health { status: "ready" }))
}
