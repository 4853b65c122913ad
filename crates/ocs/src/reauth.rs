//! Messages a credit-control server starts (RFC 8506 sections 5.5 and
//! 3.4, RFC 6733 sections 8.3 and 8.5): when a shard asks for a
//! Re-Auth-Request or an Abort-Session-Request, what they contain, and
//! what their answers mean. The runtime only delivers them (to the peer
//! that holds the session) and hands back the answer.
//!
//! * A session is *waiting for credit* once an answer gave it a
//!   Final-Unit-Indication or DIAMETER_CREDIT_LIMIT_REACHED (4012, for the
//!   command or one of its services) and it stayed open; it stops waiting
//!   at the next answer that grants without either, or when it closes.
//!   A top-up re-authorizes the account's waiting sessions.
//! * A change of the account through the operator API (PATCH) re-authorizes
//!   every open session of the account; blocking it aborts them (ASR).
//! * An RAA with DIAMETER_UNKNOWN_SESSION_ID (5002): the client forgot the
//!   session, so the shard releases it ([`CreditShard::release_session`]).
//!   Otherwise the client's next CCR-Update (after an RAR) or CCR-Terminate
//!   (after an ASR) does the rest; a session the client never comes back
//!   for is closed by supervision as always.

use bytes::{Bytes, BytesMut};
use gyro_charging::{AccountId, AccountStatus, CcAnswer, CcRequest, RequestType, Timestamp};
use gyro_diameter::codes::{app, avp, cmd, result};
use gyro_diameter::{Encoder, Message};
use rustc_hash::FxHashMap;

use crate::gy::LocalIdentity;
use crate::operations::OpError;
use crate::shard::CreditShard;

/// Re-Auth-Request-Type AUTHORIZE_ONLY (RFC 6733 section 8.12).
const AUTHORIZE_ONLY: i32 = 0;

/// Which request the server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Re-Auth-Request: the client asks for credit again (CCR-Update).
    ReAuth,
    /// Abort-Session-Request: the client ends the session (CCR-Terminate).
    Abort,
}

impl Kind {
    /// The request's name, for logs and answers.
    pub fn name(self) -> &'static str {
        match self {
            Kind::ReAuth => "RAR",
            Kind::Abort => "ASR",
        }
    }
}

/// A session the server sends a request to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Its Session-Id.
    pub session_id: String,
    /// What to send.
    pub kind: Kind,
}

/// Why a shard is asked for targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The account was topped up: its sessions waiting for credit.
    TopUp(AccountId),
    /// The account was changed (status, credit limit) to this status.
    Changed(AccountId, AccountStatus),
}

/// The sessions of a shard that wait for credit, with their accounts.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    sessions: FxHashMap<Box<str>, AccountId>,
}

impl Waiting {
    /// Notes what `answer` to `request` means for its session, which is
    /// open for `account` after it (`None`: closed).
    pub(crate) fn note(
        &mut self,
        request: &CcRequest,
        answer: &CcAnswer,
        account: Option<AccountId>,
    ) {
        if request.request_type == RequestType::Event {
            return;
        }
        let starved = answer.result_code == result::CREDIT_LIMIT_REACHED
            || answer.final_unit.is_some()
            || answer
                .mscc
                .iter()
                .any(|m| m.final_unit.is_some() || m.result_code == result::CREDIT_LIMIT_REACHED);
        match account {
            Some(account) if starved => {
                if !self.sessions.contains_key(request.session_id.as_str()) {
                    self.sessions
                        .insert(request.session_id.as_str().into(), account);
                }
            }
            _ => {
                if !self.sessions.is_empty() {
                    self.sessions.remove(request.session_id.as_str());
                }
            }
        }
    }

    /// The session closed: it waits no more.
    pub(crate) fn forget(&mut self, session_id: &str) {
        self.sessions.remove(session_id);
    }

    /// How many sessions wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sessions.len()
    }
}

impl CreditShard {
    /// The requests `trigger` calls for, one per session (see the module
    /// documentation). Sessions that closed meanwhile are forgotten.
    pub fn server_requests(&mut self, trigger: Trigger) -> Vec<Target> {
        let (engine, waiting) = match self.engine_and_waiting() {
            Some(x) => x,
            None => return Vec::new(),
        };
        waiting
            .sessions
            .retain(|sid, _| engine.session_account(sid).is_some());
        match trigger {
            Trigger::TopUp(account) => waiting
                .sessions
                .iter()
                .filter(|(_, a)| **a == account)
                .map(|(sid, _)| Target {
                    session_id: sid.to_string(),
                    kind: Kind::ReAuth,
                })
                .collect(),
            Trigger::Changed(account, status) => {
                let kind = match status {
                    AccountStatus::Blocked => Kind::Abort,
                    AccountStatus::Active => Kind::ReAuth,
                };
                let mut targets: Vec<Target> = engine
                    .account_sessions(account)
                    .map(|s| Target {
                        session_id: s.session_id.to_string(),
                        kind,
                    })
                    .collect();
                targets.sort_by(|a, b| a.session_id.cmp(&b.session_id));
                targets
            }
        }
    }

    /// Encodes the request for `target` to the peer `peer_host` /
    /// `peer_realm` that holds the session (see [`encode_request`]).
    pub fn encode_server_request(
        &self,
        target: &Target,
        peer_host: &str,
        peer_realm: &str,
        end_to_end: u32,
    ) -> Bytes {
        encode_request(
            target.kind,
            &target.session_id,
            self.identity(),
            peer_host,
            peer_realm,
            end_to_end,
        )
    }

    /// Whether this shard holds the open session `session_id` (for an
    /// operator's abort).
    pub fn holds_session(&self, session_id: &str) -> bool {
        self.engine()
            .is_some_and(|e| e.session_account(session_id).is_some())
    }

    /// The interface the open session `session_id` was opened over, if
    /// this shard holds it.
    pub fn session_interface(&self, session_id: &str) -> Option<gyro_charging::Interface> {
        self.engine()?.session_interface(session_id)
    }

    /// Releases a session its client forgot (an RAA with 5002): its
    /// reservations go back to the account, a session-end CDR is written.
    /// The change joins the shard's batch like a CCR's. Returns false when
    /// the session is not open (any more).
    pub fn release_session(&mut self, session_id: &str, now_ms: u64) -> Result<bool, OpError> {
        let unavailable =
            || OpError::Unavailable("this shard cannot make changes durable now".into());
        let (engine, output) = self.engine_and_output().ok_or_else(unavailable)?;
        output.clear();
        if !engine.release_session(session_id, Timestamp(now_ms), output) {
            return Ok(false);
        }
        self.forget_waiting(session_id);
        if !self.record_output() {
            return Err(unavailable());
        }
        Ok(true)
    }
}

/// Encodes the request of `kind` for `session_id`, from `local` to the
/// peer `peer_host`/`peer_realm` (the client that holds the session), with
/// End-to-End Identifier `end_to_end` (the runtime sets the Hop-by-Hop).
pub fn encode_request(
    kind: Kind,
    session_id: &str,
    local: &LocalIdentity,
    peer_host: &str,
    peer_realm: &str,
    end_to_end: u32,
) -> Bytes {
    let mut out = BytesMut::with_capacity(256);
    let code = match kind {
        Kind::ReAuth => cmd::RE_AUTH,
        Kind::Abort => cmd::ABORT_SESSION,
    };
    let mut e = Encoder::request(&mut out, code, app::CREDIT_CONTROL, true, 0, end_to_end);
    e.str(avp::SESSION_ID, session_id)
        .str(avp::ORIGIN_HOST, &local.origin_host)
        .str(avp::ORIGIN_REALM, &local.origin_realm)
        .str(avp::DESTINATION_REALM, peer_realm)
        .str(avp::DESTINATION_HOST, peer_host)
        .u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL);
    if kind == Kind::ReAuth {
        e.i32(avp::RE_AUTH_REQUEST_TYPE, AUTHORIZE_ONLY);
    }
    // A few fixed AVPs: cannot exceed a message's size.
    let _ = e.finish();
    out.freeze()
}

/// What an answer (RAA or ASA) asks of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterAnswer {
    /// Success: the client comes back with a CCR (Update after an RAR,
    /// Terminate after an ASR).
    ClientFollows,
    /// DIAMETER_UNKNOWN_SESSION_ID: the client forgot the session; release
    /// it.
    Release,
    /// Another error: nothing to do (supervision closes a session the
    /// client never comes back for).
    Failed(u32),
}

/// Reads an RAA or ASA: its Result-Code and what it asks.
pub fn after_answer(answer: &[u8]) -> AfterAnswer {
    let code = Message::parse(answer)
        .ok()
        .and_then(|m| m.find(avp::RESULT_CODE)?.u32().ok())
        .unwrap_or(0);
    match code {
        result::SUCCESS | result::LIMITED_SUCCESS => AfterAnswer::ClientFollows,
        result::UNKNOWN_SESSION_ID => AfterAnswer::Release,
        c => AfterAnswer::Failed(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyro_charging::{FinalUnitIndication, MsccAnswer};

    fn identity() -> LocalIdentity {
        LocalIdentity {
            origin_host: "ocs.example.net".into(),
            origin_realm: "example.net".into(),
        }
    }

    #[test]
    fn a_re_auth_request_is_authorize_only_for_credit_control() {
        let b = encode_request(
            Kind::ReAuth,
            "pgw;1;2",
            &identity(),
            "pgw.example.net",
            "example.net",
            9,
        );
        let m = Message::parse(&b).unwrap();
        assert!(m.is_request());
        assert_eq!(m.command_code(), cmd::RE_AUTH);
        assert_eq!(m.header().application_id, app::CREDIT_CONTROL);
        assert_eq!(m.header().end_to_end, 9);
        assert_eq!(m.find(avp::SESSION_ID).unwrap().utf8().unwrap(), "pgw;1;2");
        assert_eq!(
            m.find(avp::DESTINATION_HOST).unwrap().utf8().unwrap(),
            "pgw.example.net"
        );
        assert_eq!(m.find(avp::AUTH_APPLICATION_ID).unwrap().u32().unwrap(), 4);
        assert_eq!(m.find(avp::RE_AUTH_REQUEST_TYPE).unwrap().u32().unwrap(), 0);
        let v = gyro_diameter::validate::validate_request(
            gyro_diameter::dict::Dictionary::builtin(),
            &b,
            &gyro_diameter::validate::Options::strict(),
        );
        assert!(v.is_ok(), "{v:?}");
    }

    #[test]
    fn an_abort_session_request_validates_and_has_no_re_auth_type() {
        let b = encode_request(Kind::Abort, "pgw;1;2", &identity(), "h", "r", 1);
        let m = Message::parse(&b).unwrap();
        assert_eq!(m.command_code(), cmd::ABORT_SESSION);
        assert!(m.find(avp::RE_AUTH_REQUEST_TYPE).is_none());
        let v = gyro_diameter::validate::validate_request(
            gyro_diameter::dict::Dictionary::builtin(),
            &b,
            &gyro_diameter::validate::Options::strict(),
        );
        assert!(v.is_ok(), "{v:?}");
    }

    #[test]
    fn unknown_session_asks_for_release() {
        let req = encode_request(Kind::ReAuth, "s", &identity(), "h", "r", 1);
        let msg = Message::parse(&req).unwrap();
        for (code, want) in [
            (result::SUCCESS, AfterAnswer::ClientFollows),
            (result::UNKNOWN_SESSION_ID, AfterAnswer::Release),
            (result::UNABLE_TO_COMPLY, AfterAnswer::Failed(5012)),
        ] {
            let mut out = BytesMut::new();
            let mut e = Encoder::answer(&mut out, &msg, false);
            e.u32(avp::RESULT_CODE, code);
            e.finish().unwrap();
            assert_eq!(after_answer(&out), want);
        }
    }

    #[test]
    fn a_session_waits_after_final_units_and_stops_after_a_plain_grant() {
        let mut w = Waiting::default();
        let req = CcRequest {
            session_id: "s1".into(),
            request_type: RequestType::Update,
            ..CcRequest::default()
        };
        let fui = CcAnswer {
            result_code: result::SUCCESS,
            mscc: vec![MsccAnswer {
                result_code: result::SUCCESS,
                final_unit: Some(FinalUnitIndication::default()),
                ..MsccAnswer::default()
            }],
            ..CcAnswer::default()
        };
        w.note(&req, &fui, Some(AccountId(1)));
        assert_eq!(w.len(), 1);
        let denied = CcAnswer {
            result_code: result::SUCCESS,
            mscc: vec![MsccAnswer {
                result_code: result::CREDIT_LIMIT_REACHED,
                ..MsccAnswer::default()
            }],
            ..CcAnswer::default()
        };
        w.note(&req, &denied, Some(AccountId(1)));
        assert_eq!(w.len(), 1);
        let plain = CcAnswer {
            result_code: result::SUCCESS,
            ..CcAnswer::default()
        };
        w.note(&req, &plain, Some(AccountId(1)));
        assert_eq!(w.len(), 0);
        // Closed sessions never wait.
        w.note(&req, &fui, None);
        assert_eq!(w.len(), 0);
    }
}
