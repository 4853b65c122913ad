//! `/v1/openapi.json`: the OpenAPI document, generated from the handlers
//! and types of this crate.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::{accounts, health, metrics, model, peers, problem, rate, sessions, tls};

/// The API's OpenAPI description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "gyro admin API",
        description = "Operate a running gyro: health, metrics, accounts, top-ups, sessions, \
            prices (POST /v1/rate rates usage without charging it). \
            POST /v1/tls/reload reloads the Diameter over TLS certificate. \
            Every change is applied by the shard that owns the account and answered once it is \
            durable. Errors are application/problem+json (RFC 9457). \
            On a node with storage.backend = \"redis-cluster\" only GET and POST \
            /v1/accounts, GET, PATCH (status, credit_limit) and DELETE \
            /v1/accounts/{subscriber} and its top-ups work (the \
            account as the cluster holds it: no currency; a top-up key reused with another \
            amount answers 409, as on the embedded store); every other operation answers 501."
    ),
    paths(
        health::healthz,
        health::readyz,
        metrics::metrics,
        accounts::create,
        accounts::list,
        accounts::show,
        accounts::update,
        accounts::delete,
        accounts::top_up,
        accounts::sessions,
        sessions::abort,
        rate::rate,
        peers::peers,
        tls::reload,
        openapi,
    ),
    components(schemas(
        problem::Problem,
        model::CreateAccount,
        model::UpdateAccount,
        model::TopUpRequest,
        model::AccountView,
        model::AccountList,
        model::BundleView,
        model::NewBundle,
        model::SessionView,
        model::SessionList,
        sessions::AbortView,
        rate::RateRequest,
        rate::RateView,
        rate::RatePart,
        rate::PriceChange,
        model::Status,
        model::Unit,
        peers::Peers,
        peers::WorkerPeers,
        peers::Peer,
        tls::TlsCertificate,
        health::Health,
    )),
    modifiers(&BearerToken),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "health",
    responses((status = 200, description = "The OpenAPI document")))]
pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
