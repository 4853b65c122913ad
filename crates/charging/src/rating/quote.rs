//! Pricing without charging: what some usage would cost under a plan, and
//! which rate prices it (`gyro rate`, `POST /v1/rate`), so an operator can
//! check a plan before it goes live. The same rate selection, rounding
//! and time split as the engine's.

use super::{Catalog, Location, RatingError};
use crate::error::{Error, Result};
use crate::tariff::Currency;
use crate::types::{RatingKey, Timestamp, UnitKind};
use serde::{Deserialize, Serialize};

/// The most parts a quote has: usage that runs past more price changes
/// (months of seconds under a plan with daily windows) is refused rather
/// than priced in an unbounded loop.
pub const MAX_QUOTE_PARTS: usize = 10_000;

/// What to price.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuoteRequest {
    /// Service-Context-Id, e.g. `32251@3gpp.org` (data), `32260@3gpp.org`
    /// (voice), `32274@3gpp.org` (SMS).
    pub service_context: String,
    /// Rating-Group.
    #[serde(default)]
    pub rating_group: Option<u32>,
    /// Service-Identifier.
    #[serde(default)]
    pub service_id: Option<u32>,
    /// Called party (number or `tel:`/`sip:` URI); empty: none.
    #[serde(default)]
    pub called_party: String,
    /// Visited network, MCC and MNC digits; empty: home.
    #[serde(default)]
    pub visited_plmn: String,
    /// Units used, in the unit of the rate that applies (octets, seconds
    /// or events).
    pub units: u64,
    /// When the usage starts.
    pub at: Timestamp,
    /// Whether it is the first usage of a session (the first interval
    /// applies); a later report is rounded to the increment only.
    #[serde(default = "yes")]
    pub first: bool,
}

fn yes() -> bool {
    true
}

/// One part of a quote, priced at one rate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotePart {
    /// The rate's name.
    pub rate: String,
    /// Units of the usage in this part.
    pub units: u64,
    /// Units charged (after the first interval and the increment).
    pub charged_units: u64,
    /// Its price, minor units.
    pub price: i64,
    /// Price of the rate: `rate_price` minor units per `rate_per` units.
    pub rate_price: i64,
    /// See `rate_price`.
    pub rate_per: u64,
    /// When it starts.
    pub from: Timestamp,
}

/// What usage costs and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quote {
    /// The plan.
    pub plan: String,
    /// Its time zone.
    pub time_zone: String,
    /// Its currency.
    pub currency: Currency,
    /// The unit of the rate.
    pub unit: UnitKind,
    /// The destination of the called party, if any.
    pub destination: Option<String>,
    /// The zone of the visited network, if any.
    pub zone: Option<String>,
    /// The parts, in time order: one, or (seconds running past price
    /// changes) one per rate window the usage spans.
    pub parts: Vec<QuotePart>,
    /// The total, minor units.
    pub price: i64,
    /// The next price change after the usage starts, if any within a
    /// week: when, and the rate from then on.
    pub next_change: Option<(Timestamp, String)>,
}

impl Quote {
    /// The total as a decimal amount of the currency, e.g. `"3.50"`.
    pub fn amount(&self) -> String {
        decimal(self.price, self.currency.exponent)
    }
}

/// `minor` minor units as a decimal amount with `exponent` decimals.
pub fn decimal(minor: i64, exponent: u8) -> String {
    if exponent == 0 {
        return minor.to_string();
    }
    let scale = 10u128.pow(u32::from(exponent));
    let abs = u128::from(minor.unsigned_abs());
    format!(
        "{}{}.{:0width$}",
        if minor < 0 { "-" } else { "" },
        abs / scale,
        abs % scale,
        width = usize::from(exponent)
    )
}

/// An instant written as RFC 3339 (`2026-01-15T17:59:00+01:00`,
/// `...Z`), or as Unix milliseconds, or (with a `zone`) as a local date
/// and time (`2026-01-15T17:59`, `2026-01-15 17:59:30`) in that time zone.
pub fn parse_instant(s: &str, zone: Option<&str>) -> Result<Timestamp> {
    let s = s.trim();
    let bad = |why: String| Error::Unrated(format!("time {s:?}: {why}"));
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        let ms = s.parse::<u64>().map_err(|e| bad(e.to_string()))?;
        // Within what a calendar date can say (jiff's range, up to the
        // year 9999): a later instant would be priced at a clamped date.
        let latest = jiff::Timestamp::MAX.as_millisecond() as u64;
        if ms > latest {
            return Err(bad(format!(
                "Unix milliseconds past the year 9999 (at most {latest})"
            )));
        }
        return Ok(Timestamp(ms));
    }
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return u64::try_from(t.as_millisecond())
            .map(Timestamp)
            .map_err(|_| bad("before 1970".into()));
    }
    let dt: jiff::civil::DateTime = s.parse().map_err(|e: jiff::Error| bad(e.to_string()))?;
    let Some(zone) = zone else {
        return Err(bad(
            "give a UTC offset (2026-01-15T17:59:00+01:00) or Unix milliseconds".into(),
        ));
    };
    let tz = jiff::tz::TimeZone::get(zone).map_err(|e| bad(e.to_string()))?;
    let t = tz
        .to_ambiguous_timestamp(dt)
        .compatible()
        .map_err(|e| bad(e.to_string()))?;
    u64::try_from(t.as_millisecond())
        .map(Timestamp)
        .map_err(|_| bad("before 1970".into()))
}

/// `t` as RFC 3339 in time zone `zone` (UTC when it is unknown).
pub fn format_instant(t: Timestamp, zone: &str) -> String {
    let ts = jiff::Timestamp::from_millisecond(i64::try_from(t.0).unwrap_or(i64::MAX))
        .unwrap_or(jiff::Timestamp::MAX);
    let tz = jiff::tz::TimeZone::get(zone).unwrap_or(jiff::tz::TimeZone::UTC);
    let dt = tz.to_datetime(ts);
    let off = tz.to_offset(ts).seconds();
    let (sign, off) = if off < 0 { ('-', -off) } else { ('+', off) };
    format!(
        "{}{sign}{:02}:{:02}",
        dt.strftime("%Y-%m-%dT%H:%M:%S"),
        off / 3600,
        off % 3600 / 60
    )
}

impl Catalog {
    /// Prices `q` under the plan `plan` (none: the default plan) without
    /// charging anything.
    pub fn quote(&self, plan: Option<&str>, q: &QuoteRequest) -> Result<Quote> {
        let p = self.plan_named(plan).ok_or_else(|| {
            Error::InvalidPlan(match plan {
                Some(n) => format!("no plan named {n:?}"),
                None => "the configuration has no plan named \"default\"".into(),
            })
        })?;
        let loc: Location = self.locate(&q.called_party, &q.visited_plmn);
        let key = RatingKey {
            rating_group: q.rating_group,
            service_id: q.service_id,
        };
        let choose = |at: Timestamp| {
            p.rate_at(&q.service_context, key, loc, at).map_err(|e| {
                Error::Unrated(match e {
                    RatingError::UnknownContext => format!(
                        "no rate of plan {:?} serves the service context {:?}",
                        &*p.name, q.service_context
                    ),
                    RatingError::NoTariff => format!(
                        "no rate of plan {:?} serves this rating group / service here and now",
                        &*p.name
                    ),
                })
            })
        };
        let choice = choose(q.at)?;
        let rate = |i: u16| p.rate(i).expect("a chosen rate exists");
        let t = rate(choice.rate);
        let part = |i: u16, units: u64, first: bool, from: Timestamp| {
            let r = rate(i);
            QuotePart {
                rate: r.name.clone(),
                units,
                charged_units: if r.is_free() {
                    0
                } else {
                    r.charged_units(units, first)
                },
                price: r.cost_of(units, first),
                rate_price: if r.zero_rated.is_some() { 0 } else { r.price },
                rate_per: r.per,
                from,
            }
        };
        // Seconds run on from `at`: each part past a price change is
        // priced at the rate from then on, as many changes as the usage
        // spans. Other units are used at one instant.
        let mut parts = Vec::new();
        let (mut from, mut left, mut now, mut first) = (q.at, q.units, choice, q.first);
        let end = q.at.plus_secs(q.units);
        loop {
            let change = now.change.filter(|_| t.unit == UnitKind::Seconds);
            let Some((when, next)) = change.filter(|&(when, _)| when < end) else {
                parts.push(part(now.rate, left, first, from));
                break;
            };
            // The whole seconds that run past the change are priced after it.
            let after = ((end.0 - when.0.max(from.0)) / 1000).min(left);
            if parts.len() + 1 >= MAX_QUOTE_PARTS {
                return Err(Error::Unrated(format!(
                    "the usage runs past more than {MAX_QUOTE_PARTS} price changes: \
                     quote a shorter one"
                )));
            }
            if left > after {
                parts.push(part(now.rate, left - after, first, from));
                first = false;
            }
            from = when;
            left = after;
            // The rate from the change on, and the change after it.
            now = choose(when)?;
            debug_assert_eq!(now.rate, next, "the rate a change announces takes over");
        }
        Ok(Quote {
            plan: p.name.to_string(),
            time_zone: p.time_zone().to_string(),
            currency: p.currency,
            unit: t.unit,
            destination: loc
                .destination
                .and_then(|d| self.destination_name(d))
                .map(str::to_string),
            zone: loc.zone.and_then(|z| self.zone_name(z)).map(str::to_string),
            price: parts.iter().map(|x| x.price).sum(),
            parts,
            next_change: choice.change.map(|(w, r)| (w, rate(r).name.clone())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_milliseconds_past_the_calendar_are_refused() {
        assert!(parse_instant("99999999999999999", None).is_err());
        let latest = jiff::Timestamp::MAX.as_millisecond() as u64;
        assert_eq!(
            parse_instant(&latest.to_string(), None).unwrap(),
            Timestamp(latest)
        );
    }

    #[test]
    fn instants_read_with_an_offset_or_in_the_plans_zone() {
        let z = parse_instant("2026-01-15T17:59:00+01:00", None).unwrap();
        assert_eq!(parse_instant("2026-01-15T16:59:00Z", None).unwrap(), z);
        assert_eq!(
            parse_instant("2026-01-15T17:59", Some("Europe/Stockholm")).unwrap(),
            z
        );
        assert!(parse_instant("2026-01-15T17:59", None).is_err());
        assert_eq!(parse_instant(&z.0.to_string(), None).unwrap(), z);
        assert!(parse_instant("yesterday", Some("UTC")).is_err());
        assert_eq!(
            format_instant(z, "Europe/Stockholm"),
            "2026-01-15T17:59:00+01:00"
        );
        assert_eq!(format_instant(z, "UTC"), "2026-01-15T16:59:00+00:00");
    }

    #[test]
    fn decimals_follow_the_exponent() {
        assert_eq!(decimal(350, 2), "3.50");
        assert_eq!(decimal(5, 2), "0.05");
        assert_eq!(decimal(-1205, 3), "-1.205");
        assert_eq!(decimal(42, 0), "42");
    }

    /// The catalog of `config/example-plans.toml`.
    fn plans() -> Catalog {
        crate::ChargingConfig::from_toml_str(include_str!("../../../../config/example-plans.toml"))
            .unwrap()
            .catalog()
            .unwrap()
    }

    /// A call to a Swedish mobile under `smart-50` at `at` lasting `units`
    /// seconds.
    fn call(at: Timestamp, units: u64, first: bool) -> QuoteRequest {
        QuoteRequest {
            service_context: "32260@3gpp.org".into(),
            called_party: "46701234567".into(),
            units,
            at,
            first,
            ..QuoteRequest::default()
        }
    }

    #[test]
    fn usage_spanning_several_price_changes_is_priced_in_every_window() {
        let c = plans();
        let at = parse_instant("2026-01-15T17:00", Some("Europe/Stockholm")).unwrap();
        let q = c
            .quote(Some("smart-50"), &call(at, 30 * 3600, true))
            .unwrap();
        let got: Vec<(&str, u64, i64)> = q
            .parts
            .iter()
            .map(|p| (p.rate.as_str(), p.units, p.price))
            .collect();
        // 17-18 mobile, 18-24 evening, 00-18 mobile, 18-23 evening.
        assert_eq!(
            got,
            [
                ("voice-mobile", 3600, 4140),
                ("voice-evening", 6 * 3600, 14_040),
                ("voice-mobile", 18 * 3600, 74_520),
                ("voice-evening", 5 * 3600, 11_700),
            ]
        );
        assert_eq!(q.price, 104_400);
        assert_eq!(q.amount(), "1044.00");
        // Each part starts where the one before ended.
        for w in q.parts.windows(2) {
            assert_eq!(w[1].from, w[0].from.plus_secs(w[0].units));
        }
    }

    #[test]
    fn usage_past_too_many_price_changes_is_refused_not_looped_over() {
        let c = plans();
        let at = parse_instant("2026-01-15T17:00", Some("Europe/Stockholm")).unwrap();
        // Two changes a day: 20 years of seconds run past about 14,600.
        let e = c
            .quote(Some("smart-50"), &call(at, 20 * 365 * 86_400, false))
            .unwrap_err();
        assert!(e.to_string().contains("price changes"), "{e}");
    }

    proptest::proptest! {
        /// Splitting a long usage into its rate windows and pricing each
        /// window on its own gives the same parts and total as quoting it
        /// at once; every part holds one rate throughout.
        #[test]
        fn a_long_usage_costs_the_sum_of_its_windows_priced_alone(
            start_s in 1_767_225_600u64..1_798_761_600,
            units in 0u64..(10 * 86_400),
            first: bool,
        ) {
            let c = plans();
            let at = Timestamp::from_secs(start_s);
            let q = c.quote(Some("smart-50"), &call(at, units, first)).unwrap();
            proptest::prop_assert_eq!(q.parts.iter().map(|p| p.units).sum::<u64>(), units);
            let mut sum = 0;
            for (i, part) in q.parts.iter().enumerate() {
                let alone = c
                    .quote(Some("smart-50"), &call(part.from, part.units, first && i == 0))
                    .unwrap();
                // Priced alone, a window runs into no other rate.
                proptest::prop_assert_eq!(alone.parts.len(), 1);
                proptest::prop_assert_eq!(&alone.parts[0].rate, &part.rate);
                proptest::prop_assert_eq!(alone.price, part.price);
                sum += alone.price;
                if i > 0 {
                    // A new window begins with another rate.
                    proptest::prop_assert_ne!(&q.parts[i - 1].rate, &part.rate);
                }
            }
            proptest::prop_assert_eq!(q.price, sum);
        }
    }
}
