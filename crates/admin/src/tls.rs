//! `POST /v1/tls/reload`: reads the TLS certificate, key and CA bundle of
//! the Diameter over TLS listeners again (as SIGHUP does); new connections
//! use them, open ones keep theirs.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::problem::Problem;
use crate::state::AppState;

/// The server certificate the TLS listeners present.
#[derive(Debug, Serialize, ToSchema)]
pub struct TlsCertificate {
    /// The DNS names of its subject alternative name extension.
    pub dns_names: Vec<String>,
    /// SHA-256 of the DER certificate, colon-separated hex.
    pub fingerprint_sha256: String,
    /// Certificates in the chain, the server's own included.
    pub chain_length: usize,
}

/// Reloads the TLS certificate, key and client CA bundle from their files.
#[utoipa::path(post, path = "/v1/tls/reload", tag = "tls",
    responses(
        (status = 200, description = "Reloaded: the certificate new connections get", body = TlsCertificate),
        (status = 404, description = "No [tls] listener is configured", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The files could not be used; the certificate in use stays", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn reload(State(state): State<AppState>) -> Result<Json<TlsCertificate>, Problem> {
    let backend = state.backend()?;
    let Some(tls) = &backend.tls else {
        return Err(Problem::not_found(
            "no Diameter over TLS listener is configured ([tls] listen)",
        ));
    };
    match tls.reload() {
        Ok(c) => {
            tracing::info!(
                dns_names = %c.dns_names.join(", "),
                fingerprint_sha256 = %c.fingerprint_sha256,
                "TLS certificate reloaded (admin API); new connections use it"
            );
            Ok(Json(TlsCertificate {
                dns_names: c.dns_names,
                fingerprint_sha256: c.fingerprint_sha256,
                chain_length: c.chain_length,
            }))
        }
        Err(e) => {
            tracing::warn!(error = %e, "TLS certificate NOT reloaded; the one in use stays");
            Err(Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "tls-reload-failed",
                "TLS reload failed",
                format!("{e}; the certificate in use stays"),
            ))
        }
    }
}
