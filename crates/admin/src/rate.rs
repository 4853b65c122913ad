//! `POST /v1/rate`: what usage would cost and which rate prices it,
//! without charging anything (as `gyro rate` does from a charging file).

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use gyro_charging::rating::quote::{decimal, format_instant, parse_instant};
use gyro_charging::{Quote, QuoteRequest, Timestamp};
use gyro_ocs::operations::{AccountOp, Outcome};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::model::Unit;
use crate::problem::Problem;
use crate::state::AppState;

/// `POST /v1/rate`: what to price.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateRequest {
    /// The subscriber whose plan prices it (MSISDN or IMSI digits).
    pub subscriber: Option<String>,
    /// A plan, when no subscriber is given (default: the plan named
    /// `default`).
    pub plan: Option<String>,
    /// `data` (32251@3gpp.org), `voice` (32260@3gpp.org) or `sms`
    /// (32274@3gpp.org), when no `service_context` is given.
    pub service: Option<String>,
    /// Service-Context-Id.
    pub service_context: Option<String>,
    /// Rating-Group.
    pub rating_group: Option<u32>,
    /// Service-Identifier.
    pub service_id: Option<u32>,
    /// Called party (number or tel:/sip: URI).
    pub called: Option<String>,
    /// Visited network, MCC and MNC digits (e.g. `26201`).
    pub visited_network: Option<String>,
    /// Units used, in the rate's unit (octets, seconds or events).
    pub units: u64,
    /// When the usage starts: RFC 3339 with a UTC offset, or Unix
    /// milliseconds (default: now).
    pub at: Option<String>,
    /// Whether it starts a session (the first interval applies; default
    /// true).
    pub first: Option<bool>,
}

/// One part of a price, at one rate.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RatePart {
    /// The rate.
    pub rate: String,
    /// Units of the usage priced here.
    pub units: u64,
    /// Units charged (first interval, increment).
    pub charged_units: u64,
    /// Price, minor units.
    pub price: i64,
    /// The rate's price: `rate_price` minor units per `rate_per` units.
    pub rate_price: i64,
    /// See `rate_price`.
    pub rate_per: u64,
    /// When this part starts (RFC 3339, the plan's time zone).
    pub from: String,
}

/// A change of price.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PriceChange {
    /// When (RFC 3339, the plan's time zone).
    pub at: String,
    /// The rate from then on.
    pub rate: String,
}

/// What the usage costs, and why.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RateView {
    /// The plan that priced it.
    pub plan: String,
    /// The plan's currency (ISO 4217 code; numeric when gyro knows no
    /// alphabetic one).
    pub currency: String,
    /// The unit of the rate.
    pub unit: Unit,
    /// Destination of the called party.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// Roaming zone of the visited network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Total, minor units.
    pub price: i64,
    /// Total as a decimal amount of the currency.
    pub amount: String,
    /// The parts, in time order: one, or one per rate window when seconds
    /// run past changes of price.
    pub parts: Vec<RatePart>,
    /// The next change of price after the usage starts (within a week).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_change: Option<PriceChange>,
}

impl RateView {
    /// The view of a quote, times in time zone `zone`.
    pub fn new(q: &Quote, zone: &str) -> Self {
        RateView {
            plan: q.plan.clone(),
            currency: q
                .currency
                .alpha()
                .map_or_else(|| q.currency.code.to_string(), str::to_string),
            unit: q.unit.into(),
            destination: q.destination.clone(),
            zone: q.zone.clone(),
            price: q.price,
            amount: decimal(q.price, q.currency.exponent),
            parts: q
                .parts
                .iter()
                .map(|p| RatePart {
                    rate: p.rate.clone(),
                    units: p.units,
                    charged_units: p.charged_units,
                    price: p.price,
                    rate_price: p.rate_price,
                    rate_per: p.rate_per,
                    from: format_instant(p.from, zone),
                })
                .collect(),
            next_change: q.next_change.as_ref().map(|(at, rate)| PriceChange {
                at: format_instant(*at, zone),
                rate: rate.clone(),
            }),
        }
    }
}

/// The Service-Context-Id a service name stands for.
pub fn service_context(service: &str) -> Option<&'static str> {
    Some(match service {
        "data" => "32251@3gpp.org",
        "voice" => "32260@3gpp.org",
        "sms" => "32274@3gpp.org",
        _ => return None,
    })
}

/// The largest number an `integer, format: int64` field of the API
/// carries: more units are refused rather than answered with numbers a
/// client generated from the OpenAPI document cannot read.
const INT64_MAX: u64 = i64::MAX as u64;

/// 422 naming `units` unless every count of units in `q` fits an int64.
fn check_int64(units: u64, q: &Quote) -> Result<(), Problem> {
    let past = q
        .parts
        .iter()
        .any(|p| p.units > INT64_MAX || p.charged_units > INT64_MAX || p.rate_per > INT64_MAX);
    if past {
        return Err(Problem::invalid(format!(
            "units: {units} is too many to price: the units charged pass {INT64_MAX} (int64)"
        )));
    }
    Ok(())
}

/// Prices usage under a subscriber's (or a named) plan without charging.
#[utoipa::path(post, path = "/v1/rate", tag = "rating",
    request_body = RateRequest,
    responses(
        (status = 200, description = "The price and the rate that applies", body = RateView),
        (status = 404, description = "No such subscriber", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid, or nothing rates it", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn rate(
    State(state): State<AppState>,
    bytes: Bytes,
) -> Result<Json<RateView>, Problem> {
    let backend = state.backend()?;
    let r: RateRequest = crate::problem::json_body(&bytes)?;
    if r.units > INT64_MAX {
        return Err(Problem::invalid(format!(
            "units: {} is more than {INT64_MAX} (int64)",
            r.units
        )));
    }
    let ctx = match (&r.service_context, &r.service) {
        (Some(c), _) => c.clone(),
        (None, Some(s)) => service_context(s)
            .ok_or_else(|| Problem::invalid(format!("service {s:?}: data, voice or sms")))?
            .to_string(),
        (None, None) => {
            return Err(Problem::invalid("give service or service_context"));
        }
    };
    let account = match &r.subscriber {
        Some(s) => Some(
            backend
                .subscribers
                .lookup_digits(s)
                .ok_or_else(|| Problem::not_found(format!("no account for subscriber {s}")))?,
        ),
        None => None,
    };
    let at = match &r.at {
        None => Timestamp(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        ),
        Some(s) => parse_instant(s, None).map_err(|e| Problem::invalid(e.to_string()))?,
    };
    let request = QuoteRequest {
        service_context: ctx,
        rating_group: r.rating_group,
        service_id: r.service_id,
        called_party: r.called.clone().unwrap_or_default(),
        visited_plmn: r.visited_network.clone().unwrap_or_default(),
        units: r.units,
        at,
        first: r.first.unwrap_or(true),
    };
    let shard = account.map_or(0, |a| backend.shard_of(a));
    let op = AccountOp::Rate {
        account,
        plan: r.plan.clone(),
        request: Box::new(request),
    };
    match backend.call(shard, op).await? {
        Outcome::Quote(q) => {
            check_int64(r.units, &q)?;
            Ok(Json(RateView::new(&q, &q.time_zone)))
        }
        _ => Err(Problem::unavailable("unexpected answer from the shard")),
    }
}
