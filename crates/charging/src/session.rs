//! Credit-control sessions and the reservations they hold.

use crate::accounts::SharedSubscriptionId;
use crate::types::{AccountId, RatingKey, SessionKey, Timestamp, UnitKind};
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::sync::Arc;

/// The bundle holds of a reservation: inline for the usual one or two
/// bundles (serialised as a list).
pub type BundleHolds = SmallVec<[BundleHold; 2]>;

/// The reservations of a session: inline for the usual one or two rating
/// groups, so opening a session allocates nothing for them (serialised as
/// a list).
pub type Reservations = SmallVec<[Reservation; 2]>;

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
    pub bundles: BundleHolds,
    /// Start of the usage period this reservation covers.
    pub since: Timestamp,
}

/// A server-side credit-control session (RFC 8506 section 7, state Open).
///
/// Its identifiers are shared, not copied: the Session-Id with the
/// Session-Id index and the journaled [`crate::Effect::SessionOpened`],
/// the subscriber with the subscriber directory, the Service-Context-Id
/// with the other sessions of the same context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Engine handle.
    pub key: SessionKey,
    /// Diameter Session-Id.
    pub session_id: Arc<str>,
    /// The account charged.
    pub account: AccountId,
    /// The identity the account was found by.
    pub subscriber: SharedSubscriptionId,
    /// Service-Context-Id of the CCR-Initial.
    pub service_context: Arc<str>,
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
    pub reservations: Reservations,
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
