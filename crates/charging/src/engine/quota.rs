//! Rating one service: rate and debit reported usage, release what is
//! left, reserve new quota.

use super::cx::failed_for;
use super::*;

impl Cx<'_> {
    /// Rates, debits and (re)reserves one rating key.
    pub(super) fn unit(
        &mut self,
        who: &Charged<'_>,
        key: RatingKey,
        used: Option<&ServiceUnits>,
        requested: Option<&ServiceUnits>,
        reporting_reason: Option<u32>,
    ) -> UnitResult {
        let mut ma = MsccAnswer {
            rating_group: key.rating_group,
            service_id: key.service_id,
            result_code: rc::SUCCESS,
            ..MsccAnswer::default()
        };
        let catalog = self.catalog;
        let tariff = match self.tariffs.find(catalog, who.service_context, key) {
            Ok(i) => catalog.tariff(i),
            Err(e) => {
                ma.result_code = rc::RATING_FAILED;
                if let Some(u) = used {
                    // Usage of an unrateable service: recorded, not charged.
                    let c = self.cdr(who, RecordType::Usage);
                    fill_usage(c, u);
                    c.rating_group = key.rating_group;
                    c.service_id = key.service_id;
                    c.result_code = rc::RATING_FAILED;
                    c.reporting_reason = reporting_reason;
                }
                self.release(who, key);
                return UnitResult {
                    answer: ma,
                    failed: Some(failed_for(key, e)),
                };
            }
        };
        let Some(t) = tariff else {
            ma.result_code = rc::RATING_FAILED;
            return UnitResult {
                answer: ma,
                failed: Some(FailedAvp::ServiceContextId),
            };
        };
        ma.unit = Some(t.unit);
        if let Some(u) = used {
            self.charge_usage(who, key, t, u, reporting_reason);
        }
        if used.is_some() || requested.is_some() {
            self.release(who, key);
        }
        if t.zero_rated == Some(ZeroRated::NotApplicable) {
            ma.result_code = rc::CREDIT_CONTROL_NOT_APPLICABLE;
            return UnitResult {
                answer: ma,
                failed: None,
            };
        }
        if let (Some(rq), Some(session)) = (requested, who.session) {
            let want = rq
                .amount(t.unit)
                .filter(|&n| n > 0)
                .unwrap_or(t.default_quota);
            let (granted, partial) = self.reserve(who.account, session, key, t, want);
            if granted == 0 {
                ma.result_code = rc::CREDIT_LIMIT_REACHED;
            } else {
                ma.granted = Some(ServiceUnits::of(t.unit, granted));
                ma.validity_time = t.validity_time;
                if partial {
                    ma.final_unit = Some(t.final_unit.clone());
                }
            }
        }
        UnitResult {
            answer: ma,
            failed: None,
        }
    }

    pub(super) fn release(&mut self, who: &Charged<'_>, key: RatingKey) {
        let Some(session) = who.session else { return };
        let held = self
            .ledger
            .sessions
            .get(&session)
            .is_some_and(|s| s.reservation(key).is_some());
        if held {
            self.commit(Effect::Released {
                account: who.account,
                session,
                key,
            });
        }
    }

    /// Reserves up to `want` units: bundles first, then money. Returns the
    /// units granted and whether that is less than wanted.
    pub(super) fn reserve(
        &mut self,
        account: AccountId,
        session: SessionKey,
        key: RatingKey,
        t: &Tariff,
        want: u64,
    ) -> (u64, bool) {
        if t.is_free() {
            self.commit(Effect::Reserved {
                account,
                session,
                key,
                unit: t.unit,
                money: 0,
                units: want,
                at: self.now,
            });
            return (want, false);
        }
        let (unit, at) = (t.unit, self.now);
        let from_bundles = self.take_from_bundles(account, key, unit, want, |bundle, take| {
            Effect::BundleReserved {
                account,
                session,
                key,
                unit,
                bundle,
                units: take,
                at,
            }
        });
        let left = want - from_bundles;
        let mut bought = 0;
        if left > 0 {
            let spendable = self
                .ledger
                .accounts
                .get(&account)
                .map_or(0, Account::spendable);
            bought = t.affordable_units(spendable, left);
            if bought > 0 {
                self.commit(Effect::Reserved {
                    account,
                    session,
                    key,
                    unit: t.unit,
                    money: t.cost(bought),
                    units: bought,
                    at: self.now,
                });
            }
        }
        (want - left + bought, bought < left)
    }

    /// Debits reported usage: reserved bundle units, then the money
    /// reservation, then (past the grant) free bundle units and the
    /// balance, never beyond the credit limit. Writes the usage CDR.
    pub(super) fn charge_usage(
        &mut self,
        who: &Charged<'_>,
        key: RatingKey,
        t: &Tariff,
        used: &ServiceUnits,
        reporting_reason: Option<u32>,
    ) {
        let units = used.amount(t.unit).unwrap_or(0);
        let account = who.account;
        let mut left = units;
        let mut bundle_units = 0u64;
        let (mut res_money, mut res_money_units, since) = (0i64, 0u64, None);
        let mut since = since;
        if !t.is_free() {
            if let Some(session) = who.session {
                // 1. Bundle units held by the reservation.
                let holds = self
                    .ledger
                    .sessions
                    .get(&session)
                    .and_then(|s| s.reservation(key))
                    .map_or(0, |r| r.bundles.len());
                for i in 0..holds {
                    if left == 0 {
                        break;
                    }
                    let Some(h) = self
                        .ledger
                        .sessions
                        .get(&session)
                        .and_then(|s| s.reservation(key))
                        .and_then(|r| r.bundles.get(i).copied())
                    else {
                        break;
                    };
                    let take = h.units.min(left);
                    if take > 0 {
                        self.commit(Effect::BundleCharged {
                            account,
                            session: Some(session),
                            key,
                            bundle: h.bundle,
                            from_reserved: take,
                            from_remaining: 0,
                        });
                        left -= take;
                        bundle_units += take;
                    }
                }
            }
        }
        if let Some(r) = who
            .session
            .and_then(|s| self.ledger.sessions.get(&s))
            .and_then(|s| s.reservation(key))
        {
            res_money = r.money;
            res_money_units = r.money_units;
            since = Some(r.since);
        }
        let within = left.min(res_money_units);
        let mut over = left - within;
        if !t.is_free() && over > 0 {
            // 2. Usage past the grant: unreserved bundle units.
            let session = who.session;
            let taken = self.take_from_bundles(account, key, t.unit, over, |bundle, take| {
                Effect::BundleCharged {
                    account,
                    session,
                    key,
                    bundle,
                    from_reserved: 0,
                    from_remaining: take,
                }
            });
            over -= taken;
            bundle_units += taken;
        }
        // 3. Money, rated once for the whole report.
        let cost = t.cost(within + over);
        let from_reserved = cost.min(res_money);
        let extra = cost - from_reserved;
        let spendable = self
            .ledger
            .accounts
            .get(&account)
            .map_or(0, Account::spendable);
        let from_balance = extra.min(spendable);
        let unbilled = extra - from_balance;
        if from_reserved > 0 || from_balance > 0 {
            self.commit(Effect::Charged {
                account,
                session: who.session,
                key,
                from_reserved,
                from_balance,
            });
        }
        let now = self.now;
        let c = self.cdr(who, RecordType::Usage);
        fill_usage(c, used);
        c.rating_group = key.rating_group;
        c.service_id = key.service_id;
        c.unit = Some(t.unit);
        c.rated_units = units;
        c.bundle_units = bundle_units;
        c.amount = from_reserved + from_balance;
        c.unbilled = unbilled;
        c.started = since.unwrap_or(now);
        c.reporting_reason = reporting_reason;
    }
}
