//! Ledger effects: every change the engine makes to balances,
//! reservations, bundles and sessions, as values a durable store can
//! journal and replay ([`Ledger::apply`]). The engine itself changes its
//! state only by applying the effects it emits, so replaying a journal onto
//! the state it started from rebuilds exactly the state it ended with.

// Replay errors are built lazily (`ok_or_else`) although clippy finds them
// cheap: the eager `ok_or(Error::Replay(..))` builds and drops an `Error`
// (a `drop_in_place` call) on every successful lookup, about 22 per CCR,
// 446 instructions per answer measured with callgrind.
#![allow(clippy::unnecessary_lazy_evaluations)]

use crate::accounts::{Account, AccountStatus, Bundle, SharedSubscriptionId, SubscriptionId};
use crate::error::{Error, Result};
use crate::request::Interface;
use crate::session::{BundleHold, BundleHolds, RatingContext, Reservation, Reservations, Session};
use crate::tariff::Currency;
use crate::types::{AccountId, IdMap, RatingKey, SessionKey, Timestamp, UnitKind};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// One change to the ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "kebab-case")]
pub enum Effect {
    /// A credit-control session opened.
    SessionOpened {
        /// Engine handle.
        session: SessionKey,
        /// Diameter Session-Id (shared with the open session).
        session_id: Arc<str>,
        /// Account charged.
        account: AccountId,
        /// Identity the account was found by.
        subscriber: SharedSubscriptionId,
        /// Service-Context-Id.
        service_context: Arc<str>,
        /// MSCC in use.
        multiple_services: bool,
        /// Time of the CCR-Initial.
        at: Timestamp,
        /// Tcc deadline.
        supervision_until: Timestamp,
        /// The interface the CCR-Initial (or Nchf create) arrived over.
        #[serde(default, skip_serializing_if = "Interface::is_gy")]
        interface: Interface,
    },
    /// A request arrived on an open session.
    SessionTouched {
        /// Engine handle.
        session: SessionKey,
        /// CC-Request-Number.
        request_number: u32,
        /// Arrival time.
        at: Timestamp,
        /// New Tcc deadline.
        supervision_until: Timestamp,
    },
    /// What a session is rated by (its called party, its visited
    /// network) set: after [`Effect::SessionOpened`] when the CCR-Initial
    /// carries it, and when a later request of the session carries a new
    /// value.
    SessionContextChanged {
        /// Engine handle.
        session: SessionKey,
        /// The session's context from now on.
        context: RatingContext,
    },
    /// A session closed; it must hold no reservation.
    SessionClosed {
        /// Engine handle.
        session: SessionKey,
    },
    /// Money moved from balance to a reservation.
    Reserved {
        /// Account.
        account: AccountId,
        /// Session holding the reservation.
        session: SessionKey,
        /// Rating key of the reservation.
        key: RatingKey,
        /// Unit of the grant.
        unit: UnitKind,
        /// Money held.
        money: i64,
        /// Units that money pays for.
        units: u64,
        /// Time of the grant.
        at: Timestamp,
    },
    /// Bundle units moved from remaining to a reservation.
    BundleReserved {
        /// Account.
        account: AccountId,
        /// Session holding the reservation.
        session: SessionKey,
        /// Rating key of the reservation.
        key: RatingKey,
        /// Unit of the grant.
        unit: UnitKind,
        /// Bundle id.
        bundle: u32,
        /// Units held.
        units: u64,
        /// Time of the grant.
        at: Timestamp,
    },
    /// Money charged: part from a reservation, part straight from the
    /// balance.
    Charged {
        /// Account.
        account: AccountId,
        /// Session whose reservation pays `from_reserved` (none for events).
        session: Option<SessionKey>,
        /// Rating key.
        key: RatingKey,
        /// Paid from the reservation.
        from_reserved: i64,
        /// Paid from the available balance.
        from_balance: i64,
    },
    /// Bundle units consumed: part from a reservation, part from the
    /// bundle's remaining units.
    BundleCharged {
        /// Account.
        account: AccountId,
        /// Session whose reservation pays `from_reserved`.
        session: Option<SessionKey>,
        /// Rating key.
        key: RatingKey,
        /// Bundle id.
        bundle: u32,
        /// Consumed from the reservation.
        from_reserved: u64,
        /// Consumed from remaining units.
        from_remaining: u64,
    },
    /// What is left of a reservation went back to the balance and bundles;
    /// the reservation is gone.
    Released {
        /// Account.
        account: AccountId,
        /// Session.
        session: SessionKey,
        /// Rating key.
        key: RatingKey,
    },
    /// Money added to an account.
    ToppedUp {
        /// Account.
        account: AccountId,
        /// Amount, positive.
        amount: i64,
    },
    /// A charge given back (REFUND_ACCOUNT): balance up, debited down.
    Refunded {
        /// Account.
        account: AccountId,
        /// Amount, positive.
        amount: i64,
    },
    /// Account status changed.
    StatusChanged {
        /// Account.
        account: AccountId,
        /// New status.
        status: AccountStatus,
    },
    /// An account was created at run time (the configured ones are in
    /// the first snapshot instead).
    AccountCreated {
        /// The new account's id.
        account: AccountId,
        /// Its subscriber identities.
        subscribers: Vec<SubscriptionId>,
        /// Initial balance, minor units.
        balance: i64,
        /// Credit limit, minor units, not negative.
        credit_limit: i64,
        /// Status.
        status: AccountStatus,
        /// Unit allowances.
        bundles: Vec<Bundle>,
    },
    /// An account with no open session was deleted, with its identities.
    AccountDeleted {
        /// Account.
        account: AccountId,
    },
    /// An account's credit limit changed.
    CreditLimitChanged {
        /// Account.
        account: AccountId,
        /// New credit limit, minor units, not negative.
        credit_limit: i64,
    },
    /// An account's price plan (and the currency of its money) set: at
    /// creation, right after [`Effect::AccountCreated`], when either is not
    /// the configuration's default, and when an operator changes the plan.
    PlanChanged {
        /// Account.
        account: AccountId,
        /// The plan; none: the plan named `"default"`.
        plan: Option<Arc<str>>,
        /// The currency of its money; none: the configuration's.
        currency: Option<Currency>,
    },
    /// Money added to an account by a top-up named by an idempotency key,
    /// which the ledger remembers ([`Ledger::top_up_keys`]) so that the
    /// same top-up asked twice is applied once.
    ToppedUpWithKey {
        /// Account.
        account: AccountId,
        /// Amount, positive.
        amount: i64,
        /// The caller's idempotency key.
        key: Arc<str>,
    },
}

/// How many idempotency keys of top-ups the ledger remembers per account
/// (the oldest is forgotten first).
pub const TOP_UP_KEYS_PER_ACCOUNT: usize = 128;

/// The durable part of an engine's state: accounts and open sessions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// Accounts by id.
    pub accounts: IdMap<AccountId, Account>,
    /// Open sessions by handle.
    pub sessions: IdMap<SessionKey, Session>,
    /// Next session handle to assign.
    pub next_session_key: u64,
    /// The idempotency keys of each account's latest top-ups, with their
    /// amounts, oldest first (at most [`TOP_UP_KEYS_PER_ACCOUNT`]).
    #[serde(default)]
    pub top_up_keys: IdMap<AccountId, VecDeque<(Arc<str>, i64)>>,
    #[serde(skip)]
    /// Session-Id to handle; keyed per process, since Session-Ids come
    /// from the network. The keys share the sessions' Session-Ids.
    pub(crate) session_index: HashMap<Arc<str>, SessionKey, foldhash::fast::RandomState>,
}

fn neg(v: i64) -> Result<()> {
    if v < 0 {
        Err(Error::Replay("negative amount"))
    } else {
        Ok(())
    }
}

fn add(a: i64, b: i64) -> Result<i64> {
    a.checked_add(b).ok_or_else(|| Error::Replay("overflow"))
}

fn sub(a: i64, b: i64) -> Result<i64> {
    a.checked_sub(b).ok_or_else(|| Error::Replay("overflow"))
}

/// The account an effect names; replaying an effect for an account that
/// does not exist is an error.
fn account_mut<'a, S: std::hash::BuildHasher>(
    accounts: &'a mut std::collections::HashMap<AccountId, Account, S>,
    id: &AccountId,
) -> Result<&'a mut Account> {
    accounts
        .get_mut(id)
        .ok_or_else(|| Error::Replay("unknown account"))
}

impl Ledger {
    /// Rebuilds the Session-Id index (after deserialising).
    pub fn rebuild_index(&mut self) {
        self.session_index = self
            .sessions
            .values()
            .map(|s| (Arc::clone(&s.session_id), s.key))
            .collect();
    }

    /// The amount of the remembered top-up of `account` with idempotency
    /// key `key`.
    pub fn top_up(&self, account: AccountId, key: &str) -> Option<i64> {
        self.top_up_keys
            .get(&account)?
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, amount)| *amount)
    }

    /// The handle of the open session with this Session-Id.
    pub fn session_key(&self, session_id: &str) -> Option<SessionKey> {
        self.session_index.get(session_id).copied()
    }

    fn reservation_mut(
        sessions: &mut IdMap<SessionKey, Session>,
        session: SessionKey,
        key: RatingKey,
        account: AccountId,
    ) -> Result<(&mut Session, Option<usize>)> {
        let s = sessions
            .get_mut(&session)
            .ok_or_else(|| Error::Replay("unknown session"))?;
        if s.account != account {
            return Err(Error::Replay("session belongs to another account"));
        }
        let idx = s.reservations.iter().position(|r| r.key == key);
        Ok((s, idx))
    }

    /// Applies one effect. On error nothing changed.
    pub fn apply(&mut self, effect: &Effect) -> Result<()> {
        match effect {
            Effect::SessionOpened {
                session,
                session_id,
                account,
                subscriber,
                service_context,
                multiple_services,
                at,
                supervision_until,
                interface,
            } => {
                if self.sessions.contains_key(session)
                    || self.session_index.contains_key(session_id)
                {
                    return Err(Error::Replay("session already open"));
                }
                if !self.accounts.contains_key(account) {
                    return Err(Error::Replay("unknown account"));
                }
                self.sessions.insert(
                    *session,
                    Session {
                        key: *session,
                        session_id: Arc::clone(session_id),
                        account: *account,
                        subscriber: subscriber.clone(),
                        service_context: Arc::clone(service_context),
                        multiple_services: *multiple_services,
                        opened_at: *at,
                        last_seen: *at,
                        supervision_until: *supervision_until,
                        last_request_number: 0,
                        touched: false,
                        reservations: Reservations::new(),
                        context: RatingContext::default(),
                        interface: *interface,
                    },
                );
                self.session_index.insert(Arc::clone(session_id), *session);
                self.next_session_key = self.next_session_key.max(session.0.saturating_add(1));
            }
            Effect::SessionTouched {
                session,
                request_number,
                at,
                supervision_until,
            } => {
                let s = self
                    .sessions
                    .get_mut(session)
                    .ok_or_else(|| Error::Replay("unknown session"))?;
                s.last_request_number = *request_number;
                s.touched = true;
                s.last_seen = *at;
                s.supervision_until = *supervision_until;
            }
            Effect::SessionContextChanged { session, context } => {
                self.sessions
                    .get_mut(session)
                    .ok_or_else(|| Error::Replay("unknown session"))?
                    .context = *context;
            }
            Effect::SessionClosed { session } => {
                let s = self
                    .sessions
                    .get(session)
                    .ok_or_else(|| Error::Replay("unknown session"))?;
                if !s.reservations.is_empty() {
                    return Err(Error::Replay("session still holds reservations"));
                }
                if let Some(s) = self.sessions.remove(session) {
                    self.session_index.remove(&*s.session_id);
                }
            }
            Effect::Reserved {
                account,
                session,
                key,
                unit,
                money,
                units,
                at,
            } => {
                neg(*money)?;
                let acc = account_mut(&mut self.accounts, account)?;
                let balance = sub(acc.balance, *money)?;
                let reserved = add(acc.reserved, *money)?;
                let (s, idx) = Self::reservation_mut(&mut self.sessions, *session, *key, *account)?;
                let r = match idx {
                    Some(i) => &mut s.reservations[i],
                    None => {
                        s.reservations.push(Reservation {
                            key: *key,
                            unit: *unit,
                            granted_units: 0,
                            money: 0,
                            money_units: 0,
                            bundles: BundleHolds::new(),
                            since: *at,
                            opening: Some(!s.touched),
                        });
                        let last = s.reservations.len() - 1;
                        &mut s.reservations[last]
                    }
                };
                r.money = add(r.money, *money)?;
                r.money_units = r.money_units.saturating_add(*units);
                r.granted_units = r.granted_units.saturating_add(*units);
                acc.balance = balance;
                acc.reserved = reserved;
            }
            Effect::BundleReserved {
                account,
                session,
                key,
                unit,
                bundle,
                units,
                at,
            } => {
                let acc = account_mut(&mut self.accounts, account)?;
                let b = acc
                    .bundle_mut(*bundle)
                    .ok_or_else(|| Error::Replay("unknown bundle"))?;
                if b.remaining < *units {
                    return Err(Error::Replay("bundle exhausted"));
                }
                let (s, idx) = Self::reservation_mut(&mut self.sessions, *session, *key, *account)?;
                b.remaining -= units;
                b.reserved += units;
                let r = match idx {
                    Some(i) => &mut s.reservations[i],
                    None => {
                        s.reservations.push(Reservation {
                            key: *key,
                            unit: *unit,
                            granted_units: 0,
                            money: 0,
                            money_units: 0,
                            bundles: BundleHolds::new(),
                            since: *at,
                            opening: Some(!s.touched),
                        });
                        let last = s.reservations.len() - 1;
                        &mut s.reservations[last]
                    }
                };
                r.granted_units = r.granted_units.saturating_add(*units);
                match r.bundles.iter_mut().find(|h| h.bundle == *bundle) {
                    Some(h) => h.units += units,
                    None => r.bundles.push(BundleHold {
                        bundle: *bundle,
                        units: *units,
                    }),
                }
            }
            Effect::Charged {
                account,
                session,
                key,
                from_reserved,
                from_balance,
            } => {
                neg(*from_reserved)?;
                neg(*from_balance)?;
                let acc = account_mut(&mut self.accounts, account)?;
                let reserved = sub(acc.reserved, *from_reserved)?;
                let balance = sub(acc.balance, *from_balance)?;
                let debited = add(acc.debited, add(*from_reserved, *from_balance)?)?;
                if *from_reserved > 0 {
                    let session = session
                        .ok_or_else(|| Error::Replay("charge from reservation without session"))?;
                    let (s, idx) =
                        Self::reservation_mut(&mut self.sessions, session, *key, *account)?;
                    let r = idx
                        .map(|i| &mut s.reservations[i])
                        .ok_or_else(|| Error::Replay("no reservation"))?;
                    if r.money < *from_reserved {
                        return Err(Error::Replay("reservation too small"));
                    }
                    r.money -= from_reserved;
                }
                acc.reserved = reserved;
                acc.balance = balance;
                acc.debited = debited;
            }
            Effect::BundleCharged {
                account,
                session,
                key,
                bundle,
                from_reserved,
                from_remaining,
            } => {
                let acc = account_mut(&mut self.accounts, account)?;
                let b = acc
                    .bundle_mut(*bundle)
                    .ok_or_else(|| Error::Replay("unknown bundle"))?;
                if b.reserved < *from_reserved || b.remaining < *from_remaining {
                    return Err(Error::Replay("bundle too small"));
                }
                if *from_reserved > 0 {
                    let session = session
                        .ok_or_else(|| Error::Replay("charge from reservation without session"))?;
                    let (s, idx) =
                        Self::reservation_mut(&mut self.sessions, session, *key, *account)?;
                    let h = idx
                        .and_then(|i| {
                            s.reservations[i]
                                .bundles
                                .iter_mut()
                                .find(|h| h.bundle == *bundle)
                        })
                        .ok_or_else(|| Error::Replay("no bundle hold"))?;
                    if h.units < *from_reserved {
                        return Err(Error::Replay("bundle hold too small"));
                    }
                    h.units -= from_reserved;
                }
                b.reserved -= from_reserved;
                b.remaining -= from_remaining;
                b.consumed += from_reserved + from_remaining;
            }
            Effect::Released {
                account,
                session,
                key,
            } => {
                let (s, idx) = Self::reservation_mut(&mut self.sessions, *session, *key, *account)?;
                let i = idx.ok_or_else(|| Error::Replay("no reservation"))?;
                let acc = account_mut(&mut self.accounts, account)?;
                let r = &s.reservations[i];
                let balance = add(acc.balance, r.money)?;
                let reserved = sub(acc.reserved, r.money)?;
                for h in &r.bundles {
                    let ok = acc
                        .bundles
                        .iter()
                        .any(|b| b.id == h.bundle && b.reserved >= h.units);
                    if !ok {
                        return Err(Error::Replay("bundle hold mismatch"));
                    }
                }
                let r = s.reservations.swap_remove(i);
                for h in &r.bundles {
                    if let Some(b) = acc.bundle_mut(h.bundle) {
                        b.reserved -= h.units;
                        b.remaining += h.units;
                    }
                }
                acc.balance = balance;
                acc.reserved = reserved;
            }
            Effect::ToppedUp { account, amount } => {
                neg(*amount)?;
                let acc = account_mut(&mut self.accounts, account)?;
                let balance = add(acc.balance, *amount)?;
                let topped = add(acc.topped_up, *amount)?;
                acc.balance = balance;
                acc.topped_up = topped;
            }
            Effect::Refunded { account, amount } => {
                neg(*amount)?;
                let acc = account_mut(&mut self.accounts, account)?;
                let balance = add(acc.balance, *amount)?;
                let debited = sub(acc.debited, *amount)?;
                acc.balance = balance;
                acc.debited = debited;
            }
            Effect::StatusChanged { account, status } => {
                account_mut(&mut self.accounts, account)?.status = *status;
            }
            Effect::AccountCreated {
                account,
                subscribers: _,
                balance,
                credit_limit,
                status,
                bundles,
            } => {
                if self.accounts.contains_key(account) {
                    return Err(Error::Replay("account already exists"));
                }
                neg(*credit_limit)?;
                let mut a = Account::new(*account, *balance);
                a.credit_limit = *credit_limit;
                a.status = *status;
                a.bundles = bundles.clone();
                if !a.is_conserved() {
                    return Err(Error::Replay("bundle does not add up"));
                }
                self.accounts.insert(*account, a);
            }
            Effect::AccountDeleted { account } => {
                let acc = account_mut(&mut self.accounts, account)?;
                if acc.reserved != 0 || self.sessions.values().any(|s| s.account == *account) {
                    return Err(Error::Replay("account has open sessions"));
                }
                self.accounts.remove(account);
                self.top_up_keys.remove(account);
            }
            Effect::CreditLimitChanged {
                account,
                credit_limit,
            } => {
                neg(*credit_limit)?;
                account_mut(&mut self.accounts, account)?.credit_limit = *credit_limit;
            }
            Effect::PlanChanged {
                account,
                plan,
                currency,
            } => {
                let acc = account_mut(&mut self.accounts, account)?;
                acc.plan.clone_from(plan);
                acc.currency = *currency;
            }
            Effect::ToppedUpWithKey {
                account,
                amount,
                key,
            } => {
                if self.top_up(*account, key).is_some() {
                    return Err(Error::Replay("idempotency key already used"));
                }
                self.apply(&Effect::ToppedUp {
                    account: *account,
                    amount: *amount,
                })?;
                let keys = self.top_up_keys.entry(*account).or_default();
                if keys.len() >= TOP_UP_KEYS_PER_ACCOUNT {
                    keys.pop_front();
                }
                keys.push_back((Arc::clone(key), *amount));
            } // The duplicate cache is not part of the ledger.
        }
        Ok(())
    }
}
