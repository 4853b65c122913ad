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

    /// 400: the request does not parse (its JSON body, a JSON body that is
    /// not an object, or its query string).
    pub fn malformed(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            "Malformed request",
            detail,
        )
    }

    /// The problem an error answer of the framework (one no handler made)
    /// becomes: one type per status, each with one title.
    pub fn for_status(status: StatusCode, detail: impl Into<String>) -> Self {
        let (slug, title) = match status {
            StatusCode::BAD_REQUEST => return Problem::malformed(detail),
            StatusCode::NOT_FOUND => return Problem::not_found(detail),
            StatusCode::METHOD_NOT_ALLOWED => ("method-not-allowed", "Method not allowed"),
            StatusCode::PAYLOAD_TOO_LARGE => ("too-large", "Content too large"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ("unsupported-media-type", "Unsupported media type")
            }
            _ => ("error", "Error"),
        };
        Problem::new(status, slug, title, detail)
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

/// Reads a JSON request body: 400 `malformed` when it is not JSON or not
/// a JSON object (every request body of the API is an object; serde would
/// also read a struct from an array), 422 `invalid` when it is an object
/// of the wrong shape. Every handler reads its body through this.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        let what = match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Ok(_) => "a JSON object is expected, not another JSON value".to_string(),
            Err(e) => e.to_string(),
        };
        return Err(Problem::malformed(what));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        if e.is_data() {
            Problem::invalid(e.to_string())
        } else {
            Problem::malformed(e.to_string())
        }
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct TopUp {
        amount: i64,
        key: String,
    }

    #[test]
    fn only_a_json_object_is_a_body() {
        let ok: TopUp = json_body(br#" {"amount": 250, "key": "k"}"#).unwrap();
        assert_eq!(ok.amount, 250);
        for bad in [
            &br#"[250, "key-1"]"#[..],
            b"250",
            b"\"k\"",
            b"null",
            b"",
            b"{",
            br#"{"amount": 250, "key": "k"} trailing"#,
        ] {
            let p = json_body::<TopUp>(bad).unwrap_err();
            assert_eq!(
                (p.status, p.kind.as_str(), p.title.as_str()),
                (400, "urn:gyro:problem:malformed", "Malformed request"),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let p = json_body::<TopUp>(br#"{"amount": "lots", "key": "k"}"#).unwrap_err();
        assert_eq!(p.status, 422);
    }

    #[test]
    fn each_problem_type_has_one_title() {
        let mut seen = std::collections::HashMap::new();
        let statuses = (400..600).filter_map(|s| StatusCode::from_u16(s).ok());
        let problems = statuses.map(|s| Problem::for_status(s, "d")).chain([
            Problem::malformed("d"),
            Problem::not_found("d"),
            Problem::invalid("d"),
            Problem::conflict("d"),
            Problem::not_implemented("d"),
            Problem::unavailable("d"),
        ]);
        for p in problems {
            let title = seen.entry(p.kind.clone()).or_insert(p.title.clone());
            assert_eq!(*title, p.title, "{}", p.kind);
        }
    }
}
