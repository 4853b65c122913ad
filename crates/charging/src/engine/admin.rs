//! Account operations an operator asks for while the engine runs:
//! create, change, delete and top up with an idempotency key. Like a
//! request, each one changes the state only through the effects it
//! appends to [`Output::effects`], so the journal replays it.

use super::*;
use crate::accounts::Bundle;
use crate::session::Session;
use crate::tariff::Currency;

/// An account to create ([`Engine::create_account`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewAccount {
    /// Its id; it picks the shard ([`AccountId::shard`]).
    pub id: AccountId,
    /// Its subscriber identities (at least one).
    pub subscribers: Vec<SubscriptionId>,
    /// Initial balance, minor units.
    pub balance: i64,
    /// Credit limit, minor units, not negative.
    pub credit_limit: i64,
    /// Status.
    pub status: AccountStatus,
    /// Unit allowances (fresh: nothing reserved or consumed).
    pub bundles: Vec<Bundle>,
    /// Its price plan (none: the plan named `"default"`); it must exist.
    pub plan: Option<String>,
    /// The currency of its money (none: the configuration's); its plan
    /// must be priced in it.
    pub currency: Option<Currency>,
}

/// What [`Engine::top_up_once`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopUp {
    /// The money was added; the new balance.
    Applied(i64),
    /// The key was used before with the same amount: nothing changed; the
    /// balance now.
    Repeated(i64),
}

impl TopUp {
    /// The balance after the top-up.
    pub fn balance(self) -> i64 {
        match self {
            TopUp::Applied(b) | TopUp::Repeated(b) => b,
        }
    }
}

fn plan_error(e: Error) -> Error {
    match e {
        Error::Config(m) => Error::InvalidPlan(m),
        other => other,
    }
}

/// Longest idempotency key accepted, in bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 256;

impl Engine {
    /// Creates an account with its identities. Fails (changing nothing)
    /// when the id or an identity is taken, when it has no identity, or
    /// when an amount or bundle is invalid.
    pub fn create_account(&mut self, new: NewAccount, out: &mut Output) -> Result<()> {
        if self.ledger.accounts.contains_key(&new.id) {
            return Err(Error::DuplicateAccount(new.id));
        }
        if new.subscribers.is_empty() {
            return Err(Error::InvalidAccount("no subscriber identity".into()));
        }
        if new.credit_limit < 0 {
            return Err(Error::InvalidAmount(new.credit_limit));
        }
        if new.balance < 0 {
            return Err(Error::InvalidAmount(new.balance));
        }
        for s in &new.subscribers {
            if s.data.is_empty() {
                return Err(Error::InvalidAccount("empty subscriber identity".into()));
            }
            if self.directory.lookup(s.kind, &s.data).is_some() {
                return Err(Error::DuplicateSubscriber(s.to_string()));
            }
        }
        for (i, b) in new.bundles.iter().enumerate() {
            let fresh = b.reserved == 0 && b.consumed == 0 && b.remaining == b.initial;
            if !fresh || b.valid_until <= b.valid_from {
                return Err(Error::InvalidAccount(format!(
                    "bundle {}: needs units and valid_until after valid_from",
                    b.id
                )));
            }
            if new.bundles[..i].iter().any(|o| o.id == b.id) {
                return Err(Error::InvalidAccount(format!(
                    "bundle id {} given twice",
                    b.id
                )));
            }
        }
        self.catalog
            .check_plan(new.plan.as_deref(), new.currency)
            .map_err(plan_error)?;
        let e = Effect::AccountCreated {
            account: new.id,
            subscribers: new.subscribers,
            balance: new.balance,
            credit_limit: new.credit_limit,
            status: new.status,
            bundles: new.bundles,
        };
        self.apply(&e)?;
        out.effects.push(e);
        if new.plan.is_some() || new.currency.is_some() {
            let e = Effect::PlanChanged {
                account: new.id,
                plan: new.plan.as_deref().map(Arc::from),
                currency: new.currency,
            };
            self.apply(&e)?;
            out.effects.push(e);
        }
        Ok(())
    }

    /// Moves an account to another price plan (none: the plan named
    /// `"default"`). Refused ([`Error::InvalidPlan`]) for a plan the
    /// configuration lacks or one priced in another currency than the
    /// account's money. Open sessions are rated by the new plan from their
    /// next request on.
    pub fn set_plan(
        &mut self,
        account: AccountId,
        plan: Option<&str>,
        out: &mut Output,
    ) -> Result<()> {
        let acc = self
            .ledger
            .accounts
            .get(&account)
            .ok_or(Error::UnknownAccount(account))?;
        self.catalog
            .check_plan(plan, acc.currency)
            .map_err(plan_error)?;
        let e = Effect::PlanChanged {
            account,
            plan: plan.map(Arc::from),
            currency: acc.currency,
        };
        self.apply(&e)?;
        out.effects.push(e);
        Ok(())
    }

    /// Deletes an account and its identities. Refused while it has an
    /// open session ([`Error::AccountInUse`]).
    pub fn delete_account(&mut self, account: AccountId, out: &mut Output) -> Result<()> {
        let acc = self
            .ledger
            .accounts
            .get(&account)
            .ok_or(Error::UnknownAccount(account))?;
        if acc.reserved != 0 || self.account_sessions(account).next().is_some() {
            return Err(Error::AccountInUse(account));
        }
        let e = Effect::AccountDeleted { account };
        self.apply(&e)?;
        out.effects.push(e);
        Ok(())
    }

    /// Sets how far below zero the balance may go.
    pub fn set_credit_limit(
        &mut self,
        account: AccountId,
        credit_limit: i64,
        out: &mut Output,
    ) -> Result<()> {
        if credit_limit < 0 {
            return Err(Error::InvalidAmount(credit_limit));
        }
        if !self.ledger.accounts.contains_key(&account) {
            return Err(Error::UnknownAccount(account));
        }
        let e = Effect::CreditLimitChanged {
            account,
            credit_limit,
        };
        self.apply(&e)?;
        out.effects.push(e);
        Ok(())
    }

    /// Adds money once per idempotency `key`: asked again with the same
    /// key and amount it changes nothing ([`TopUp::Repeated`]); with the
    /// same key and another amount it fails
    /// ([`Error::IdempotencyConflict`]). The ledger remembers the latest
    /// [`crate::effects::TOP_UP_KEYS_PER_ACCOUNT`] keys of each account.
    pub fn top_up_once(
        &mut self,
        account: AccountId,
        amount: i64,
        key: &str,
        out: &mut Output,
    ) -> Result<TopUp> {
        if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY {
            return Err(Error::InvalidAccount(format!(
                "idempotency key must be 1 to {MAX_IDEMPOTENCY_KEY} bytes"
            )));
        }
        let acc = self
            .ledger
            .accounts
            .get(&account)
            .ok_or(Error::UnknownAccount(account))?;
        let balance = acc.balance;
        match self.ledger.top_up(account, key) {
            Some(a) if a == amount => return Ok(TopUp::Repeated(balance)),
            Some(a) => {
                return Err(Error::IdempotencyConflict {
                    key: key.to_string(),
                    amount: a,
                })
            }
            None => {}
        }
        if amount <= 0 {
            return Err(Error::InvalidAmount(amount));
        }
        if acc.balance.checked_add(amount).is_none() || acc.topped_up.checked_add(amount).is_none()
        {
            return Err(Error::WouldOverflow(amount));
        }
        let e = Effect::ToppedUpWithKey {
            account,
            amount,
            key: Arc::from(key),
        };
        self.apply(&e)?;
        out.effects.push(e);
        Ok(TopUp::Applied(
            self.ledger.accounts.get(&account).map_or(0, |a| a.balance),
        ))
    }

    /// Closes a session the client no longer knows (it answered a
    /// Re-Auth-Request with DIAMETER_UNKNOWN_SESSION_ID): releases what it
    /// holds and writes its session-end CDR with cause
    /// [`ClosingCause::Rejected`] and Result-Code 5002. Returns false when
    /// the session is not open.
    pub fn release_session(&mut self, session_id: &str, now: Timestamp, out: &mut Output) -> bool {
        let Some(key) = self.ledger.session_key(session_id) else {
            return false;
        };
        let number = self
            .ledger
            .sessions
            .get(&key)
            .map_or(0, |s| s.last_request_number);
        let mut answer = CcAnswer::default();
        let mut cx = self.cx(now, &mut answer, out);
        cx.close_session(key, ClosingCause::Rejected, 5002, None, number);
        true
    }

    /// Closes every open session of the peer `host` opened before
    /// `restarted`, as [`Engine::release_session`] does: the peer restarted
    /// and lost its state (RFC 6733 section 8.16), so it will never
    /// continue them. A session is the peer's when its Session-Id begins
    /// with the peer's identity and a `;` (RFC 6733 section 8.8, compared
    /// without regard to case). Returns the Session-Ids closed.
    pub fn release_sessions_of_peer(
        &mut self,
        host: &str,
        restarted: Timestamp,
        now: Timestamp,
        out: &mut Output,
    ) -> Vec<Arc<str>> {
        let of_peer = |sid: &str| {
            sid.len() > host.len()
                && sid.as_bytes()[host.len()] == b';'
                && sid.as_bytes()[..host.len()].eq_ignore_ascii_case(host.as_bytes())
        };
        let mut ended: Vec<Arc<str>> = self
            .ledger
            .sessions
            .values()
            .filter(|s| s.opened_at < restarted && of_peer(&s.session_id))
            .map(|s| s.session_id.clone())
            .collect();
        ended.sort();
        ended.retain(|sid| self.release_session(sid, now, out));
        ended
    }

    /// What `q` would cost the account `account` under its plan, without
    /// charging anything ([`Catalog::quote`]).
    pub fn quote(&self, account: AccountId, q: &crate::QuoteRequest) -> Result<crate::Quote> {
        let acc = self
            .ledger
            .accounts
            .get(&account)
            .ok_or(Error::UnknownAccount(account))?;
        self.catalog.quote(acc.plan.as_deref(), q)
    }

    /// The open sessions of an account.
    pub fn account_sessions(&self, account: AccountId) -> impl Iterator<Item = &Session> {
        self.ledger
            .sessions
            .values()
            .filter(move |s| s.account == account)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::TOP_UP_KEYS_PER_ACCOUNT;
    use crate::types::UnitKind;
    use crate::SubscriptionType;

    fn engine() -> Engine {
        Engine::new(Catalog::default(), EngineOptions::default())
    }

    fn new_account(id: u64, msisdn: &str, balance: i64) -> NewAccount {
        NewAccount {
            id: AccountId(id),
            subscribers: vec![SubscriptionId::e164(msisdn)],
            balance,
            ..NewAccount::default()
        }
    }

    /// Replays `out`'s effects on a fresh engine and compares the states.
    fn replays_to_same_state(live: &Engine, out: &Output) {
        let mut replayed = engine();
        for e in &out.effects {
            replayed.apply(e).unwrap();
        }
        let (a, b) = (live.snapshot(), replayed.snapshot());
        assert_eq!(a.ledger.accounts, b.ledger.accounts);
        assert_eq!(a.ledger.top_up_keys, b.ledger.top_up_keys);
        assert_eq!(a.directory, b.directory);
    }

    #[test]
    fn a_created_account_is_found_by_its_identities_and_replays() {
        let mut e = engine();
        let mut out = Output::default();
        let mut new = new_account(7, "+46709990001", 1000);
        new.subscribers.push(SubscriptionId::new(
            SubscriptionType::Imsi,
            "240010000000001",
        ));
        new.credit_limit = 50;
        new.bundles.push(Bundle::new(
            1,
            UnitKind::Octets,
            1 << 20,
            Timestamp(0),
            Timestamp(10),
        ));
        e.create_account(new, &mut out).unwrap();
        assert_eq!(
            e.resolve_subscriber(&SubscriptionId::e164("46709990001")),
            Some(AccountId(7))
        );
        let a = e.account(AccountId(7)).unwrap();
        assert_eq!(
            (a.balance, a.credit_limit, a.initial_balance),
            (1000, 50, 1000)
        );
        assert!(a.is_conserved());
        assert_eq!(e.directory().identities_of(AccountId(7)).len(), 2);
        replays_to_same_state(&e, &out);
    }

    #[test]
    fn creating_a_taken_id_or_identity_changes_nothing() {
        let mut e = engine();
        let mut out = Output::default();
        e.create_account(new_account(1, "461", 10), &mut out)
            .unwrap();
        assert_eq!(
            e.create_account(new_account(1, "462", 10), &mut out),
            Err(Error::DuplicateAccount(AccountId(1)))
        );
        assert!(matches!(
            e.create_account(new_account(2, "461", 10), &mut out),
            Err(Error::DuplicateSubscriber(_))
        ));
        assert!(e.account(AccountId(2)).is_none());
        assert_eq!(out.effects.len(), 1);
        let mut none = new_account(3, "463", 10);
        none.subscribers.clear();
        assert!(e.create_account(none, &mut out).is_err());
        assert!(e
            .create_account(new_account(4, "464", -1), &mut out)
            .is_err());
    }

    #[test]
    fn the_same_top_up_key_tops_up_once() {
        let mut e = engine();
        let mut out = Output::default();
        e.create_account(new_account(1, "461", 100), &mut out)
            .unwrap();
        let id = AccountId(1);
        assert_eq!(
            e.top_up_once(id, 50, "k1", &mut out),
            Ok(TopUp::Applied(150))
        );
        assert_eq!(
            e.top_up_once(id, 50, "k1", &mut out),
            Ok(TopUp::Repeated(150))
        );
        assert!(matches!(
            e.top_up_once(id, 60, "k1", &mut out),
            Err(Error::IdempotencyConflict { amount: 50, .. })
        ));
        assert_eq!(
            e.top_up_once(id, 5, "k2", &mut out),
            Ok(TopUp::Applied(155))
        );
        let a = e.account(id).unwrap();
        assert_eq!(a.topped_up, 55);
        assert!(a.is_conserved());
        replays_to_same_state(&e, &out);
        // A replayed journal repeating a key is not this engine's journal.
        let again = Effect::ToppedUpWithKey {
            account: id,
            amount: 50,
            key: "k1".into(),
        };
        assert!(e.apply(&again).is_err());
    }

    #[test]
    fn only_the_latest_keys_are_remembered() {
        let mut e = engine();
        let mut out = Output::default();
        e.create_account(new_account(1, "461", 0), &mut out)
            .unwrap();
        for i in 0..=TOP_UP_KEYS_PER_ACCOUNT {
            e.top_up_once(AccountId(1), 1, &format!("k{i}"), &mut out)
                .unwrap();
        }
        assert_eq!(
            e.top_up_once(AccountId(1), 1, "k0", &mut out),
            Ok(TopUp::Applied(TOP_UP_KEYS_PER_ACCOUNT as i64 + 2))
        );
        replays_to_same_state(&e, &out);
    }

    #[test]
    fn delete_forgets_the_account_and_frees_its_identities() {
        let mut e = engine();
        let mut out = Output::default();
        e.create_account(new_account(1, "461", 10), &mut out)
            .unwrap();
        e.top_up_once(AccountId(1), 5, "k", &mut out).unwrap();
        e.set_credit_limit(AccountId(1), 20, &mut out).unwrap();
        assert_eq!(e.account(AccountId(1)).unwrap().credit_limit, 20);
        e.delete_account(AccountId(1), &mut out).unwrap();
        assert!(e.account(AccountId(1)).is_none());
        assert!(e.resolve_subscriber(&SubscriptionId::e164("461")).is_none());
        assert_eq!(
            e.delete_account(AccountId(1), &mut out),
            Err(Error::UnknownAccount(AccountId(1)))
        );
        e.create_account(new_account(2, "461", 10), &mut out)
            .unwrap();
        replays_to_same_state(&e, &out);
    }
}
