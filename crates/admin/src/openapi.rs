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
    modifiers(&BearerToken, &ErrorResponses),
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

/// What every operation can answer beyond its own responses: 401
/// without the token (the probes need none: their `security` is empty),
/// 400 for a query string or JSON body that does not parse, 413 for a
/// body over the size limit; all as `application/problem+json`. And the
/// content of this document's own 200.
struct ErrorResponses;

impl Modify for ErrorResponses {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{Object, Schema};
        use utoipa::openapi::{Content, Ref, RefOr, ResponseBuilder};
        let problem = |description: &str| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        "application/problem+json",
                        Content::new(Some(Ref::from_schema_name("Problem"))),
                    )
                    .build(),
            )
        };
        for (path, item) in api.paths.paths.iter_mut() {
            let probe = path == "/healthz" || path == "/readyz";
            let ops = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for op in ops.into_iter().flatten() {
                let responses = &mut op.responses.responses;
                if probe {
                    op.security = Some(Vec::new());
                } else {
                    responses.entry("401".into()).or_insert_with(|| {
                        problem("The bearer token is missing or wrong (admin.token_file)")
                    });
                }
                if op.request_body.is_some() || op.parameters.is_some() {
                    responses.entry("400".into()).or_insert_with(|| {
                        problem("The query string or the JSON body does not parse")
                    });
                }
                if op.request_body.is_some() {
                    responses
                        .entry("413".into())
                        .or_insert_with(|| problem("The body is over the size limit"));
                }
            }
            if path == "/v1/openapi.json" {
                if let Some(RefOr::T(ok)) = item
                    .get
                    .as_mut()
                    .and_then(|op| op.responses.responses.get_mut("200"))
                {
                    let schema: RefOr<Schema> = RefOr::T(Schema::Object(Object::new()));
                    ok.content
                        .insert("application/json".into(), Content::new(Some(schema)));
                }
            }
        }
    }
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "health",
    responses((status = 200, description = "The OpenAPI document")))]
pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
