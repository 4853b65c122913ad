//! `gyro ledger --config FILE` where the file says `[storage] backend =
//! "redis-cluster"`: the books of every account of the namespace, read
//! from every master of the cluster. It only reads.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use gyro_server::config::RedisClusterSection;
use gyro_store::redis::{Books, RedisLedger, RedisOptions};
use serde::Serialize;

/// How to reach the cluster `[storage.redis]` describes (the password
/// read from `password_file` when one is named).
pub fn options(section: &RedisClusterSection) -> anyhow::Result<RedisOptions> {
    let password = match (&section.password, &section.password_file) {
        (_, Some(file)) => Some(
            std::fs::read_to_string(file)
                .with_context(|| {
                    format!("storage.redis.password_file: reading {}", file.display())
                })?
                .trim_end_matches(['\r', '\n'])
                .to_string(),
        ),
        (p, None) => p.clone(),
    };
    Ok(RedisOptions {
        nodes: section.nodes.clone(),
        username: section.username.clone(),
        password,
        tls: section.tls,
        tls_ca: section.tls_ca.clone(),
        tls_cert: section.tls_cert.clone(),
        tls_key: section.tls_key.clone(),
        replicas_ack: section.replicas_ack,
        wait_timeout: Duration::from_millis(section.wait_timeout_ms),
        namespace: section.namespace.clone(),
        node_id: "gyro-ledger".into(),
        ..RedisOptions::default()
    })
}

/// One account that does not add up.
#[derive(Debug, Serialize)]
struct Violation {
    account: u64,
    initial_balance: i64,
    topped_up: i64,
    balance: i64,
    reserved: i64,
    debited: i64,
    /// What the account's reservations hold (differs from `reserved` when
    /// they do not add up).
    reservations_hold: i64,
}

/// One bundle that does not add up: `initial != remaining + reserved +
/// consumed`, or its `reserved` is not what its account's reservations
/// hold of it.
#[derive(Debug, Serialize)]
struct BundleViolation {
    account: u64,
    bundle: u32,
    initial: u64,
    remaining: u64,
    reserved: u64,
    consumed: u64,
    /// What the account's reservations hold of it.
    reservations_hold: u64,
}

/// The bundles' units, summed over the namespace.
#[derive(Debug, Serialize)]
struct BundleTotals {
    bundles: u64,
    initial: u128,
    remaining: u128,
    reserved: u128,
    consumed: u128,
}

/// The report (`--json`).
#[derive(Debug, Serialize)]
struct Report {
    backend: &'static str,
    namespace: String,
    accounts: u64,
    initial_balance: i128,
    topped_up: i128,
    balance: i128,
    reserved: i128,
    debited: i128,
    violations: usize,
    unbalanced: Vec<Violation>,
    bundles: BundleTotals,
    bundle_violations: Vec<BundleViolation>,
}

fn report(namespace: &str, books: &Books) -> Report {
    let violation = |s: &gyro_store::redis::AccountState, held: i64| Violation {
        account: s.account.0,
        initial_balance: s.initial,
        topped_up: s.topped_up,
        balance: s.balance,
        reserved: s.reserved,
        debited: s.debited,
        reservations_hold: held,
    };
    let mut bundle_violations = Vec::new();
    for s in &books.unbalanced {
        for b in s.bundles.iter().filter(|b| !b.is_conserved()) {
            bundle_violations.push(BundleViolation {
                account: s.account.0,
                bundle: b.id,
                initial: b.initial,
                remaining: b.remaining,
                reserved: b.reserved,
                consumed: b.consumed,
                reservations_hold: b.reserved,
            });
        }
    }
    for (account, b, held) in &books.holds_mismatch {
        bundle_violations.push(BundleViolation {
            account: account.0,
            bundle: b.id,
            initial: b.initial,
            remaining: b.remaining,
            reserved: b.reserved,
            consumed: b.consumed,
            reservations_hold: *held,
        });
    }
    let unbalanced: Vec<Violation> = books
        .unbalanced
        .iter()
        .filter(|s| {
            i128::from(s.initial) + i128::from(s.topped_up)
                != i128::from(s.balance) + i128::from(s.reserved) + i128::from(s.debited)
        })
        .map(|s| violation(s, s.reserved))
        .chain(
            books
                .reservations_mismatch
                .iter()
                .map(|(s, held)| violation(s, *held)),
        )
        .collect();
    Report {
        backend: "redis-cluster",
        namespace: namespace.to_string(),
        accounts: books.accounts,
        initial_balance: books.initial,
        topped_up: books.topped_up,
        balance: books.balance,
        reserved: books.reserved,
        debited: books.debited,
        violations: unbalanced.len() + bundle_violations.len(),
        unbalanced,
        bundles: BundleTotals {
            bundles: books.bundles,
            initial: books.bundle_initial,
            remaining: books.bundle_remaining,
            reserved: books.bundle_reserved,
            consumed: books.bundle_consumed,
        },
        bundle_violations,
    }
}

/// Checks the cluster's books and prints them; fails when an account does
/// not add up.
pub fn run(section: &RedisClusterSection, json: bool) -> anyhow::Result<ExitCode> {
    let opts = options(section)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let nodes = section.nodes.join(", ");
    let books = rt.block_on(async {
        let ledger = RedisLedger::connect(opts)
            .await
            .with_context(|| format!("connecting to the Redis Cluster at {nodes}"))?;
        ledger
            .books()
            .await
            .with_context(|| format!("reading the books from the Redis Cluster at {nodes}"))
    })?;
    let r = report(&section.namespace, &books);
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        for v in &r.unbalanced {
            eprintln!(
                "account {}: initial {} + top-ups {} vs balance {} + reserved {} + debited {} \
                 (its reservations hold {})",
                v.account,
                v.initial_balance,
                v.topped_up,
                v.balance,
                v.reserved,
                v.debited,
                v.reservations_hold
            );
        }
        println!(
            "Redis Cluster ({nodes}), namespace {}: {} accounts: balance {}, reserved {}, \
             debited {} (minor units); a live snapshot of a shared ledger",
            r.namespace, r.accounts, r.balance, r.reserved, r.debited
        );
        for v in &r.bundle_violations {
            eprintln!(
                "account {} bundle {}: initial {} vs remaining {} + reserved {} + consumed {} \
                 (its account's reservations hold {})",
                v.account,
                v.bundle,
                v.initial,
                v.remaining,
                v.reserved,
                v.consumed,
                v.reservations_hold
            );
        }
        if r.bundles.bundles > 0 {
            println!(
                "{} bundles: remaining {}, reserved {}, consumed {} of {} units",
                r.bundles.bundles,
                r.bundles.remaining,
                r.bundles.reserved,
                r.bundles.consumed,
                r.bundles.initial
            );
        }
        println!(
            "initial + top-ups = balance + reserved + debited: {}",
            if r.unbalanced.is_empty() {
                "holds for every account".to_string()
            } else {
                format!("VIOLATED for {} accounts", r.unbalanced.len())
            }
        );
        if r.bundles.bundles > 0 || !r.bundle_violations.is_empty() {
            println!(
                "bundles: initial = remaining + reserved + consumed, reserved = what \
                 reservations hold: {}",
                if r.bundle_violations.is_empty() {
                    "holds for every bundle".to_string()
                } else {
                    format!("VIOLATED for {} bundles", r.bundle_violations.len())
                }
            );
        }
    }
    Ok(if books.is_balanced() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
