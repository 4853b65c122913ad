//! The TOML configuration: engine settings, currency, tariffs, accounts and
//! ranges of demo accounts. `config/example-charging.toml` in the
//! repository documents every field.
//!
//! ```toml
//! [engine]
//! node_id = "gyro-1"
//!
//! [[tariff]]
//! name = "data"
//! service_context = "32251@3gpp.org"
//! rating_group = 10
//! unit = "octets"
//! price = 10
//! per = 1048576
//! default_quota = 10485760
//!
//! [[account_range]]
//! first_id = 1000
//! count = 10
//! e164_first = "46700000000"
//! balance = 10000
//! ```

use crate::accounts::{Account, AccountStatus, Bundle, SubscriberDirectory, SubscriptionId};
use crate::engine::{Engine, EngineOptions};
use crate::error::{Error, Result};
use crate::rating::{PlanSpec, DEFAULT_PLAN};
use crate::tariff::{Catalog, Currency, Tariff};
use crate::types::{AccountId, Timestamp, UnitKind};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::config_check::{MAX_DEDUP_TTL_SECS, MIN_DEDUP_TTL_SECS};

/// The message of a configuration error, without its "configuration: ".
pub(crate) fn strip(e: Error) -> String {
    match e {
        Error::Config(m) | Error::ConfigSyntax(m) => m,
        other => other.to_string(),
    }
}

/// The whole configuration file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChargingConfig {
    /// `[engine]`: engine settings.
    #[serde(default)]
    pub engine: EngineOptions,
    /// `[currency]`: the currency of all money.
    #[serde(default)]
    pub currency: Currency,
    /// `[[tariff]]`: the rates of the plan named `"default"`, the plan of
    /// accounts that name none.
    #[serde(default, rename = "tariff")]
    pub tariffs: Vec<Tariff>,
    /// `[plans.NAME]`: named price plans.
    #[serde(default)]
    pub plans: BTreeMap<String, PlanConfig>,
    /// `[destinations]`: destination name = its prefixes of the called
    /// number (longest prefix wins).
    #[serde(default)]
    pub destinations: BTreeMap<String, Vec<String>>,
    /// `[zones]`: roaming zone name = its visited networks (MCC+MNC, or an
    /// MCC for the whole country).
    #[serde(default)]
    pub zones: BTreeMap<String, Vec<String>>,
    /// `[[account]]`: accounts listed one by one.
    #[serde(default, rename = "account")]
    pub accounts: Vec<AccountConfig>,
    /// `[[account_range]]`: many similar accounts with consecutive ids and
    /// numbers.
    #[serde(default, rename = "account_range")]
    pub account_ranges: Vec<AccountRangeConfig>,
}

/// One `[plans.NAME]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanConfig {
    /// What the plan is, for people.
    #[serde(default)]
    pub description: Option<String>,
    /// Currency of its prices (default: `[currency]`); accounts on the
    /// plan must hold money in it.
    #[serde(default)]
    pub currency: Option<Currency>,
    /// IANA time zone of its rates' `days` and `hours` (default `"UTC"`).
    #[serde(default)]
    pub time_zone: Option<String>,
    /// `[[plans.NAME.rate]]`: its rates, with the fields of a `[[tariff]]`.
    #[serde(default, rename = "rate")]
    pub rates: Vec<Tariff>,
}

/// One `[[account]]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountConfig {
    /// Account id (stable; picks the shard).
    pub id: u64,
    /// Initial balance, minor units.
    pub balance: i64,
    /// Credit limit, minor units (how far below zero the balance may go).
    #[serde(default)]
    pub credit_limit: i64,
    /// `active` or `blocked`.
    #[serde(default)]
    pub status: AccountStatus,
    /// Identities as `kind:data`: `e164:46701234567`, `imsi:...`,
    /// `sip:...`, `nai:...`, `private:...`.
    #[serde(default)]
    pub subscribers: Vec<String>,
    /// `[[account.bundle]]`: unit allowances.
    #[serde(default, rename = "bundle")]
    pub bundles: Vec<BundleConfig>,
    /// Its price plan (default: the plan named `"default"`).
    #[serde(default)]
    pub plan: Option<String>,
    /// The currency of its money (default: `[currency]`).
    #[serde(default)]
    pub currency: Option<Currency>,
}

/// One `[[account.bundle]]` or `[[account_range.bundle]]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleConfig {
    /// Bundle id within its account; defaults to its position (1-based).
    #[serde(default)]
    pub id: Option<u32>,
    /// `octets`, `seconds` or `events`.
    pub unit: UnitKind,
    /// Units in the bundle.
    pub units: u64,
    /// Rating groups covered (empty with `service_ids` empty: all).
    #[serde(default)]
    pub rating_groups: Vec<u32>,
    /// Service-Identifiers covered.
    #[serde(default)]
    pub service_ids: Vec<u32>,
    /// Start of validity, Unix seconds (default: always).
    #[serde(default)]
    pub valid_from: Option<u64>,
    /// End of validity, Unix seconds, exclusive (default: never).
    #[serde(default)]
    pub valid_until: Option<u64>,
}

/// One `[[account_range]]`: `count` accounts with ids from `first_id` and
/// numbers counting up from `e164_first` (and `imsi_first`), keeping their
/// width.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountRangeConfig {
    /// Id of the first account.
    pub first_id: u64,
    /// Number of accounts.
    pub count: u64,
    /// E.164 number of the first account.
    #[serde(default)]
    pub e164_first: Option<String>,
    /// IMSI of the first account.
    #[serde(default)]
    pub imsi_first: Option<String>,
    /// Initial balance of each account.
    pub balance: i64,
    /// Credit limit of each account.
    #[serde(default)]
    pub credit_limit: i64,
    /// Bundles each account gets.
    #[serde(default, rename = "bundle")]
    pub bundles: Vec<BundleConfig>,
    /// The price plan of each account (default: the plan named
    /// `"default"`).
    #[serde(default)]
    pub plan: Option<String>,
    /// The currency of each account's money (default: `[currency]`).
    #[serde(default)]
    pub currency: Option<Currency>,
}

/// The `i`-th number after `first`, with the same number of digits.
pub(crate) fn nth_number(first: &str, i: u64) -> Result<String> {
    let digits = first.strip_prefix('+').unwrap_or(first);
    if digits.is_empty() || digits.len() > 30 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Config(format!("{first:?} is not a number")));
    }
    let n: u128 = digits
        .parse()
        .map_err(|_| Error::Config(format!("{first:?} is not a number")))?;
    let v = n + u128::from(i);
    let s = format!("{v:0width$}", width = digits.len());
    if s.len() > digits.len() {
        return Err(Error::Config(format!(
            "range from {first:?} overflows its digits"
        )));
    }
    Ok(s)
}

fn bundles(cfg: &[BundleConfig]) -> Result<Vec<Bundle>> {
    let mut out: Vec<Bundle> = Vec::with_capacity(cfg.len());
    for (i, b) in cfg.iter().enumerate() {
        let id = b.id.unwrap_or(i as u32 + 1);
        if out.iter().any(|o| o.id == id) {
            return Err(Error::Config(format!("bundle id {id} used twice")));
        }
        let mut bundle = Bundle::new(
            id,
            b.unit,
            b.units,
            Timestamp::from_secs(b.valid_from.unwrap_or(0)),
            b.valid_until
                .map_or(Timestamp(u64::MAX), Timestamp::from_secs),
        );
        bundle.rating_groups.clone_from(&b.rating_groups);
        bundle.service_ids.clone_from(&b.service_ids);
        out.push(bundle);
    }
    Ok(out)
}

impl ChargingConfig {
    /// Parses a configuration from TOML text and checks all of it: the
    /// catalog, every account's plan and currency, every subscriber and
    /// bundle, and that no account id or subscriber is defined twice
    /// (across `[[account]]` and `[[account_range]]`). A configuration
    /// this returns builds its accounts and shards without error.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let cfg: ChargingConfig =
            toml::from_str(text).map_err(|e| Error::ConfigSyntax(e.to_string()))?;
        crate::config_check::validate(&cfg)?;
        let catalog = cfg.catalog()?;
        // Every account's plan exists and is priced in its currency.
        for a in &cfg.accounts {
            catalog
                .check_plan(a.plan.as_deref(), a.currency)
                .map_err(|e| Error::Config(format!("account {}: {}", a.id, strip(e))))?;
        }
        for r in &cfg.account_ranges {
            catalog
                .check_plan(r.plan.as_deref(), r.currency)
                .map_err(|e| {
                    Error::Config(format!("account range from {}: {}", r.first_id, strip(e)))
                })?;
        }
        Ok(cfg)
    }

    /// The rating catalog: the plans (the `[[tariff]]` list is the plan
    /// named `"default"`), destinations and zones.
    pub fn catalog(&self) -> Result<Catalog> {
        let mut plans = Vec::with_capacity(self.plans.len() + 1);
        if !self.tariffs.is_empty() {
            if self.plans.contains_key(DEFAULT_PLAN) {
                return Err(Error::Config(format!(
                    "[[tariff]] is the plan {DEFAULT_PLAN:?}, and [plans.{DEFAULT_PLAN}] defines it again: keep one"
                )));
            }
            plans.push(PlanSpec {
                name: DEFAULT_PLAN.into(),
                currency: self.currency,
                time_zone: "UTC".into(),
                rates: self.tariffs.clone(),
            });
        }
        for (name, p) in &self.plans {
            plans.push(PlanSpec {
                name: name.clone(),
                currency: p.currency.unwrap_or(self.currency),
                time_zone: p.time_zone.clone().unwrap_or_else(|| "UTC".into()),
                rates: p.rates.clone(),
            });
        }
        Catalog::build(
            self.currency,
            plans,
            self.destinations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            self.zones
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    /// Every account with its identities, ranges expanded.
    pub fn accounts(&self) -> Result<Vec<(Account, Vec<SubscriptionId>)>> {
        let mut out = Vec::new();
        for a in &self.accounts {
            let mut acc = Account::new(AccountId(a.id), a.balance);
            acc.credit_limit = a.credit_limit;
            acc.status = a.status;
            acc.bundles = bundles(&a.bundles)?;
            acc.plan = a.plan.as_deref().map(Arc::from);
            acc.currency = a.currency;
            let subs = a
                .subscribers
                .iter()
                .map(|s| SubscriptionId::parse(s))
                .collect::<Result<Vec<_>>>()?;
            out.push((acc, subs));
        }
        for r in &self.account_ranges {
            let template = bundles(&r.bundles)?;
            let plan: Option<Arc<str>> = r.plan.as_deref().map(Arc::from);
            for i in 0..r.count {
                let id = r
                    .first_id
                    .checked_add(i)
                    .ok_or_else(|| Error::Config("account range overflows".into()))?;
                let mut acc = Account::new(AccountId(id), r.balance);
                acc.credit_limit = r.credit_limit;
                acc.bundles.clone_from(&template);
                acc.plan.clone_from(&plan);
                acc.currency = r.currency;
                let mut subs = Vec::new();
                if let Some(first) = &r.e164_first {
                    subs.push(SubscriptionId::e164(nth_number(first, i)?));
                }
                if let Some(first) = &r.imsi_first {
                    subs.push(SubscriptionId::new(
                        crate::accounts::SubscriptionType::Imsi,
                        nth_number(first, i)?,
                    ));
                }
                out.push((acc, subs));
            }
        }
        Ok(out)
    }

    /// The subscriber directory of all accounts (for routing across
    /// shards).
    pub fn directory(&self) -> Result<SubscriberDirectory> {
        let mut d = SubscriberDirectory::new();
        for (acc, subs) in self.accounts()? {
            for s in &subs {
                d.insert(s, acc.id)?;
            }
        }
        Ok(d)
    }

    /// An engine holding every account.
    pub fn build_engine(&self) -> Result<Engine> {
        self.build_shard(0, 1)
    }

    /// The engine of shard `shard` of `shards`: the accounts whose
    /// [`AccountId::shard`] is `shard`.
    pub fn build_shard(&self, shard: usize, shards: usize) -> Result<Engine> {
        let mut e = Engine::new(self.catalog()?, self.engine.clone());
        for (acc, subs) in self.accounts()? {
            if acc.id.shard(shards) == shard {
                e.add_account(acc, &subs)?;
            }
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_a_range_keep_their_width() {
        assert_eq!(nth_number("46700000000", 999).unwrap(), "46700000999");
        assert_eq!(nth_number("+0010", 5).unwrap(), "0015");
        assert!(nth_number("99", 1).is_err());
        assert!(nth_number("12a", 1).is_err());
    }

    /// The message of the error `text` gets, or a panic naming it.
    fn refused(text: &str) -> String {
        match ChargingConfig::from_toml_str(text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    const RANGE: &str = "[[account_range]]\nfirst_id = 1000\ncount = 1000\n\
                         e164_first = \"46700000000\"\nbalance = 1\n";

    #[test]
    fn an_account_id_defined_by_an_account_and_a_range_is_refused_naming_both() {
        let text = "[[account]]\nid = 1\nbalance = 5\n\
                    [[account_range]]\nfirst_id = 1\ncount = 1000\nbalance = 1\n";
        let e = refused(text);
        assert!(
            e.contains("account 1 is defined twice")
                && e.contains("[[account]] #1 (id = 1)")
                && e.contains("[[account_range]] #1 (first_id = 1, count = 1000)"),
            "{e}"
        );
        // Two ranges that overlap in their middle, and two accounts.
        let e = refused(&format!(
            "{RANGE}[[account_range]]\nfirst_id = 1999\ncount = 5\nbalance = 1\n"
        ));
        assert!(e.contains("account 1999 is defined twice"), "{e}");
        let e = refused("[[account]]\nid = 7\nbalance = 1\n[[account]]\nid = 7\nbalance = 2\n");
        assert!(e.contains("[[account]] #2 (id = 7)"), "{e}");
        // Ranges that only touch are fine.
        assert!(ChargingConfig::from_toml_str(&format!(
            "{RANGE}[[account_range]]\nfirst_id = 2000\ncount = 5\nbalance = 1\n\
             [[account]]\nid = 999\nbalance = 1\n"
        ))
        .is_ok());
    }

    #[test]
    fn a_subscriber_given_to_two_accounts_is_refused_naming_both() {
        let e = refused(
            "[[account]]\nid = 1\nbalance = 1\nsubscribers = [\"e164:4670\"]\n\
             [[account]]\nid = 2\nbalance = 1\nsubscribers = [\"e164:+4670\"]\n",
        );
        assert!(
            e.contains("two accounts") && e.contains("(id = 1)") && e.contains("(id = 2)"),
            "{e}"
        );
        let e = refused(&format!(
            "{RANGE}[[account]]\nid = 1\nbalance = 1\nsubscribers = [\"e164:46700000999\"]\n"
        ));
        assert!(
            e.contains("e164:46700000999") && e.contains("first_id = 1000"),
            "{e}"
        );
        let e = refused(&format!(
            "{RANGE}[[account_range]]\nfirst_id = 1\ncount = 10\n\
             e164_first = \"46700000995\"\nbalance = 1\n"
        ));
        assert!(
            e.contains("subscriber e164:46700000995 is given to two accounts"),
            "{e}"
        );
        // One account may list an identity twice; other widths differ.
        assert!(ChargingConfig::from_toml_str(&format!(
            "{RANGE}[[account]]\nid = 1\nbalance = 1\n\
             subscribers = [\"e164:4670000000\", \"e164:+4670000000\"]\n"
        ))
        .is_ok());
    }

    #[test]
    fn values_out_of_their_documented_range_are_refused_naming_the_key() {
        let cases = [
            ("[engine]\ndedup_ttl_secs = 10\n", "dedup_ttl_secs = 10"),
            ("[currency]\ncode = 9999\nexponent = 2\n", "code = 9999"),
            ("[currency]\ncode = 752\nexponent = 30\n", "exponent = 30"),
            (
                "[[account]]\nid = 1\nbalance = 1\n[[account.bundle]]\nunit = \"octets\"\n\
                 units = 1\nvalid_from = 200\nvalid_until = 100\n",
                "valid_until = 100 is not after valid_from = 200",
            ),
            (
                "[[account]]\nid = 1\nbalance = 1\nsubscribers = [\"e164:4670100000100000001\"]\n",
                "1 to 15 digits",
            ),
            (
                "[[account]]\nid = 1\nbalance = 1\nsubscribers = [\"imsi:24001x\"]\n",
                "5 to 15 digits",
            ),
            (
                "[[account]]\nid = 1\nbalance = 1\nsubscribers = [\"foo:46701000001\"]\n",
                "[[account]] #1 (id = 1): subscribers: subscriber \"foo:46701000001\": unknown kind",
            ),
            (
                "[[account_range]]\nfirst_id = 1\ncount = 2\nbalance = 1\n\
                 e164_first = \"4670100000100000001\"\n",
                "e164_first",
            ),
            (
                "[[account_range]]\nfirst_id = 1\ncount = 2\nbalance = 1\n\
                 e164_first = \"99\"\n",
                "overflows its digits",
            ),
        ];
        for (text, what) in cases {
            let e = refused(text);
            assert!(e.contains(what), "{text}\n=> {e}");
        }
    }

    #[test]
    fn a_range_of_millions_is_checked_without_being_expanded() {
        let c = ChargingConfig::from_toml_str(
            "[[account_range]]\nfirst_id = 1\ncount = 100000000\n\
             e164_first = \"46700000000\"\nbalance = 1\n",
        )
        .unwrap();
        assert_eq!(c.account_ranges[0].count, 100_000_000);
    }

    #[test]
    fn the_example_files_pass_every_check() {
        for text in [
            include_str!("../../../config/example-charging.toml"),
            include_str!("../../../config/example-plans.toml"),
        ] {
            let c = ChargingConfig::from_toml_str(text).unwrap();
            // What the check promises: the accounts and their directory build.
            c.directory().unwrap();
        }
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = ChargingConfig::from_toml_str("[engine]\nnode = 1\n").unwrap_err();
        assert!(matches!(err, Error::ConfigSyntax(_)));
    }
}
