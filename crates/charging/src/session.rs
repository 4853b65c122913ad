//! Credit-control sessions and the reservations they hold.

use crate::accounts::SubscriptionId;
use crate::types::{AccountId, RatingKey, SessionKey, Timestamp, UnitKind};
use serde::{Deserialize, Serialize};

/// Units of one bundle held by a reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleHold {
    /// Bundle id within the account.
    pub bundle: u32,
    /// Units held.
    pub units: u64,
}

/// Quota granted for one rating group / service and not yet reported: the
/// money and bundle units set aside for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// What the quota is for.
    pub key: RatingKey,
    /// The unit of the grant.
    pub unit: UnitKind,
    /// Units granted in total (bundles plus money).
    pub granted_units: u64,
    /// Money held, minor units.
    pub money: i64,
    /// Units the held money pays for.
    pub money_units: u64,
    /// Bundle units held, in the order they are used.
    pub bundles: Vec<BundleHold>,
    /// Start of the usage period this reservation covers.
    pub since: Timestamp,
}

/// A server-side credit-control session (RFC 8506 section 7, state Open).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Engine handle.
    pub key: SessionKey,
    /// Diameter Session-Id.
    pub session_id: String,
    /// The account charged.
    pub account: AccountId,
    /// The identity the account was found by.
    pub subscriber: SubscriptionId,
    /// Service-Context-Id of the CCR-Initial.
    pub service_context: String,
    /// Whether the session uses Multiple-Services-Credit-Control.
    pub multiple_services: bool,
    /// When the session opened.
    pub opened_at: Timestamp,
    /// When the last request arrived.
    pub last_seen: Timestamp,
    /// Tcc: the session is closed by the engine when nothing arrives
    /// before this time.
    pub supervision_until: Timestamp,
    /// CC-Request-Number of the last request processed.
    pub last_request_number: u32,
    /// Open reservations, one per rating key.
    pub reservations: Vec<Reservation>,
}

impl Session {
    /// The reservation for `key`.
    pub fn reservation(&self, key: RatingKey) -> Option<&Reservation> {
        self.reservations.iter().find(|r| r.key == key)
    }
    /// Money held by all reservations.
    pub fn reserved_money(&self) -> i64 {
        self.reservations.iter().map(|r| r.money).sum()
    }
}
