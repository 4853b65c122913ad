//! Accounts created through the operator API on a real Redis Cluster:
//! ids come from the cluster's counter above every configured id (and
//! above an id asked for); every identity is claimed with its account's
//! definition, so that any node finds it; of several creations of one
//! identity racing from different clients exactly one succeeds; a
//! creation that died between its claims and its account leaves claims
//! that name no account (steps on it answer 5030) and that the next
//! creation takes over once their grace has passed, burying the dead
//! creation's id so that it can never be created late; deleting a created
//! account and freeing its claims lets the identity be created again; and
//! the books count the created accounts' initial balances.

mod redis_support;

use std::sync::Arc;
use std::time::Duration;

use gyro_charging::{AccountId, Bundle, SubscriptionId, SubscriptionType, Timestamp, UnitKind};
use gyro_store::redis::{
    AccountDefinition, Creation, Deletion, NewAccount, RedisLedger, Reserve, Step,
};
use redis_support::*;

const GRACE: Duration = Duration::from_secs(5);

fn new_account(subscribers: &[SubscriptionId], balance: i64) -> NewAccount {
    NewAccount {
        id: None,
        id_floor: 5000,
        balance,
        credit_limit: 0,
        blocked: false,
        definition: AccountDefinition {
            subscribers: subscribers.to_vec(),
            plan: Some("gold".into()),
            currency: None,
            bundles: vec![Bundle::new(
                1,
                UnitKind::Octets,
                1_000_000,
                Timestamp(0),
                Timestamp(u64::MAX),
            )],
        },
    }
}

fn reserve(account: AccountId, session: &str) -> Step {
    Step::Reserve(Reserve {
        account,
        request: format!("{session};0;0"),
        session: session.into(),
        key: rg(10),
        money: 100,
        units: 1000,
        min_money: 1,
        expires: Timestamp(NOW.as_millis() + 60_000),
        bundles: None,
    })
}

#[tokio::test]
async fn created_accounts_are_found_by_their_identities_and_claimed_once() {
    let Some(ledger) = ledger("created").await else {
        return;
    };
    let msisdn = SubscriptionId::e164("+46709990001");
    let imsi = SubscriptionId::new(SubscriptionType::Imsi, "240019990000001");

    // The first id is above the configuration's highest; the account
    // holds its figures, bundle and definition.
    let created = ledger
        .create_account(
            &new_account(&[msisdn.clone(), imsi.clone()], 777),
            GRACE,
            NOW,
        )
        .await
        .unwrap();
    assert_eq!(created, Creation::Created(AccountId(5001)));
    let state = ledger.account(AccountId(5001)).await.unwrap().unwrap();
    assert_eq!((state.balance, state.initial), (777, 777));
    assert_eq!(state.bundles.len(), 1);
    assert_eq!(state.bundles[0].remaining, 1_000_000);
    let def = state.definition.clone().unwrap();
    assert_eq!(def.plan.as_deref(), Some("gold"));
    assert_eq!(def.subscribers, vec![msisdn.clone(), imsi.clone()]);

    // Found by either identity, the MSISDN with or without '+', in one
    // round trip for several.
    let bare = SubscriptionId::e164("46709990001");
    let unknown = SubscriptionId::e164("46709990999");
    let found = ledger.claims(&[&bare, &imsi, &unknown]).await;
    assert_eq!(found[0].as_ref().unwrap().as_ref().unwrap().account.0, 5001);
    let by_imsi = found[1].as_ref().unwrap().as_ref().unwrap();
    assert_eq!(by_imsi.account.0, 5001);
    assert_eq!(by_imsi.definition.as_ref(), Some(&def));
    assert!(found[2].as_ref().unwrap().is_none());

    // Created again (either identity): refused, nothing changes.
    assert_eq!(
        ledger
            .create_account(
                &new_account(&[unknown.clone(), imsi.clone()], 5),
                GRACE,
                NOW
            )
            .await
            .unwrap(),
        Creation::SubscriberTaken(imsi.clone())
    );
    assert!(
        ledger.subscriber(&unknown).await.unwrap().is_none(),
        "the claim taken before the refusal is freed"
    );
    // An id asked for: refused when taken, else used and the counter
    // goes above it.
    let mut asked = new_account(std::slice::from_ref(&unknown), 5);
    asked.id = Some(AccountId(5001));
    assert_eq!(
        ledger.create_account(&asked, GRACE, NOW).await.unwrap(),
        Creation::AccountTaken(AccountId(5001))
    );
    asked.id = Some(AccountId(7000));
    assert_eq!(
        ledger.create_account(&asked, GRACE, NOW).await.unwrap(),
        Creation::Created(AccountId(7000))
    );
    let next = SubscriptionId::e164("46709990002");
    assert_eq!(
        ledger
            .create_account(&new_account(std::slice::from_ref(&next), 1), GRACE, NOW)
            .await
            .unwrap(),
        Creation::Created(AccountId(7001))
    );

    // Deleted and its claims freed: the identity can be created again
    // (under a new id; the old one stays deleted).
    assert_eq!(
        ledger.delete_account(AccountId(7001), NOW).await.unwrap(),
        Deletion::Deleted
    );
    assert_eq!(
        ledger
            .free_subscribers(AccountId(7001), std::slice::from_ref(&next))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        ledger
            .create_account(&new_account(std::slice::from_ref(&next), 2), GRACE, NOW)
            .await
            .unwrap(),
        Creation::Created(AccountId(7002))
    );

    let books = ledger.books().await.unwrap();
    assert!(books.is_balanced(), "{books:?}");
    assert_eq!(books.accounts, 3);
    assert_eq!(books.initial, 777 + 5 + 2);
}

#[tokio::test]
async fn of_concurrent_creations_of_one_identity_exactly_one_succeeds() {
    let Some(nodes) = cluster_nodes() else {
        return;
    };
    let opts = options(&nodes, "created-race", "node-a");
    let mut ledgers = Vec::new();
    for node in ["node-a", "node-b", "node-c", "node-d"] {
        let mut o = opts.clone();
        o.node_id = node.into();
        ledgers.push(Arc::new(RedisLedger::connect(o).await.unwrap()));
    }
    for round in 0..20 {
        let id = SubscriptionId::e164(format!("4670888{round:04}"));
        let other = SubscriptionId::new(SubscriptionType::Imsi, format!("24001888{round:04}"));
        let tasks: Vec<_> = ledgers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let l = l.clone();
                // Half of them with a second identity, claimed first.
                let subs = if i % 2 == 0 {
                    vec![id.clone()]
                } else {
                    vec![other.clone(), id.clone()]
                };
                tokio::spawn(async move {
                    l.create_account(&new_account(&subs, 10), GRACE, NOW)
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut created = Vec::new();
        for t in tasks {
            if let Creation::Created(a) = t.await.unwrap() {
                created.push(a);
            }
        }
        assert_eq!(created.len(), 1, "round {round}: {created:?}");
        let claim = ledgers[0].subscriber(&id).await.unwrap().unwrap();
        assert_eq!(claim.account, created[0]);
    }
    let books = ledgers[0].books().await.unwrap();
    assert!(books.is_balanced(), "{books:?}");
    assert_eq!(books.accounts, 20, "no account left behind by a loser");
}

#[tokio::test]
async fn a_creation_that_died_after_its_claim_is_taken_over_after_the_grace() {
    let Some(ledger) = ledger("created-dead").await else {
        return;
    };
    let id = SubscriptionId::e164("46709990100");
    // A creator that claimed the identity for account 9000 and died
    // before creating it (written as gyro_claim writes it).
    let key = ledger.keys().subscriber(id.kind, &id.data);
    let def = serde_json::to_string(&AccountDefinition {
        subscribers: vec![id.clone()],
        ..AccountDefinition::default()
    })
    .unwrap();
    let value = format!("9000 {} {def}", NOW.as_millis());
    redis_cli(&["SET", &key, &value]);

    // Found, but it names no account: a step on it answers 5030.
    let claim = ledger.subscriber(&id).await.unwrap().unwrap();
    assert_eq!(claim.account, AccountId(9000));
    let answer = ledger
        .step(&reserve(claim.account, "s1"), NOW)
        .await
        .unwrap();
    assert_eq!(answer.code, 5030);

    // Within the grace it is still being created: refused.
    let soon = Timestamp(NOW.as_millis() + 1000);
    assert_eq!(
        ledger
            .create_account(&new_account(std::slice::from_ref(&id), 50), GRACE, soon)
            .await
            .unwrap(),
        Creation::SubscriberTaken(id.clone())
    );
    // After it: taken over.
    let later = Timestamp(NOW.as_millis() + GRACE.as_millis() as u64);
    let created = ledger
        .create_account(&new_account(std::slice::from_ref(&id), 50), GRACE, later)
        .await
        .unwrap();
    let Creation::Created(account) = created else {
        panic!("{created:?}");
    };
    assert_ne!(account, AccountId(9000));
    assert_eq!(
        ledger.subscriber(&id).await.unwrap().unwrap().account,
        account
    );
    let answer = ledger.step(&reserve(account, "s2"), later).await.unwrap();
    assert_eq!(answer.code, 2001);

    // The dead creator, had it only been slow, can no longer create its
    // account: the id was buried when its claim was taken over.
    let mut late = new_account(&[SubscriptionId::e164("46709990101")], 1);
    late.id = Some(AccountId(9000));
    assert_eq!(
        ledger.create_account(&late, GRACE, later).await.unwrap(),
        Creation::AccountTaken(AccountId(9000))
    );
    assert!(ledger.account(AccountId(9000)).await.unwrap().is_none());
    // An account that exists is never taken over, however old its claim.
    let much_later = Timestamp(later.as_millis() + 3_600_000);
    assert_eq!(
        ledger
            .create_account(
                &new_account(std::slice::from_ref(&id), 1),
                GRACE,
                much_later
            )
            .await
            .unwrap(),
        Creation::SubscriberTaken(id.clone())
    );
    let books = ledger.books().await.unwrap();
    assert!(books.is_balanced(), "{books:?}");
    assert_eq!(books.accounts, 1);
}
