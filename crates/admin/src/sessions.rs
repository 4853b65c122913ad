//! Requests the server starts on an operator's behalf: a Re-Auth-Request
//! after a top-up or a change of an account, an Abort-Session-Request
//! when a session is deleted (`DELETE /v1/sessions/{session-id}`) or its
//! account blocked. The shard says which sessions and builds the requests
//! ([`gyro_ocs::reauth`]); the runtime delivers them to the peer holding
//! each session ([`gyro_server::Outbound`]); an answer saying the client
//! forgot the session (5002) releases it on its shard.

use std::sync::atomic::{AtomicU32, Ordering};

use axum::extract::{Path, State};
use axum::Json;
use bytes::Bytes;
use gyro_charging::Interface;
use gyro_ocs::operations::{AccountOp, Outcome};
use gyro_ocs::reauth::{after_answer, AfterAnswer, Kind, Target, Trigger};
use gyro_ocs::CreditShard;
use gyro_server::{Outbound, OutboundError};
use serde::Serialize;
use tokio::sync::oneshot;
use tracing::{debug, info, warn};
use utoipa::ToSchema;

use crate::problem::Problem;
use crate::state::{AppState, Backend};

/// End-to-End Identifiers of the requests the server starts.
static END_TO_END: AtomicU32 = AtomicU32::new(0);

fn next_end_to_end() -> u32 {
    let seed = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| (d.as_secs() as u32) << 20)
    };
    let _ = END_TO_END.compare_exchange(0, seed(), Ordering::Relaxed, Ordering::Relaxed);
    END_TO_END.fetch_add(1, Ordering::Relaxed)
}

/// Takes the Nchf sessions out of `targets`: their SMF has no
/// Re-Auth-Request or Abort-Session-Request to receive (ChargingNotify is
/// not built). One to abort (its account was blocked) is released there
/// and then, as `DELETE /v1/sessions/{id}` releases it; one to
/// re-authorize is left to ask again when its quota runs out.
fn settle_nchf(shard: &mut CreditShard, targets: Vec<Target>, now: u64) -> Vec<Target> {
    targets
        .into_iter()
        .filter(|t| {
            if shard.session_interface(&t.session_id) != Some(Interface::Nchf) {
                return true;
            }
            match t.kind {
                Kind::Abort => {
                    let released = shard.release_session(&t.session_id, now);
                    info!(session = t.session_id, ?released, "Nchf session of a blocked account released");
                }
                Kind::ReAuth => debug!(
                    session = t.session_id,
                    "Nchf session: not re-authorized (no ChargingNotify); it asks again when its quota runs out"
                ),
            }
            false
        })
        .collect()
}

/// A request built for a session, ready to send.
struct Prepared {
    target: Target,
    request: Bytes,
    peer: String,
}

/// Builds the requests for `targets` on the shard (whose identity they
/// carry), each addressed to the client that holds its session; sessions
/// no open connection carries are logged and left out.
fn prepare(shard: &CreditShard, outbound: &Outbound, targets: Vec<Target>) -> Vec<Prepared> {
    targets
        .into_iter()
        .filter_map(|target| {
            let Some(client) = outbound.client(target.session_id.as_bytes()) else {
                warn!(
                    session = target.session_id,
                    request = target.kind.name(),
                    "no connection ever carried this session since the start: not sent"
                );
                return None;
            };
            let request = shard.encode_server_request(
                &target,
                &client.host,
                &client.realm,
                next_end_to_end(),
            );
            let peer = outbound
                .peer(target.session_id.as_bytes())
                .map_or(client.host, |p| p.host);
            Some(Prepared {
                target,
                request,
                peer,
            })
        })
        .collect()
}

/// What became of one request.
struct Delivered {
    /// The answer's Result-Code, when one came.
    result_code: Option<u32>,
    /// Whether the session was released (the client forgot it).
    released: bool,
    /// Why it got no answer.
    error: Option<OutboundError>,
}

/// Sends one request, waits for its answer and acts on it.
async fn deliver(backend: &Backend, shard: usize, p: Prepared) -> Delivered {
    let outbound = backend.control.outbound();
    let sid = p.target.session_id.clone();
    let kind = p.target.kind.name();
    match outbound.request(sid.as_bytes(), p.request).await {
        Ok(answer) => {
            let code = gyro_diameter::Message::parse(&answer)
                .ok()
                .and_then(|m| m.find(gyro_diameter::codes::avp::RESULT_CODE)?.u32().ok());
            let mut released = false;
            match after_answer(&answer) {
                AfterAnswer::ClientFollows => {
                    info!(session = sid, peer = p.peer, request = kind, "answered 2001")
                }
                AfterAnswer::Release => {
                    let id = sid.clone();
                    released = backend
                        .run(shard, move |s, now| s.release_session(&id, now))
                        .await
                        .ok()
                        .and_then(Result::ok)
                        .unwrap_or(false);
                    info!(
                        session = sid,
                        peer = p.peer,
                        request = kind,
                        released,
                        "the client does not know the session (5002): released"
                    );
                }
                AfterAnswer::Failed(code) => warn!(
                    session = sid,
                    peer = p.peer,
                    request = kind,
                    code,
                    "answered with an error; supervision closes the session if the client does not come back"
                ),
            }
            Delivered {
                result_code: code,
                released,
                error: None,
            }
        }
        Err(e) => {
            warn!(session = sid, peer = p.peer, request = kind, error = %e, "not answered");
            Delivered {
                result_code: None,
                released: false,
                error: Some(e),
            }
        }
    }
}

/// Sends the requests in the background, each on its own.
fn deliver_all(backend: &Backend, shard: usize, requests: Vec<Prepared>) {
    for p in requests {
        let backend = backend.clone();
        tokio::spawn(async move {
            deliver(&backend, shard, p).await;
        });
    }
}

impl Backend {
    /// Runs `f` on `shard`'s event loop and returns what it returned once
    /// the group commit after it is done; an error when that commit
    /// failed (what `f` changed did not happen).
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut CreditShard, u64) -> T + Send + 'static,
    ) -> Result<T, Problem> {
        let (tx, rx) = oneshot::channel();
        self.control
            .send(
                shard,
                Box::new(move |s: &mut CreditShard, now_ms| {
                    let r = f(s, now_ms);
                    Box::new(move |durable| {
                        let _ = tx.send(durable.then_some(r));
                    })
                }),
            )
            .map_err(|e| Problem::unavailable(e.to_string()))?;
        rx.await
            .map_err(|_| Problem::unavailable("the server is stopping"))?
            .ok_or_else(|| {
                Problem::unavailable("the change could not be made durable; nothing changed")
            })
    }

    /// [`Backend::call`], then the requests to sessions that what it did
    /// calls for (`trigger`, from its outcome), sent in the background
    /// once it is durable.
    pub(crate) async fn call_and_notify(
        &self,
        shard: usize,
        op: AccountOp,
        trigger: fn(&Outcome) -> Option<Trigger>,
    ) -> Result<Outcome, Problem> {
        let outbound = self.control.outbound().clone();
        let (outcome, requests) = self
            .run(shard, move |s, now| {
                let r = s.apply(op);
                let requests = match r.as_ref().ok().and_then(trigger) {
                    Some(t) => {
                        let targets = s.server_requests(t);
                        let targets = settle_nchf(s, targets, now);
                        prepare(s, &outbound, targets)
                    }
                    None => Vec::new(),
                };
                (r, requests)
            })
            .await?;
        let outcome = outcome.map_err(Problem::from)?;
        deliver_all(self, shard, requests);
        Ok(outcome)
    }
}

/// What `DELETE /v1/sessions/{session-id}` did.
#[derive(Debug, Serialize, ToSchema)]
pub struct AbortView {
    /// The session.
    pub session_id: String,
    /// The Abort-Session-Request was sent and answered.
    pub asr_sent: bool,
    /// The peer it was sent to (the client holding the session); empty
    /// for an Nchf session.
    pub peer: String,
    /// The ASA's Result-Code (2001: the client ends the session with a
    /// CCR-Terminate, which releases its reservation).
    pub result_code: Option<u32>,
    /// The session was released at once (the client did not know it, or
    /// an Nchf session).
    pub released: bool,
}

/// Ends a session. A Gy session: sends an Abort-Session-Request to the
/// client holding it and waits for the answer; the client's
/// CCR-Terminate closes the session and releases its reservation. An
/// Nchf session (its SMF has no Abort-Session-Request to receive):
/// released at once, its reservations back on the account and a
/// session-end CDR written; the SMF's next update or release of it is
/// answered 404 with cause `CONTEXT_NOT_FOUND`, as for any charging data
/// reference gyro no longer holds.
#[utoipa::path(delete, path = "/v1/sessions/{session_id}", tag = "sessions",
    params(("session_id" = String, Path, description = "Diameter Session-Id, or an Nchf session's ChargingDataRef session")),
    responses(
        (status = 200, description = "ASR sent and answered, or an Nchf session released", body = AbortView),
        (status = 404, description = "No such open session", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The peer holding the session is not connected, or did not answer", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn abort(
    State(state): State<AppState>,
    Path(session_id): Path<String>,
) -> Result<Json<AbortView>, Problem> {
    let backend = state.backend()?;
    let outbound = backend.control.outbound().clone();
    for shard in 0..backend.control.shards() {
        let sid = session_id.clone();
        let ob = outbound.clone();
        let found = backend
            .run(shard, move |s, now| match s.session_interface(&sid)? {
                Interface::Nchf => Some(Held::Nchf(s.release_session(&sid, now))),
                Interface::Gy => {
                    let target = Target {
                        session_id: sid,
                        kind: Kind::Abort,
                    };
                    Some(Held::Gy(prepare(s, &ob, vec![target]).pop()))
                }
            })
            .await?;
        let prepared = match found {
            None => continue,
            Some(Held::Gy(prepared)) => prepared,
            Some(Held::Nchf(released)) => {
                let released = released?;
                info!(
                    session = session_id,
                    released, "Nchf session released by the operator"
                );
                return Ok(Json(AbortView {
                    session_id,
                    asr_sent: false,
                    peer: String::new(),
                    result_code: None,
                    released,
                }));
            }
        };
        let Some(p) = prepared else {
            return Err(bad_gateway(
                "no connection carries this session (its peer is gone); \
                 supervision closes it when its time runs out",
            ));
        };
        let peer = p.peer.clone();
        let d = deliver(backend, shard, p).await;
        if let Some(e) = d.error {
            return Err(bad_gateway(format!("ASR to {peer}: {e}")));
        }
        return Ok(Json(AbortView {
            session_id,
            asr_sent: true,
            peer,
            result_code: d.result_code,
            released: d.released,
        }));
    }
    Err(Problem::not_found(format!("no open session {session_id}")))
}

/// How the shard holding a session to end found it.
enum Held {
    /// A Gy session: the request to its client, if a connection carries it.
    Gy(Option<Prepared>),
    /// An Nchf session, released there and then (false: it was no longer
    /// open).
    Nchf(Result<bool, gyro_ocs::operations::OpError>),
}

fn bad_gateway(detail: impl Into<String>) -> Problem {
    Problem::new(
        axum::http::StatusCode::BAD_GATEWAY,
        "peer-unreachable",
        "Peer unreachable",
        detail,
    )
}

/// The requests a top-up calls for: RAR to the account's sessions waiting
/// for credit (not for a repeated top-up, which changed nothing).
pub(crate) fn after_top_up(outcome: &Outcome) -> Option<Trigger> {
    match outcome {
        Outcome::Account {
            state,
            repeated: false,
        } => Some(Trigger::TopUp(state.account.id)),
        _ => None,
    }
}

/// The requests a change of an account calls for: RAR to its sessions, or
/// ASR when it is now blocked.
pub(crate) fn after_change(outcome: &Outcome) -> Option<Trigger> {
    match outcome {
        Outcome::Account { state, .. } => {
            Some(Trigger::Changed(state.account.id, state.account.status))
        }
        _ => None,
    }
}
