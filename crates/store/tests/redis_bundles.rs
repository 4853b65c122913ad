//! Bundles on a real Redis Cluster under randomized sequences of steps
//! (grants, usage, direct debits, releases, session ends, expiry,
//! top-ups) with retries of the same request keys, several sessions
//! sharing an account's bundles: every retry is answered as the first
//! time and changes nothing; after every batch each account's money and
//! each bundle add up (`initial = remaining + reserved + consumed`, and
//! a bundle's reserved units are what the reservations hold); in the end
//! the CDRs add up to the money debited and to the bundle units consumed.

mod redis_support;

use gyro_charging::{AccountId, Rounding, Timestamp};
use gyro_store::redis::{
    Answer, BundleUse, Debit, EndSession, Expire, Outcome, Pricing, RedisLedger, Release, Reserve,
    Step, TopUp,
};
use redis_support::*;
use std::collections::HashMap;

/// 3 money per 1,000 units, in increments of 100, rounded `rounding`.
fn pricing(rounding: Rounding) -> Pricing {
    Pricing {
        increment: 100,
        price: 3,
        per: 1000,
        rounding,
        first_interval: 0,
    }
}

/// Bundle 1 covers rating group 10, bundle 2 both 10 and 20 (the caller
/// names them in the account's order).
fn covering(rg_: u32, rounding: Rounding) -> BundleUse {
    BundleUse {
        bundles: if rg_ == 10 { vec![1, 2] } else { vec![2] },
        pricing: pricing(rounding),
    }
}

fn random_step(rng: &mut fastrand::Rng, n: u64, account: AccountId, now: Timestamp) -> Step {
    let session = format!("sess-{}", rng.u64(..3));
    let g = 10 * (1 + rng.u64(..2) as u32);
    let key = rg(g);
    let rounding = [Rounding::Up, Rounding::Down, Rounding::Nearest][rng.u64(..3) as usize];
    let p = pricing(rounding);
    let request = format!("{session};{n}");
    match rng.u64(..100) {
        0..=34 => {
            let units = 100 * (1 + rng.u64(..40));
            Step::Reserve(Reserve {
                account,
                request,
                session,
                key,
                money: p.cost(units),
                units,
                min_money: p.cost(100),
                expires: now.plus_secs(rng.u64(..4)),
                bundles: Some(covering(g, rounding)),
            })
        }
        35..=69 => {
            let used = rng.u64(..5000);
            let event = rng.u64(..100) < 15;
            Step::Debit(Debit {
                account,
                request,
                reservation: (!event).then(|| (session.clone(), key)),
                amount: p.cost(used),
                release: rng.u64(..100) < 60,
                whole: event,
                cdr: cdr(&session, n as u32, key),
                bundles: Some((used, covering(g, rounding))),
            })
        }
        70..=79 => Step::Release(Release {
            account,
            request,
            session,
            key,
        }),
        80..=86 => Step::TopUp(TopUp {
            account,
            request,
            amount: 1 + rng.u64(..20) as i64,
        }),
        87..=92 => Step::End(EndSession {
            account,
            request,
            session,
        }),
        _ => Step::Expire(Expire {
            account,
            request,
            session: session.clone(),
            owner: None,
            cdr: cdr(&session, n as u32, key),
        }),
    }
}

/// What an answer may say, whatever the state: a grant of no more than
/// asked, a debit whose parts add up.
fn plausible(step: &Step, a: &Answer) -> bool {
    match (step, &a.outcome) {
        (
            Step::Reserve(r),
            Outcome::Reserved {
                units,
                bundle_units,
                money,
                ..
            },
        ) => units + bundle_units <= r.units && *money >= 0,
        (
            Step::Debit(_),
            Outcome::Debited {
                charged,
                from_reserved,
                from_balance,
                unbilled,
                ..
            },
        ) => charged == &(from_reserved + from_balance) && *unbilled >= 0,
        _ => true,
    }
}

async fn check_books(ledger: &RedisLedger, accounts: &[AccountId], seed: u64, at: &str) {
    for &a in accounts {
        let s = ledger.account(a).await.unwrap().unwrap();
        assert!(s.is_conserved(), "seed {seed} {at}: {s:?}");
        let mut holds: HashMap<u32, u64> = HashMap::new();
        let mut money = 0;
        for r in ledger.reservations(a).await.unwrap() {
            money += r.money;
            for (id, units) in r.bundle_holds {
                *holds.entry(id).or_default() += units;
            }
        }
        assert_eq!(money, s.reserved, "seed {seed} {at}: {s:?}");
        for b in &s.bundles {
            assert_eq!(
                holds.get(&b.id).copied().unwrap_or(0),
                b.reserved,
                "seed {seed} {at}: bundle {} of {s:?}",
                b.id
            );
        }
    }
}

#[tokio::test]
async fn random_bundle_steps_with_retries_keep_money_and_units() {
    let Some(nodes) = cluster_nodes() else {
        return;
    };
    for seed in [0x9E37_79B9_7F4A_7C15u64, 42, 7_000_001, 99] {
        let ledger = RedisLedger::connect(options(&nodes, "bundle-prop", "node-a"))
            .await
            .unwrap();
        let mut rng = fastrand::Rng::with_seed(seed);
        let accounts: Vec<AccountId> = (1..=4).map(acct).collect();
        for (i, &a) in accounts.iter().enumerate() {
            let limit = if i == 0 { 10 } else { 0 };
            ledger
                .open_account_with_bundles(
                    a,
                    20 + 10 * i as i64,
                    limit,
                    false,
                    &[(1, 6000), (2, 4000)],
                )
                .await
                .unwrap();
        }
        let mut sent: Vec<(Step, Answer)> = Vec::new();
        let (mut now, mut n) = (NOW, 0u64);
        let (mut fresh, mut retried, mut from_bundles) = (0, 0, 0u64);
        for round in 0..40 {
            now = Timestamp(now.0 + 1000);
            let mut batch: Vec<(Step, Option<Answer>)> = Vec::new();
            for _ in 0..1 + rng.u64(..8) {
                if !sent.is_empty() && rng.u64(..100) < 20 {
                    let (step, first) = sent[rng.u64(..sent.len() as u64) as usize].clone();
                    batch.push((step, Some(first)));
                } else {
                    n += 1;
                    let a = accounts[rng.u64(..accounts.len() as u64) as usize];
                    batch.push((random_step(&mut rng, n, a, now), None));
                }
            }
            let steps: Vec<Step> = batch.iter().map(|(s, _)| s.clone()).collect();
            let answers = ledger.run(&steps, now).await;
            for ((step, first), got) in batch.into_iter().zip(answers) {
                let got = got.unwrap_or_else(|e| panic!("seed {seed}: {step:?}: {e}"));
                match first {
                    Some(first) => {
                        assert!(got.replayed, "seed {seed}: {step:?}");
                        assert_eq!(
                            (got.code, &got.outcome),
                            (first.code, &first.outcome),
                            "seed {seed}: {step:?}"
                        );
                        retried += 1;
                    }
                    None => {
                        assert!(!got.replayed, "seed {seed}: {step:?}");
                        assert!(plausible(&step, &got), "seed {seed}: {step:?}: {got:?}");
                        if let Outcome::Debited { bundle_units, .. }
                        | Outcome::Reserved { bundle_units, .. } = got.outcome
                        {
                            from_bundles += bundle_units;
                        }
                        fresh += 1;
                        sent.push((step, got));
                    }
                }
            }
            check_books(&ledger, &accounts, seed, &format!("round {round}")).await;
        }
        assert!(
            fresh > 100 && retried > 20 && from_bundles > 0,
            "{fresh} fresh, {retried} retried, {from_bundles} bundle units"
        );
        // Every session ended: nothing held; the CDRs add up.
        for &a in &accounts {
            for s in 0..3 {
                n += 1;
                let end = Step::End(EndSession {
                    account: a,
                    request: format!("end-{s};{n}"),
                    session: format!("sess-{s}"),
                });
                ledger.step(&end, now).await.unwrap();
            }
        }
        check_books(&ledger, &accounts, seed, "at the end").await;
        let books = ledger.books().await.unwrap();
        assert!(books.is_balanced(), "seed {seed}: {books:?}");
        assert_eq!((books.reserved, books.bundle_reserved), (0, 0));
        for &a in &accounts {
            let s = ledger.account(a).await.unwrap().unwrap();
            let cdrs = ledger.account_cdrs(a).await.unwrap();
            let amount: i64 = cdrs.iter().map(|c| c.cdr.amount).sum();
            let units: u64 = cdrs.iter().map(|c| c.cdr.bundle_units).sum();
            let consumed: u64 = s.bundles.iter().map(|b| b.consumed).sum();
            assert_eq!(amount, s.debited, "seed {seed}: {s:?}");
            assert_eq!(units, consumed, "seed {seed}: {s:?}");
        }
    }
}
