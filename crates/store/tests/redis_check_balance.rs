//! The balance check (CHECK_BALANCE, `gyro_check`) on a real Redis
//! Cluster: free bundle units count first and only the rest is priced;
//! credit limit counts; a blocked account is 4010, a missing one 5030;
//! nothing changes, however often it is asked with the same request key.

mod redis_support;

use gyro_charging::Rounding;
use gyro_store::redis::{BundleUse, CheckBalance, Outcome, Pricing, Step};
use redis_support::*;

/// 3 money per 1,000 units, in increments of 100.
const PRICING: Pricing = Pricing {
    increment: 100,
    price: 3,
    per: 1000,
    rounding: Rounding::Up,
    first_interval: 0,
};

fn check(account: u64, units: u64, bundles: &[u32]) -> Step {
    Step::Check(CheckBalance {
        account: acct(account),
        request: format!("check-{account}-{units};0;0"),
        money: PRICING.cost(units),
        units,
        bundles: (!bundles.is_empty()).then(|| BundleUse {
            bundles: bundles.to_vec(),
            pricing: PRICING,
        }),
        cdr: None,
    })
}

fn said(a: &gyro_store::redis::Answer) -> (u32, bool, i64, u64) {
    match a.outcome {
        Outcome::Checked {
            enough,
            money,
            bundle_units,
        } => (a.code, enough, money, bundle_units),
        ref o => panic!("{o:?}"),
    }
}

#[tokio::test]
async fn a_balance_check_counts_free_bundle_units_first_and_changes_nothing() {
    let Some(ledger) = ledger("check-balance").await else {
        return;
    };
    // 30 money, 10 of credit, a bundle of 5,000 units.
    ledger
        .open_account_with_bundles(acct(1), 30, 10, false, &[(1, 5000)])
        .await
        .unwrap();
    ledger.open_account(acct(2), 1000, 0, true).await.unwrap();
    let before = ledger.account(acct(1)).await.unwrap();
    let steps = [
        // 10,000 units: 30 money, within balance.
        check(1, 10_000, &[]),
        // 14,000 units: 42 money, beyond balance + credit (40).
        check(1, 14_000, &[]),
        // The same with the bundle: 9,000 units priced, 27 money.
        check(1, 14_000, &[1]),
        check(2, 100, &[]),
        check(3, 100, &[]),
    ];
    for _ in 0..2 {
        let answers: Vec<_> = ledger
            .run(&steps, NOW)
            .await
            .into_iter()
            .map(|a| said(&a.unwrap()))
            .collect();
        assert_eq!(
            answers,
            vec![
                (2001, true, 30, 0),
                (2001, false, 42, 0),
                (2001, true, 27, 5000),
                (4010, false, 0, 0),
                (5030, false, 0, 0),
            ]
        );
    }
    assert_eq!(ledger.account(acct(1)).await.unwrap(), before);
}
