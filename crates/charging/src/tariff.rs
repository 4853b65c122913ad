//! Tariffs and rating: which tariff applies to a service, what units cost,
//! and how many units a sum of money buys.
//!
//! A tariff prices `price` minor units per `per` units (octets, seconds or
//! events). Usage is first rounded up to the charging `increment` (and the
//! first interval), then paid from bundle units, then what is left is
//! priced, and the money is rounded as the tariff says (`rounding` rounds
//! money only, never the units). All arithmetic is
//! integer (128-bit intermediates); there is no floating point.

use crate::error::{Error, Result};
pub use crate::rating::schedule::{HourWindow, Weekday};
pub use crate::rating::{Catalog, RatingError};
use crate::types::UnitKind;
use serde::{Deserialize, Serialize};

/// How a fractional amount of money is rounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rounding {
    /// Towards the operator: any fraction costs a whole minor unit.
    #[default]
    Up,
    /// Towards the subscriber.
    Down,
    /// Half up.
    Nearest,
}

/// What to do with a zero-rated service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZeroRated {
    /// Answer DIAMETER_CREDIT_CONTROL_NOT_APPLICABLE (4011): the client
    /// stops asking.
    NotApplicable,
    /// Grant quota as usual without charging; usage still makes CDRs.
    Free,
}

/// Final-Unit-Action (RFC 8506 section 8.35).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinalUnitAction {
    /// TERMINATE (0).
    #[default]
    Terminate = 0,
    /// REDIRECT (1).
    Redirect = 1,
    /// RESTRICT_ACCESS (2).
    RestrictAccess = 2,
}

/// Redirect-Address-Type (RFC 8506 section 8.38).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RedirectAddressType {
    /// IPv4 address (0).
    Ipv4 = 0,
    /// IPv6 address (1).
    Ipv6 = 1,
    /// URL (2).
    Url = 2,
    /// SIP URI (3).
    SipUri = 3,
}

/// Redirect-Server (RFC 8506 section 8.37).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RedirectServer {
    /// Redirect-Address-Type.
    pub address_type: RedirectAddressType,
    /// Redirect-Server-Address.
    pub address: String,
}

/// Final-Unit-Indication contents (RFC 8506 section 8.34).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FinalUnitIndication {
    /// Final-Unit-Action.
    pub action: FinalUnitAction,
    /// Redirect-Server, for REDIRECT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect: Option<RedirectServer>,
    /// Restriction-Filter-Rule values, for RESTRICT_ACCESS.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restriction_filter_rules: Vec<String>,
    /// Filter-Id values, for RESTRICT_ACCESS.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filter_ids: Vec<String>,
}

/// The currency money is counted in: an ISO 4217 code and the number of
/// decimals of its minor unit. In configuration either the alphabetic code
/// of a common currency (`currency = "SEK"`) or the numbers
/// (`currency = { code = 752, exponent = 2 }`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "CurrencyRepr")]
pub struct Currency {
    /// ISO 4217 numeric code (Currency-Code), e.g. 978 for EUR.
    pub code: u32,
    /// Decimal places of a minor unit, e.g. 2 for cents.
    pub exponent: u8,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum CurrencyRepr {
    Alpha(String),
    Numbers { code: u32, exponent: u8 },
}

impl TryFrom<CurrencyRepr> for Currency {
    type Error = String;
    fn try_from(r: CurrencyRepr) -> std::result::Result<Self, String> {
        match r {
            CurrencyRepr::Numbers { code, exponent } => Currency::checked(code, exponent),
            CurrencyRepr::Alpha(a) => Currency::from_alpha(&a).ok_or_else(|| {
                format!("unknown currency {a:?}: give {{ code = <ISO 4217 number>, exponent = <decimals> }}")
            }),
        }
    }
}

/// Common ISO 4217 currencies: alphabetic code, numeric code, exponent.
const ISO_4217: &[(&str, u32, u8)] = &[
    ("AED", 784, 2),
    ("AUD", 36, 2),
    ("BGN", 975, 2),
    ("BHD", 48, 3),
    ("BRL", 986, 2),
    ("CAD", 124, 2),
    ("CHF", 756, 2),
    ("CLP", 152, 0),
    ("CNY", 156, 2),
    ("CZK", 203, 2),
    ("DKK", 208, 2),
    ("EGP", 818, 2),
    ("EUR", 978, 2),
    ("GBP", 826, 2),
    ("HKD", 344, 2),
    ("HUF", 348, 2),
    ("IDR", 360, 2),
    ("ILS", 376, 2),
    ("INR", 356, 2),
    ("ISK", 352, 0),
    ("JOD", 400, 3),
    ("JPY", 392, 0),
    ("KES", 404, 2),
    ("KRW", 410, 0),
    ("KWD", 414, 3),
    ("MAD", 504, 2),
    ("MXN", 484, 2),
    ("MYR", 458, 2),
    ("NGN", 566, 2),
    ("NOK", 578, 2),
    ("NZD", 554, 2),
    ("OMR", 512, 3),
    ("PHP", 608, 2),
    ("PKR", 586, 2),
    ("PLN", 985, 2),
    ("QAR", 634, 2),
    ("RON", 946, 2),
    ("RSD", 941, 2),
    ("SAR", 682, 2),
    ("SEK", 752, 2),
    ("SGD", 702, 2),
    ("THB", 764, 2),
    ("TND", 788, 3),
    ("TRY", 949, 2),
    ("TWD", 901, 2),
    ("UAH", 980, 2),
    ("USD", 840, 2),
    ("VND", 704, 0),
    ("XAF", 950, 0),
    ("XOF", 952, 0),
    ("ZAR", 710, 2),
];

/// The largest ISO 4217 numeric code (they have 3 digits).
pub const MAX_CURRENCY_CODE: u32 = 999;

/// The most decimals a currency's minor unit may have: 10^18 minor units
/// still fit the `i64` that holds money (ISO 4217 currencies use 0 to 4).
pub const MAX_CURRENCY_EXPONENT: u8 = 18;

impl Currency {
    /// A currency from its numbers, once they are checked: `code` 1 to
    /// [`MAX_CURRENCY_CODE`], `exponent` at most [`MAX_CURRENCY_EXPONENT`].
    pub fn checked(code: u32, exponent: u8) -> std::result::Result<Self, String> {
        if !(1..=MAX_CURRENCY_CODE).contains(&code) {
            return Err(format!(
                "currency code = {code}: an ISO 4217 numeric code has 3 digits (1 to {MAX_CURRENCY_CODE})"
            ));
        }
        if exponent > MAX_CURRENCY_EXPONENT {
            return Err(format!(
                "currency exponent = {exponent}: at most {MAX_CURRENCY_EXPONENT} decimals"
            ));
        }
        Ok(Currency { code, exponent })
    }

    /// A common currency by its ISO 4217 alphabetic code (`"EUR"`).
    pub fn from_alpha(alpha: &str) -> Option<Self> {
        ISO_4217
            .iter()
            .find(|(a, _, _)| a.eq_ignore_ascii_case(alpha))
            .map(|&(_, code, exponent)| Currency { code, exponent })
    }

    /// Its ISO 4217 alphabetic code, when it is a common currency with the
    /// usual exponent.
    pub fn alpha(self) -> Option<&'static str> {
        ISO_4217
            .iter()
            .find(|&&(_, code, exponent)| code == self.code && exponent == self.exponent)
            .map(|(a, _, _)| *a)
    }
}

impl std::fmt::Display for Currency {
    /// `SEK (752, exponent 2)`, or `752 (exponent 2)` for a code without a
    /// known alphabetic name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.alpha() {
            Some(a) => write!(f, "{a} ({}, exponent {})", self.code, self.exponent),
            None => write!(f, "{} (exponent {})", self.code, self.exponent),
        }
    }
}

impl Default for Currency {
    fn default() -> Self {
        Currency {
            code: 978,
            exponent: 2,
        }
    }
}

fn one() -> u64 {
    1
}

/// One price line of the catalog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tariff {
    /// Name, for CDRs and logs.
    pub name: String,
    /// Service-Context-Id it serves, matched on its suffix: `32251@3gpp.org`
    /// also matches `12.32251@3gpp.org` (case-insensitive, at a dot).
    pub service_context: String,
    /// Rating-Group it serves; absent: any.
    #[serde(default)]
    pub rating_group: Option<u32>,
    /// Service-Identifier it serves; absent: any.
    #[serde(default)]
    pub service_identifier: Option<u32>,
    /// What it counts.
    pub unit: UnitKind,
    /// Price in minor units for each `per` units.
    #[serde(default)]
    pub price: i64,
    /// Units `price` pays for (e.g. 1048576 octets, 60 seconds, 1 event).
    #[serde(default = "one")]
    pub per: u64,
    /// Charging increment: usage is rounded up to a multiple of it before
    /// bundle units and money pay for it, and partial grants and the
    /// bundle units a grant holds are multiples of it.
    #[serde(default = "one")]
    pub increment: u64,
    /// Rounding of money (only: usage always rounds up to the increment).
    #[serde(default)]
    pub rounding: Rounding,
    /// Quota granted when the request names no amount.
    pub default_quota: u64,
    /// Validity-Time sent with each grant, seconds; with a REDIRECT or
    /// RESTRICT_ACCESS [`Tariff::final_unit`] also with the answer to a
    /// CCR-Update whose report uses up its grant (at least the units
    /// granted) and that gets no units (the report of the final units
    /// used, RFC 8506 sections 5.6.2 and 5.6.3): how long the redirection
    /// or restriction holds.
    #[serde(default)]
    pub validity_time: Option<u32>,
    /// What the client must do when the final units are used.
    #[serde(default)]
    pub final_unit: FinalUnitIndication,
    /// Zero-rated service handling; absent: charged normally.
    #[serde(default)]
    pub zero_rated: Option<ZeroRated>,
    /// Days of the week it applies on, in the plan's time zone (empty:
    /// every day).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<Weekday>,
    /// Local time window it applies in, `"HH:MM-HH:MM"` (absent: all
    /// day). A window past midnight belongs to the day it starts on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<HourWindow>,
    /// Destination (a `[destinations]` name) the called number must be in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// Roaming zone (a `[zones]` name) the visited network must be in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// First charging interval: the first usage of a session (and every
    /// event) costs at least this many units, later ones are rounded up
    /// to the increment ("60/1": `first_interval = 60`, `increment = 1`).
    /// 0: none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first_interval: u64,
    /// Volume-Quota-Threshold (octets) sent with each grant (TS 32.299).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_quota_threshold: Option<u32>,
    /// Time-Quota-Threshold (seconds) sent with each grant (TS 32.299).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_quota_threshold: Option<u32>,
    /// Quota-Holding-Time (seconds) sent with each grant (TS 32.299).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_holding_time: Option<u32>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Default for Tariff {
    /// A free catch-all rate of one unit, to fill in with struct update
    /// syntax.
    fn default() -> Self {
        Tariff {
            name: String::new(),
            service_context: String::new(),
            rating_group: None,
            service_identifier: None,
            unit: UnitKind::Octets,
            price: 0,
            per: 1,
            increment: 1,
            rounding: Rounding::Up,
            default_quota: 1,
            validity_time: None,
            final_unit: FinalUnitIndication::default(),
            zero_rated: None,
            days: Vec::new(),
            hours: None,
            destination: None,
            zone: None,
            first_interval: 0,
            volume_quota_threshold: None,
            time_quota_threshold: None,
            quota_holding_time: None,
        }
    }
}

/// `a * b / c` with the given rounding, saturating at `i64::MAX`.
fn mul_div(a: u128, b: u128, c: u128, rounding: Rounding) -> i64 {
    if c == 0 {
        return i64::MAX;
    }
    let p = a.saturating_mul(b);
    let q = match rounding {
        Rounding::Up => p.div_ceil(c),
        Rounding::Down => p / c,
        Rounding::Nearest => (p.saturating_add(c / 2)) / c,
    };
    i64::try_from(q).unwrap_or(i64::MAX)
}

impl Tariff {
    /// Checks the numbers make sense.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::Config(format!("tariff {:?}: {what}", self.name)));
        if self.service_context.is_empty() {
            return bad("empty service_context");
        }
        if self.price < 0 {
            return bad("negative price");
        }
        if self.per == 0 {
            return bad("per must be at least 1");
        }
        if self.increment == 0 {
            return bad("increment must be at least 1");
        }
        if self.default_quota == 0 && self.zero_rated != Some(ZeroRated::NotApplicable) {
            return bad("default_quota must be at least 1");
        }
        if self.final_unit.action == FinalUnitAction::Redirect && self.final_unit.redirect.is_none()
        {
            return bad("final_unit action redirect needs a redirect server");
        }
        if self.volume_quota_threshold.is_some() && self.unit != UnitKind::Octets {
            return bad("volume_quota_threshold needs unit \"octets\"");
        }
        if self.time_quota_threshold.is_some() && self.unit != UnitKind::Seconds {
            return bad("time_quota_threshold needs unit \"seconds\"");
        }
        if self
            .days
            .iter()
            .enumerate()
            .any(|(i, d)| self.days[..i].contains(d))
        {
            return bad("a day is listed twice");
        }
        Ok(())
    }

    /// Whether the tariff charges nothing.
    pub fn is_free(&self) -> bool {
        self.price == 0 || self.zero_rated.is_some()
    }

    /// Whether the rate applies only at some times.
    pub fn is_timed(&self) -> bool {
        !self.days.is_empty() || self.hours.is_some()
    }

    /// `units` rounded up to the charging increment.
    pub fn rounded_units(&self, units: u64) -> u64 {
        let inc = self.increment.max(1);
        units.div_ceil(inc).saturating_mul(inc)
    }

    /// `units` as charged: the first usage (`first`) at least the first
    /// interval and the rest rounded up to the increment; a later usage
    /// rounded up to the increment.
    pub fn charged_units(&self, units: u64, first: bool) -> u64 {
        if units == 0 {
            return 0;
        }
        let fi = self.first_interval;
        if first && fi > 0 {
            if units <= fi {
                fi
            } else {
                fi.saturating_add(self.rounded_units(units - fi))
            }
        } else {
            self.rounded_units(units)
        }
    }

    /// The price of `units` as a first usage (the first interval applies,
    /// then the increment).
    pub fn cost(&self, units: u64) -> i64 {
        self.cost_of(units, true)
    }

    /// The price of `units`, as a first usage of a session or not: the
    /// price of [`Tariff::charged_units`].
    pub fn cost_of(&self, units: u64, first: bool) -> i64 {
        self.price_of_rated(self.charged_units(units, first))
    }

    /// The price of `rated` units already rounded to the increment (and
    /// the first interval): `price` per `per` units, the money rounded as
    /// the tariff says, the units not rounded again. Usage is rounded
    /// first, then paid from bundle units, then this prices the rest.
    pub fn price_of_rated(&self, rated: u64) -> i64 {
        if self.is_free() || rated == 0 {
            return 0;
        }
        mul_div(
            u128::from(rated),
            self.price as u128,
            u128::from(self.per),
            self.rounding,
        )
    }

    /// The units `units` of usage are rated at (`first`: as a first usage):
    /// [`Tariff::charged_units`], or the units themselves for a free
    /// tariff.
    pub fn rated_units(&self, units: u64, first: bool) -> u64 {
        if self.is_free() {
            units
        } else {
            self.charged_units(units, first)
        }
    }

    /// The bundle units a grant of `want` units holds when bundles giving
    /// at most `available` units pay for it: whole increments, as many as
    /// `want` rounded up to the increment needs, so that usage rounded up
    /// to the increment is paid by the units held.
    pub fn bundle_hold(&self, want: u64, available: u64) -> u64 {
        let inc = self.increment.max(1);
        self.rounded_units(want).min(available / inc * inc)
    }

    /// The largest grant of at most `want` units whose cost fits in `money`.
    /// Grants smaller than `want` are multiples of the increment.
    pub fn affordable_units(&self, money: i64, want: u64) -> u64 {
        affordable(self.increment, money, want, |u| self.cost(u))
    }
}

/// The largest grant of at most `want` units whose `cost` (non-decreasing
/// in the units) fits in `money`; grants smaller than `want` are multiples
/// of `increment`.
pub fn affordable(increment: u64, money: i64, want: u64, cost: impl Fn(u64) -> i64) -> u64 {
    if cost(want) <= money {
        return want;
    }
    if money <= 0 {
        return 0;
    }
    let inc = increment.max(1);
    // cost is non-decreasing in units: binary search over whole increments.
    let (mut lo, mut hi) = (0u64, want / inc);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if cost(mid.saturating_mul(inc)) <= money {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo.saturating_mul(inc)
}

/// Whether a request's Service-Context-Id matches a tariff's: equal, or
/// ending with it right after a dot (checklist D.2), ignoring ASCII case.
pub fn context_matches(tariff_ctx: &str, request_ctx: &str) -> bool {
    let (t, r) = (tariff_ctx.as_bytes(), request_ctx.as_bytes());
    if r.len() < t.len() {
        return false;
    }
    let split = r.len() - t.len();
    r[split..].eq_ignore_ascii_case(t) && (split == 0 || r[split - 1] == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::RatingKey;

    fn data() -> Tariff {
        Tariff {
            name: "data".into(),
            service_context: "32251@3gpp.org".into(),
            rating_group: Some(10),
            service_identifier: None,
            unit: UnitKind::Octets,
            price: 100,
            per: 1_000_000,
            increment: 1000,
            rounding: Rounding::Up,
            default_quota: 10_000_000,
            validity_time: Some(600),
            final_unit: FinalUnitIndication::default(),
            ..Tariff::default()
        }
    }

    #[test]
    fn the_first_interval_is_charged_once_then_the_increment() {
        // Voice at 60/1: 0.60 a minute, the first minute whole.
        let t = Tariff {
            unit: UnitKind::Seconds,
            price: 60,
            per: 60,
            increment: 1,
            first_interval: 60,
            ..data()
        };
        assert_eq!(t.charged_units(5, true), 60);
        assert_eq!(t.charged_units(60, true), 60);
        assert_eq!(t.charged_units(61, true), 61);
        assert_eq!(t.charged_units(5, false), 5);
        assert_eq!(t.cost(5), 60);
        assert_eq!(t.cost_of(5, false), 5);
        assert_eq!(t.cost(0), 0);
        // 0.59 buys nothing (the first minute costs 0.60), 0.75 buys 75 s.
        assert_eq!(t.affordable_units(59, 300), 0);
        assert_eq!(t.affordable_units(75, 300), 75);
    }

    #[test]
    fn currencies_read_by_code_or_numbers_and_name_themselves() {
        let sek = Currency::from_alpha("sek").unwrap();
        assert_eq!((sek.code, sek.exponent), (752, 2));
        assert_eq!(sek.to_string(), "SEK (752, exponent 2)");
        let odd = Currency {
            code: 999,
            exponent: 1,
        };
        assert_eq!(odd.to_string(), "999 (exponent 1)");
        #[derive(Deserialize)]
        struct C {
            c: Currency,
        }
        let c: C = toml::from_str("c = \"EUR\"").unwrap();
        assert_eq!(c.c, Currency::default());
        let c: C = toml::from_str("c = { code = 752, exponent = 2 }").unwrap();
        assert_eq!(c.c, sek);
        assert!(toml::from_str::<C>("c = \"XYZ\"").is_err());
    }

    #[test]
    fn currency_numbers_out_of_range_are_refused_naming_the_key() {
        #[derive(Debug, Deserialize)]
        struct C {
            #[allow(dead_code)]
            c: Currency,
        }
        for (text, what) in [
            ("c = { code = 9999, exponent = 2 }", "code = 9999"),
            ("c = { code = 0, exponent = 2 }", "code = 0"),
            ("c = { code = 752, exponent = 30 }", "exponent = 30"),
        ] {
            let e = toml::from_str::<C>(text).unwrap_err().to_string();
            assert!(e.contains(what) && e.contains("line 1"), "{text}: {e}");
        }
        let c: C = toml::from_str("c = { code = 999, exponent = 18 }").unwrap();
        assert_eq!((c.c.code, c.c.exponent), (999, 18));
    }

    #[test]
    fn usage_rounds_up_to_the_increment_then_money_rounds_as_configured() {
        let mut t = data();
        assert_eq!(t.rounded_units(1), 1000);
        assert_eq!(t.rounded_units(1000), 1000);
        assert_eq!(t.rounded_units(1001), 2000);
        // 1001 octets -> 2000 octets -> 0.2 minor units -> 1 (up)
        assert_eq!(t.cost(1001), 1);
        t.rounding = Rounding::Down;
        assert_eq!(t.cost(1001), 0);
        t.rounding = Rounding::Nearest;
        assert_eq!(t.cost(5_000), 1); // 0.5 -> 1
        assert_eq!(t.cost(4_000), 0); // 0.4 -> 0
        assert_eq!(t.cost(0), 0);
    }

    #[test]
    fn rated_units_are_priced_without_rounding_them_again() {
        let t = Tariff {
            price: 1,
            per: 1,
            increment: 1024,
            ..data()
        };
        // 2000 units rate as 2048; with 1000 of them paid by a bundle the
        // other 1048 cost 1048, not 2048.
        assert_eq!(t.charged_units(2000, false), 2048);
        assert_eq!(t.price_of_rated(2048 - 1000), 1048);
        assert_eq!(t.cost_of(2048 - 1000, false), 2048);
        assert_eq!(t.cost_of(2000, false), t.price_of_rated(2048));
        // Rounding down rounds the money only.
        let down = Tariff {
            price: 1,
            per: 1000,
            rounding: Rounding::Down,
            ..t.clone()
        };
        assert_eq!(
            (down.rated_units(1, false), down.price_of_rated(1024)),
            (1024, 1)
        );
        // A free tariff rates the units as they are.
        let free = Tariff {
            price: 0,
            ..t.clone()
        };
        assert_eq!(
            (free.rated_units(1, false), free.price_of_rated(1024)),
            (1, 0)
        );
        // Bundle holds are whole increments.
        assert_eq!(t.bundle_hold(1_000_000, 1_500_000), 1_000_448);
        assert_eq!(t.bundle_hold(2048, 1500), 1024);
        assert_eq!(t.bundle_hold(2048, 1000), 0);
        assert_eq!(t.bundle_hold(1, 5000), 1024);
    }

    #[test]
    fn affordable_units_is_the_largest_grant_that_fits() {
        let t = data();
        assert_eq!(t.affordable_units(1000, 5_000_000), 5_000_000);
        // 250 minor units buy 2.5 MB.
        assert_eq!(t.affordable_units(250, 10_000_000), 2_500_000);
        assert_eq!(t.affordable_units(0, 10_000_000), 0);
        assert_eq!(t.affordable_units(-5, 10_000_000), 0);
        for money in 0..300 {
            let q = t.affordable_units(money, 10_000_000);
            assert!(t.cost(q) <= money);
            assert!(q == 10_000_000 || t.cost(q + 1000) > money);
        }
    }

    #[test]
    fn huge_numbers_saturate_instead_of_overflowing() {
        let mut t = data();
        t.price = i64::MAX;
        t.per = 1;
        assert_eq!(t.cost(u64::MAX), i64::MAX);
        assert_eq!(t.affordable_units(i64::MAX - 1, u64::MAX), 0);
    }

    #[test]
    fn service_context_matches_on_suffix_at_a_dot() {
        assert!(context_matches("32251@3gpp.org", "32251@3gpp.org"));
        assert!(context_matches("32251@3gpp.org", "12.32251@3gpp.org"));
        assert!(context_matches(
            "32251@3gpp.org",
            "ext.001.01.8.32251@3GPP.ORG"
        ));
        assert!(!context_matches("32251@3gpp.org", "132251@3gpp.org"));
        assert!(!context_matches("32251@3gpp.org", "3gpp.org"));
        assert!(!context_matches("32251@3gpp.org", "é32251@3gpp.org2"));
    }

    #[test]
    fn most_specific_tariff_wins() {
        let mut any = data();
        any.rating_group = None;
        any.name = "any".into();
        let mut sid = data();
        sid.rating_group = None;
        sid.service_identifier = Some(7);
        sid.name = "sid".into();
        let c = Catalog::new(Currency::default(), vec![any, data(), sid]).unwrap();
        let k = |rg, s| RatingKey {
            rating_group: rg,
            service_id: s,
        };
        assert_eq!(c.find("32251@3gpp.org", k(Some(10), None)), Ok(1));
        assert_eq!(c.find("32251@3gpp.org", k(Some(10), Some(7))), Ok(2));
        assert_eq!(c.find("32251@3gpp.org", k(Some(99), None)), Ok(0));
        assert_eq!(
            c.find("32274@3gpp.org", k(Some(10), None)),
            Err(RatingError::UnknownContext)
        );
        let c = Catalog::new(Currency::default(), vec![data()]).unwrap();
        assert_eq!(
            c.find("32251@3gpp.org", k(Some(20), None)),
            Err(RatingError::NoTariff)
        );
    }
}
