//! Account operations a shard applies for the operator API: the engine
//! does the work ([`gyro_charging::Engine::create_account`] and the
//! others), the shard journals the effects into its current batch, so the
//! runtime answers once the batch is durable, exactly like a CCA.

use gyro_charging::{
    Account, AccountId, AccountStatus, NewAccount, Quote, QuoteRequest, SubscriptionId, Timestamp,
    TopUp,
};

use crate::shard::CreditShard;

/// What an operator asks of the shard that owns an account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccountOp {
    /// Create an account.
    Create(NewAccount),
    /// Read an account.
    Show(AccountId),
    /// Change an account's status and/or credit limit.
    Update {
        /// Account.
        account: AccountId,
        /// New status.
        status: Option<AccountStatus>,
        /// New credit limit.
        credit_limit: Option<i64>,
        /// New price plan.
        plan: Option<String>,
    },
    /// Delete an account with no open session.
    Delete(AccountId),
    /// Add money once per idempotency key.
    TopUp {
        /// Account.
        account: AccountId,
        /// Amount, minor units.
        amount: i64,
        /// Idempotency key.
        key: String,
    },
    /// List accounts in id order: those with an id above `after`, at
    /// most `limit`.
    List {
        /// Only ids above this one.
        after: Option<AccountId>,
        /// Most accounts listed.
        limit: usize,
    },
    /// Price usage without charging it: under an account's plan, or a
    /// named plan (or the default plan) when no account is given.
    Rate {
        /// Account whose plan prices it.
        account: Option<AccountId>,
        /// Plan, when no account is given.
        plan: Option<String>,
        /// What to price.
        request: Box<QuoteRequest>,
    },
    /// List open sessions: an account's, or (with `None`) any, at most
    /// `limit`.
    Sessions {
        /// Account, or every account of the shard.
        account: Option<AccountId>,
        /// Most sessions listed.
        limit: usize,
    },
}

/// An account as the operator API shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountState {
    /// The account.
    pub account: Account,
    /// Its subscriber identities.
    pub subscribers: Vec<SubscriptionId>,
    /// Its open sessions.
    pub open_sessions: usize,
}

/// An open session as the operator API shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionState {
    /// Diameter Session-Id.
    pub session_id: String,
    /// Account charged.
    pub account: AccountId,
    /// Identity the account was found by.
    pub subscriber: SubscriptionId,
    /// Service-Context-Id.
    pub service_context: String,
    /// When the CCR-Initial arrived.
    pub opened_at: Timestamp,
    /// When the last request arrived.
    pub last_seen: Timestamp,
    /// Last CC-Request-Number.
    pub request_number: u32,
    /// Money reserved by the session.
    pub reserved: i64,
    /// The interface it was opened over.
    pub interface: gyro_charging::Interface,
}

/// What an [`AccountOp`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The account after the operation; `repeated` for a top-up whose
    /// idempotency key was used before (nothing changed).
    Account {
        /// The account.
        state: Box<AccountState>,
        /// Whether a top-up repeated an earlier one.
        repeated: bool,
    },
    /// Accounts, in id order.
    Accounts(Vec<AccountState>),
    /// The account is gone; these were its identities.
    Deleted(Vec<SubscriptionId>),
    /// Open sessions: at most the limit asked for, and how many match.
    Sessions {
        /// The sessions listed.
        sessions: Vec<SessionState>,
        /// Open sessions of the shard that match (listed or not).
        total: usize,
    },
    /// A price.
    Quote(Box<Quote>),
}

/// Why an [`AccountOp`] was not done. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// No such account.
    #[error("{0}")]
    NotFound(String),
    /// It conflicts with the state (exists, in use, key reused).
    #[error("{0}")]
    Conflict(String),
    /// The request itself is invalid.
    #[error("{0}")]
    Invalid(String),
    /// The shard cannot make changes durable now.
    #[error("{0}")]
    Unavailable(String),
}

impl From<gyro_charging::Error> for OpError {
    fn from(e: gyro_charging::Error) -> Self {
        use gyro_charging::Error as E;
        let text = e.to_string();
        match e {
            E::UnknownAccount(_) => OpError::NotFound(text),
            E::DuplicateAccount(_)
            | E::DuplicateSubscriber(_)
            | E::AccountInUse(_)
            | E::IdempotencyConflict { .. } => OpError::Conflict(text),
            E::InvalidAmount(_)
            | E::WouldOverflow(_)
            | E::InvalidAccount(_)
            | E::InvalidPlan(_)
            | E::Unrated(_) => OpError::Invalid(text),
            _ => OpError::Unavailable(text),
        }
    }
}

impl CreditShard {
    /// Applies an account operation: its effects join the shard's batch
    /// (answer only once the runtime says the batch is durable).
    pub fn apply(&mut self, op: AccountOp) -> Result<Outcome, OpError> {
        let unavailable = || {
            OpError::Unavailable(
                "this shard cannot make changes durable now; it reloads from disk".into(),
            )
        };
        let (engine, output) = self.engine_and_output().ok_or_else(unavailable)?;
        output.clear();
        let (account, repeated) = match op {
            AccountOp::Create(new) => {
                let id = new.id;
                engine.create_account(new, output)?;
                (id, false)
            }
            AccountOp::Show(id) => (id, false),
            AccountOp::Update {
                account,
                status,
                credit_limit,
                plan,
            } => {
                if engine.account(account).is_none() {
                    return Err(gyro_charging::Error::UnknownAccount(account).into());
                }
                if let Some(plan) = plan {
                    engine.set_plan(account, Some(&plan), output)?;
                }
                if let Some(limit) = credit_limit {
                    engine.set_credit_limit(account, limit, output)?;
                }
                if let Some(status) = status {
                    engine.set_status(account, status, output)?;
                }
                (account, false)
            }
            AccountOp::Delete(id) => {
                let identities = engine.directory().identities_of(id);
                engine.delete_account(id, output)?;
                if !self.record_output() {
                    return Err(unavailable());
                }
                return Ok(Outcome::Deleted(identities));
            }
            AccountOp::TopUp {
                account,
                amount,
                key,
            } => {
                let r = engine.top_up_once(account, amount, &key, output)?;
                (account, matches!(r, TopUp::Repeated(_)))
            }
            AccountOp::Rate {
                account,
                plan,
                request,
            } => {
                let quote = match account {
                    Some(a) => engine.quote(a, &request)?,
                    None => engine.catalog().quote(plan.as_deref(), &request)?,
                };
                return Ok(Outcome::Quote(Box::new(quote)));
            }
            AccountOp::List { after, limit } => {
                return Ok(Outcome::Accounts(list_accounts(engine, after, limit)));
            }
            AccountOp::Sessions { account, limit } => {
                let open = &engine.ledger().sessions;
                let total = match account {
                    None => open.len(),
                    Some(a) => open.values().filter(|s| s.account == a).count(),
                };
                let sessions = open
                    .values()
                    .filter(|s| account.is_none_or(|a| a == s.account))
                    .take(limit)
                    .map(|s| SessionState {
                        session_id: s.session_id.to_string(),
                        account: s.account,
                        subscriber: SubscriptionId::new(s.subscriber.kind, &*s.subscriber.data),
                        service_context: s.service_context.to_string(),
                        opened_at: s.opened_at,
                        last_seen: s.last_seen,
                        request_number: s.last_request_number,
                        reserved: s.reserved_money(),
                        interface: s.interface,
                    })
                    .collect();
                return Ok(Outcome::Sessions { sessions, total });
            }
        };
        let state =
            account_state(engine, account).ok_or(gyro_charging::Error::UnknownAccount(account))?;
        if !self.record_output() {
            return Err(unavailable());
        }
        Ok(Outcome::Account {
            state: Box::new(state),
            repeated,
        })
    }
}

fn account_state(engine: &gyro_charging::Engine, id: AccountId) -> Option<AccountState> {
    let account = engine.account(id)?.clone();
    let mut subscribers = engine.directory().identities_of(id);
    subscribers.sort_by_key(|s| s.kind.code());
    Some(AccountState {
        account,
        subscribers,
        open_sessions: engine.account_sessions(id).count(),
    })
}

/// The first `limit` accounts with ids above `after`, with their
/// identities: one pass over the accounts, one over the directory.
fn list_accounts(
    engine: &gyro_charging::Engine,
    after: Option<AccountId>,
    limit: usize,
) -> Vec<AccountState> {
    let mut ids: Vec<AccountId> = engine
        .accounts()
        .map(|a| a.id)
        .filter(|id| after.is_none_or(|after| *id > after))
        .collect();
    if ids.len() > limit {
        ids.select_nth_unstable(limit);
        ids.truncate(limit);
    }
    ids.sort_unstable();
    let mut states: Vec<AccountState> = ids
        .iter()
        .filter_map(|id| {
            Some(AccountState {
                account: engine.account(*id)?.clone(),
                subscribers: Vec::new(),
                open_sessions: 0,
            })
        })
        .collect();
    let index: std::collections::HashMap<AccountId, usize> =
        ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    for (kind, data, account) in engine.directory().iter() {
        if let Some(&i) = index.get(&account) {
            states[i]
                .subscribers
                .push(SubscriptionId::new(kind, &**data));
        }
    }
    for s in engine.ledger().sessions.values() {
        if let Some(&i) = index.get(&s.account) {
            states[i].open_sessions += 1;
        }
    }
    for s in &mut states {
        s.subscribers.sort_by_key(|id| id.kind.code());
    }
    states
}
