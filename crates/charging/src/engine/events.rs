//! One-shot events (CCR-Event, RFC 8506 section 6): direct debiting,
//! refund, balance check and price enquiry. Events open no session.

use super::{fill_usage, Charged, Cx};
use crate::accounts::AccountStatus;
use crate::answer::{CheckBalanceResult, CostInformation, FailedAvp, MsccAnswer};
use crate::cdr::RecordType;
use crate::effects::Effect;
use crate::request::{CcRequest, RequestedAction};
use crate::tariff::ZeroRated;
use crate::types::{result_code as rc, RatingKey, ServiceUnits};

impl Cx<'_> {
    pub(crate) fn event(&mut self, req: &CcRequest) {
        let Some(action) = req.requested_action else {
            self.answer.result_code = rc::MISSING_AVP;
            self.answer.failed_avp = Some(FailedAvp::RequestedAction);
            return;
        };
        let Some((sub_idx, account)) = self.directory.resolve(&req.subscription_ids) else {
            self.answer.result_code = rc::USER_UNKNOWN;
            self.answer.failed_avp = Some(FailedAvp::SubscriptionId);
            return;
        };
        let Some(acc) = self.ledger.accounts.get(&account) else {
            self.answer.result_code = rc::USER_UNKNOWN;
            self.answer.failed_avp = Some(FailedAvp::SubscriptionId);
            return;
        };
        let blocked = acc.status == AccountStatus::Blocked;
        // The service: the first MSCC, else the command-level AVPs.
        let (key, units_avp, in_mscc) = match req.mscc.first() {
            Some(m) => (m.key(), m.requested.or(m.used), true),
            None => (
                RatingKey {
                    rating_group: None,
                    service_id: req.service_id,
                },
                req.requested.or(req.used),
                false,
            ),
        };
        let who = Charged {
            session: None,
            account,
            session_id: &req.session_id,
            subscriber: &req.subscription_ids[sub_idx],
            service_context: &req.service_context,
            request_number: req.request_number,
            interface: req.interface,
        };
        let catalog = self.catalog;
        let mut rated = None;
        let tariff = match self.rate(&who, key, self.now, false) {
            Ok((plan, choice)) => {
                rated = Some((plan, choice.rate));
                catalog.plan(plan).and_then(|p| p.rate(choice.rate))
            }
            Err(e) => {
                self.answer.result_code = rc::RATING_FAILED;
                self.answer.failed_avp = Some(match e {
                    crate::tariff::RatingError::UnknownContext => FailedAvp::ServiceContextId,
                    _ => match (key.service_id, key.rating_group) {
                        (Some(s), _) => FailedAvp::ServiceIdentifier(s),
                        (None, Some(rg)) => FailedAvp::RatingGroup(rg),
                        _ => FailedAvp::ServiceContextId,
                    },
                });
                None
            }
        };
        let mut result = self.answer.result_code;
        let mut granted = None;
        let mut amount = 0i64;
        let mut bundle_units = 0u64;
        let mut units = 0u64;
        let mut unit = None;
        if let Some(t) = tariff {
            unit = Some(t.unit);
            units = units_avp
                .and_then(|u| u.amount(t.unit))
                .filter(|&n| n > 0)
                .unwrap_or(t.default_quota);
            let currency = rated
                .and_then(|(p, _)| catalog.plan(p))
                .map_or(catalog.currency, |p| p.currency);
            let cost_info = |value: i64| CostInformation {
                value_digits: value,
                exponent: -i32::from(currency.exponent),
                currency_code: currency.code,
            };
            let Some(acc) = self.ledger.accounts.get(&account) else {
                return;
            };
            let spendable = acc.spendable();
            let bundles_free = if t.is_free() {
                0
            } else {
                acc.bundle_units_available(key, t.unit, self.now)
            };
            // The units rounded up to the increment (and the first
            // interval) first, then bundle units, then money for the rest.
            let rated = t.rated_units(units, true);
            let from_bundles = bundles_free.min(rated);
            let money_cost = t.price_of_rated(rated - from_bundles);
            if blocked && action != RequestedAction::RefundAccount {
                result = rc::END_USER_SERVICE_DENIED;
            } else if t.zero_rated == Some(ZeroRated::NotApplicable)
                && matches!(
                    action,
                    RequestedAction::DirectDebiting | RequestedAction::RefundAccount
                )
            {
                result = rc::CREDIT_CONTROL_NOT_APPLICABLE;
            } else {
                match action {
                    RequestedAction::DirectDebiting => {
                        if money_cost > spendable {
                            result = rc::CREDIT_LIMIT_REACHED;
                        } else {
                            self.take_from_bundles(
                                account,
                                key,
                                t.unit,
                                from_bundles,
                                |bundle, take| Effect::BundleCharged {
                                    account,
                                    session: None,
                                    key,
                                    bundle,
                                    from_reserved: 0,
                                    from_remaining: take,
                                },
                            );
                            bundle_units = from_bundles;
                            if money_cost > 0 {
                                self.commit(Effect::Charged {
                                    account,
                                    session: None,
                                    key,
                                    from_reserved: 0,
                                    from_balance: money_cost,
                                });
                            }
                            amount = money_cost;
                            granted = Some(ServiceUnits::of(t.unit, units));
                            self.answer.cost = Some(cost_info(money_cost));
                        }
                    }
                    RequestedAction::RefundAccount => {
                        let refund = t.cost(units);
                        if refund > 0 {
                            self.commit(Effect::Refunded {
                                account,
                                amount: refund,
                            });
                        }
                        amount = -refund;
                        self.answer.cost = Some(cost_info(refund));
                    }
                    RequestedAction::CheckBalance => {
                        self.answer.check_balance = Some(if money_cost <= spendable {
                            CheckBalanceResult::EnoughCredit
                        } else {
                            CheckBalanceResult::NoCredit
                        });
                    }
                    RequestedAction::PriceEnquiry => {
                        self.answer.cost = Some(cost_info(t.cost(units)));
                    }
                }
            }
        }
        self.answer.result_code = result;
        if in_mscc {
            self.answer.mscc.push(MsccAnswer {
                rating_group: key.rating_group,
                service_id: key.service_id,
                result_code: result,
                granted,
                unit,
                ..MsccAnswer::default()
            });
        } else {
            self.answer.granted = granted;
        }
        let c = self.cdr(&who, RecordType::Event);
        if let Some(u) = units_avp.as_ref() {
            fill_usage(c, u);
        }
        c.rating_group = key.rating_group;
        c.service_id = key.service_id;
        c.requested_action = Some(action);
        c.unit = unit;
        c.rated_units = if amount != 0 || bundle_units > 0 {
            tariff.map_or(units, |t| t.rated_units(units, true))
        } else {
            0
        };
        c.bundle_units = bundle_units;
        c.amount = amount;
        c.result_code = result;
        if let Some((plan, rate)) = rated {
            self.label_cdr(plan, rate);
        }
    }
}
