//! `/v1/accounts` and `/v1/sessions`: every change is applied by the
//! shard that owns the account and answered once it is durable.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use gyro_charging::{AccountId, SubscriptionType};
use gyro_ocs::operations::{AccountOp, Outcome};
use serde::Deserialize;
use utoipa::IntoParams;

/// The largest account id the API takes (2^53 - 1, the largest integer a
/// JSON client reading numbers as doubles holds exactly); the ids gyro
/// picks itself stay far below it.
pub const MAX_ACCOUNT_ID: u64 = (1 << 53) - 1;

use crate::model::{
    AccountList, AccountView, BundleView, CreateAccount, SessionList, SessionView, Status,
    TopUpRequest, UpdateAccount,
};
use crate::problem::{json_body, Problem};
use crate::state::{AppState, Backend, Redis};

/// The account of a subscriber given in a path (MSISDN or IMSI digits).
fn account_of(backend: &Backend, subscriber: &str) -> Result<AccountId, Problem> {
    backend
        .subscribers
        .lookup_digits(subscriber)
        .ok_or_else(|| Problem::not_found(format!("no account for subscriber {subscriber}")))
}

fn account(outcome: Outcome) -> Result<AccountView, Problem> {
    match outcome {
        Outcome::Account { state, repeated } => {
            let mut v = AccountView::new(&state);
            v.replayed = Some(repeated);
            Ok(v)
        }
        _ => Err(Problem::unavailable("unexpected answer from the shard")),
    }
}

/// The account of a subscriber on the Redis Cluster ledger (the charging
/// configuration's directory, else the cluster's: accounts created
/// through the operator API).
async fn redis_account_of(r: &Redis, subscriber: &str) -> Result<AccountId, Problem> {
    r.accounts
        .find(subscriber)
        .await
        .map_err(redis_problem)?
        .ok_or_else(|| Problem::not_found(format!("no account for subscriber {subscriber}")))
}

fn no_account_in_cluster(subscriber: &str) -> Problem {
    Problem::not_found(format!(
        "subscriber {subscriber} has no account in the Redis Cluster"
    ))
}

/// A ledger error: 503 when Redis could not be reached or did not confirm
/// (retry; a top-up with the same key is applied once), 409 for a
/// conflict with what the cluster holds, 500 otherwise.
fn redis_problem(e: gyro_ocs::RedisAccountsError) -> Problem {
    match e {
        gyro_ocs::RedisAccountsError::Conflict(detail) => return Problem::conflict(detail),
        gyro_ocs::RedisAccountsError::Invalid(detail) => return Problem::invalid(detail),
        _ => {}
    }
    if e.is_unavailable() {
        Problem::unavailable(format!("{e}; retry (with the same idempotency key)"))
    } else {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "ledger",
            "Ledger error",
            e.to_string(),
        )
    }
}

/// The API's view of an account on the Redis Cluster ledger: its bundles
/// as the charging configuration defines them with the cluster's counts,
/// the currency of the configuration.
fn redis_view(v: gyro_ocs::RedisAccountView, replayed: Option<bool>) -> AccountView {
    let find = |kind| {
        v.subscribers
            .iter()
            .find(|id| id.kind == kind)
            .map(|id| id.data.clone())
    };
    let s = &v.state;
    AccountView {
        id: s.account.0,
        msisdn: find(SubscriptionType::E164),
        imsi: find(SubscriptionType::Imsi),
        balance: s.balance,
        reserved: s.reserved,
        credit_limit: s.credit_limit,
        status: if s.blocked {
            Status::Blocked
        } else {
            Status::Active
        },
        bundles: v.bundles.iter().map(BundleView::from).collect(),
        debited: s.debited,
        initial_balance: s.initial,
        topped_up: s.topped_up,
        plan: v.plan.clone(),
        currency: v
            .currency
            .map(|c| c.alpha().map_or_else(|| c.code.to_string(), str::to_string)),
        open_sessions: v.open_sessions,
        replayed,
    }
}

/// Creates an account (on the Redis Cluster ledger: in the cluster, with
/// its identities in the cluster's subscriber directory, so that every
/// node sharing the namespace finds it).
#[utoipa::path(post, path = "/v1/accounts", tag = "accounts",
    request_body = CreateAccount,
    responses(
        (status = 201, description = "Created (and durable; on the Redis Cluster ledger, confirmed by Redis)", body = AccountView),
        (status = 409, description = "The id or a subscriber identity has an account", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Starting, or (Redis Cluster ledger) Redis did not answer or confirm: the account may or may not exist", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(State(state): State<AppState>, bytes: Bytes) -> Result<Response, Problem> {
    if let Some(r) = state.redis.get() {
        let request: CreateAccount = json_body(&bytes)?;
        let new = request.to_new_account()?;
        let view = r.accounts.create(new).await.map_err(redis_problem)?;
        return Ok(created(redis_view(view, None)));
    }
    let backend = state.backend()?;
    let request: CreateAccount = json_body(&bytes)?;
    let mut new = request.to_new_account()?;
    let subs = &backend.subscribers;
    new.id = match request.id {
        Some(id) if !(1..=MAX_ACCOUNT_ID).contains(&id) => {
            return Err(Problem::invalid(format!(
                "account id {id} is out of range: 1 to {MAX_ACCOUNT_ID} (the largest integer \
                 every JSON client reads exactly)"
            )))
        }
        Some(id) => {
            subs.note_account_id(AccountId(id));
            AccountId(id)
        }
        None => subs.next_account_id(),
    };
    let ids = new.subscribers.clone();
    if let Err(taken) = subs.claim(&ids, new.id) {
        return Err(Problem::conflict(format!(
            "subscriber {taken} already has an account"
        )));
    }
    let shard = backend.shard_of(new.id);
    let outcome = match backend.call(shard, AccountOp::Create(new)).await {
        Ok(o) => o,
        Err(e) => {
            subs.release(&ids);
            return Err(e);
        }
    };
    let mut view = account(outcome)?;
    view.replayed = None;
    Ok(created(view))
}

/// The 201 answer of a creation, with the account's address.
fn created(view: AccountView) -> Response {
    let location = format!(
        "/v1/accounts/{}",
        view.msisdn
            .as_deref()
            .or(view.imsi.as_deref())
            .unwrap_or("")
    );
    (
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(view),
    )
        .into_response()
}

/// Reads an account (on the Redis Cluster ledger: the cluster's figures,
/// without bundles or currency).
#[utoipa::path(get, path = "/v1/accounts/{subscriber}", tag = "accounts",
    params(("subscriber" = String, Path, description = "MSISDN or IMSI digits")),
    responses(
        (status = 200, description = "The account", body = AccountView),
        (status = 404, description = "No such account", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Starting, or (Redis Cluster ledger) Redis did not answer", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn show(
    State(state): State<AppState>,
    Path(subscriber): Path<String>,
) -> Result<Json<AccountView>, Problem> {
    if let Some(r) = state.redis.get() {
        let id = redis_account_of(r, &subscriber).await?;
        let view = r.accounts.show(id).await.map_err(redis_problem)?;
        let view = view.ok_or_else(|| no_account_in_cluster(&subscriber))?;
        return Ok(Json(redis_view(view, None)));
    }
    let backend = state.backend()?;
    let id = account_of(backend, &subscriber)?;
    let mut view = account(
        backend
            .call(backend.shard_of(id), AccountOp::Show(id))
            .await?,
    )?;
    view.replayed = None;
    Ok(Json(view))
}

/// Changes an account's status, credit limit and/or price plan (on the
/// Redis Cluster ledger: status and credit limit, for every node at once,
/// with no Re-Auth- or Abort-Session-Request; the plan comes from the
/// charging configuration there).
#[utoipa::path(patch, path = "/v1/accounts/{subscriber}", tag = "accounts",
    params(("subscriber" = String, Path, description = "MSISDN or IMSI digits")),
    request_body = UpdateAccount,
    responses(
        (status = 501, description = "A plan change on the Redis Cluster ledger", body = Problem, content_type = "application/problem+json"),
        (status = 200, description = "The changed account (durable)", body = AccountView),
        (status = 404, description = "No such account", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn update(
    State(state): State<AppState>,
    Path(subscriber): Path<String>,
    bytes: Bytes,
) -> Result<Json<AccountView>, Problem> {
    let change: UpdateAccount = json_body(&bytes)?;
    if change.status.is_none() && change.credit_limit.is_none() && change.plan.is_none() {
        return Err(Problem::invalid(
            "nothing to change: give status, credit_limit and/or plan",
        ));
    }
    if change.credit_limit.is_some_and(|l| l < 0) {
        return Err(Problem::invalid("credit_limit must not be negative"));
    }
    if let Some(r) = state.redis.get() {
        if change.plan.is_some() {
            return Err(Problem::not_implemented(
                "not implemented with storage.backend = \"redis-cluster\": an account's plan \
                 comes from the charging configuration; status and credit_limit can be changed",
            ));
        }
        let id = redis_account_of(r, &subscriber).await?;
        let blocked = change.status.map(|s| matches!(s, Status::Blocked));
        let view = r
            .accounts
            .update(id, blocked, change.credit_limit)
            .await
            .map_err(redis_problem)?
            .ok_or_else(|| no_account_in_cluster(&subscriber))?;
        return Ok(Json(redis_view(view, None)));
    }
    let backend = state.backend()?;
    let id = account_of(backend, &subscriber)?;
    let op = AccountOp::Update {
        account: id,
        status: change.status.map(Into::into),
        credit_limit: change.credit_limit,
        plan: change.plan,
    };
    let outcome = backend
        .call_and_notify(backend.shard_of(id), op, crate::sessions::after_change)
        .await?;
    let mut view = account(outcome)?;
    view.replayed = None;
    Ok(Json(view))
}

/// Deletes an account that has no open session (on the Redis Cluster
/// ledger: an account of the charging configuration leaves its
/// subscribers there, without an account, and no node creates it again;
/// an account created through the API frees its identities, which can be
/// given a new account).
#[utoipa::path(delete, path = "/v1/accounts/{subscriber}", tag = "accounts",
    params(("subscriber" = String, Path, description = "MSISDN or IMSI digits")),
    responses(
        (status = 204, description = "Deleted (durable)"),
        (status = 404, description = "No such account", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "It has open sessions", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn delete(
    State(state): State<AppState>,
    Path(subscriber): Path<String>,
) -> Result<StatusCode, Problem> {
    if let Some(r) = state.redis.get() {
        let id = redis_account_of(r, &subscriber).await?;
        return if r.accounts.delete(id).await.map_err(redis_problem)? {
            Ok(StatusCode::NO_CONTENT)
        } else {
            Err(no_account_in_cluster(&subscriber))
        };
    }
    let backend = state.backend()?;
    let id = account_of(backend, &subscriber)?;
    match backend
        .call(backend.shard_of(id), AccountOp::Delete(id))
        .await?
    {
        Outcome::Deleted(identities) => {
            backend.subscribers.release(&identities);
            Ok(StatusCode::NO_CONTENT)
        }
        _ => Err(Problem::unavailable("unexpected answer from the shard")),
    }
}

/// Adds money, once per idempotency key (on the Redis Cluster ledger: a
/// `gyro_topup` step whose request key is the idempotency key).
#[utoipa::path(post, path = "/v1/accounts/{subscriber}/top-ups", tag = "accounts",
    params(("subscriber" = String, Path, description = "MSISDN or IMSI digits")),
    request_body = TopUpRequest,
    responses(
        (status = 200, description = "The account with its new balance (durable); `replayed` when the key was used before", body = AccountView),
        (status = 404, description = "No such account", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The key was used with another amount", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Not durable, or (Redis Cluster ledger) not confirmed by Redis: retry with the same key", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn top_up(
    State(state): State<AppState>,
    Path(subscriber): Path<String>,
    bytes: Bytes,
) -> Result<Json<AccountView>, Problem> {
    let request: TopUpRequest = json_body(&bytes)?;
    if request.amount <= 0 {
        return Err(Problem::invalid("amount must be positive"));
    }
    if request.idempotency_key.is_empty()
        || request.idempotency_key.len() > gyro_charging::MAX_IDEMPOTENCY_KEY
    {
        return Err(Problem::invalid(format!(
            "idempotency_key must be 1 to {} bytes",
            gyro_charging::MAX_IDEMPOTENCY_KEY
        )));
    }
    if let Some(r) = state.redis.get() {
        let id = redis_account_of(r, &subscriber).await?;
        let view = r
            .accounts
            .top_up(id, &request.idempotency_key, request.amount)
            .await
            .map_err(redis_problem)?
            .ok_or_else(|| no_account_in_cluster(&subscriber))?;
        let replayed = view.replayed;
        return Ok(Json(redis_view(view, Some(replayed))));
    }
    let backend = state.backend()?;
    let id = account_of(backend, &subscriber)?;
    let op = AccountOp::TopUp {
        account: id,
        amount: request.amount,
        key: request.idempotency_key,
    };
    let outcome = backend
        .call_and_notify(backend.shard_of(id), op, crate::sessions::after_top_up)
        .await?;
    Ok(Json(account(outcome)?))
}

/// `GET /v1/accounts` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AccountQuery {
    /// Only accounts with an id above this one (for the next page).
    pub after: Option<u64>,
    /// Most accounts listed (default 100).
    pub limit: Option<usize>,
}

/// Lists accounts in id order (on the Redis Cluster ledger: the
/// cluster's accounts, found by scanning the namespace's keys).
#[utoipa::path(get, path = "/v1/accounts", tag = "accounts",
    params(AccountQuery),
    responses(
        (status = 200, description = "Accounts", body = AccountList),
        (status = 503, description = "Starting, or (Redis Cluster ledger) Redis did not answer", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<AccountQuery>,
) -> Result<Json<AccountList>, Problem> {
    let limit = q.limit.unwrap_or(100);
    let after = q.after.map(AccountId);
    if let Some(r) = state.redis.get() {
        let views = r.accounts.list(after, limit).await.map_err(redis_problem)?;
        return Ok(Json(AccountList {
            accounts: views.into_iter().map(|v| redis_view(v, None)).collect(),
        }));
    }
    let backend = state.backend()?;
    let mut all = Vec::new();
    for shard in 0..backend.control.shards() {
        if let Outcome::Accounts(a) = backend
            .call(shard, AccountOp::List { after, limit })
            .await?
        {
            all.extend(a);
        }
    }
    all.sort_by_key(|s| s.account.id);
    all.truncate(limit);
    Ok(Json(AccountList {
        accounts: all.iter().map(AccountView::new).collect(),
    }))
}

/// `GET /v1/sessions` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionQuery {
    /// Only this subscriber's sessions (MSISDN or IMSI digits).
    pub subscriber: Option<String>,
    /// Most sessions listed (default 1000).
    pub limit: Option<usize>,
}

/// Lists open credit-control sessions.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions",
    params(SessionQuery),
    responses(
        (status = 501, description = "Not on the Redis Cluster ledger", body = Problem, content_type = "application/problem+json"),
        (status = 200, description = "Open sessions", body = SessionList),
        (status = 404, description = "No such subscriber", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn sessions(
    State(state): State<AppState>,
    Query(q): Query<SessionQuery>,
) -> Result<Json<SessionList>, Problem> {
    let backend = state.backend()?;
    let limit = q.limit.unwrap_or(1000);
    let (account, shards) = match &q.subscriber {
        Some(s) => {
            let id = account_of(backend, s)?;
            (Some(id), vec![backend.shard_of(id)])
        }
        None => (None, (0..backend.control.shards()).collect()),
    };
    let (mut list, mut total) = (Vec::new(), 0);
    // Every shard counts its sessions, also once the list is full.
    for shard in shards {
        let op = AccountOp::Sessions {
            account,
            limit: limit.saturating_sub(list.len()),
        };
        if let Outcome::Sessions { sessions, total: n } = backend.call(shard, op).await? {
            list.extend(sessions.into_iter().map(SessionView::from));
            total += n;
        }
    }
    Ok(Json(SessionList {
        sessions: list,
        total,
    }))
}
