//! The Redis Cluster ledger against a real Redis Cluster: each money step,
//! duplicates, CDRs in the slot streams, expiry of a dead node's
//! reservations, partial grants priced with the tariff, changing and
//! deleting accounts, errors.

mod redis_support;

use gyro_charging::{AccountId, Timestamp};
use gyro_store::redis::{
    Answer, Debit, EndSession, Expire, Outcome, PutSession, RedisLedger, RedisOptions, Refund,
    Release, Reserve, SessionRecord, Step, TopUp,
};
use gyro_store::ErrorKind;
use redis_support::*;
use std::time::Duration;

fn reserve(account: AccountId, request: &str, session: &str, money: i64) -> Step {
    Step::Reserve(Reserve {
        account,
        request: request.into(),
        session: session.into(),
        key: rg(10),
        money,
        units: money as u64 * 100,
        min_money: 1,
        expires: NOW.plus_secs(60),
        bundles: None,
    })
}

fn debit(account: AccountId, request: &str, session: &str, amount: i64, release: bool) -> Step {
    Step::Debit(Debit {
        account,
        request: request.into(),
        reservation: Some((session.into(), rg(10))),
        amount,
        release,
        whole: false,
        cdr: cdr(session, 1, rg(10)),
        bundles: None,
    })
}

async fn one(ledger: &RedisLedger, step: Step) -> Answer {
    ledger.step(&step, NOW).await.expect("step")
}

#[tokio::test]
async fn a_debit_retried_after_a_client_timeout_is_charged_once() {
    let Some(ledger) = ledger("retry").await else {
        return;
    };
    let a = acct(7);
    assert!(ledger.open_account(a, 1000, 0, false).await.unwrap());
    assert!(
        !ledger.open_account(a, 5, 0, false).await.unwrap(),
        "exists"
    );
    let r = one(&ledger, reserve(a, "s1;0;0", "s1", 300)).await;
    assert_eq!(r.code, 2001);
    // The client sends the debit, times out before the answer, and sends
    // the same request again.
    let step = debit(a, "s1;1;0", "s1", 120, false);
    let first = one(&ledger, step.clone()).await;
    let again = one(&ledger, step.clone()).await;
    assert!(!first.replayed);
    assert!(again.replayed);
    assert_eq!(first.outcome, again.outcome);
    assert_eq!(
        first.outcome,
        Outcome::Debited {
            charged: 120,
            from_reserved: 120,
            from_balance: 0,
            unbilled: 0,
            balance_after: 880,
            sequence: 1,
            released: 0,
            bundle_units: 0,
            granted: Some(30_000),
        }
    );
    // Also when the retry rides in a batch with the original (a
    // retransmission in the same event-loop turn).
    let batch = ledger.run(&[step.clone(), step], NOW).await;
    assert!(batch.iter().all(|r| r.as_ref().unwrap().replayed));
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.reserved, s.debited), (700, 180, 120));
    assert!(s.is_conserved());
    let cdrs = ledger.account_cdrs(a).await.unwrap();
    assert_eq!(cdrs.len(), 1, "one CDR for one debit");
    let c = &cdrs[0].cdr;
    assert_eq!((c.amount, c.balance_after, c.sequence), (120, 880, 1));
    assert_eq!(
        (c.session_id.as_str(), c.node_id.as_str()),
        ("s1", "node-a")
    );
    assert_eq!(c.account, a);
    assert_eq!(c.rating_group, Some(10));
}

#[tokio::test]
async fn a_whole_debit_is_all_or_nothing() {
    let Some(ledger) = ledger("whole").await else {
        return;
    };
    let (a, blocked) = (acct(31), acct(32));
    ledger.open_account(a, 100, 20, false).await.unwrap();
    ledger.open_account(blocked, 100, 0, true).await.unwrap();
    let whole = |account, request: &str, amount| {
        let Step::Debit(mut d) = debit(account, request, "", amount, false) else {
            unreachable!()
        };
        d.reservation = None;
        d.whole = true;
        Step::Debit(d)
    };
    // More than balance plus credit limit: refused, nothing changes, no
    // CDR.
    let r = one(&ledger, whole(a, "e;0;0", 121)).await;
    assert_eq!(r.code, 4012);
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.debited), (100, 0));
    assert!(ledger.account_cdrs(a).await.unwrap().is_empty());
    // Up to the credit limit: charged whole.
    let r = one(&ledger, whole(a, "e;1;0", 120)).await;
    assert_eq!(r.code, 2001);
    assert!(matches!(
        r.outcome,
        Outcome::Debited {
            charged: 120,
            unbilled: 0,
            ..
        }
    ));
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.debited), (-20, 120));
    // A blocked account: 4010.
    assert_eq!(one(&ledger, whole(blocked, "e;2;0", 1)).await.code, 4010);
    assert!(ledger.account_cdrs(blocked).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_request_key_names_one_step_only() {
    let Some(ledger) = ledger("reuse").await else {
        return;
    };
    let a = acct(8);
    ledger.open_account(a, 1000, 0, false).await.unwrap();
    one(&ledger, reserve(a, "k", "s1", 10)).await;
    let e = ledger
        .step(&debit(a, "k", "s1", 5, false), NOW)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Remote, "{e}");
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.reserved, s.debited), (990, 10, 0));
}

#[tokio::test]
async fn reservations_follow_the_engines_money_rules() {
    let Some(ledger) = ledger("rules").await else {
        return;
    };
    let (a, limited, blocked) = (acct(1), acct(2), acct(3));
    ledger.open_account(a, 100, 0, false).await.unwrap();
    ledger.open_account(limited, 0, 50, false).await.unwrap();
    ledger.open_account(blocked, 100, 0, true).await.unwrap();
    // All of it, then what is left (units scaled down), then nothing.
    let r = one(&ledger, reserve(a, "1", "s", 60)).await;
    assert_eq!(
        r.outcome,
        Outcome::Reserved {
            money: 60,
            units: 6000,
            balance: 40,
            reserved: 60,
            bundle_units: 0,
        }
    );
    let r = one(&ledger, reserve(a, "2", "s", 80)).await;
    assert_eq!(
        r.outcome,
        Outcome::Reserved {
            money: 40,
            units: 4000,
            balance: 0,
            reserved: 100,
            bundle_units: 0,
        }
    );
    let r = one(&ledger, reserve(a, "3", "s", 10)).await;
    assert_eq!(r.code, 4012);
    // All or nothing when min_money is the whole amount.
    let mut whole = reserve(limited, "4", "t", 80);
    if let Step::Reserve(r) = &mut whole {
        r.min_money = 80;
    }
    assert_eq!(one(&ledger, whole).await.code, 4012);
    // The credit limit is spendable.
    let r = one(&ledger, reserve(limited, "5", "t", 30)).await;
    assert_eq!(
        r.outcome,
        Outcome::Reserved {
            money: 30,
            units: 3000,
            balance: -30,
            reserved: 30,
            bundle_units: 0,
        }
    );
    assert_eq!(one(&ledger, reserve(blocked, "6", "u", 1)).await.code, 4010);
    assert_eq!(
        one(&ledger, reserve(acct(99), "7", "v", 1)).await.code,
        5030
    );
    // Usage beyond the reservation and the balance is unbilled.
    let d = one(&ledger, debit(a, "8", "s", 130, true)).await;
    assert_eq!(
        d.outcome,
        Outcome::Debited {
            charged: 100,
            from_reserved: 100,
            from_balance: 0,
            unbilled: 30,
            balance_after: 0,
            sequence: d_seq(&d),
            released: 0,
            bundle_units: 0,
            granted: Some(10_000),
        }
    );
    // Release, refund, top-up.
    let r = one(
        &ledger,
        Step::Release(Release {
            account: limited,
            request: "9".into(),
            session: "t".into(),
            key: rg(10),
        }),
    )
    .await;
    assert_eq!(
        r.outcome,
        Outcome::Released {
            found: true,
            money: 30,
            balance: 0,
            reserved: 0
        }
    );
    let r = one(
        &ledger,
        Step::Refund(Refund {
            account: a,
            request: "10".into(),
            amount: 25,
            cdr: cdr("sms", 0, rg(10)),
        }),
    )
    .await;
    assert!(matches!(
        r.outcome,
        Outcome::Refunded {
            amount: 25,
            balance_after: 25,
            ..
        }
    ));
    let r = one(
        &ledger,
        Step::TopUp(TopUp {
            account: a,
            request: "11".into(),
            amount: 500,
        }),
    )
    .await;
    assert_eq!(
        r.outcome,
        Outcome::ToppedUp {
            balance: 525,
            topped_up: 500,
            amount: Some(500),
        }
    );
    for id in [a, limited, blocked] {
        let s = ledger.account(id).await.unwrap().unwrap();
        assert!(s.is_conserved(), "{s:?}");
    }
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!(
        (s.balance, s.reserved, s.debited, s.topped_up),
        (525, 0, 75, 500)
    );
    assert!(ledger.reservations(a).await.unwrap().is_empty());
    // The CDRs: the debit (100, 30 unbilled) and the refund (-25).
    let cdrs = ledger.account_cdrs(a).await.unwrap();
    let amounts: Vec<(i64, i64)> = cdrs
        .iter()
        .map(|c| (c.cdr.amount, c.cdr.unbilled))
        .collect();
    assert_eq!(amounts, [(100, 30), (-25, 0)]);
}

fn d_seq(a: &Answer) -> u64 {
    match a.outcome {
        Outcome::Debited { sequence, .. } => sequence,
        _ => 0,
    }
}

#[tokio::test]
async fn a_dead_nodes_reservations_are_released_after_their_expiry() {
    let Some(nodes) = cluster_nodes() else {
        return;
    };
    let ns_a = options(&nodes, "expiry", "node-a");
    let node_a = RedisLedger::connect(ns_a.clone()).await.unwrap();
    let node_b = RedisLedger::connect(RedisOptions {
        node_id: "node-b".into(),
        ..ns_a
    })
    .await
    .unwrap();
    let a = acct(11);
    node_a.open_account(a, 1000, 0, false).await.unwrap();
    // Node A reserves for one rating group of a session (Tcc 60 s), then,
    // on its next request, for another (the session's deadline moves to
    // 90 s, for both)...
    one(&node_a, reserve(a, "x;0;0", "x", 100)).await;
    let mut other = reserve(a, "x;1;0", "x", 50);
    if let Step::Reserve(r) = &mut other {
        r.key = rg(20);
        r.expires = NOW.plus_secs(90);
    }
    one(&node_a, other).await;
    let res = node_a.reservations(a).await.unwrap();
    assert_eq!(res.len(), 2);
    assert!(res.iter().all(|r| r.owner == "node-a"));
    // ...and dies. Before the deadline nothing is due and nothing is
    // released, not even the reservation of the first request.
    let slot = node_b.keys().account_slot(a);
    assert!(node_b
        .due_sessions(slot, NOW.plus_secs(61), 100)
        .await
        .unwrap()
        .is_empty());
    let expire = |request: &str| {
        Step::Expire(Expire {
            account: a,
            request: request.into(),
            session: "x".into(),
            owner: Some("node-a".into()),
            cdr: gyro_charging::Cdr {
                record_type: gyro_charging::cdr::RecordType::SessionEnd,
                closing_cause: Some(gyro_charging::cdr::ClosingCause::SupervisionExpired),
                ..cdr("x", 1, rg(10))
            },
        })
    };
    let early = node_b
        .step(&expire("early"), NOW.plus_secs(61))
        .await
        .unwrap();
    assert_eq!(
        early.outcome,
        Outcome::Expired {
            reservations: 0,
            money: 0,
            sequence: 0
        }
    );
    // After it, node B finds the session and releases both reservations.
    let later = NOW.plus_secs(91);
    let due = node_b.due_sessions(slot, later, 100).await.unwrap();
    assert_eq!(due, [(a, "x".to_string())]);
    let done = node_b.step(&expire("late"), later).await.unwrap();
    assert!(matches!(
        done.outcome,
        Outcome::Expired {
            reservations: 2,
            money: 150,
            sequence: 1
        }
    ));
    let again = node_b.step(&expire("late"), later).await.unwrap();
    assert!(again.replayed);
    assert!(node_b
        .due_sessions(slot, later, 100)
        .await
        .unwrap()
        .is_empty());
    let s = node_b.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.reserved, s.debited), (1000, 0, 0));
    assert!(s.is_conserved());
    let cdrs = node_b.account_cdrs(a).await.unwrap();
    assert_eq!(cdrs.len(), 1);
    assert_eq!(
        cdrs[0].cdr.closing_cause,
        Some(gyro_charging::cdr::ClosingCause::SupervisionExpired)
    );
    assert_eq!(cdrs[0].cdr.node_id, "node-b");
}

#[tokio::test]
async fn with_replicas_ack_a_batch_is_answered_once_a_replica_has_it() {
    let Some(nodes) = cluster_nodes() else {
        return;
    };
    let ledger = RedisLedger::connect(RedisOptions {
        replicas_ack: 1,
        wait_timeout: Duration::from_secs(2),
        ..options(&nodes, "wait", "node-a")
    })
    .await
    .unwrap();
    let accounts: Vec<AccountId> = (0..12).map(acct).collect();
    for &a in &accounts {
        ledger.open_account(a, 100, 0, false).await.unwrap();
    }
    let steps: Vec<Step> = accounts
        .iter()
        .map(|&a| reserve(a, "w;0;0", "w", 10))
        .collect();
    let before = ledger.stats();
    let answers = ledger.run(&steps, NOW).await;
    for a in &answers {
        assert_eq!(a.as_ref().unwrap().code, 2001);
    }
    assert_eq!(ledger.masters().len(), 3);
    // One pipeline per master the batch touches, nothing sent on its own.
    let mut masters: Vec<String> = (0..12).map(|i| master_of(&ledger, acct(i))).collect();
    masters.sort();
    masters.dedup();
    let after = ledger.stats();
    assert_eq!(after.pipelines - before.pipelines, masters.len() as u64);
    assert_eq!(
        (after.steps - before.steps, after.alone - before.alone),
        (12, 0)
    );
    assert_eq!(after.failed, before.failed);
    assert!(after.batch_micros > before.batch_micros);
    assert!(after.batch_micros_max > 0);
}

/// The master of an account's slot, as the cluster says (CLUSTER SLOTS
/// through redis-cli would do; the ledger's own map is what is tested, so
/// ask a node directly).
fn master_of(ledger: &RedisLedger, a: AccountId) -> String {
    let slot = ledger.keys().account_slot(a);
    let seed = cluster_nodes().unwrap()[0].clone();
    let port = seed
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &port, "cluster", "slots"])
        .output()
        .expect("redis-cli");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = text.lines().collect();
    // Groups: start, end, master host, master port, master id, replica...
    let mut i = 0;
    while i + 3 < lines.len() {
        if let (Ok(start), Ok(end)) = (lines[i].parse::<u16>(), lines[i + 1].parse::<u16>()) {
            if (start..=end).contains(&slot) {
                return format!("{}:{}", lines[i + 2], lines[i + 3]);
            }
        }
        i += 1;
    }
    panic!("slot {slot} not served: {text}");
}

#[tokio::test]
async fn an_unreachable_cluster_is_an_error_value() {
    let e = RedisLedger::connect(RedisOptions {
        nodes: vec!["127.0.0.1:1".into()],
        connect_timeout: Duration::from_millis(300),
        response_timeout: Duration::from_millis(300),
        ..RedisOptions::default()
    })
    .await
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
}

#[tokio::test]
async fn values_the_functions_cannot_take_are_refused_before_sending() {
    let Some(ledger) = ledger("bad").await else {
        return;
    };
    let a = acct(1);
    ledger.open_account(a, 100, 0, false).await.unwrap();
    let huge = Step::TopUp(TopUp {
        account: a,
        request: "t".into(),
        amount: 1 << 60,
    });
    let negative = debit(a, "d", "s", -5, false);
    let empty_key = reserve(a, "", "s", 5);
    for step in [huge, negative, empty_key] {
        let e = ledger.step(&step, NOW).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    }
    let out = ledger
        .run(&[reserve(a, "", "s", 5), reserve(a, "ok", "s", 5)], NOW)
        .await;
    assert!(out[0].is_err());
    assert_eq!(out[1].as_ref().unwrap().code, 2001);
    assert!(ledger.open_account(acct(2), 0, -1, false).await.is_err());
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.reserved), (95, 5));
    let _ = Timestamp(0);
}

#[tokio::test]
async fn the_books_of_the_whole_cluster_add_up_and_name_what_does_not() {
    let Some(ledger) = ledger("books").await else {
        return;
    };
    let accounts: Vec<AccountId> = (1..=30).map(acct).collect();
    for &a in &accounts {
        ledger.open_account(a, 1000, 0, false).await.unwrap();
    }
    let steps: Vec<Step> = accounts
        .iter()
        .flat_map(|&a| [reserve(a, "b;0", "b", 100), debit(a, "b;1", "b", 30, false)])
        .collect();
    for r in ledger.run(&steps, NOW).await {
        assert_eq!(r.unwrap().code, 2001);
    }
    let books = ledger.books().await.unwrap();
    assert_eq!(books.accounts, 30);
    assert!(books.is_balanced(), "{books:?}");
    assert_eq!(
        (books.initial, books.balance, books.reserved, books.debited),
        (30_000, 27_000, 2_100, 900)
    );
    // Money that appears from nowhere, and a reservation the account does
    // not count, are named.
    let keys = ledger.keys();
    redis_cli(&["HINCRBY", &keys.account(accounts[3]), "balance", "5"]);
    redis_cli(&[
        "HSET",
        &keys.reservations(accounts[7]),
        "ghost|1:",
        "40 0 0 0 nobody",
    ]);
    let books = ledger.books().await.unwrap();
    assert!(!books.is_balanced());
    let unbalanced: Vec<AccountId> = books.unbalanced.iter().map(|s| s.account).collect();
    assert_eq!(unbalanced, [accounts[3]]);
    let mismatched: Vec<(AccountId, i64)> = books
        .reservations_mismatch
        .iter()
        .map(|(s, held)| (s.account, *held))
        .collect();
    assert_eq!(mismatched, [(accounts[7], 110)]);
}

#[tokio::test]
async fn another_node_expires_every_session_of_a_dead_node_across_the_cluster() {
    let Some(nodes) = cluster_nodes() else {
        return;
    };
    let opts = options(&nodes, "expire-due", "node-a");
    let node_a = RedisLedger::connect(opts.clone()).await.unwrap();
    let node_b = RedisLedger::connect(RedisOptions {
        node_id: "node-b".into(),
        ..opts
    })
    .await
    .unwrap();
    let accounts: Vec<AccountId> = (1..=20).map(acct).collect();
    let mut steps = Vec::new();
    for &a in &accounts {
        node_a.open_account(a, 500, 0, false).await.unwrap();
        steps.push(reserve(a, "d;0", &format!("dead-{}", a.0), 40));
    }
    // A session whose deadline is still ahead.
    node_b.open_account(acct(21), 500, 0, false).await.unwrap();
    let mut own = reserve(acct(21), "l;0", "alive", 40);
    if let Step::Reserve(r) = &mut own {
        r.expires = NOW.plus_secs(600);
    }
    steps.push(own);
    for r in node_a.run(&steps, NOW).await {
        assert_eq!(r.unwrap().code, 2001);
    }
    let early = node_b
        .expire_due(NOW.plus_secs(59), None, 100)
        .await
        .unwrap();
    assert_eq!((early.due, early.sessions), (0, 0));
    let later = NOW.plus_secs(61);
    let done = node_b.expire_due(later, Some("node-a"), 100).await.unwrap();
    assert!(done.errors.is_empty(), "{:?}", done.errors);
    assert_eq!(
        (done.due, done.sessions, done.reservations, done.money),
        (20, 20, 20, 800)
    );
    let again = node_b.expire_due(later, Some("node-a"), 100).await.unwrap();
    assert_eq!(again.due, 0);
    let books = node_b.books().await.unwrap();
    assert!(books.is_balanced(), "{books:?}");
    assert_eq!((books.accounts, books.reserved), (21, 40));
    for &a in &accounts {
        let cdrs = node_b.account_cdrs(a).await.unwrap();
        assert_eq!(cdrs.len(), 1);
        assert_eq!(
            cdrs[0].cdr.closing_cause,
            Some(gyro_charging::cdr::ClosingCause::SupervisionExpired)
        );
        assert_eq!(cdrs[0].cdr.session_id, format!("dead-{}", a.0));
    }
}

#[tokio::test]
async fn ending_a_session_releases_every_reservation_it_holds_once() {
    let Some(ledger) = ledger("end").await else {
        return;
    };
    let a = acct(31);
    ledger.open_account(a, 1000, 0, false).await.unwrap();
    one(&ledger, reserve(a, "s;0;0", "s", 100)).await;
    let mut rg20 = reserve(a, "s;0;1", "s", 50);
    if let Step::Reserve(r) = &mut rg20 {
        r.key = rg(20);
    }
    one(&ledger, rg20).await;
    one(&ledger, reserve(a, "t;0;0", "t", 10)).await;
    let end = Step::End(EndSession {
        account: a,
        request: "s;2;1".into(),
        session: "s".into(),
    });
    let ended = one(&ledger, end.clone()).await;
    assert_eq!(
        (ended.replayed, ended.code, ended.outcome),
        (
            false,
            2001,
            Outcome::Ended {
                reservations: 2,
                money: 150
            }
        )
    );
    assert!(one(&ledger, end).await.replayed);
    let state = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((state.balance, state.reserved), (990, 10), "{state:?}");
    let left = ledger.reservations(a).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].session, "t");
    assert!(state.is_conserved());
}

#[tokio::test]
async fn a_session_record_is_found_from_its_session_id_until_it_expires() {
    let Some(ledger) = ledger("sessions").await else {
        return;
    };
    let record = SessionRecord {
        account: acct(32),
        subscriber: "e164:4670".into(),
        service_context: "32251@3gpp.org".into(),
        owner: "node-a".into(),
        deadline: NOW.plus_secs(1),
        ended: None,
    };
    let put = |session: &str, ttl_ms: u64| {
        Step::Session(PutSession {
            session: session.into(),
            record: record.clone(),
            ttl: Duration::from_millis(ttl_ms),
        })
    };
    let answers = ledger
        .run(&[put("a;1", 60_000), put("b{x};2", 300)], NOW)
        .await;
    for a in &answers {
        assert_eq!(a.as_ref().unwrap().outcome, Outcome::SessionKept);
    }
    let found = ledger.sessions(&["a;1", "b{x};2", "never"]).await;
    let found: Vec<_> = found.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(
        found,
        vec![Some(record.clone()), Some(record.clone()), None]
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let found = ledger.sessions(&["a;1", "b{x};2"]).await;
    assert_eq!(found[0].as_ref().unwrap(), &Some(record));
    assert_eq!(found[1].as_ref().unwrap(), &None, "expired with its ttl");
}

/// 1 money per 100 units, in increments of 100.
fn per_hundred() -> gyro_store::redis::Pricing {
    gyro_store::redis::Pricing {
        increment: 100,
        price: 1,
        per: 100,
        rounding: gyro_charging::Rounding::Up,
        first_interval: 0,
    }
}

fn bundles(ids: &[u32]) -> gyro_store::redis::BundleUse {
    gyro_store::redis::BundleUse {
        bundles: ids.to_vec(),
        pricing: per_hundred(),
    }
}

fn reserve_units(account: AccountId, request: &str, session: &str, units: u64) -> Step {
    let p = per_hundred();
    Step::Reserve(Reserve {
        account,
        request: request.into(),
        session: session.into(),
        key: rg(10),
        money: p.cost(units),
        units,
        min_money: p.cost(100),
        expires: NOW.plus_secs(60),
        bundles: Some(bundles(&[1, 2])),
    })
}

fn debit_units(
    account: AccountId,
    request: &str,
    session: Option<&str>,
    used: u64,
    whole: bool,
) -> Step {
    Step::Debit(Debit {
        account,
        request: request.into(),
        reservation: session.map(|s| (s.to_string(), rg(10))),
        amount: per_hundred().cost(used),
        release: true,
        whole,
        cdr: cdr(session.unwrap_or("event"), 1, rg(10)),
        bundles: Some((used, bundles(&[1, 2]))),
    })
}

#[tokio::test]
async fn bundles_pay_before_money_and_their_holds_go_back() {
    let Some(ledger) = ledger("bundles").await else {
        return;
    };
    let a = acct(11);
    assert!(ledger
        .open_account_with_bundles(a, 1000, 0, false, &[(1, 5000), (2, 5000)])
        .await
        .unwrap());
    // Opening it again changes nothing, bundles included.
    assert!(!ledger
        .open_account_with_bundles(a, 1, 0, false, &[(1, 1), (3, 7)])
        .await
        .unwrap());
    let bundle = |s: &gyro_store::redis::AccountState, id: u32| {
        let b = s.bundles.iter().find(|b| b.id == id).expect("bundle");
        (b.remaining, b.reserved, b.consumed)
    };

    // A grant bundle 1 pays for whole; released, its units go back.
    let r = one(&ledger, reserve_units(a, "s1;0;0", "s1", 3000)).await;
    assert_eq!(
        (r.code, r.outcome),
        (
            2001,
            Outcome::Reserved {
                money: 0,
                units: 0,
                bundle_units: 3000,
                balance: 1000,
                reserved: 0,
            }
        )
    );
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!(s.bundles.len(), 2, "bundle 3 was not added: {s:?}");
    assert_eq!(bundle(&s, 1), (2000, 3000, 0));
    let held = ledger.reservations(a).await.unwrap();
    assert_eq!(held[0].bundle_holds, vec![(1, 3000)]);
    let step = Step::Release(Release {
        account: a,
        request: "s1;1;0".into(),
        session: "s1".into(),
        key: rg(10),
    });
    one(&ledger, step).await;
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!(bundle(&s, 1), (5000, 0, 0));

    // 11,000 units: 5,000 from bundle 1, 5,000 from bundle 2, 1,000 with
    // money (10).
    let r = one(&ledger, reserve_units(a, "s2;0;0", "s2", 11_000)).await;
    assert_eq!(
        r.outcome,
        Outcome::Reserved {
            money: 10,
            units: 1000,
            bundle_units: 10_000,
            balance: 990,
            reserved: 10,
        }
    );
    // 10,500 used: the holds pay 10,000, the money 500 (5); the rest of
    // the reservation (5) goes back. Sent twice: charged once.
    let step = debit_units(a, "s2;1;0", Some("s2"), 10_500, false);
    let first = one(&ledger, step.clone()).await;
    let again = one(&ledger, step).await;
    assert!(again.replayed);
    assert_eq!(first.outcome, again.outcome);
    assert_eq!(
        first.outcome,
        Outcome::Debited {
            charged: 5,
            from_reserved: 5,
            from_balance: 0,
            unbilled: 0,
            balance_after: 995,
            sequence: 1,
            released: 5,
            bundle_units: 10_000,
            granted: Some(11_000),
        }
    );
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.reserved, s.debited), (995, 0, 5));
    assert_eq!((bundle(&s, 1), bundle(&s, 2)), ((0, 0, 5000), (0, 0, 5000)));
    assert!(s.is_conserved());
    let cdrs = ledger.account_cdrs(a).await.unwrap();
    assert_eq!(cdrs.len(), 1);
    assert_eq!((cdrs[0].cdr.amount, cdrs[0].cdr.bundle_units), (5, 10_000));

    // Bundles empty: money only, priced as without bundles.
    let r = one(&ledger, reserve_units(a, "s3;0;0", "s3", 2000)).await;
    assert_eq!(
        r.outcome,
        Outcome::Reserved {
            money: 20,
            units: 2000,
            bundle_units: 0,
            balance: 975,
            reserved: 20,
        }
    );
    let d = one(&ledger, debit_units(a, "s3;1;0", Some("s3"), 2000, false)).await;
    assert!(matches!(
        d.outcome,
        Outcome::Debited {
            charged: 20,
            bundle_units: 0,
            ..
        }
    ));

    let books = ledger.books().await.unwrap();
    assert!(books.is_balanced(), "{books:?}");
    assert_eq!(
        (books.bundles, books.bundle_initial, books.bundle_consumed),
        (2, 10_000, 10_000)
    );
}

/// Usage is rounded up to the increment before bundles pay for it, and a
/// grant holds bundle units in whole increments (library version 11).
#[tokio::test]
async fn usage_is_rounded_up_to_the_increment_before_bundles_pay() {
    let Some(ledger) = ledger("bundle-increment").await else {
        return;
    };
    let a = acct(12);
    assert!(ledger
        .open_account_with_bundles(a, 1000, 0, false, &[(1, 150)])
        .await
        .unwrap());
    // 200 units asked: the bundle holds one whole increment (100 of its
    // 150), money buys the other (1).
    let r = one(&ledger, reserve_units(a, "i1;0;0", "i1", 200)).await;
    assert_eq!(
        r.outcome,
        Outcome::Reserved {
            money: 1,
            units: 100,
            bundle_units: 100,
            balance: 999,
            reserved: 1,
        }
    );
    // 1 unit used is rated 100, all paid by the hold; the money goes
    // back.
    let d = one(&ledger, debit_units(a, "i1;1;0", Some("i1"), 1, false)).await;
    assert!(
        matches!(
            d.outcome,
            Outcome::Debited {
                charged: 0,
                released: 1,
                bundle_units: 100,
                ..
            }
        ),
        "{d:?}"
    );
    // A direct debit of 250 units is rated 300: the bundle's last 50,
    // then 250 with money (2.5, rounded up to 3).
    let e = one(&ledger, debit_units(a, "i2;0;0", None, 250, true)).await;
    assert!(
        matches!(
            e.outcome,
            Outcome::Debited {
                charged: 3,
                bundle_units: 50,
                ..
            }
        ),
        "{e:?}"
    );
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.reserved, s.debited), (997, 0, 3));
    let b = &s.bundles[0];
    assert_eq!((b.remaining, b.reserved, b.consumed), (0, 0, 150));
    assert!(s.is_conserved());
    // The CDRs say the units rated.
    let cdrs: Vec<_> = ledger
        .account_cdrs(a)
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.cdr.rated_units, c.cdr.bundle_units, c.cdr.amount))
        .collect();
    assert_eq!(cdrs, vec![(100, 100, 0), (300, 50, 3)]);
}

#[tokio::test]
async fn usage_past_the_grant_and_events_draw_on_free_bundle_units() {
    let Some(ledger) = ledger("bundle-events").await else {
        return;
    };
    let a = acct(12);
    ledger
        .open_account_with_bundles(a, 50, 0, false, &[(1, 1000), (2, 3000)])
        .await
        .unwrap();
    let bundle = |s: &gyro_store::redis::AccountState, id: u32| {
        let b = s.bundles.iter().find(|b| b.id == id).expect("bundle");
        (b.remaining, b.reserved, b.consumed)
    };
    // 2,000 granted: bundle 1's 1,000 and 1,000 of bundle 2.
    let r = one(&ledger, reserve_units(a, "s;0;0", "s", 2000)).await;
    assert!(matches!(
        r.outcome,
        Outcome::Reserved {
            money: 0,
            bundle_units: 2000,
            ..
        }
    ));
    // 2,600 used: the holds pay 2,000; the 600 beyond the grant come from
    // bundle 2's free units.
    let d = one(&ledger, debit_units(a, "s;1;0", Some("s"), 2600, false)).await;
    assert!(matches!(
        d.outcome,
        Outcome::Debited {
            charged: 0,
            bundle_units: 2600,
            ..
        }
    ));
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!(
        (bundle(&s, 1), bundle(&s, 2)),
        ((0, 0, 1000), (1400, 0, 1600))
    );

    // An event of 2,000 units: 1,400 from bundle 2, 600 with money (6).
    let e = one(&ledger, debit_units(a, "e;0;0", None, 2000, true)).await;
    assert_eq!(e.code, 2001);
    assert!(matches!(
        e.outcome,
        Outcome::Debited {
            charged: 6,
            bundle_units: 1400,
            ..
        }
    ));
    // An event the money cannot pay (bundles empty, 44 left, 100 asked):
    // refused, and nothing changes.
    let e = one(&ledger, debit_units(a, "e2;0;0", None, 10_000, true)).await;
    assert_eq!(e.code, 4012);
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.debited), (44, 6));
    assert_eq!(bundle(&s, 2), (0, 0, 3000));
    assert!(s.is_conserved());
    let books = ledger.books().await.unwrap();
    assert!(books.is_balanced(), "{books:?}");
}

#[tokio::test]
async fn a_grant_bundles_cannot_fill_buys_what_the_money_pays_and_expiry_gives_the_holds_back() {
    let Some(ledger) = ledger("bundle-partial").await else {
        return;
    };
    let a = acct(13);
    ledger
        .open_account_with_bundles(a, 5, 0, false, &[(1, 1000)])
        .await
        .unwrap();
    // 2,000 wanted: 1,000 from the bundle; the other 1,000 cost 10, the
    // account has 5: 500 units (whole increments of 100) for 5.
    let r = one(&ledger, reserve_units(a, "x;0;0", "x", 2000)).await;
    assert_eq!(
        (r.code, r.outcome),
        (
            2001,
            Outcome::Reserved {
                money: 5,
                units: 500,
                bundle_units: 1000,
                balance: 0,
                reserved: 5,
            }
        )
    );
    // Nothing heard of the session past its deadline: its money and its
    // bundle units go back.
    let expire = Step::Expire(Expire {
        account: a,
        request: "x;expire".into(),
        session: "x".into(),
        owner: None,
        cdr: gyro_charging::Cdr {
            record_type: gyro_charging::cdr::RecordType::SessionEnd,
            ..cdr("x", 1, rg(10))
        },
    });
    let e = ledger.step(&expire, NOW.plus_secs(61)).await.unwrap();
    assert!(matches!(
        e.outcome,
        Outcome::Expired {
            reservations: 1,
            money: 5,
            ..
        }
    ));
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.reserved), (5, 0));
    let b = &s.bundles[0];
    assert_eq!((b.remaining, b.reserved, b.consumed), (1000, 0, 0));
    assert!(s.is_conserved());

    // Again, ended by a CCR-Terminate instead.
    one(&ledger, reserve_units(a, "y;0;0", "y", 1500)).await;
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.bundles[0].remaining, s.bundles[0].reserved), (0, 1000));
    let end = Step::End(EndSession {
        account: a,
        request: "y;1;0".into(),
        session: "y".into(),
    });
    one(&ledger, end).await;
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.reserved), (5, 0));
    assert_eq!((s.bundles[0].remaining, s.bundles[0].reserved), (1000, 0));
    let books = ledger.books().await.unwrap();
    assert!(books.is_balanced(), "{books:?}");
}

#[tokio::test]
async fn a_partial_grant_with_the_tariff_reserves_the_price_of_whole_increments() {
    let Some(ledger) = ledger("partial").await else {
        return;
    };
    let a = acct(21);
    ledger.open_account(a, 250, 0, false).await.unwrap();
    // 3 per 100 units, in increments of 100: 250 pays 83 increments (249).
    let pricing = gyro_store::redis::Pricing {
        price: 3,
        ..per_hundred()
    };
    let step = |request: &str, session: &str, priced: bool| {
        Step::Reserve(Reserve {
            account: a,
            request: request.into(),
            session: session.into(),
            key: rg(10),
            money: pricing.cost(10_000),
            units: 10_000,
            min_money: pricing.cost(100),
            expires: NOW.plus_secs(60),
            bundles: priced.then(|| gyro_store::redis::BundleUse {
                bundles: Vec::new(),
                pricing,
            }),
        })
    };
    let r = one(&ledger, step("p1", "s1", true)).await;
    assert_eq!(r.code, 2001);
    assert!(
        matches!(
            r.outcome,
            Outcome::Reserved {
                money: 249,
                units: 8300,
                bundle_units: 0,
                balance: 1,
                reserved: 249
            }
        ),
        "{r:?}"
    );
    // What is left pays no increment: nothing granted.
    let r = one(&ledger, step("p2", "s2", true)).await;
    assert_eq!(r.code, 4012, "{r:?}");
    // Without the tariff a partial grant is all the account can pay.
    let b = acct(22);
    ledger.open_account(b, 250, 0, false).await.unwrap();
    let Step::Reserve(mut unpriced) = step("p3", "s3", false) else {
        unreachable!()
    };
    unpriced.account = b;
    let r = one(&ledger, Step::Reserve(unpriced)).await;
    assert!(
        matches!(r.outcome, Outcome::Reserved { money: 250, .. }),
        "{r:?}"
    );
    for id in [a, b] {
        let s = ledger.account(id).await.unwrap().unwrap();
        assert!(s.is_conserved(), "{s:?}");
    }
}

#[tokio::test]
async fn an_account_is_changed_and_deleted_for_good() {
    use gyro_store::redis::Deletion;
    let Some(ledger) = ledger("change").await else {
        return;
    };
    let a = acct(23);
    ledger.open_account(a, 100, 0, false).await.unwrap();
    assert!(ledger
        .update_account(a, Some(true), Some(50))
        .await
        .unwrap());
    let s = ledger.account(a).await.unwrap().unwrap();
    assert!(s.blocked);
    assert_eq!((s.balance, s.credit_limit), (100, 50));
    assert_eq!(one(&ledger, reserve(a, "c1", "s1", 10)).await.code, 4010);
    assert!(ledger.update_account(a, Some(false), None).await.unwrap());
    let s = ledger.account(a).await.unwrap().unwrap();
    assert!(!s.blocked);
    assert_eq!(s.credit_limit, 50, "kept");
    // The credit limit pays: 150 spendable.
    let r = one(&ledger, reserve(a, "c2", "s1", 150)).await;
    assert!(
        matches!(r.outcome, Outcome::Reserved { money: 150, .. }),
        "{r:?}"
    );
    assert!(ledger.update_account(a, None, Some(-1)).await.is_err());
    // Not while a session holds a reservation.
    assert_eq!(
        ledger.delete_account(a, NOW).await.unwrap(),
        Deletion::InUse
    );
    assert!(ledger.account(a).await.unwrap().is_some());
    let r = one(
        &ledger,
        Step::Release(Release {
            account: a,
            request: "c3".into(),
            session: "s1".into(),
            key: rg(10),
        }),
    )
    .await;
    assert_eq!(r.code, 2001);
    assert_eq!(
        ledger.delete_account(a, NOW).await.unwrap(),
        Deletion::Deleted
    );
    assert!(ledger.account(a).await.unwrap().is_none());
    assert!(!ledger.account_ids().await.unwrap().contains(&a));
    assert_eq!(
        ledger.delete_account(a, NOW).await.unwrap(),
        Deletion::NoAccount
    );
    // Its tombstone: not created again, not changed, not charged.
    assert!(!ledger.open_account(a, 100, 0, false).await.unwrap());
    assert!(ledger.account(a).await.unwrap().is_none());
    assert!(!ledger.update_account(a, Some(true), None).await.unwrap());
    assert_eq!(one(&ledger, reserve(a, "c4", "s2", 10)).await.code, 5030);
    // Another account is listed.
    let b = acct(24);
    ledger.open_account(b, 1, 0, false).await.unwrap();
    assert!(ledger.account_ids().await.unwrap().contains(&b));
}
