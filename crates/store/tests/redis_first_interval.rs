//! A tariff's first interval on the Redis Cluster ledger: the reservation
//! a session's opening request made ([`FirstInterval::Opening`]) pays it
//! on the usage first reported against it ([`FirstInterval::Usage`]),
//! once; any other reservation, or none, does not; a reservation written
//! by an earlier library version (no mark) counts as the caller says.

mod redis_support;

use gyro_charging::tariff::Rounding;
use gyro_charging::AccountId;
use gyro_store::redis::{
    Answer, BundleUse, Debit, FirstInterval, Outcome, PlannedStep, Pricing, RedisLedger, Reserve,
    Step,
};
use redis_support::*;

/// 0.01 a second, the first minute whole ("60/1").
const FIRST: u64 = 60;

fn reserve(account: AccountId, request: &str, session: &str, opening: bool) -> PlannedStep {
    PlannedStep {
        step: Step::Reserve(Reserve {
            account,
            request: request.into(),
            session: session.into(),
            key: rg(1),
            money: 60,
            units: 10,
            min_money: 1,
            expires: NOW.plus_secs(60),
            bundles: None,
        }),
        first_interval: opening.then_some(FirstInterval::Opening),
    }
}

/// A report of `used` seconds: 0.01 each, or the first minute whole when
/// the reservation is the opening one.
fn usage(
    account: AccountId,
    request: &str,
    session: &str,
    used: u64,
    release: bool,
    unmarked_opening: bool,
) -> PlannedStep {
    PlannedStep {
        step: Step::Debit(Debit {
            account,
            request: request.into(),
            reservation: Some((session.into(), rg(1))),
            amount: used as i64,
            release,
            whole: false,
            cdr: cdr(session, 1, rg(1)),
            bundles: None,
        }),
        first_interval: Some(FirstInterval::Usage {
            opening_amount: FIRST.max(used) as i64,
            first_interval: FIRST,
            unmarked_opening,
        }),
    }
}

async fn run(ledger: &RedisLedger, steps: &[PlannedStep]) -> Vec<Answer> {
    ledger
        .run_planned(steps, NOW)
        .await
        .into_iter()
        .map(|r| r.expect("step"))
        .collect()
}

fn charged(a: &Answer) -> i64 {
    match a.outcome {
        Outcome::Debited { charged, .. } => charged,
        ref o => panic!("not a debit: {o:?}"),
    }
}

async fn opening_marks(ledger: &RedisLedger, account: AccountId) -> Vec<(String, Option<bool>)> {
    let mut v: Vec<_> = ledger
        .reservations(account)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.session, r.opening))
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn the_opening_reservation_pays_the_first_interval_once_whichever_request_reports_it() {
    let Some(ledger) = ledger("first-interval").await else {
        return;
    };
    let a = acct(31);
    assert!(ledger.open_account(a, 10_000, 0, false).await.unwrap());
    // s1 and s2 reserved by their opening requests, s3 by a later one.
    let made = run(
        &ledger,
        &[
            reserve(a, "s1;0;0", "s1", true),
            reserve(a, "s2;0;0", "s2", true),
            reserve(a, "s3;4;0", "s3", false),
        ],
    )
    .await;
    assert!(made.iter().all(|a| a.code == 2001), "{made:?}");
    assert_eq!(
        opening_marks(&ledger, a).await,
        vec![
            ("s1".into(), Some(true)),
            ("s2".into(), Some(true)),
            ("s3".into(), Some(false))
        ]
    );
    // Reported by any request (request 1 is not needed): the first
    // minute. A reservation a later request made: the seconds.
    let got = run(
        &ledger,
        &[
            usage(a, "s1;7;0", "s1", 5, true, false),
            usage(a, "s3;5;0", "s3", 5, true, true),
        ],
    )
    .await;
    assert_eq!(got.iter().map(charged).collect::<Vec<_>>(), vec![60, 5]);
    // A report that keeps the reservation (a second part follows): the
    // first minute is paid once.
    let got = run(
        &ledger,
        &[
            usage(a, "s2;1;0", "s2", 5, false, false),
            usage(a, "s2;1;1", "s2", 5, true, false),
        ],
    )
    .await;
    assert_eq!(got.iter().map(charged).collect::<Vec<_>>(), vec![60, 5]);
    // No reservation: the seconds.
    let got = run(&ledger, &[usage(a, "s4;1;0", "s4", 5, false, true)]).await;
    assert_eq!(charged(&got[0]), 5);
    // A retransmission is answered as the first.
    let again = run(&ledger, &[usage(a, "s1;7;0", "s1", 5, true, false)]).await;
    assert!(again[0].replayed);
    assert_eq!(charged(&again[0]), 60);
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.debited, s.reserved), (60 + 5 + 60 + 5 + 5, 0));
    assert!(ledger.books().await.unwrap().is_balanced());
}

#[tokio::test]
async fn a_reservation_of_an_earlier_version_counts_as_the_caller_says() {
    let Some(ledger) = ledger("first-interval-unmarked").await else {
        return;
    };
    let a = acct(32);
    assert!(ledger.open_account(a, 10_000, 0, false).await.unwrap());
    run(
        &ledger,
        &[
            reserve(a, "u1;0;0", "u1", true),
            reserve(a, "u2;0;0", "u2", true),
        ],
    )
    .await;
    // Written as library version 8 wrote them: no opening mark.
    let key = ledger.keys().reservations(a);
    for session in ["u1", "u2"] {
        let field = format!("{session}|1:");
        let value = redis_cli(&["HGET", &key, &field]);
        let old = value.trim().replace(" o1 ", " ");
        assert_ne!(old, value.trim(), "{value}");
        redis_cli(&["HSET", &key, &field, &old]);
    }
    assert_eq!(
        opening_marks(&ledger, a).await,
        vec![("u1".into(), None), ("u2".into(), None)]
    );
    let got = run(
        &ledger,
        &[
            usage(a, "u1;1;0", "u1", 5, true, true),
            usage(a, "u2;2;0", "u2", 5, true, false),
        ],
    )
    .await;
    assert_eq!(got.iter().map(charged).collect::<Vec<_>>(), vec![60, 5]);
    assert!(ledger.books().await.unwrap().is_balanced());
}

#[tokio::test]
async fn what_bundles_leave_of_the_opening_usage_is_priced_with_the_first_interval() {
    let Some(ledger) = ledger("first-interval-bundles").await else {
        return;
    };
    let a = acct(33);
    assert!(ledger
        .open_account_with_bundles(a, 10_000, 0, false, &[(1, 3)])
        .await
        .unwrap());
    let pricing = Pricing {
        increment: 1,
        price: 1,
        per: 1,
        rounding: Rounding::Up,
        first_interval: 0,
    };
    let bundles = BundleUse {
        bundles: vec![1],
        pricing,
    };
    let mut r = reserve(a, "b1;0;0", "b1", true);
    if let Step::Reserve(s) = &mut r.step {
        s.bundles = Some(bundles.clone());
    }
    let made = run(&ledger, &[r]).await;
    assert_eq!(made[0].code, 2001, "{made:?}");
    // 10 s used as a first usage are rated as the minute (version 11:
    // rounded before bundles pay): the bundle's 3 s, then 57 s of money.
    let mut u = usage(a, "b1;2;0", "b1", 10, true, false);
    if let Step::Debit(d) = &mut u.step {
        d.bundles = Some((10, bundles));
    }
    let got = run(&ledger, &[u]).await;
    match got[0].outcome {
        Outcome::Debited {
            charged,
            bundle_units,
            ..
        } => assert_eq!((charged, bundle_units), (57, 3)),
        ref o => panic!("{o:?}"),
    }
    assert!(ledger.books().await.unwrap().is_balanced());
}
