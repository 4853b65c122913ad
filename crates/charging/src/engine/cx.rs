//! The per-request context every step works through, and the steps every
//! flow shares: committing an effect, drawing on bundles, writing a CDR.

use super::*;
use crate::session::RatingContext;

/// Everything one request needs, borrowed apart so the catalog can be read
/// while the ledger changes.
pub(crate) struct Cx<'a> {
    pub(crate) catalog: &'a Catalog,
    pub(super) rating: &'a mut RatingMemo,
    /// The request being answered (none for supervision and operator
    /// actions): where its called party and visited network are read.
    pub(crate) request: Option<&'a CcRequest>,
    /// What rating found out about this request so far.
    pub(super) rated: Rated,
    pub(crate) directory: &'a SubscriberDirectory,
    pub(crate) ledger: &'a mut Ledger,
    pub(super) timers: &'a mut BinaryHeap<Reverse<(Timestamp, SessionKey)>>,
    pub(crate) options: &'a EngineOptions,
    pub(super) next_cdr: &'a mut u64,
    pub(super) scratch: &'a mut SubscriptionId,
    pub(super) contexts: &'a mut ContextNames,
    pub(crate) answer: &'a mut CcAnswer,
    pub(crate) out: &'a mut Output,
    pub(crate) now: Timestamp,
}

/// Who is charged, for CDRs.
#[derive(Clone, Copy)]
pub(crate) struct Charged<'r> {
    pub(crate) session: Option<SessionKey>,
    pub(crate) account: AccountId,
    pub(crate) session_id: &'r str,
    pub(crate) subscriber: &'r SubscriptionId,
    pub(crate) service_context: &'r str,
    pub(crate) request_number: u32,
    pub(crate) interface: Interface,
}

/// What rating found out about the request being answered, found once:
/// the plan of the account it charges and where the request is.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Rated {
    /// The account, and the index of its plan (none: it has no plan the
    /// catalog knows).
    plan: Option<(AccountId, Option<u16>)>,
    /// The destination and zone new grants are rated at.
    location: Option<Location>,
    /// The destination and zone the usage the request reports is rated
    /// at, when it differs from `location`.
    usage_location: Option<Location>,
    /// The rating context of the session the request belongs to: the one
    /// its reported usage was granted under, and the one new grants are
    /// rated under; none: the request's own (events).
    session: Option<(RatingContext, RatingContext)>,
    /// Where the remembered ratings of the request's context are.
    context: Option<ContextHint>,
}

/// Result of rating one unit request.
pub(crate) struct UnitResult {
    pub(crate) answer: MsccAnswer,
    pub(crate) failed: Option<FailedAvp>,
}

pub(super) fn failed_for(key: RatingKey, err: RatingError) -> FailedAvp {
    match (err, key.service_id, key.rating_group) {
        (RatingError::UnknownContext, _, _) => FailedAvp::ServiceContextId,
        (_, Some(s), _) => FailedAvp::ServiceIdentifier(s),
        (_, None, Some(rg)) => FailedAvp::RatingGroup(rg),
        (_, None, None) => FailedAvp::ServiceContextId,
    }
}

impl Cx<'_> {
    /// The index of the plan of `account` in the catalog.
    pub(crate) fn plan_of(&mut self, account: AccountId) -> Option<u16> {
        if let Some((a, p)) = self.rated.plan {
            if a == account {
                return p;
            }
        }
        let p = self
            .ledger
            .accounts
            .get(&account)
            .and_then(|a| self.catalog.plan_index(a.plan.as_deref()));
        self.rated.plan = Some((account, p));
        p
    }

    /// Rates the request by its session's context ([`RatingContext`]):
    /// `used` for the usage it reports, `now` for new grants.
    pub(super) fn rate_by_session(&mut self, used: RatingContext, now: RatingContext) {
        self.rated.session = Some((used, now));
        self.rated.location = None;
        self.rated.usage_location = None;
    }

    /// Whether the usage the request reports is rated elsewhere than its
    /// new grants (the session's context changed with it).
    pub(super) fn context_moved(&self) -> bool {
        self.rated.session.is_some_and(|(used, now)| used != now)
    }

    /// Where the request is: the destination of its called party and the
    /// zone of its visited network, from its session's context when it
    /// belongs to one (`usage`: the context its reported usage was
    /// granted under), else from what it carries.
    pub(crate) fn location(&mut self, usage: bool) -> Location {
        let moved = self.context_moved();
        let slot = if usage && moved {
            self.rated.usage_location
        } else {
            self.rated.location
        };
        if let Some(l) = slot {
            return l;
        }
        let l = match (self.rated.session, self.request) {
            (Some((used, now)), _) => self
                .catalog
                .locate_context(if usage { &used } else { &now }),
            (None, Some(r)) => self.catalog.locate(&r.called_party, &r.visited_plmn),
            (None, None) => Location::default(),
        };
        if usage && moved {
            self.rated.usage_location = Some(l);
        } else {
            self.rated.location = Some(l);
        }
        l
    }

    /// Rates `key` of the service `who` uses at instant `at`: the plan's
    /// index and the rate chosen (with the next price change). `usage`:
    /// for usage reported (rated where it was granted, see
    /// [`Cx::location`]), else for a new grant.
    pub(crate) fn rate(
        &mut self,
        who: &Charged<'_>,
        key: RatingKey,
        at: Timestamp,
        usage: bool,
    ) -> Result<(u16, Choice), RatingError> {
        let plan = self
            .plan_of(who.account)
            .ok_or(RatingError::UnknownContext)?;
        let catalog = self.catalog;
        let p = catalog.plan(plan).ok_or(RatingError::UnknownContext)?;
        let loc = if p.uses_location() {
            self.location(usage)
        } else {
            Location::default()
        };
        self.rating
            .rate(
                catalog,
                plan,
                who.service_context,
                key,
                loc,
                at,
                &mut self.rated.context,
            )
            .map(|c| (plan, c))
    }

    /// Names the plan, rate, destination and zone on the last CDR (a
    /// usage CDR: the destination and zone its usage was rated at).
    pub(crate) fn label_cdr(&mut self, plan: u16, rate: u16) {
        let catalog = self.catalog;
        let loc = if self.context_moved() {
            self.rated.usage_location
        } else {
            self.rated.location
        }
        .unwrap_or_default();
        let Some(c) = self.out.cdrs.last_mut() else {
            return;
        };
        if let Some(p) = catalog.plan(plan) {
            c.plan.push_str(&p.name);
            if let Some(t) = p.rate(rate) {
                c.rate.push_str(&t.name);
            }
        }
        if let Some(d) = loc.destination.and_then(|d| catalog.destination_name(d)) {
            c.destination.push_str(d);
        }
        if let Some(z) = loc.zone.and_then(|z| catalog.zone_name(z)) {
            c.zone.push_str(z);
        }
    }

    /// Applies an effect and records it.
    /// Takes up to `want` units from the account's bundles that apply to
    /// `key` and `unit` now, in bundle order, committing `effect(bundle,
    /// units)` for each one drawn on. Returns the units taken.
    pub(crate) fn take_from_bundles(
        &mut self,
        account: AccountId,
        key: RatingKey,
        unit: crate::UnitKind,
        want: u64,
        mut effect: impl FnMut(u32, u64) -> Effect,
    ) -> u64 {
        let mut left = want;
        let n = self
            .ledger
            .accounts
            .get(&account)
            .map_or(0, |a| a.bundles.len());
        for i in 0..n {
            if left == 0 {
                break;
            }
            let Some(b) = self
                .ledger
                .accounts
                .get(&account)
                .and_then(|a| a.bundles.get(i))
            else {
                break;
            };
            if b.remaining == 0 || !b.applies(key, unit, self.now) {
                continue;
            }
            let take = b.remaining.min(left);
            let bundle = b.id;
            self.commit(effect(bundle, take));
            left -= take;
        }
        want - left
    }

    pub(crate) fn commit(&mut self, e: Effect) {
        match self.ledger.apply(&e) {
            Ok(()) => {
                if let Effect::SessionOpened {
                    session,
                    supervision_until,
                    ..
                } = &e
                {
                    self.timers.push(Reverse((*supervision_until, *session)));
                }
                self.out.effects.push(e);
            }
            Err(err) => {
                debug_assert!(false, "engine produced an effect it cannot apply: {err}");
            }
        }
    }

    pub(super) fn fail(&mut self, code: u32, failed: Option<FailedAvp>) {
        self.answer.result_code = code;
        self.answer.failed_avp = failed;
    }

    /// A fresh CDR slot with the common fields filled.
    pub(crate) fn cdr(&mut self, who: &Charged<'_>, record_type: RecordType) -> &mut Cdr {
        let seq = *self.next_cdr;
        *self.next_cdr += 1;
        let balance = self
            .ledger
            .accounts
            .get(&who.account)
            .map_or(0, |a| a.balance.saturating_add(a.reserved));
        let c = self.out.cdrs.next_slot();
        c.sequence = seq;
        c.node_id.clone_from(&self.options.node_id);
        c.record_type = record_type;
        c.session_id.clear();
        c.session_id.push_str(who.session_id);
        c.account = who.account;
        // `kind:data`, as `SubscriptionId`'s Display writes it.
        c.subscriber.clear();
        c.subscriber.push_str(who.subscriber.kind.name());
        c.subscriber.push(':');
        c.subscriber.push_str(&who.subscriber.data);
        c.service_context.clear();
        c.service_context.push_str(who.service_context);
        c.interface = who.interface;
        c.rating_group = None;
        c.service_id = None;
        c.request_number = who.request_number;
        c.requested_action = None;
        c.unit = None;
        c.time = 0;
        c.input_octets = 0;
        c.output_octets = 0;
        c.total_octets = 0;
        c.service_units = 0;
        c.rated_units = 0;
        c.bundle_units = 0;
        c.amount = 0;
        c.unbilled = 0;
        c.balance_after = balance;
        c.started = self.now;
        c.ended = self.now;
        c.result_code = rc::SUCCESS;
        c.closing_cause = None;
        c.termination_cause = None;
        c.reporting_reason = None;
        c.plan.clear();
        c.rate.clear();
        c.destination.clear();
        c.zone.clear();
        c.tariff_change = None;
        c
    }

    pub(super) fn supervision_deadline(&self) -> Timestamp {
        self.now.plus_secs(self.options.supervision_secs)
    }
}

/// Copies usage counters into a CDR.
pub(crate) fn fill_usage(c: &mut Cdr, u: &ServiceUnits) {
    c.time = u.time.map_or(0, u64::from);
    c.input_octets = u.input_octets.unwrap_or(0);
    c.output_octets = u.output_octets.unwrap_or(0);
    c.total_octets = u
        .total_octets
        .unwrap_or_else(|| c.input_octets.saturating_add(c.output_octets));
    c.service_units = u.service_specific.unwrap_or(0);
}
