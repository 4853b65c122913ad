//! Parses the input as a charging file (TOML: currency, tariffs, price
//! plans, destinations, roaming zones, accounts and account ranges;
//! `ChargingConfig::from_toml_str`, which also builds the rating catalog
//! and checks every account's plan and currency) and, when it is taken and
//! its accounts are few enough to build quickly, expands the accounts,
//! builds the subscriber directory and an engine, as `gyro serve` does at
//! start, and prices a call, a data session and an SMS under every plan at
//! a few instants (`Catalog::quote`: rate selection by time of day, day of
//! week, destination and zone). Nothing may panic: a bad file is an error
//! naming the problem.
#![no_main]

use gyro_charging::{ChargingConfig, QuoteRequest, Timestamp};
use libfuzzer_sys::fuzz_target;

/// Most accounts a fuzz input may make the target build.
const MAX_ACCOUNTS: u64 = 10_000;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = ChargingConfig::from_toml_str(text) else {
        return;
    };
    let ranged = config
        .account_ranges
        .iter()
        .fold(0u64, |n, r| n.saturating_add(r.count));
    if ranged.saturating_add(config.accounts.len() as u64) > MAX_ACCOUNTS {
        return;
    }
    let catalog = config
        .catalog()
        .expect("a configuration taken has a catalog");
    for plan in catalog.plans() {
        for (ctx, called, visited, units) in [
            ("32260@3gpp.org", "+46900123456", "", 90),
            ("32251@3gpp.org", "", "26201", 10_000_000),
            ("32274@3gpp.org", "4915112345678", "310410", 1),
        ] {
            for at in [0u64, 1_768_449_599_000, 1_774_746_000_000] {
                let q = QuoteRequest {
                    service_context: ctx.into(),
                    called_party: called.into(),
                    visited_plmn: visited.into(),
                    units,
                    at: Timestamp(at),
                    first: true,
                    ..QuoteRequest::default()
                };
                let _ = catalog.quote(Some(&plan.name), &q);
            }
        }
    }
    let _ = config.accounts();
    let _ = config.directory();
    for shards in [1, 3] {
        let _ = config.build_shard(0, shards);
    }
});
