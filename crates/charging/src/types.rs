//! Small value types shared by the whole crate: time, identifiers, units.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A point in time: milliseconds since the Unix epoch. The engine never
/// reads a clock; every call that needs the time takes a `Timestamp`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// A timestamp from Unix seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }
    /// A timestamp from Unix milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Timestamp(ms)
    }
    /// Unix milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0
    }
    /// Whole Unix seconds.
    pub const fn as_secs(self) -> u64 {
        self.0 / 1000
    }
    /// This time plus `secs` seconds, saturating.
    pub const fn plus_secs(self, secs: u64) -> Self {
        Timestamp(self.0.saturating_add(secs.saturating_mul(1000)))
    }
}

/// A stable account identifier. Shards are chosen from it
/// ([`AccountId::shard`]), so it must never change for an account.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct AccountId(pub u64);

impl AccountId {
    /// The shard (0..`shards`) that owns this account. `shards` of 0 is
    /// treated as 1.
    pub fn shard(self, shards: usize) -> usize {
        let n = shards.max(1) as u64;
        (self.0 % n) as usize
    }
}

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The engine's compact handle of an open credit-control session, used by
/// effects instead of the Session-Id string.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct SessionKey(pub u64);

/// What a tariff counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnitKind {
    /// Octets (CC-Total-Octets, or CC-Input-Octets + CC-Output-Octets).
    Octets,
    /// Seconds (CC-Time).
    Seconds,
    /// Events or other service-specific units (CC-Service-Specific-Units).
    Events,
}

/// The unit counters of a Requested-, Granted- or Used-Service-Unit AVP.
/// `None` means the AVP was absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceUnits {
    /// CC-Time, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u32>,
    /// CC-Total-Octets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_octets: Option<u64>,
    /// CC-Input-Octets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_octets: Option<u64>,
    /// CC-Output-Octets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_octets: Option<u64>,
    /// CC-Service-Specific-Units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_specific: Option<u64>,
    /// Tariff-Time-Change (RFC 8506 section 8.20), in a
    /// Granted-Service-Unit only: when the price of the granted units
    /// changes. Not a counter: [`ServiceUnits::is_empty`] and
    /// [`ServiceUnits::accumulate`] ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tariff_time_change: Option<Timestamp>,
}

impl ServiceUnits {
    /// No counter at all (an empty Requested-Service-Unit: "give me the
    /// default quota").
    pub fn is_empty(&self) -> bool {
        self.time.is_none()
            && self.total_octets.is_none()
            && self.input_octets.is_none()
            && self.output_octets.is_none()
            && self.service_specific.is_none()
    }

    /// The amount of `kind` these counters carry, if any. Octets are
    /// CC-Total-Octets when present, else input plus output.
    pub fn amount(&self, kind: UnitKind) -> Option<u64> {
        match kind {
            UnitKind::Octets => {
                self.total_octets
                    .or(match (self.input_octets, self.output_octets) {
                        (None, None) => None,
                        (i, o) => Some(i.unwrap_or(0).saturating_add(o.unwrap_or(0))),
                    })
            }
            UnitKind::Seconds => self.time.map(u64::from),
            UnitKind::Events => self.service_specific,
        }
    }

    /// Counters holding `amount` of `kind` (for a Granted-Service-Unit).
    /// Time above `u32::MAX` seconds is capped.
    pub fn of(kind: UnitKind, amount: u64) -> Self {
        let mut u = ServiceUnits::default();
        match kind {
            UnitKind::Octets => u.total_octets = Some(amount),
            UnitKind::Seconds => u.time = Some(u32::try_from(amount).unwrap_or(u32::MAX)),
            UnitKind::Events => u.service_specific = Some(amount),
        }
        u
    }

    /// These counters less `other`'s, each not below zero (usage before a
    /// tariff change: the whole report less what came after).
    pub fn minus(&self, other: &ServiceUnits) -> Self {
        fn sub64(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            a.map(|a| a.saturating_sub(b.unwrap_or(0)))
        }
        ServiceUnits {
            time: self.time.map(|t| t.saturating_sub(other.time.unwrap_or(0))),
            total_octets: sub64(self.total_octets, other.total_octets),
            input_octets: sub64(self.input_octets, other.input_octets),
            output_octets: sub64(self.output_octets, other.output_octets),
            service_specific: sub64(self.service_specific, other.service_specific),
            tariff_time_change: None,
        }
    }

    /// Adds `other` to these counters (several Used-Service-Unit AVPs in
    /// one request are summed), saturating.
    pub fn accumulate(&mut self, other: &ServiceUnits) {
        fn add64(a: &mut Option<u64>, b: Option<u64>) {
            if let Some(b) = b {
                *a = Some(a.unwrap_or(0).saturating_add(b));
            }
        }
        if let Some(t) = other.time {
            self.time = Some(self.time.unwrap_or(0).saturating_add(t));
        }
        add64(&mut self.total_octets, other.total_octets);
        add64(&mut self.input_octets, other.input_octets);
        add64(&mut self.output_octets, other.output_octets);
        add64(&mut self.service_specific, other.service_specific);
    }
}

/// Identifies what a quota is for: a Rating-Group, a Service-Identifier or
/// both (the single-service form carries at most a Service-Identifier).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct RatingKey {
    /// Rating-Group.
    pub rating_group: Option<u32>,
    /// Service-Identifier.
    pub service_id: Option<u32>,
}

/// Credit-control Result-Code values the engine produces (RFC 6733 and
/// RFC 8506 section 9).
pub mod result_code {
    /// DIAMETER_SUCCESS.
    pub const SUCCESS: u32 = 2001;
    /// DIAMETER_UNKNOWN_SESSION_ID.
    pub const UNKNOWN_SESSION_ID: u32 = 5002;
    /// DIAMETER_INVALID_AVP_VALUE.
    pub const INVALID_AVP_VALUE: u32 = 5004;
    /// DIAMETER_MISSING_AVP.
    pub const MISSING_AVP: u32 = 5005;
    /// DIAMETER_AVP_NOT_ALLOWED.
    pub const AVP_NOT_ALLOWED: u32 = 5008;
    /// DIAMETER_UNABLE_TO_COMPLY.
    pub const UNABLE_TO_COMPLY: u32 = 5012;
    /// DIAMETER_END_USER_SERVICE_DENIED.
    pub const END_USER_SERVICE_DENIED: u32 = 4010;
    /// DIAMETER_CREDIT_CONTROL_NOT_APPLICABLE.
    pub const CREDIT_CONTROL_NOT_APPLICABLE: u32 = 4011;
    /// DIAMETER_CREDIT_LIMIT_REACHED.
    pub const CREDIT_LIMIT_REACHED: u32 = 4012;
    /// DIAMETER_USER_UNKNOWN.
    pub const USER_UNKNOWN: u32 = 5030;
    /// DIAMETER_RATING_FAILED.
    pub const RATING_FAILED: u32 = 5031;
}

/// Hash map keyed by engine-assigned integers ([`AccountId`],
/// [`SessionKey`]): the Fx hash (one multiply) instead of SipHash, since
/// these keys never come from the network.
pub type IdMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;
