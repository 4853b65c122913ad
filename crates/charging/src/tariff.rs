//! Tariffs and rating: which tariff applies to a service, what units cost,
//! and how many units a sum of money buys.
//!
//! A tariff prices `price` minor units per `per` units (octets, seconds or
//! events). Usage is first rounded up to the charging `increment`, then
//! priced, and the money is rounded as the tariff says. All arithmetic is
//! integer (128-bit intermediates); there is no floating point.

use crate::error::{Error, Result};
use crate::types::{RatingKey, UnitKind};
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

/// The currency money is counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Currency {
    /// ISO 4217 numeric code (Currency-Code), e.g. 978 for EUR.
    pub code: u32,
    /// Decimal places of a minor unit, e.g. 2 for cents.
    pub exponent: u8,
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
    /// Charging increment: usage is rounded up to a multiple of it, and
    /// grants are multiples of it.
    #[serde(default = "one")]
    pub increment: u64,
    /// Rounding of money.
    #[serde(default)]
    pub rounding: Rounding,
    /// Quota granted when the request names no amount.
    pub default_quota: u64,
    /// Validity-Time sent with each grant, seconds.
    #[serde(default)]
    pub validity_time: Option<u32>,
    /// What the client must do when the final units are used.
    #[serde(default)]
    pub final_unit: FinalUnitIndication,
    /// Zero-rated service handling; absent: charged normally.
    #[serde(default)]
    pub zero_rated: Option<ZeroRated>,
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
        Ok(())
    }

    /// Whether the tariff charges nothing.
    pub fn is_free(&self) -> bool {
        self.price == 0 || self.zero_rated.is_some()
    }

    /// `units` rounded up to the charging increment.
    pub fn rounded_units(&self, units: u64) -> u64 {
        let inc = self.increment.max(1);
        units.div_ceil(inc).saturating_mul(inc)
    }

    /// The price of `units` (after rounding to the increment).
    pub fn cost(&self, units: u64) -> i64 {
        if self.is_free() || units == 0 {
            return 0;
        }
        mul_div(
            u128::from(self.rounded_units(units)),
            self.price as u128,
            u128::from(self.per),
            self.rounding,
        )
    }

    /// The largest grant of at most `want` units whose cost fits in `money`.
    /// Grants smaller than `want` are multiples of the increment.
    pub fn affordable_units(&self, money: i64, want: u64) -> u64 {
        if self.cost(want) <= money {
            return want;
        }
        if money <= 0 {
            return 0;
        }
        let inc = self.increment.max(1);
        // cost is non-decreasing in units: binary search over whole increments.
        let (mut lo, mut hi) = (0u64, want / inc);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.cost(mid.saturating_mul(inc)) <= money {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo.saturating_mul(inc)
    }
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

/// All tariffs, and the currency.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    /// Currency of every price and balance.
    pub currency: Currency,
    /// The tariffs; the most specific match wins (see [`Catalog::find`]).
    pub tariffs: Vec<Tariff>,
}

/// Why a service could not be rated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RatingError {
    /// No tariff serves this Service-Context-Id at all.
    UnknownContext,
    /// The context is known but no tariff serves this rating group /
    /// service.
    NoTariff,
}

impl Catalog {
    /// A catalog of validated tariffs.
    pub fn new(currency: Currency, tariffs: Vec<Tariff>) -> Result<Self> {
        for t in &tariffs {
            t.validate()?;
        }
        Ok(Catalog { currency, tariffs })
    }

    /// Whether any tariff serves this Service-Context-Id.
    pub fn knows_context(&self, ctx: &str) -> bool {
        self.tariffs
            .iter()
            .any(|t| context_matches(&t.service_context, ctx))
    }

    /// The index of the tariff for `key` under `ctx`. Preference: exact
    /// rating group and service, then service only, then rating group only,
    /// then a tariff naming neither (a catch-all for the context).
    pub fn find(&self, ctx: &str, key: RatingKey) -> Result<usize, RatingError> {
        let mut best: Option<(u8, usize)> = None;
        let mut context_known = false;
        for (i, t) in self.tariffs.iter().enumerate() {
            if !context_matches(&t.service_context, ctx) {
                continue;
            }
            context_known = true;
            let rg = match t.rating_group {
                None => Some(false),
                Some(rg) if key.rating_group == Some(rg) => Some(true),
                Some(_) => None,
            };
            let sid = match t.service_identifier {
                None => Some(false),
                Some(s) if key.service_id == Some(s) => Some(true),
                Some(_) => None,
            };
            let score = match (rg, sid) {
                (Some(true), Some(true)) => 4,
                (Some(false), Some(true)) => 3,
                (Some(true), Some(false)) => 2,
                (Some(false), Some(false)) => 1,
                _ => continue,
            };
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, i));
            }
        }
        match best {
            Some((_, i)) => Ok(i),
            None if context_known => Err(RatingError::NoTariff),
            None => Err(RatingError::UnknownContext),
        }
    }

    /// The tariff at `index`.
    pub fn tariff(&self, index: usize) -> Option<&Tariff> {
        self.tariffs.get(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            zero_rated: None,
        }
    }

    #[test]
    fn remembered_tariffs_are_what_the_catalog_finds() {
        let mut voice = data();
        voice.service_context = "32260@3gpp.org".into();
        voice.rating_group = None;
        let mut sid = data();
        sid.rating_group = None;
        sid.service_identifier = Some(7);
        let catalog = Catalog {
            currency: Currency::default(),
            tariffs: vec![data(), voice, sid],
        };
        let mut memo = TariffMemo::default();
        let contexts = [
            "32251@3gpp.org",
            "X.32251@3GPP.ORG",
            "32260@3gpp.org",
            "nope",
            "",
        ];
        let keys = [None, Some(10), Some(20)]
            .into_iter()
            .flat_map(|rating_group| {
                [None, Some(7)].map(|service_id| RatingKey {
                    rating_group,
                    service_id,
                })
            });
        let keys: Vec<RatingKey> = keys.collect();
        // Twice over: the second round is answered from the memo.
        for _ in 0..2 {
            for ctx in contexts {
                for &key in &keys {
                    assert_eq!(
                        memo.find(&catalog, ctx, key),
                        catalog.find(ctx, key),
                        "{ctx} {key:?}"
                    );
                }
            }
        }
        // Bounded: past its limits it answers without remembering.
        for n in 0..(TariffMemo::CONTEXTS + 10) {
            let ctx = format!("{n}.32251@3gpp.org");
            assert_eq!(
                memo.find(&catalog, &ctx, keys[2]),
                catalog.find(&ctx, keys[2])
            );
        }
        assert_eq!(memo.contexts.len(), TariffMemo::CONTEXTS);
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

/// The answers of [`Catalog::find`] already given, per Service-Context-Id:
/// a request's few rating keys are found with one hash of its context and
/// a short scan instead of matching every tariff's context again. The
/// catalog does not change under an engine; at most [`TariffMemo::CONTEXTS`]
/// contexts of [`TariffMemo::KEYS`] keys each are remembered (past that,
/// `find` answers without remembering).
#[derive(Clone, Debug, Default)]
pub(crate) struct TariffMemo {
    contexts: std::collections::HashMap<Box<str>, Vec<Found>, foldhash::fast::RandomState>,
}

/// A rating key and what [`Catalog::find`] answered for it.
type Found = (RatingKey, Result<usize, RatingError>);

impl TariffMemo {
    /// Most contexts remembered.
    const CONTEXTS: usize = 256;
    /// Most rating keys remembered per context.
    const KEYS: usize = 64;

    /// [`Catalog::find`], remembered.
    pub(crate) fn find(
        &mut self,
        catalog: &Catalog,
        ctx: &str,
        key: RatingKey,
    ) -> Result<usize, RatingError> {
        if let Some(keys) = self.contexts.get_mut(ctx) {
            if let Some((_, r)) = keys.iter().find(|(k, _)| *k == key) {
                return *r;
            }
            let r = catalog.find(ctx, key);
            if keys.len() < Self::KEYS {
                keys.push((key, r));
            }
            return r;
        }
        let r = catalog.find(ctx, key);
        if self.contexts.len() < Self::CONTEXTS {
            self.contexts.insert(ctx.into(), vec![(key, r)]);
        }
        r
    }
}
