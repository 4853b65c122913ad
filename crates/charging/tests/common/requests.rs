//! Builders of credit-control requests shared by the engine's rating
//! tests (`crates/charging/tests/rating.rs`) and those of a real server
//! (`crates/gyro/tests/rating.rs`, which includes this file): the service
//! contexts, units, MSCCs and CCRs of a gateway.

#![allow(dead_code)]

use gyro_charging::{CcRequest, Mscc, RequestType, ServiceUnits, SubscriptionId};

/// Data (PS, TS 32.251).
pub const DATA: &str = "32251@3gpp.org";
/// Voice (IMS, TS 32.260).
pub const VOICE: &str = "32260@3gpp.org";
/// SMS (TS 32.274).
pub const SMS: &str = "32274@3gpp.org";

pub fn octets(n: u64) -> ServiceUnits {
    ServiceUnits {
        total_octets: Some(n),
        ..ServiceUnits::default()
    }
}

pub fn secs(n: u32) -> ServiceUnits {
    ServiceUnits {
        time: Some(n),
        ..ServiceUnits::default()
    }
}

/// An MSCC of rating group `rg` (none: the service's), asking for units
/// when `want`, reporting `used`.
pub fn mscc(rg: Option<u32>, want: bool, used: Option<ServiceUnits>) -> Mscc {
    Mscc {
        rating_group: rg,
        requested: want.then(ServiceUnits::default),
        used,
        ..Mscc::default()
    }
}

/// Request `n` of `session` for `msisdn` on the service `ctx`, from the
/// gateway gw.rating.test, multiple services on and no MSCC yet; its
/// End-to-End Identifier differs from those of the session's other
/// requests.
pub fn request(session: &str, kind: RequestType, n: u32, msisdn: &str, ctx: &str) -> CcRequest {
    CcRequest {
        session_id: session.into(),
        origin_host: "gw.rating.test".into(),
        end_to_end: 0x7000_0000 | (session.len() as u32) << 8 | n,
        request_type: kind,
        request_number: n,
        service_context: ctx.into(),
        subscription_ids: vec![SubscriptionId::e164(msisdn)],
        multiple_services: Some(true),
        ..CcRequest::default()
    }
}
