//! The credit-control session flow (RFC 8506 section 7): CCR-Initial,
//! CCR-Update and CCR-Terminate, and closing a session.

use super::*;
use crate::session::RatingContext;

impl Cx<'_> {
    pub(super) fn initial(&mut self, req: &CcRequest) {
        if req.requested_action.is_some() && !self.options.lenient {
            return self.fail(rc::AVP_NOT_ALLOWED, Some(FailedAvp::RequestedAction));
        }
        if self.ledger.session_key(&req.session_id).is_some() {
            return self.fail(rc::UNABLE_TO_COMPLY, None);
        }
        let Some((sub_idx, account, held)) = self.directory.resolve_key(&req.subscription_ids)
        else {
            return self.fail(rc::USER_UNKNOWN, Some(FailedAvp::SubscriptionId));
        };
        let Some(acc) = self.ledger.accounts.get(&account) else {
            return self.fail(rc::USER_UNKNOWN, Some(FailedAvp::SubscriptionId));
        };
        if acc.status == AccountStatus::Blocked {
            return self.fail(rc::END_USER_SERVICE_DENIED, None);
        }
        if !self.catalog.knows_context(&req.service_context) {
            return self.fail(rc::RATING_FAILED, Some(FailedAvp::ServiceContextId));
        }
        let msi = req.multiple_services == Some(true);
        if !req.mscc.is_empty() && !msi && !self.options.lenient {
            return self.fail(
                rc::AVP_NOT_ALLOWED,
                Some(FailedAvp::MultipleServicesCreditControl),
            );
        }
        let use_mscc = msi || !req.mscc.is_empty();
        let key = SessionKey(self.ledger.next_session_key);
        let subscriber = &req.subscription_ids[sub_idx];
        // The one copy a CCR-Initial makes: the Session-Id, shared by the
        // effect, the session and the Session-Id index. The subscriber is
        // the directory's copy, the context the one held for all sessions.
        let service_context = self.contexts.get(&req.service_context);
        self.commit(Effect::SessionOpened {
            session: key,
            session_id: Arc::from(req.session_id.as_str()),
            account,
            subscriber: SharedSubscriptionId::sharing(subscriber, held),
            service_context,
            multiple_services: use_mscc,
            at: self.now,
            supervision_until: self.supervision_deadline(),
            interface: req.interface,
        });
        // What the session is rated by from now on: its called party and
        // visited network, remembered for the requests that leave them out.
        let context = RatingContext::carried(&req.called_party, &req.visited_plmn);
        if !context.is_empty() {
            self.commit(Effect::SessionContextChanged {
                session: key,
                context,
            });
        }
        self.rate_by_session(context, context);
        let who = Charged {
            session: Some(key),
            account,
            session_id: &req.session_id,
            subscriber,
            service_context: &req.service_context,
            request_number: req.request_number,
            interface: req.interface,
        };
        if use_mscc {
            self.msccs(req, &who, true);
            let first_ok = self.answer.mscc.is_empty()
                || self
                    .answer
                    .mscc
                    .iter()
                    .any(|m| m.result_code == rc::SUCCESS);
            if !first_ok {
                self.answer.result_code = self.answer.mscc[0].result_code;
            }
        } else {
            // Single-service CCR-Initial: quota is implied even without RSU.
            let requested = Some(req.requested.unwrap_or_default());
            let k = RatingKey {
                rating_group: None,
                service_id: req.service_id,
            };
            let u = self.unit(&who, k, req.used.as_ref(), requested.as_ref(), None);
            self.single(u);
        }
        if self.answer.result_code != rc::SUCCESS {
            // Idle + INITIAL not processed OK -> Idle: nothing stays open.
            self.release_all(key, account);
            self.commit(Effect::SessionClosed { session: key });
        }
    }

    /// Puts a single-service unit result at command level.
    pub(super) fn single(&mut self, u: UnitResult) {
        self.answer.result_code = u.answer.result_code;
        self.answer.granted = u.answer.granted;
        self.answer.validity_time = u.answer.validity_time;
        self.answer.final_unit = u.answer.final_unit;
        if u.answer.result_code == rc::RATING_FAILED {
            self.answer.failed_avp = u.failed;
        }
    }

    pub(super) fn msccs(&mut self, req: &CcRequest, who: &Charged<'_>, grant: bool) {
        let mut failed = None;
        for m in &req.mscc {
            let requested = if grant { m.requested.as_ref() } else { None };
            let u = self.unit(who, m.key(), m.used.as_ref(), requested, m.reporting_reason);
            if failed.is_none() && u.answer.result_code == rc::RATING_FAILED {
                failed = u.failed;
            }
            self.answer.mscc.push(u.answer);
        }
        if self.answer.failed_avp.is_none() {
            self.answer.failed_avp = failed;
        }
    }

    /// Finds the open session of an Update/Terminate; expires it first if
    /// its supervision time has passed.
    pub(super) fn open_session(&mut self, req: &CcRequest) -> Option<SessionKey> {
        let key = self.ledger.session_key(&req.session_id)?;
        let s = self.ledger.sessions.get(&key)?;
        if s.supervision_until <= self.now {
            self.close_session(key, ClosingCause::SupervisionExpired, rc::SUCCESS, None, 0);
            return None;
        }
        Some(key)
    }

    pub(super) fn update(&mut self, req: &CcRequest) {
        let Some(key) = self.open_session(req) else {
            return self.fail(rc::UNKNOWN_SESSION_ID, None);
        };
        if req.requested_action.is_some() && !self.options.lenient {
            return self.fail(rc::AVP_NOT_ALLOWED, Some(FailedAvp::RequestedAction));
        }
        let Some(s) = self.ledger.sessions.get(&key) else {
            return self.fail(rc::UNKNOWN_SESSION_ID, None);
        };
        if !req.mscc.is_empty() && !s.multiple_services && !self.options.lenient {
            return self.fail(
                rc::AVP_NOT_ALLOWED,
                Some(FailedAvp::MultipleServicesCreditControl),
            );
        }
        let account = s.account;
        let context = s.context;
        let interface = s.interface;
        // The subscriber is copied into a reused buffer so the session can
        // change while it is in use.
        let mut subscriber = std::mem::take(self.scratch);
        subscriber.kind = s.subscriber.kind;
        subscriber.data.clear();
        subscriber.data.push_str(&s.subscriber.data);
        let blocked = self
            .ledger
            .accounts
            .get(&account)
            .is_none_or(|a| a.status == AccountStatus::Blocked);
        self.commit(Effect::SessionTouched {
            session: key,
            request_number: req.request_number,
            at: self.now,
            supervision_until: self.supervision_deadline(),
        });
        let (used, now) = self.move_context(key, context, req, true);
        self.rate_by_session(used, now);
        let who = Charged {
            session: Some(key),
            account,
            session_id: &req.session_id,
            subscriber: &subscriber,
            service_context: &req.service_context,
            request_number: req.request_number,
            interface,
        };
        if !req.mscc.is_empty() {
            self.msccs(req, &who, !blocked);
        } else {
            let k = RatingKey {
                rating_group: None,
                service_id: req.service_id,
            };
            let requested = if blocked {
                None
            } else {
                req.requested.as_ref()
            };
            let u = self.unit(&who, k, req.used.as_ref(), requested, None);
            self.single(u);
        }
        if blocked {
            // Denied: the session ends, no redirection stays in force.
            self.answer.result_code = rc::END_USER_SERVICE_DENIED;
            self.answer.validity_time = None;
            for m in &mut self.answer.mscc {
                m.validity_time = None;
            }
        }
        *self.scratch = subscriber;
        if self.answer.result_code != rc::SUCCESS {
            // Open + UPDATE not processed OK -> Idle (usage was debited).
            let code = self.answer.result_code;
            self.close_session(key, ClosingCause::Rejected, code, None, req.request_number);
        }
    }

    pub(super) fn terminate(&mut self, req: &CcRequest) {
        let Some(key) = self.open_session(req) else {
            return self.fail(rc::UNKNOWN_SESSION_ID, None);
        };
        let Some(s) = self.ledger.sessions.get(&key) else {
            return self.fail(rc::UNKNOWN_SESSION_ID, None);
        };
        let account = s.account;
        let context = s.context;
        let interface = s.interface;
        let mut subscriber = std::mem::take(self.scratch);
        subscriber.kind = s.subscriber.kind;
        subscriber.data.clear();
        subscriber.data.push_str(&s.subscriber.data);
        // The session ends: nothing is granted, so the context is not
        // moved; the usage is rated where it was granted.
        let (used, _) = self.move_context(key, context, req, false);
        self.rate_by_session(used, used);
        let who = Charged {
            session: Some(key),
            account,
            session_id: &req.session_id,
            subscriber: &subscriber,
            service_context: &req.service_context,
            request_number: req.request_number,
            interface,
        };
        for m in &req.mscc {
            if m.used.is_some() {
                self.unit(&who, m.key(), m.used.as_ref(), None, m.reporting_reason);
            }
        }
        if req.used.is_some() {
            let k = RatingKey {
                rating_group: None,
                service_id: req.service_id,
            };
            self.unit(&who, k, req.used.as_ref(), None, None);
        }
        *self.scratch = subscriber;
        self.close_session(
            key,
            ClosingCause::Terminated,
            rc::SUCCESS,
            req.termination_cause,
            req.request_number,
        );
    }

    /// The rating contexts of a CCR-Update or CCR-Terminate of the
    /// session `key`, whose context is `context`: the one the usage it
    /// reports was granted under, and the one its new grants are rated
    /// under. A called party or visited network the request carries
    /// replaces the session's for new grants (committed when `keep`); the
    /// usage it reports was granted before the change and is rated at the
    /// session's context: 3GPP TS 32.299 has the client report the usage
    /// up to a change of rating condition (a location change, a new
    /// SGSN/serving node) with Reporting-Reason RATING_CONDITION_CHANGE
    /// (clause 7.2.175) and ask for quota under the new condition. What
    /// the session never knew (it came later than the CCR-Initial) is
    /// taken from the request for both.
    fn move_context(
        &mut self,
        key: SessionKey,
        context: RatingContext,
        req: &CcRequest,
        keep: bool,
    ) -> (RatingContext, RatingContext) {
        let carried = RatingContext::carried(&req.called_party, &req.visited_plmn);
        if carried.is_empty() {
            return (context, context);
        }
        let now = context.updated(carried);
        if keep && now != context {
            self.commit(Effect::SessionContextChanged {
                session: key,
                context: now,
            });
        }
        (carried.updated(context), now)
    }

    pub(super) fn release_all(&mut self, key: SessionKey, account: AccountId) {
        while let Some(k) = self
            .ledger
            .sessions
            .get(&key)
            .and_then(|s| s.reservations.last())
            .map(|r| r.key)
        {
            self.commit(Effect::Released {
                account,
                session: key,
                key: k,
            });
        }
    }

    /// Releases everything a session holds, writes its session-end CDR and
    /// closes it.
    pub(crate) fn close_session(
        &mut self,
        key: SessionKey,
        cause: ClosingCause,
        result_code: u32,
        termination_cause: Option<u32>,
        request_number: u32,
    ) {
        let Some(s) = self.ledger.sessions.get(&key) else {
            return;
        };
        let account = s.account;
        let opened = s.opened_at;
        let interface = s.interface;
        let number = if cause == ClosingCause::SupervisionExpired {
            s.last_request_number
        } else {
            request_number
        };
        // The session's identifiers are held on to for its last CDR (the
        // subscriber copied into a reused buffer) while it is released.
        let session_id = Arc::clone(&s.session_id);
        let ctx = Arc::clone(&s.service_context);
        let mut subscriber = std::mem::take(self.scratch);
        subscriber.kind = s.subscriber.kind;
        subscriber.data.clear();
        subscriber.data.push_str(&s.subscriber.data);
        self.release_all(key, account);
        let who = Charged {
            session: Some(key),
            account,
            session_id: &session_id,
            subscriber: &subscriber,
            service_context: &ctx,
            request_number: number,
            interface,
        };
        let c = self.cdr(&who, RecordType::SessionEnd);
        c.started = opened;
        c.result_code = result_code;
        c.closing_cause = Some(cause);
        c.termination_cause = termination_cause;
        *self.scratch = subscriber;
        self.commit(Effect::SessionClosed { session: key });
    }
}
