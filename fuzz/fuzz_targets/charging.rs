//! Parses the input as a charging file (TOML: currency, tariffs, accounts
//! and account ranges; `ChargingConfig::from_toml_str`, which also builds
//! the tariff catalog) and, when it is taken and its accounts are few
//! enough to build quickly, expands the accounts, builds the subscriber
//! directory and an engine, as `gyro serve` does at start. Nothing may
//! panic: a bad file is an error naming the problem.
#![no_main]

use gyro_charging::ChargingConfig;
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
    let _ = config
        .catalog()
        .expect("a configuration taken has a catalog");
    let _ = config.accounts();
    let _ = config.directory();
    for shards in [1, 3] {
        let _ = config.build_shard(0, shards);
    }
});
