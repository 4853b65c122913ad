//! The JSON the API reads and writes.

use gyro_charging::{
    AccountStatus, Bundle, Currency, NewAccount, SubscriptionId, SubscriptionType, Timestamp,
    UnitKind,
};
use gyro_ocs::operations::{AccountState, SessionState};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::problem::Problem;

/// Whether an account may be charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Normal service.
    Active,
    /// Every chargeable request is denied (4010).
    Blocked,
}

impl From<Status> for AccountStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Active => AccountStatus::Active,
            Status::Blocked => AccountStatus::Blocked,
        }
    }
}

impl From<AccountStatus> for Status {
    fn from(s: AccountStatus) -> Self {
        match s {
            AccountStatus::Active => Status::Active,
            AccountStatus::Blocked => Status::Blocked,
        }
    }
}

/// What a bundle counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Bytes.
    Octets,
    /// Seconds.
    Seconds,
    /// Events (SMS and the like).
    Events,
}

impl From<Unit> for UnitKind {
    fn from(u: Unit) -> Self {
        match u {
            Unit::Octets => UnitKind::Octets,
            Unit::Seconds => UnitKind::Seconds,
            Unit::Events => UnitKind::Events,
        }
    }
}

impl From<UnitKind> for Unit {
    fn from(u: UnitKind) -> Self {
        match u {
            UnitKind::Octets => Unit::Octets,
            UnitKind::Seconds => Unit::Seconds,
            UnitKind::Events => Unit::Events,
        }
    }
}

/// A bundle to give a new account.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBundle {
    /// Id within the account (default: its position, from 1).
    pub id: Option<u32>,
    /// What it counts.
    pub unit: Unit,
    /// How many units it holds.
    pub units: u64,
    /// Rating groups it serves (empty with `service_ids`: every service
    /// of its unit).
    #[serde(default)]
    pub rating_groups: Vec<u32>,
    /// Service-Identifiers it serves.
    #[serde(default)]
    pub service_ids: Vec<u32>,
    /// Start of validity, Unix milliseconds (default: always).
    #[serde(default)]
    pub valid_from: u64,
    /// End of validity (exclusive), Unix milliseconds (default: never).
    pub valid_until: Option<u64>,
}

/// `POST /v1/accounts`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAccount {
    /// E.164 number (digits, an optional leading '+').
    pub msisdn: Option<String>,
    /// IMSI (digits).
    pub imsi: Option<String>,
    /// Initial balance in minor units (default 0).
    #[serde(default)]
    pub balance: i64,
    /// How far below zero the balance may go, minor units (default 0).
    #[serde(default)]
    pub credit_limit: i64,
    /// Status (default active).
    pub status: Option<Status>,
    /// Unit allowances.
    #[serde(default)]
    pub bundles: Vec<NewBundle>,
    /// Its price plan, by name (default: the plan named `default`). It
    /// must exist and be priced in the account's currency.
    pub plan: Option<String>,
    /// The ISO 4217 alphabetic code of its money (default: the charging
    /// configuration's `[currency]`).
    pub currency: Option<String>,
    /// Account id, 1 to 2^53 - 1 (default: the next free one). It picks
    /// the shard.
    #[schema(minimum = 1, maximum = 9007199254740991_u64)]
    pub id: Option<u64>,
}

/// `PATCH /v1/accounts/{subscriber}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateAccount {
    /// New status.
    pub status: Option<Status>,
    /// New credit limit, minor units.
    pub credit_limit: Option<i64>,
    /// New price plan, by name (`default` for the plan of accounts that
    /// name none). Open sessions are rated by it from their next request.
    pub plan: Option<String>,
}

/// `POST /v1/accounts/{subscriber}/top-ups`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TopUpRequest {
    /// Money to add, minor units, positive.
    pub amount: i64,
    /// Names this top-up: the same key again tops up once.
    pub idempotency_key: String,
}

/// A bundle as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BundleView {
    /// Id within the account.
    pub id: u32,
    /// What it counts.
    pub unit: Unit,
    /// Units it started with.
    pub initial: u64,
    /// Units free.
    pub remaining: u64,
    /// Units held by open reservations.
    pub reserved: u64,
    /// Units consumed.
    pub consumed: u64,
    /// Rating groups it serves.
    pub rating_groups: Vec<u32>,
    /// Service-Identifiers it serves.
    pub service_ids: Vec<u32>,
    /// Start of validity, Unix milliseconds.
    pub valid_from: u64,
    /// End of validity, Unix milliseconds.
    pub valid_until: u64,
}

impl From<&gyro_charging::Bundle> for BundleView {
    fn from(b: &gyro_charging::Bundle) -> Self {
        BundleView {
            id: b.id,
            unit: b.unit.into(),
            initial: b.initial,
            remaining: b.remaining,
            reserved: b.reserved,
            consumed: b.consumed,
            rating_groups: b.rating_groups.clone(),
            service_ids: b.service_ids.clone(),
            valid_from: b.valid_from.0,
            valid_until: b.valid_until.0,
        }
    }
}

/// An account as the API shows it. Money in integer minor units.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AccountView {
    /// Account id.
    pub id: u64,
    /// E.164 number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msisdn: Option<String>,
    /// IMSI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imsi: Option<String>,
    /// Money available.
    pub balance: i64,
    /// Money held by open reservations.
    pub reserved: i64,
    /// How far below zero the balance may go.
    pub credit_limit: i64,
    /// Status.
    pub status: Status,
    /// Unit allowances.
    pub bundles: Vec<BundleView>,
    /// Money charged so far, net of refunds.
    pub debited: i64,
    /// Balance the account was created with.
    pub initial_balance: i64,
    /// Sum of its top-ups.
    pub topped_up: i64,
    /// Its price plan (`default`: the plan of accounts that name none).
    pub plan: String,
    /// The ISO 4217 code of its money (numeric when gyro knows no
    /// alphabetic one), when it is not the configuration's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// Its open credit-control sessions.
    pub open_sessions: usize,
    /// For a top-up: true when its idempotency key was used before, so
    /// nothing was added this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed: Option<bool>,
}

impl AccountView {
    /// The view of an account's state.
    pub fn new(s: &AccountState) -> Self {
        let a = &s.account;
        let find = |kind| {
            s.subscribers
                .iter()
                .find(|id| id.kind == kind)
                .map(|id| id.data.clone())
        };
        AccountView {
            id: a.id.0,
            msisdn: find(SubscriptionType::E164),
            imsi: find(SubscriptionType::Imsi),
            balance: a.balance,
            reserved: a.reserved,
            credit_limit: a.credit_limit,
            status: a.status.into(),
            bundles: a.bundles.iter().map(BundleView::from).collect(),
            debited: a.debited,
            initial_balance: a.initial_balance,
            topped_up: a.topped_up,
            plan: a
                .plan
                .as_deref()
                .unwrap_or(gyro_charging::DEFAULT_PLAN)
                .to_string(),
            currency: a
                .currency
                .map(|c| c.alpha().map_or_else(|| c.code.to_string(), str::to_string)),
            open_sessions: s.open_sessions,
            replayed: None,
        }
    }
}

/// `GET /v1/accounts`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AccountList {
    /// Accounts in id order.
    pub accounts: Vec<AccountView>,
}

/// An open credit-control session.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionView {
    /// Diameter Session-Id.
    pub session_id: String,
    /// Account charged.
    pub account: u64,
    /// Identity the account was found by, as `kind:data`.
    pub subscriber: String,
    /// Service-Context-Id.
    pub service_context: String,
    /// When it opened, Unix milliseconds.
    pub opened_at: u64,
    /// When its last request arrived, Unix milliseconds.
    pub last_seen: u64,
    /// Its last CC-Request-Number.
    pub request_number: u32,
    /// Money it holds reserved, minor units.
    pub reserved: i64,
    /// The interface it was opened over: `gy` (Diameter) or `nchf`
    /// (Nchf_ConvergedCharging; its Session-Id is the ChargingDataRef).
    pub interface: String,
}

impl From<SessionState> for SessionView {
    fn from(s: SessionState) -> Self {
        SessionView {
            session_id: s.session_id,
            account: s.account.0,
            subscriber: s.subscriber.to_string(),
            service_context: s.service_context,
            opened_at: s.opened_at.0,
            last_seen: s.last_seen.0,
            request_number: s.request_number,
            reserved: s.reserved,
            interface: s.interface.as_str().to_string(),
        }
    }
}

/// `GET /v1/sessions`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionList {
    /// Open sessions, at most the query's limit.
    pub sessions: Vec<SessionView>,
    /// How many open sessions match the query, listed or not.
    pub total: usize,
}

/// Digits, with an optional leading '+' for an E.164 number, of
/// `min..=15` digits.
/// The same rule as the charging configuration's
/// ([`gyro_charging::accounts::check_digits`]).
fn digits(s: &str, min: usize, what: &str, plus: bool) -> Result<String, Problem> {
    gyro_charging::accounts::check_digits(s, min, plus)
        .map(str::to_string)
        .map_err(|e| Problem::invalid(format!("{what} {s:?}: {e}")))
}

impl CreateAccount {
    /// The engine's account, once checked (422 on anything invalid).
    pub fn to_new_account(&self) -> Result<NewAccount, Problem> {
        let mut subscribers = Vec::new();
        if let Some(m) = &self.msisdn {
            subscribers.push(SubscriptionId::e164(digits(m, 1, "msisdn", true)?));
        }
        if let Some(i) = &self.imsi {
            subscribers.push(SubscriptionId::new(
                SubscriptionType::Imsi,
                digits(i, gyro_charging::accounts::MIN_IMSI_DIGITS, "imsi", false)?,
            ));
        }
        if subscribers.is_empty() {
            return Err(Problem::invalid("an account needs an msisdn or an imsi"));
        }
        let currency = match &self.currency {
            None => None,
            Some(c) => Some(Currency::from_alpha(c).ok_or_else(|| {
                Problem::invalid(format!("currency {c:?}: not an ISO 4217 code gyro knows"))
            })?),
        };
        if self.balance < 0 {
            return Err(Problem::invalid("balance must not be negative"));
        }
        if self.credit_limit < 0 {
            return Err(Problem::invalid("credit_limit must not be negative"));
        }
        let mut bundles = Vec::with_capacity(self.bundles.len());
        for (i, b) in self.bundles.iter().enumerate() {
            let id = b.id.unwrap_or(i as u32 + 1);
            let until = b.valid_until.unwrap_or(u64::MAX);
            if b.units == 0 || until <= b.valid_from {
                return Err(Problem::invalid(format!(
                    "bundle {id}: needs units > 0 and valid_until after valid_from"
                )));
            }
            let mut bundle = Bundle::new(
                id,
                b.unit.into(),
                b.units,
                Timestamp(b.valid_from),
                Timestamp(until),
            );
            bundle.rating_groups = b.rating_groups.clone();
            bundle.service_ids = b.service_ids.clone();
            bundles.push(bundle);
        }
        Ok(NewAccount {
            id: gyro_charging::AccountId(self.id.unwrap_or(0)),
            subscribers,
            balance: self.balance,
            credit_limit: self.credit_limit,
            status: self.status.map_or(AccountStatus::Active, Into::into),
            bundles,
            plan: self.plan.clone(),
            currency,
        })
    }
}
