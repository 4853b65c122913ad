//! Error answers: HTTP status codes with a ProblemDetails body whose
//! `cause` names the application error.
//!
//! * Protocol and common application errors of TS 29.500 table
//!   5.2.7.2-1: `INVALID_API`, `INVALID_MSG_FORMAT`,
//!   `MANDATORY_IE_MISSING`, `MANDATORY_IE_INCORRECT`,
//!   `OPTIONAL_IE_INCORRECT` (400), `RESOURCE_URI_STRUCTURE_NOT_FOUND`
//!   (404), `NF_CONGESTION` (503), `SYSTEM_FAILURE` (500); statuses without
//!   a cause of their own there (405, 408, 411, 413, 415) carry no
//!   `cause`.
//! * Nchf_ConvergedCharging's application errors, TS 32.291 table
//!   6.1.7.3-1: `CHARGING_FAILED` (400), `CHARGING_NOT_APPLICABLE`,
//!   `END_USER_REQUEST_DENIED`, `QUOTA_LIMIT_REACHED` (403),
//!   `USER_UNKNOWN` (404).
//! * TS 32.291 names no cause for an Update or Release of a Charging Data
//!   resource that does not exist (never created, released, or closed by
//!   supervision): gyro answers 404 with `CONTEXT_NOT_FOUND`, the cause
//!   other SBI services give for a missing individual resource (e.g.
//!   Nsmf_PDUSession, TS 29.502).

use crate::model::{InvalidParam, ProblemDetails};

/// An error answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// HTTP status code.
    pub status: u16,
    /// The body.
    pub details: Box<ProblemDetails>,
}

/// Application error causes gyro sends.
pub mod cause {
    /// TS 29.500: unsupported API name or version in the URI.
    pub const INVALID_API: &str = "INVALID_API";
    /// TS 29.500: the body is not JSON (or not an object).
    pub const INVALID_MSG_FORMAT: &str = "INVALID_MSG_FORMAT";
    /// TS 29.500: a required attribute is absent.
    pub const MANDATORY_IE_MISSING: &str = "MANDATORY_IE_MISSING";
    /// TS 29.500: a required attribute has a wrong type or value.
    pub const MANDATORY_IE_INCORRECT: &str = "MANDATORY_IE_INCORRECT";
    /// TS 29.500: an optional attribute has a wrong type or value.
    pub const OPTIONAL_IE_INCORRECT: &str = "OPTIONAL_IE_INCORRECT";
    /// TS 29.500: no such resource structure.
    pub const RESOURCE_URI_STRUCTURE_NOT_FOUND: &str = "RESOURCE_URI_STRUCTURE_NOT_FOUND";
    /// TS 29.500: overloaded; nothing was done.
    pub const NF_CONGESTION: &str = "NF_CONGESTION";
    /// TS 29.500: a failure inside the NF.
    pub const SYSTEM_FAILURE: &str = "SYSTEM_FAILURE";
    /// TS 32.291: the information needed to charge is incomplete or wrong.
    pub const CHARGING_FAILED: &str = "CHARGING_FAILED";
    /// TS 32.291: the service is allowed without charging.
    pub const CHARGING_NOT_APPLICABLE: &str = "CHARGING_NOT_APPLICABLE";
    /// TS 32.291: the subscriber is not known.
    pub const USER_UNKNOWN: &str = "USER_UNKNOWN";
    /// TS 32.291: the end user's request is denied (e.g. a blocked
    /// account).
    pub const END_USER_REQUEST_DENIED: &str = "END_USER_REQUEST_DENIED";
    /// TS 32.291: no quota can be granted (no credit).
    pub const QUOTA_LIMIT_REACHED: &str = "QUOTA_LIMIT_REACHED";
    /// No Charging Data resource of that ChargingDataRef (see the module
    /// documentation).
    pub const CONTEXT_NOT_FOUND: &str = "CONTEXT_NOT_FOUND";
}

fn title(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

impl Problem {
    /// An answer with `status`, `cause` (if any) and `detail`.
    pub fn new(status: u16, cause: Option<&str>, detail: impl Into<String>) -> Problem {
        Problem {
            status,
            details: Box::new(ProblemDetails {
                title: Some(title(status).to_string()),
                status: Some(status),
                detail: Some(detail.into()),
                cause: cause.map(str::to_string),
                ..ProblemDetails::default()
            }),
        }
    }

    /// Names the attribute at fault (a JSON pointer).
    pub fn param(mut self, pointer: impl Into<String>, reason: impl Into<String>) -> Problem {
        self.details.invalid_params.push(InvalidParam {
            param: pointer.into(),
            reason: Some(reason.into()),
        });
        self
    }

    /// Sets `instance` (the request's path).
    pub fn instance(mut self, path: &str) -> Problem {
        self.details.instance = Some(path.to_string());
        self
    }

    /// The `cause`, if any.
    pub fn cause(&self) -> Option<&str> {
        self.details.cause.as_deref()
    }

    /// 400 with `cause`.
    pub fn bad_request(cause: &str, detail: impl Into<String>) -> Problem {
        Problem::new(400, Some(cause), detail)
    }

    /// 503 NF_CONGESTION: nothing was done, try again or elsewhere.
    pub fn congestion(detail: impl Into<String>) -> Problem {
        Problem::new(503, Some(cause::NF_CONGESTION), detail)
    }

    /// 404 CONTEXT_NOT_FOUND for a ChargingDataRef.
    pub fn no_context(reference: &str) -> Problem {
        Problem::new(
            404,
            Some(cause::CONTEXT_NOT_FOUND),
            format!(
                "no charging data resource {reference}: never created, already released, \
                 or closed after its supervision time"
            ),
        )
        .param("{ChargingDataRef}", "unknown")
    }

    /// The body as JSON bytes.
    pub fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&self.details).unwrap_or_default()
    }
}
