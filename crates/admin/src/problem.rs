//! Errors as `application/problem+json` (RFC 9457).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use gyro_ocs::operations::OpError;
use serde::Serialize;
use utoipa::ToSchema;

/// A problem detail (RFC 9457).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the kind of problem.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong this time.
    pub detail: String,
}

impl Problem {
    /// A problem of kind `slug` (`urn:gyro:problem:<slug>`).
    pub fn new(status: StatusCode, slug: &str, title: &str, detail: impl Into<String>) -> Self {
        Problem {
            kind: format!("urn:gyro:problem:{slug}"),
            title: title.to_string(),
            status: status.as_u16(),
            detail: detail.into(),
        }
    }

    /// 404: no such account (or session).
    pub fn not_found(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", detail)
    }

    /// 422: the request is well-formed but invalid.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            "Invalid request",
            detail,
        )
    }

    /// 409: the request conflicts with the current state.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::CONFLICT, "conflict", "Conflict", detail)
    }

    /// 501: the operation is not available on this node's storage
    /// backend; nothing changed.
    pub fn not_implemented(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::NOT_IMPLEMENTED,
            "not-implemented",
            "Not implemented",
            detail,
        )
    }

    /// 503: not now; nothing changed.
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
            detail,
        )
    }
}

impl From<OpError> for Problem {
    fn from(e: OpError) -> Self {
        match e {
            OpError::NotFound(d) => Problem::not_found(d),
            OpError::Conflict(d) => Problem::conflict(d),
            OpError::Invalid(d) => Problem::invalid(d),
            OpError::Unavailable(d) => Problem::unavailable(d),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_default();
        (
            status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            body,
        )
            .into_response()
    }
}
