//! Accounts, unit bundles, subscriber identities and the subscriber
//! directory.
//!
//! An account's money is split three ways, always in integer minor units:
//! `balance` (available), `reserved` (held for granted quota) and `debited`
//! (charged so far, net of refunds). Conservation, checked by
//! [`Account::is_conserved`], is
//! `initial_balance + topped_up == balance + reserved + debited`.

use crate::error::{Error, Result};
use crate::types::{AccountId, RatingKey, Timestamp, UnitKind};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Whether an account may be charged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccountStatus {
    /// Normal service.
    #[default]
    Active,
    /// Every chargeable request gets END_USER_SERVICE_DENIED (4010).
    Blocked,
}

/// An allowance of units (bytes, seconds or events) for some rating groups
/// or services, valid in a time window, used before money.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bundle {
    /// Identifier, unique within its account.
    pub id: u32,
    /// What the bundle counts; it only serves tariffs of the same unit.
    pub unit: UnitKind,
    /// Rating groups it covers; empty together with `service_ids` covers
    /// every service of that unit.
    #[serde(default)]
    pub rating_groups: Vec<u32>,
    /// Service-Identifiers it covers.
    #[serde(default)]
    pub service_ids: Vec<u32>,
    /// Start of validity (inclusive).
    pub valid_from: Timestamp,
    /// End of validity (exclusive).
    pub valid_until: Timestamp,
    /// Units the bundle started with.
    pub initial: u64,
    /// Units still free to reserve or consume.
    pub remaining: u64,
    /// Units held by open reservations.
    pub reserved: u64,
    /// Units consumed.
    pub consumed: u64,
}

impl Bundle {
    /// A fresh bundle of `units` valid in `[from, until)`.
    pub fn new(id: u32, unit: UnitKind, units: u64, from: Timestamp, until: Timestamp) -> Self {
        Bundle {
            id,
            unit,
            rating_groups: Vec::new(),
            service_ids: Vec::new(),
            valid_from: from,
            valid_until: until,
            initial: units,
            remaining: units,
            reserved: 0,
            consumed: 0,
        }
    }

    /// Whether the bundle may pay for `unit`s of `key` at `now`.
    pub fn applies(&self, key: RatingKey, unit: UnitKind, now: Timestamp) -> bool {
        if self.unit != unit || now < self.valid_from || now >= self.valid_until {
            return false;
        }
        if self.rating_groups.is_empty() && self.service_ids.is_empty() {
            return true;
        }
        let rg = key
            .rating_group
            .is_some_and(|rg| self.rating_groups.contains(&rg));
        let sid = key
            .service_id
            .is_some_and(|sid| self.service_ids.contains(&sid));
        rg || sid
    }
}

/// A prepaid account: money, credit limit, status and bundles.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// Stable identifier.
    pub id: AccountId,
    /// Money available, in minor units. May go negative down to
    /// `-credit_limit`, never further.
    pub balance: i64,
    /// How far below zero the balance may go (0 for pure prepaid).
    pub credit_limit: i64,
    /// Active or blocked.
    pub status: AccountStatus,
    /// Money held by open reservations.
    pub reserved: i64,
    /// Money charged so far, net of refunds.
    pub debited: i64,
    /// The balance the account was created with.
    pub initial_balance: i64,
    /// Sum of all top-ups since creation.
    pub topped_up: i64,
    /// Unit allowances, used before money.
    pub bundles: Vec<Bundle>,
    /// Its price plan; none: the plan named `"default"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Arc<str>>,
    /// The currency of its money; none: the configuration's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<crate::tariff::Currency>,
}

impl Account {
    /// A new active account holding `balance`.
    pub fn new(id: AccountId, balance: i64) -> Self {
        Account {
            id,
            balance,
            credit_limit: 0,
            status: AccountStatus::Active,
            reserved: 0,
            debited: 0,
            initial_balance: balance,
            topped_up: 0,
            bundles: Vec::new(),
            plan: None,
            currency: None,
        }
    }

    /// Money that may still be reserved or charged: balance plus credit
    /// limit, never negative.
    pub fn spendable(&self) -> i64 {
        self.balance.saturating_add(self.credit_limit).max(0)
    }

    /// `initial_balance + topped_up == balance + reserved + debited`, and
    /// every bundle's `initial == remaining + reserved + consumed`.
    pub fn is_conserved(&self) -> bool {
        let left = i128::from(self.initial_balance) + i128::from(self.topped_up);
        let right = i128::from(self.balance) + i128::from(self.reserved) + i128::from(self.debited);
        left == right
            && self.bundles.iter().all(|b| {
                u128::from(b.initial)
                    == u128::from(b.remaining) + u128::from(b.reserved) + u128::from(b.consumed)
            })
    }

    /// The bundle with this id.
    pub fn bundle_mut(&mut self, id: u32) -> Option<&mut Bundle> {
        self.bundles.iter_mut().find(|b| b.id == id)
    }

    /// Units of `unit` for `key` that bundles can still give at `now`.
    pub fn bundle_units_available(&self, key: RatingKey, unit: UnitKind, now: Timestamp) -> u64 {
        self.bundles
            .iter()
            .filter(|b| b.applies(key, unit, now))
            .fold(0u64, |acc, b| acc.saturating_add(b.remaining))
    }
}

/// Subscription-Id-Type (RFC 8506 section 8.47).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubscriptionType {
    /// END_USER_E164 (0): an MSISDN.
    #[default]
    E164 = 0,
    /// END_USER_IMSI (1).
    Imsi = 1,
    /// END_USER_SIP_URI (2).
    SipUri = 2,
    /// END_USER_NAI (3).
    Nai = 3,
    /// END_USER_PRIVATE (4).
    Private = 4,
}

impl SubscriptionType {
    /// From the Subscription-Id-Type value.
    pub fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            0 => Self::E164,
            1 => Self::Imsi,
            2 => Self::SipUri,
            3 => Self::Nai,
            4 => Self::Private,
            _ => return None,
        })
    }
    /// The Subscription-Id-Type value.
    pub fn code(self) -> u32 {
        self as u32
    }
    /// Short lower-case name used in configuration and CDRs.
    pub fn name(self) -> &'static str {
        match self {
            Self::E164 => "e164",
            Self::Imsi => "imsi",
            Self::SipUri => "sip",
            Self::Nai => "nai",
            Self::Private => "private",
        }
    }
    fn from_name(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "e164" | "msisdn" => Self::E164,
            "imsi" => Self::Imsi,
            "sip" | "sip-uri" => Self::SipUri,
            "nai" => Self::Nai,
            "private" => Self::Private,
            _ => return None,
        })
    }
}

/// A subscriber identity from a Subscription-Id AVP.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SubscriptionId {
    /// Subscription-Id-Type.
    pub kind: SubscriptionType,
    /// Subscription-Id-Data.
    pub data: String,
}

impl SubscriptionId {
    /// A new identity.
    pub fn new(kind: SubscriptionType, data: impl Into<String>) -> Self {
        SubscriptionId {
            kind,
            data: data.into(),
        }
    }
    /// An E.164 number.
    pub fn e164(data: impl Into<String>) -> Self {
        Self::new(SubscriptionType::E164, data)
    }
    /// Parses `kind:data`, e.g. `e164:46700000001` or `imsi:240...`.
    pub fn parse(s: &str) -> Result<Self> {
        let (kind, data) = s
            .split_once(':')
            .ok_or_else(|| Error::Config(format!("subscriber {s:?}: expected kind:data")))?;
        let kind = SubscriptionType::from_name(kind)
            .ok_or_else(|| Error::Config(format!("subscriber {s:?}: unknown kind {kind:?}")))?;
        if data.is_empty() {
            return Err(Error::Config(format!("subscriber {s:?}: empty data")));
        }
        Ok(SubscriptionId::new(kind, data))
    }
}

/// The most digits an E.164 number (ITU-T E.164) or an IMSI (3GPP TS
/// 23.003) has.
pub const MAX_NUMBER_DIGITS: usize = 15;

/// The fewest digits gyro accepts in an IMSI (MCC + MNC + at least one
/// digit of MSIN).
pub const MIN_IMSI_DIGITS: usize = 5;

/// The digits of a subscriber number: `min` to [`MAX_NUMBER_DIGITS`]
/// ASCII digits, after a leading `'+'` when `plus` allows one (E.164).
/// The one rule for numbers from the configuration and the admin API; the
/// error says what was expected.
pub fn check_digits(s: &str, min: usize, plus: bool) -> std::result::Result<&str, String> {
    let d = if plus {
        s.strip_prefix('+').unwrap_or(s)
    } else {
        s
    };
    if d.len() < min || d.len() > MAX_NUMBER_DIGITS || !d.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected {min} to {MAX_NUMBER_DIGITS} digits"));
    }
    Ok(d)
}

/// Checks the data of a `kind` identity where its kind has a number rule
/// (E.164: 1 to 15 digits after an optional `'+'`; IMSI: 5 to 15 digits);
/// other kinds take any non-empty data.
pub fn check_number(kind: SubscriptionType, data: &str) -> std::result::Result<(), String> {
    match kind {
        SubscriptionType::E164 => check_digits(data, 1, true).map(drop),
        SubscriptionType::Imsi => check_digits(data, MIN_IMSI_DIGITS, false).map(drop),
        _ => Ok(()),
    }
}

impl fmt::Display for SubscriptionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.name(), self.data)
    }
}

/// A subscriber identity held by an open session and its journaled
/// opening: a [`SubscriptionId`] whose data is shared. When the request
/// spells the identity as the [`SubscriberDirectory`] holds it (the usual
/// case), the data is the directory's own copy, so opening a session copies
/// no identity. Serialised like a [`SubscriptionId`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SharedSubscriptionId {
    /// Subscription-Id-Type.
    pub kind: SubscriptionType,
    /// Subscription-Id-Data.
    pub data: Arc<str>,
}

impl SharedSubscriptionId {
    /// A new identity.
    pub fn new(kind: SubscriptionType, data: impl Into<Arc<str>>) -> Self {
        SharedSubscriptionId {
            kind,
            data: data.into(),
        }
    }
}

impl SharedSubscriptionId {
    /// `id`, sharing `key` (the directory's copy of its data,
    /// [`SubscriberDirectory::resolve_key`]) when `id` spells its data the
    /// same way, else with a copy of its data.
    pub fn sharing(id: &SubscriptionId, key: &Arc<str>) -> Self {
        if **key == *id.data {
            SharedSubscriptionId::new(id.kind, Arc::clone(key))
        } else {
            SharedSubscriptionId::from(id)
        }
    }
}

impl From<&SubscriptionId> for SharedSubscriptionId {
    fn from(id: &SubscriptionId) -> Self {
        SharedSubscriptionId::new(id.kind, id.data.as_str())
    }
}

impl fmt::Display for SharedSubscriptionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.name(), self.data)
    }
}

/// E.164 numbers are compared without a leading '+'; SIP URIs and NAIs as
/// given.
pub(crate) fn normalise(kind: SubscriptionType, data: &str) -> &str {
    match kind {
        SubscriptionType::E164 => data.strip_prefix('+').unwrap_or(data),
        _ => data,
    }
}

/// Maps subscriber identities to accounts. Several identities may map to
/// one account. It holds no balances, so a server may build one for all
/// shards and share it read-only to route requests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriberDirectory {
    by_kind: [HashMap<Arc<str>, AccountId>; 5],
}

impl SubscriberDirectory {
    /// An empty directory.
    pub fn new() -> Self {
        Self::default()
    }
    /// Maps `id` to `account`; fails if `id` already maps elsewhere.
    pub fn insert(&mut self, id: &SubscriptionId, account: AccountId) -> Result<()> {
        let key = normalise(id.kind, &id.data);
        self.map_key(id.kind, key, account, || Arc::from(key))
            .map_err(|()| Error::DuplicateSubscriber(id.to_string()))
    }

    /// Maps an identity, given as another directory holds it (kind and
    /// normalised data, [`SubscriberDirectory::iter`]), to `account`,
    /// sharing that directory's copy of the data; fails if it already maps
    /// elsewhere.
    pub fn insert_shared(
        &mut self,
        kind: SubscriptionType,
        data: &Arc<str>,
        account: AccountId,
    ) -> Result<()> {
        self.map_key(kind, data, account, || Arc::clone(data))
            .map_err(|()| {
                Error::DuplicateSubscriber(SubscriptionId::new(kind, &**data).to_string())
            })
    }

    /// Maps the normalised `key` to `account` (its stored copy made by
    /// `stored` only when it is new); `Err` if it maps to another account.
    fn map_key(
        &mut self,
        kind: SubscriptionType,
        key: &str,
        account: AccountId,
        stored: impl FnOnce() -> Arc<str>,
    ) -> std::result::Result<(), ()> {
        let map = &mut self.by_kind[kind as usize];
        match map.get(key) {
            Some(a) if *a != account => Err(()),
            Some(_) => Ok(()),
            None => {
                map.insert(stored(), account);
                Ok(())
            }
        }
    }

    /// Removes the identities mapped to `account`; returns them.
    pub fn remove_account(&mut self, account: AccountId) -> Vec<SubscriptionId> {
        let mut removed = Vec::new();
        for (i, map) in self.by_kind.iter_mut().enumerate() {
            map.retain(|data, a| {
                let keep = *a != account;
                if !keep {
                    if let Some(kind) = SubscriptionType::from_code(i as u32) {
                        removed.push(SubscriptionId::new(kind, &**data));
                    }
                }
                keep
            });
        }
        removed
    }

    /// The identities mapped to `account` (a scan of the directory).
    pub fn identities_of(&self, account: AccountId) -> Vec<SubscriptionId> {
        let mut found = Vec::new();
        for (i, map) in self.by_kind.iter().enumerate() {
            let Some(kind) = SubscriptionType::from_code(i as u32) else {
                continue;
            };
            for (data, a) in map {
                if *a == account {
                    found.push(SubscriptionId::new(kind, &**data));
                }
            }
        }
        found
    }

    /// Every identity with its account.
    pub fn iter(&self) -> impl Iterator<Item = (SubscriptionType, &Arc<str>, AccountId)> {
        self.by_kind.iter().enumerate().flat_map(|(i, map)| {
            let kind = SubscriptionType::from_code(i as u32).unwrap_or_default();
            map.iter().map(move |(d, a)| (kind, d, *a))
        })
    }

    /// The account of one identity.
    pub fn lookup(&self, kind: SubscriptionType, data: &str) -> Option<AccountId> {
        self.by_kind[kind as usize]
            .get(normalise(kind, data))
            .copied()
    }
    /// The account of the first known identity in `ids` (a CCR may carry
    /// several Subscription-Id AVPs, e.g. E.164 and IMSI), with its index.
    pub fn resolve(&self, ids: &[SubscriptionId]) -> Option<(usize, AccountId)> {
        self.resolve_key(ids).map(|(i, a, _)| (i, a))
    }

    /// [`SubscriberDirectory::resolve`], with the directory's copy of the
    /// identity's (normalised) data, for
    /// [`SharedSubscriptionId::sharing`].
    pub fn resolve_key(&self, ids: &[SubscriptionId]) -> Option<(usize, AccountId, &Arc<str>)> {
        ids.iter().enumerate().find_map(|(i, id)| {
            self.by_kind[id.kind as usize]
                .get_key_value(normalise(id.kind, &id.data))
                .map(|(key, account)| (i, *account, key))
        })
    }

    /// `id` with its data shared with the directory's copy when the
    /// directory holds it spelt the same way (after a restore, so that
    /// open sessions do not each hold a copy).
    pub fn share(&self, id: &SharedSubscriptionId) -> SharedSubscriptionId {
        match self.by_kind[id.kind as usize].get_key_value(&*id.data) {
            Some((key, _)) => SharedSubscriptionId::new(id.kind, Arc::clone(key)),
            None => id.clone(),
        }
    }
    /// Number of identities.
    pub fn len(&self) -> usize {
        self.by_kind.iter().map(HashMap::len).sum()
    }
    /// Whether the directory is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_spelt_as_the_directory_holds_it_shares_the_directorys_copy() {
        let mut d = SubscriberDirectory::new();
        d.insert(&SubscriptionId::e164("46700000001"), AccountId(1))
            .unwrap();
        let asked = [SubscriptionId::e164("46700000001")];
        let (i, account, key) = d.resolve_key(&asked).unwrap();
        assert_eq!((i, account), (0, AccountId(1)));
        let shared = SharedSubscriptionId::sharing(&asked[0], key);
        assert!(Arc::ptr_eq(&shared.data, key));
        assert_eq!(shared.to_string(), asked[0].to_string());
        let copy = SharedSubscriptionId::from(&asked[0]);
        assert!(Arc::ptr_eq(&d.share(&copy).data, key));
    }

    #[test]
    fn a_directory_built_from_another_shares_its_copies_and_refuses_a_second_account() {
        let mut engine = SubscriberDirectory::new();
        engine
            .insert(&SubscriptionId::e164("+46700000001"), AccountId(1))
            .unwrap();
        let mut routing = SubscriberDirectory::new();
        for (kind, data, account) in engine.iter() {
            routing.insert_shared(kind, data, account).unwrap();
            // Again, for the same account: nothing changes.
            routing.insert_shared(kind, data, account).unwrap();
        }
        let (kind, data, _) = engine.iter().next().unwrap();
        let asked = [SubscriptionId::e164("+46700000001")];
        let (_, account, key) = routing.resolve_key(&asked).unwrap();
        assert_eq!(account, AccountId(1));
        assert!(Arc::ptr_eq(key, data));
        let err = routing.insert_shared(kind, data, AccountId(2)).unwrap_err();
        assert!(
            matches!(&err, Error::DuplicateSubscriber(id) if id == "e164:46700000001"),
            "{err}"
        );
        assert_eq!(routing.lookup(kind, "46700000001"), Some(AccountId(1)));
    }

    #[test]
    fn an_identity_spelt_otherwise_keeps_its_own_spelling() {
        let mut d = SubscriberDirectory::new();
        d.insert(&SubscriptionId::e164("46700000001"), AccountId(1))
            .unwrap();
        let asked = [SubscriptionId::e164("+46700000001")];
        let (_, account, key) = d.resolve_key(&asked).unwrap();
        assert_eq!(account, AccountId(1));
        let shared = SharedSubscriptionId::sharing(&asked[0], key);
        assert_eq!(&*shared.data, "+46700000001");
        assert_eq!(d.share(&shared), shared);
    }

    #[test]
    fn a_shared_identity_serialises_like_a_subscription_id() {
        let id = SubscriptionId::new(SubscriptionType::Imsi, "240011234567890");
        let shared = SharedSubscriptionId::from(&id);
        let json = serde_json::to_string(&shared).unwrap();
        assert_eq!(json, serde_json::to_string(&id).unwrap());
        assert_eq!(
            serde_json::from_str::<SharedSubscriptionId>(&json).unwrap(),
            shared
        );
    }
}
