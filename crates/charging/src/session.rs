//! Credit-control sessions and the reservations they hold.

use crate::accounts::SharedSubscriptionId;
use crate::request::Interface;
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
    /// Whether the request that opened the session made it, so the first
    /// usage reported against it pays the tariff's first interval.
    /// `None` in snapshots written before gyro recorded it: such a
    /// reservation is the opening one when it dates from the session's
    /// opening (the rule then, which two requests within one millisecond
    /// could fool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opening: Option<bool>,
}

impl Reservation {
    /// Whether the request that opened `session` made it (see
    /// [`Reservation::opening`]).
    pub fn is_opening(&self, session: &Session) -> bool {
        self.opening.unwrap_or(self.since == session.opened_at)
    }
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
    /// Whether a request after the opening one has been processed
    /// ([`crate::Effect::SessionTouched`]): until then the session's
    /// grants and reservations are its opening ones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub touched: bool,
    /// Open reservations, one per rating key.
    pub reservations: Reservations,
    /// The called party and visited network the session is rated by:
    /// from its CCR-Initial, replaced by a later request that carries a
    /// new one ([`crate::Effect::SessionContextChanged`]).
    #[serde(default, skip_serializing_if = "RatingContext::is_empty")]
    pub context: RatingContext,
    /// The interface its first request arrived over; the CDRs the engine
    /// writes for it on its own (supervision, a release) carry it.
    #[serde(default, skip_serializing_if = "Interface::is_gy")]
    pub interface: Interface,
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

/// Most digits [`Digits`] holds: as many as destination prefixes compare
/// ([`crate::rating::prefix::MAX_DIGITS`]).
pub const MAX_CONTEXT_DIGITS: usize = crate::rating::prefix::MAX_DIGITS;

/// Up to [`MAX_CONTEXT_DIGITS`] decimal digits, held inline (no heap):
/// the digits a called party dials, or a visited network's MCC and MNC.
/// Serialised as a string of digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Digits {
    len: u8,
    digits: [u8; MAX_CONTEXT_DIGITS],
}

impl Digits {
    /// `digits` (ASCII), when they are all decimal digits and at most
    /// [`MAX_CONTEXT_DIGITS`] of them.
    pub fn new(digits: &[u8]) -> Option<Self> {
        if digits.len() > MAX_CONTEXT_DIGITS || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut d = Digits {
            len: digits.len() as u8,
            digits: [0; MAX_CONTEXT_DIGITS],
        };
        d.digits[..digits.len()].copy_from_slice(digits);
        Some(d)
    }

    /// The digits a called-party address dials
    /// ([`crate::rating::prefix::dialled_digits`]: the first
    /// [`MAX_CONTEXT_DIGITS`], all that destinations look at).
    pub fn dialled(address: &str) -> Self {
        let mut digits = [0; MAX_CONTEXT_DIGITS];
        let len = crate::rating::prefix::dialled_digits(address, &mut digits) as u8;
        Digits { len, digits }
    }

    /// A visited network's MCC and MNC digits; empty when `plmn` is not
    /// digits (it is then in no zone).
    pub fn plmn(plmn: &str) -> Self {
        Digits::new(plmn.as_bytes()).unwrap_or_default()
    }

    /// The digits, ASCII.
    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[..usize::from(self.len)]
    }

    /// The digits as a string.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits are ever stored.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    /// Whether there are no digits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for Digits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl Serialize for Digits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Digits {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Digits::new(s.as_bytes()).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected at most {MAX_CONTEXT_DIGITS} decimal digits"
            ))
        })
    }
}

/// What a session is rated by besides its service: the digits its called
/// party dials (Ro: IMS-Information Called-Party-Address, SMS-Information
/// recipient) and its visited network (3GPP-SGSN-MCC-MNC, or the PLMN of
/// 3GPP-User-Location-Info), as last carried. Gateways send
/// Service-Information in the CCR-Initial and again only when it changes
/// (3GPP TS 32.299), so a session remembers it. The raw digits are kept,
/// not the destination or zone they fall in, so a session rates by the
/// destinations and zones of the configuration in force.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RatingContext {
    /// The called party's digits; none: never carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub called: Option<Digits>,
    /// The visited network's MCC and MNC digits; none: never carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visited: Option<Digits>,
}

impl RatingContext {
    /// What a request carries: its called party and visited network
    /// (each empty string: not carried).
    pub fn carried(called_party: &str, visited_plmn: &str) -> Self {
        RatingContext {
            called: (!called_party.is_empty()).then(|| Digits::dialled(called_party)),
            visited: (!visited_plmn.is_empty()).then(|| Digits::plmn(visited_plmn)),
        }
    }

    /// Whether nothing was ever carried.
    pub fn is_empty(&self) -> bool {
        self.called.is_none() && self.visited.is_none()
    }

    /// This context with what `newer` carries put in its place.
    pub fn updated(self, newer: RatingContext) -> Self {
        RatingContext {
            called: newer.called.or(self.called),
            visited: newer.visited.or(self.visited),
        }
    }
}
