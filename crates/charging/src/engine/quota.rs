//! Rating one service: rate and debit reported usage, release what is
//! left, reserve new quota.
//!
//! The rate is the account's plan's rate in force now ([`Cx::rate`]).
//! When its price changes within the grant's validity (time of day, day of
//! week), the grant is sized so that the balance pays for all of it at the
//! dearer of the two prices, and for octets and events the
//! Granted-Service-Unit carries the Tariff-Time-Change (RFC 8506 section
//! 8.20); the client then reports the units used after it separately
//! (Tariff-Change-Usage), each side priced at its own rate. For seconds
//! (RFC 8506 leaves time-based services out of the mechanism) gyro splits
//! the reported time itself: the seconds up to the report, counted back,
//! that fall after the change are priced at the new rate.

use super::cx::failed_for;
use super::*;
use crate::cdr::TariffChangeUsage;
use crate::tariff::{affordable, FinalUnitAction};
use crate::types::UnitKind;

/// One part of a usage report priced at one rate.
struct Piece {
    units: u64,
    rate: u16,
    side: Option<TariffChangeUsage>,
    started: Timestamp,
    ended: Timestamp,
}

/// A usage report's parts: one, or two around a price change.
type Pieces = (Piece, Option<Piece>);

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
        let (plan, choice) = match self.rate(who, key, self.now, false) {
            Ok(r) => r,
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
        let Some(p) = catalog.plan(plan) else {
            ma.result_code = rc::RATING_FAILED;
            return UnitResult {
                answer: ma,
                failed: Some(FailedAvp::ServiceContextId),
            };
        };
        let Some(t) = p.rate(choice.rate) else {
            ma.result_code = rc::RATING_FAILED;
            return UnitResult {
                answer: ma,
                failed: Some(FailedAvp::ServiceContextId),
            };
        };
        ma.unit = Some(t.unit);
        // Whether the report uses up the reservation it is made against,
        // as a report of final units does.
        let used_up = used.is_some_and(|u| {
            who.session
                .and_then(|s| self.ledger.sessions.get(&s))
                .and_then(|s| s.reservation(key))
                .is_some_and(|r| {
                    r.granted_units > 0 && u.amount(t.unit).unwrap_or(0) >= r.granted_units
                })
        });
        if let Some(u) = used {
            // Usage is priced where it was granted: when the request moves
            // the session (a new visited network, a new called party), at
            // the session's context before the move.
            let used_choice = if self.context_moved() {
                match self.rate(who, key, self.now, true) {
                    Ok((p, c)) if p == plan => c,
                    _ => choice,
                }
            } else {
                choice
            };
            self.charge_usage(who, key, plan, used_choice, u, reporting_reason);
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
            // A price change before the grant expires: the grant is paid
            // at the dearer price, and tells the client when it changes.
            let horizon = match (t.validity_time, t.unit) {
                (Some(v), _) => self.now.plus_secs(u64::from(v)),
                (None, UnitKind::Seconds) => self.now.plus_secs(want),
                (None, _) => Timestamp(u64::MAX),
            };
            let change = choice
                .change
                .filter(|&(at, _)| at < horizon)
                .and_then(|(at, r)| p.rate(r).map(|after| (at, after)));
            // A grant runs past one price change at most: RFC 8506 has one
            // Tariff-Time-Change per grant and a report splits in two
            // (before and after it), so the grant ends at the change after
            // that one (its seconds, and its Validity-Time).
            let until = change
                .and_then(|(at, _)| match self.rate(who, key, at, false) {
                    Ok((pl, c)) if pl == plan => c.change.map(|(t2, _)| t2),
                    _ => None,
                })
                .filter(|&t2| t2 < horizon)
                .map(|t2| (t2.0.saturating_sub(self.now.0) / 1000).max(1));
            let want = match (until, t.unit) {
                (Some(secs), UnitKind::Seconds) => want.min(secs),
                _ => want,
            };
            let first = (t.first_interval > 0 || change.is_some_and(|c| c.1.first_interval > 0))
                && self
                    .ledger
                    .sessions
                    .get(&session)
                    .is_some_and(|s| !s.touched);
            let (granted, partial) = self.reserve(
                who.account,
                session,
                key,
                t,
                change.map(|c| c.1),
                want,
                first,
            );
            if granted == 0 {
                ma.result_code = rc::CREDIT_LIMIT_REACHED;
            } else {
                let mut gsu = ServiceUnits::of(t.unit, granted);
                if t.unit != UnitKind::Seconds {
                    gsu.tariff_time_change = change.map(|c| c.0);
                }
                ma.granted = Some(gsu);
                ma.validity_time = match until {
                    Some(secs) => {
                        let secs = u32::try_from(secs).unwrap_or(u32::MAX);
                        Some(t.validity_time.map_or(secs, |v| v.min(secs)))
                    }
                    None => t.validity_time,
                };
                ma.volume_quota_threshold = t.volume_quota_threshold;
                ma.time_quota_threshold = t.time_quota_threshold;
                ma.quota_holding_time = t.quota_holding_time;
                if partial {
                    ma.final_unit = Some(t.final_unit.clone());
                }
            }
        }
        if self.final_units_used(used_up, &ma, t) {
            ma.validity_time = t.validity_time;
        }
        UnitResult {
            answer: ma,
            failed: None,
        }
    }

    /// Whether the answer for a service reports final units used up
    /// under REDIRECT or RESTRICT_ACCESS and so carries the tariff's
    /// Validity-Time without a grant (RFC 8506 sections 5.6.2 and 5.6.3:
    /// the answer to the report of the final units "does not contain any
    /// granted service units and MUST include the Validity-Time", the
    /// time the redirection or restriction stays in force): a
    /// CCR-Update whose report uses up the reservation it is made
    /// against (`used_up`: at least the units granted) and that gets no
    /// units for it, asking none (success) or none being left (4012).
    /// gyro does not record which grant carried the
    /// Final-Unit-Indication, so the report is recognised by what
    /// section 5.6.2 says of it: the final units used, nothing granted.
    fn final_units_used(&self, used_up: bool, ma: &MsccAnswer, t: &Tariff) -> bool {
        used_up
            && ma.granted.is_none()
            && matches!(ma.result_code, rc::SUCCESS | rc::CREDIT_LIMIT_REACHED)
            && t.final_unit.action != FinalUnitAction::Terminate
            && self
                .request
                .is_some_and(|r| r.request_type == RequestType::Update)
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

    /// Reserves up to `want` units: bundles first (whole increments, as
    /// many as `want` rounded up to the increment needs), then money, as
    /// much as the balance pays at rate `t` (and at `after`, when the
    /// price changes within the grant: at the dearer of the two).
    /// `first`: the grant starts the session's usage (its first interval
    /// applies). Returns the units granted (at most `want`) and whether
    /// that is less than wanted.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reserve(
        &mut self,
        account: AccountId,
        session: SessionKey,
        key: RatingKey,
        t: &Tariff,
        after: Option<&Tariff>,
        want: u64,
        first: bool,
    ) -> (u64, bool) {
        if t.is_free() && after.is_none_or(Tariff::is_free) {
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
        // Bundle units are held in whole increments (usage is rounded up
        // to the increment before bundles pay for it): as many as `want`
        // rounded up needs, or the most whole increments they give.
        let available = self
            .ledger
            .accounts
            .get(&account)
            .map_or(0, |a| a.bundle_units_available(key, unit, at));
        let hold = t.bundle_hold(want, available);
        let from_bundles = self.take_from_bundles(account, key, unit, hold, |bundle, take| {
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
        let left = want.saturating_sub(from_bundles);
        let mut bought = 0;
        if left > 0 {
            let spendable = self
                .ledger
                .accounts
                .get(&account)
                .map_or(0, Account::spendable);
            let cost = |u: u64| {
                let now = t.cost_of(u, first);
                after.map_or(now, |a| now.max(a.cost_of(u, first)))
            };
            bought = affordable(t.increment, spendable, left, cost);
            if bought > 0 {
                self.commit(Effect::Reserved {
                    account,
                    session,
                    key,
                    unit: t.unit,
                    money: cost(bought),
                    units: bought,
                    at: self.now,
                });
            }
        }
        ((from_bundles + bought).min(want), bought < left)
    }

    /// Splits a usage report into the parts priced at one rate each: the
    /// rate in force when the usage began (the grant), and after the next
    /// price change the rate from then on, for the units the client
    /// reported after it (or, for seconds, that fall after it).
    #[allow(clippy::too_many_arguments)]
    fn pieces(
        &mut self,
        who: &Charged<'_>,
        key: RatingKey,
        plan: u16,
        now_choice: Choice,
        unit: UnitKind,
        used: &ServiceUnits,
        since: Option<Timestamp>,
    ) -> Pieces {
        let now = self.now;
        let start = since.unwrap_or(now);
        let total = used.amount(unit).unwrap_or(0);
        let whole = |rate| Piece {
            units: total,
            rate,
            side: None,
            started: start,
            ended: now,
        };
        // Usage that began in the segment of the week `now` is in is
        // rated as now (always, for a plan without time windows).
        let same = self
            .rating
            .segment_start(self.catalog, plan, now)
            .is_some_and(|from| from <= start);
        let choice = if same {
            now_choice
        } else {
            match self.rate(who, key, start, true) {
                Ok((p, c)) if p == plan => c,
                _ => now_choice,
            }
        };
        let Some((at, next)) = choice.change else {
            return (whole(choice.rate), None);
        };
        let after_report = self.after_report(key);
        let after_units = match (after_report, unit) {
            (Some(a), _) => a.amount(unit).unwrap_or(0).min(total),
            (None, UnitKind::Seconds) if at <= now => ((now.0 - at.0) / 1000).min(total),
            (None, _) => 0,
        };
        if after_report.is_none() && after_units == 0 {
            // Nothing reported or counted past the change.
            return (whole(choice.rate), None);
        }
        (
            Piece {
                units: total - after_units,
                rate: choice.rate,
                side: Some(TariffChangeUsage::Before),
                started: start,
                ended: at.min(now),
            },
            Some(Piece {
                units: after_units,
                rate: next,
                side: Some(TariffChangeUsage::After),
                started: at.min(now),
                ended: now,
            }),
        )
    }

    /// The usage the request reports for `key` after a tariff change
    /// (Tariff-Change-Usage UNIT_AFTER_TARIFF_CHANGE), if any.
    fn after_report(&self, key: RatingKey) -> Option<ServiceUnits> {
        let r = self.request?;
        if r.mscc.is_empty() {
            r.used_after
        } else {
            r.mscc.iter().find(|m| m.key() == key)?.used_after
        }
    }

    /// Debits reported usage, rounded up to the increment (and the first
    /// interval) first: reserved bundle units, then the money
    /// reservation, then (past the grant) free bundle units and the
    /// balance, never beyond the credit limit. Usage across a price change
    /// is priced in two parts; each part writes its usage CDR.
    pub(super) fn charge_usage(
        &mut self,
        who: &Charged<'_>,
        key: RatingKey,
        plan: u16,
        now_choice: Choice,
        used: &ServiceUnits,
        reporting_reason: Option<u32>,
    ) {
        let account = who.account;
        let (mut grant_units, since, first) = match who
            .session
            .and_then(|s| self.ledger.sessions.get(&s))
            .map(|s| (s, s.reservation(key)))
        {
            Some((s, Some(r))) => (r.money_units, Some(r.since), r.is_opening(s)),
            Some((_, None)) => (0, None, false),
            None => (0, None, true),
        };
        let catalog = self.catalog;
        let Some(p) = catalog.plan(plan) else { return };
        let unit = p.rate(now_choice.rate).map_or(UnitKind::Octets, |t| t.unit);
        let (first_piece, second) = self.pieces(who, key, plan, now_choice, unit, used, since);
        // The counters after a change: as reported, or (seconds gyro split)
        // the seconds past it.
        let after = second.as_ref().map(|s| {
            self.after_report(key)
                .unwrap_or_else(|| ServiceUnits::of(unit, s.units))
        });
        for (n, piece) in std::iter::once(first_piece).chain(second).enumerate() {
            let Some(t) = p.rate(piece.rate) else {
                continue;
            };
            // Usage is rounded up to the increment (and the first
            // interval) first; bundle units pay for the rounded units,
            // money for the rest, priced without rounding them again.
            let rated = t.rated_units(piece.units, first && n == 0);
            let mut left = rated;
            let mut bundle_units = 0u64;
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
            let res_money = who
                .session
                .and_then(|s| self.ledger.sessions.get(&s))
                .and_then(|s| s.reservation(key))
                .map_or(0, |r| r.money);
            let within = left.min(grant_units);
            grant_units -= within;
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
            // 3. Money, rated once for the part.
            let cost = t.price_of_rated(within + over);
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
            let c = self.cdr(who, RecordType::Usage);
            match (piece.side, &after) {
                (Some(TariffChangeUsage::Before), Some(a)) => fill_usage(c, &used.minus(a)),
                (Some(TariffChangeUsage::After), Some(a)) => fill_usage(c, a),
                _ => fill_usage(c, used),
            }
            c.rating_group = key.rating_group;
            c.service_id = key.service_id;
            c.unit = Some(t.unit);
            c.rated_units = rated;
            c.bundle_units = bundle_units;
            c.amount = from_reserved + from_balance;
            c.unbilled = unbilled;
            c.started = piece.started;
            c.ended = piece.ended;
            c.reporting_reason = reporting_reason;
            c.tariff_change = piece.side;
            self.label_cdr(plan, piece.rate);
        }
    }
}
