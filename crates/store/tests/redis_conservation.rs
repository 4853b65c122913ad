//! Conservation and duplicates on a real Redis Cluster: randomized
//! sequences of money steps (with retries of the same request keys)
//! checked step by step against a model of the engine's money rules, and
//! two ledger clients ("nodes") charging the same accounts at once.

mod redis_support;

use gyro_charging::{AccountId, RatingKey, Timestamp};
use gyro_store::redis::{
    Answer, Debit, EndSession, Expire, Outcome, RedisLedger, Refund, Release, Reserve, Step, TopUp,
};
use redis_support::*;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Clone, Debug, Default)]
struct Res {
    money: i64,
    units: u64,
}

/// One account under the engine's rules, as the functions should apply
/// them.
#[derive(Clone, Debug, Default)]
struct Model {
    balance: i64,
    credit_limit: i64,
    reserved: i64,
    debited: i64,
    initial: i64,
    topped_up: i64,
    res: HashMap<(String, RatingKey), Res>,
    /// Each session's deadline: the expiry of its latest reservation,
    /// until it holds none.
    deadline: HashMap<String, u64>,
}

impl Model {
    fn forget_if_empty(&mut self, session: &str) {
        if !self.res.keys().any(|(s, _)| s == session) {
            self.deadline.remove(session);
        }
    }

    fn spendable(&self) -> i64 {
        (self.balance + self.credit_limit).max(0)
    }

    /// The outcome the ledger must give, applying the step; `cdr` tells
    /// whether a CDR is written.
    fn apply(&mut self, step: &Step, now: Timestamp, seq: &mut u64) -> Answer {
        let ok = |outcome| Answer {
            replayed: false,
            code: 2001,
            outcome,
        };
        match step {
            Step::Reserve(s) => {
                let spendable = self.spendable();
                let (grant, units) = if spendable >= s.money {
                    (s.money, s.units)
                } else if spendable > 0 && spendable >= s.min_money {
                    let units = (s.units as f64 * (spendable as f64 / s.money as f64)).floor();
                    (spendable, units as u64)
                } else {
                    return Answer {
                        replayed: false,
                        code: 4012,
                        outcome: Outcome::Reserved {
                            money: 0,
                            units: 0,
                            balance: self.balance,
                            reserved: self.reserved,
                            bundle_units: 0,
                        },
                    };
                };
                let r = self.res.entry((s.session.clone(), s.key)).or_default();
                r.money += grant;
                r.units += units;
                self.deadline
                    .insert(s.session.clone(), s.expires.as_millis());
                self.balance -= grant;
                self.reserved += grant;
                ok(Outcome::Reserved {
                    money: grant,
                    units,
                    balance: self.balance,
                    reserved: self.reserved,
                    bundle_units: 0,
                })
            }
            Step::Debit(s) => {
                let key = s.reservation.clone();
                let held = key.as_ref().and_then(|k| self.res.get(k)).map(|r| r.money);
                let granted = key
                    .as_ref()
                    .and_then(|k| self.res.get(k))
                    .map_or(0, |r| r.units);
                let from_reserved = held.map_or(0, |m| s.amount.min(m.max(0)));
                let from_balance = (s.amount - from_reserved).min(self.spendable());
                let unbilled = s.amount - from_reserved - from_balance;
                self.reserved -= from_reserved;
                self.balance -= from_balance;
                self.debited += from_reserved + from_balance;
                let mut released = 0;
                if let (Some(k), Some(_)) = (&key, held) {
                    let r = self.res.get_mut(k).expect("held");
                    r.money -= from_reserved;
                    if s.release {
                        released = r.money;
                        self.balance += r.money;
                        self.reserved -= r.money;
                        self.res.remove(k);
                        self.forget_if_empty(&k.0);
                    }
                }
                *seq += 1;
                ok(Outcome::Debited {
                    charged: from_reserved + from_balance,
                    from_reserved,
                    from_balance,
                    unbilled,
                    balance_after: self.balance + self.reserved,
                    sequence: *seq,
                    released,
                    bundle_units: 0,
                    granted: Some(granted),
                })
            }
            Step::Release(s) => {
                let (found, money) = match self.res.remove(&(s.session.clone(), s.key)) {
                    Some(r) => {
                        self.balance += r.money;
                        self.reserved -= r.money;
                        self.forget_if_empty(&s.session);
                        (true, r.money)
                    }
                    None => (false, 0),
                };
                ok(Outcome::Released {
                    found,
                    money,
                    balance: self.balance,
                    reserved: self.reserved,
                })
            }
            Step::Refund(s) => {
                self.balance += s.amount;
                self.debited -= s.amount;
                *seq += 1;
                ok(Outcome::Refunded {
                    amount: s.amount,
                    balance_after: self.balance + self.reserved,
                    sequence: *seq,
                })
            }
            Step::TopUp(s) => {
                self.balance += s.amount;
                self.topped_up += s.amount;
                ok(Outcome::ToppedUp {
                    balance: self.balance,
                    topped_up: self.topped_up,
                    amount: Some(s.amount),
                })
            }
            Step::Expire(s) => {
                let due: Vec<_> = match self.deadline.get(&s.session) {
                    Some(&d) if d <= now.0 => self
                        .res
                        .keys()
                        .filter(|(session, _)| *session == s.session)
                        .cloned()
                        .collect(),
                    _ => Vec::new(),
                };
                let mut money = 0;
                for k in &due {
                    if let Some(r) = self.res.remove(k) {
                        money += r.money;
                        self.balance += r.money;
                        self.reserved -= r.money;
                    }
                }
                self.forget_if_empty(&s.session);
                let sequence = if due.is_empty() {
                    0
                } else {
                    *seq += 1;
                    *seq
                };
                ok(Outcome::Expired {
                    reservations: due.len() as u64,
                    money,
                    sequence,
                })
            }
            Step::End(s) => {
                let all: Vec<_> = self
                    .res
                    .keys()
                    .filter(|(session, _)| *session == s.session)
                    .cloned()
                    .collect();
                let mut money = 0;
                for k in &all {
                    if let Some(r) = self.res.remove(k) {
                        money += r.money;
                        self.balance += r.money;
                        self.reserved -= r.money;
                    }
                }
                self.deadline.remove(&s.session);
                ok(Outcome::Ended {
                    reservations: all.len() as u64,
                    money,
                })
            }
            Step::Session(_) => ok(Outcome::SessionKept),
            // The model's accounts are never blocked and have no bundles.
            Step::Check(s) => ok(Outcome::Checked {
                enough: s.money <= self.spendable(),
                money: s.money,
                bundle_units: 0,
            }),
        }
    }
}

fn random_step(rng: &mut fastrand::Rng, n: u64, account: AccountId, now: Timestamp) -> Step {
    let session = format!("sess-{}", rng.u64(..3));
    let key = rg(10 * (1 + rng.u64(..2) as u32));
    let request = format!("{session};{n}");
    match rng.u64(..100) {
        0..=34 => {
            let money = 1 + rng.u64(..200) as i64;
            Step::Reserve(Reserve {
                account,
                request,
                session,
                key,
                money,
                units: money as u64 * 1000,
                min_money: if rng.u64(..100) < 30 { money } else { 1 },
                expires: now.plus_secs(rng.u64(..4)),
                bundles: None,
            })
        }
        35..=64 => Step::Debit(Debit {
            account,
            request,
            reservation: if rng.u64(..100) < 85 {
                Some((session.clone(), key))
            } else {
                None
            },
            amount: rng.u64(..250) as i64,
            release: rng.u64(..100) < 40,
            whole: false,
            cdr: cdr(&session, n as u32, key),
            bundles: None,
        }),
        65..=74 => Step::Release(Release {
            account,
            request,
            session,
            key,
        }),
        75..=82 => Step::Refund(Refund {
            account,
            request,
            amount: 1 + rng.u64(..60) as i64,
            cdr: cdr(&session, n as u32, key),
        }),
        83..=89 => Step::TopUp(TopUp {
            account,
            request,
            amount: 1 + rng.u64(..400) as i64,
        }),
        90..=92 => Step::End(EndSession {
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

async fn check_books(ledger: &RedisLedger, models: &HashMap<AccountId, Model>, seed: u64) {
    let mut debited_in_cdrs: HashMap<AccountId, i64> = HashMap::new();
    let mut slots: Vec<u16> = models
        .keys()
        .map(|&a| ledger.keys().account_slot(a))
        .collect();
    slots.sort_unstable();
    slots.dedup();
    for slot in slots {
        let cdrs = ledger.cdrs(slot).await.unwrap();
        for (i, c) in cdrs.iter().enumerate() {
            assert_eq!(
                c.cdr.sequence,
                i as u64 + 1,
                "seed {seed}: gap in slot {slot}"
            );
            *debited_in_cdrs.entry(c.cdr.account).or_default() += c.cdr.amount;
        }
    }
    for (&a, m) in models {
        let s = ledger.account(a).await.unwrap().unwrap();
        assert!(s.is_conserved(), "seed {seed}: {s:?}");
        assert_eq!(
            (s.balance, s.reserved, s.debited, s.topped_up, s.initial),
            (m.balance, m.reserved, m.debited, m.topped_up, m.initial),
            "seed {seed}: account {a}"
        );
        assert!(s.balance >= -s.credit_limit, "seed {seed}: {s:?}");
        assert_eq!(
            debited_in_cdrs.get(&a).copied().unwrap_or(0),
            s.debited,
            "seed {seed}: the CDRs of account {a} add up to what it was charged"
        );
        let mut held: Vec<(String, RatingKey, i64)> = ledger
            .reservations(a)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.session, r.key, r.money))
            .collect();
        held.sort();
        let mut want: Vec<(String, RatingKey, i64)> = m
            .res
            .iter()
            .map(|((s, k), r)| (s.clone(), *k, r.money))
            .collect();
        want.sort();
        assert_eq!(held, want, "seed {seed}: reservations of account {a}");
        assert_eq!(held.iter().map(|r| r.2).sum::<i64>(), s.reserved);
    }
}

/// Randomized reserve/debit/release/refund/top-up/expiry steps in batches
/// (one pipeline per master), a fifth of them retries of earlier request
/// keys: every fresh answer is the model's, every retry returns the
/// original answer and changes nothing, and at the end every account adds
/// up (initial + top-ups = balance + reserved + debited), equals the
/// model, and its CDRs (gap-free per slot stream) add up to its debits.
#[tokio::test]
async fn random_steps_with_retries_keep_the_books_and_never_charge_twice() {
    let Some(nodes) = cluster_nodes() else {
        return;
    };
    for seed in [0x9E37_79B9_7F4A_7C15u64, 42, 7_000_001] {
        let ledger = RedisLedger::connect(options(&nodes, "prop", "node-a"))
            .await
            .unwrap();
        let mut rng = fastrand::Rng::with_seed(seed);
        let accounts: Vec<AccountId> = (1..=6).map(acct).collect();
        let mut models = HashMap::new();
        for (i, &a) in accounts.iter().enumerate() {
            let (balance, limit) = (300 + 100 * i as i64, if i % 3 == 0 { 100 } else { 0 });
            ledger.open_account(a, balance, limit, false).await.unwrap();
            models.insert(
                a,
                Model {
                    balance,
                    credit_limit: limit,
                    initial: balance,
                    ..Model::default()
                },
            );
        }
        let mut seqs: HashMap<u16, u64> = HashMap::new();
        let mut sent: Vec<(Step, Answer)> = Vec::new();
        let mut now = NOW;
        let mut n = 0u64;
        let (mut fresh, mut retried) = (0, 0);
        for _ in 0..40 {
            now = Timestamp(now.0 + 1000);
            let mut batch: Vec<(Step, Option<Answer>)> = Vec::new();
            for _ in 0..1 + rng.u64(..8) {
                if !sent.is_empty() && rng.u64(..100) < 20 {
                    let (step, answer) = sent[rng.u64(..sent.len() as u64) as usize].clone();
                    batch.push((
                        step,
                        Some(Answer {
                            replayed: true,
                            ..answer
                        }),
                    ));
                } else {
                    n += 1;
                    let a = accounts[rng.u64(..accounts.len() as u64) as usize];
                    let step = random_step(&mut rng, n, a, now);
                    let seq = seqs.entry(ledger.keys().account_slot(a)).or_default();
                    let model = models.get_mut(&a).expect("model");
                    let expected = model.apply(&step, now, seq);
                    batch.push((step, Some(expected)));
                }
            }
            // A fresh step sent twice in one batch: the second is a replay.
            if rng.u64(..100) < 25 {
                if let Some((step, Some(a))) = batch
                    .iter()
                    .find(|(_, a)| a.as_ref().is_some_and(|a| !a.replayed))
                    .cloned()
                {
                    batch.push((
                        step,
                        Some(Answer {
                            replayed: true,
                            ..a
                        }),
                    ));
                }
            }
            let steps: Vec<Step> = batch.iter().map(|(s, _)| s.clone()).collect();
            let answers = ledger.run(&steps, now).await;
            for ((step, expected), got) in batch.into_iter().zip(answers) {
                let got = got.unwrap_or_else(|e| panic!("seed {seed}: {step:?}: {e}"));
                let expected = expected.expect("expected");
                assert_eq!(got, expected, "seed {seed}: {step:?}");
                if got.replayed {
                    retried += 1;
                } else {
                    fresh += 1;
                    sent.push((step, got));
                }
            }
        }
        assert!(
            fresh > 100 && retried > 20,
            "{fresh} fresh, {retried} retried"
        );
        check_books(&ledger, &models, seed).await;
    }
}

/// A client gives up on a debit (its timeout fires while the function may
/// or may not have run) and sends it again: whatever the first attempt
/// did, the account is charged once and has one CDR.
#[tokio::test]
async fn a_step_abandoned_on_a_client_timeout_and_sent_again_is_charged_once() {
    let Some(ledger) = ledger("abandon").await else {
        return;
    };
    let a = acct(5);
    ledger.open_account(a, 100_000, 0, false).await.unwrap();
    let (mut charged, mut replayed) = (0, 0);
    for i in 0..40u32 {
        let step = Step::Debit(Debit {
            account: a,
            request: format!("ev;{i}"),
            reservation: None,
            amount: 10 + i64::from(i),
            release: false,
            whole: false,
            cdr: cdr("ev", i, rg(1)),
            bundles: None,
        });
        // Abandon the first attempt after a few microseconds (it went out,
        // so it runs, but its answer is never read); every fourth request
        // is lost before it was sent instead.
        if i % 4 != 3 {
            let _ = tokio::time::timeout(
                Duration::from_micros(u64::from(i % 4) * 40),
                ledger.step(&step, NOW),
            )
            .await;
        }
        let answer = ledger.step(&step, NOW).await.unwrap();
        replayed += usize::from(answer.replayed);
        if let Outcome::Debited { charged: c, .. } = answer.outcome {
            charged += c;
        }
    }
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!(s.debited, charged);
    assert_eq!(s.debited, (0..40).map(|i| 10 + i).sum::<i64>());
    assert!(
        replayed > 0 && replayed <= 30,
        "{replayed} answers were the first attempt's"
    );
    assert!(s.is_conserved());
    let cdrs = ledger.account_cdrs(a).await.unwrap();
    assert_eq!(cdrs.len(), 40);
    assert_eq!(cdrs.iter().map(|c| c.cdr.amount).sum::<i64>(), s.debited);
}

/// Two ledger clients with their own node names (two gyro nodes) reserve
/// and debit the same accounts at the same time, each in batches, each
/// retrying some of its requests: the books add up, each account was
/// charged exactly what the fresh answers say, once, with one CDR per
/// debit, and no reservation is left behind.
#[tokio::test]
async fn two_nodes_charging_the_same_accounts_keep_the_books() {
    let Some(nodes) = cluster_nodes() else {
        return;
    };
    let base = options(&nodes, "two", "node-a");
    let accounts: Vec<AccountId> = (1..=4).map(acct).collect();
    {
        let setup = RedisLedger::connect(base.clone()).await.unwrap();
        for &a in &accounts {
            setup.open_account(a, 20_000, 0, false).await.unwrap();
        }
    }
    let mut tasks = Vec::new();
    for (node, seed) in [("node-a", 1u64), ("node-b", 2)] {
        let opts = gyro_store::redis::RedisOptions {
            node_id: node.into(),
            ..base.clone()
        };
        let accounts = accounts.clone();
        tasks.push(tokio::spawn(async move {
            let ledger = RedisLedger::connect(opts).await.unwrap();
            let mut rng = fastrand::Rng::with_seed(seed);
            // Per account: money charged and debits made, by fresh answers.
            let mut charged: HashMap<AccountId, (i64, usize)> = HashMap::new();
            for round in 0..30u32 {
                let sessions: Vec<(AccountId, String)> = (0..4)
                    .map(|k| {
                        let a = accounts[rng.u64(..accounts.len() as u64) as usize];
                        (a, format!("{node}-{round}-{k}"))
                    })
                    .collect();
                let reserves: Vec<Step> = sessions
                    .iter()
                    .map(|(a, s)| {
                        Step::Reserve(Reserve {
                            account: *a,
                            request: format!("{s};0"),
                            session: s.clone(),
                            key: rg(10),
                            money: 50 + rng.u64(..100) as i64,
                            units: 1000,
                            min_money: 1,
                            expires: NOW.plus_secs(60),
                            bundles: None,
                        })
                    })
                    .collect();
                for r in ledger.run(&reserves, NOW).await {
                    assert_eq!(r.unwrap().code, 2001);
                }
                let debits: Vec<Step> = sessions
                    .iter()
                    .map(|(a, s)| {
                        Step::Debit(Debit {
                            account: *a,
                            request: format!("{s};1"),
                            reservation: Some((s.clone(), rg(10))),
                            amount: rng.u64(..180) as i64,
                            release: true,
                            whole: false,
                            cdr: cdr(s, 1, rg(10)),
                            bundles: None,
                        })
                    })
                    .collect();
                let first = ledger.run(&debits, NOW).await;
                // Retry some of them (as after a timeout): same answers.
                let retry: Vec<Step> = debits
                    .iter()
                    .filter(|_| rng.u64(..100) < 30)
                    .cloned()
                    .collect();
                let again = ledger.run(&retry, NOW).await;
                for (step, a) in retry.iter().zip(again) {
                    let a = a.unwrap();
                    assert!(a.replayed);
                    let i = debits.iter().position(|d| d == step).unwrap();
                    let orig = first[i].as_ref().unwrap();
                    assert_eq!(a.outcome, orig.outcome);
                }
                for (step, a) in debits.iter().zip(first) {
                    let a = a.unwrap();
                    assert!(!a.replayed);
                    if let Outcome::Debited { charged: c, .. } = a.outcome {
                        let e = charged.entry(step.account()).or_default();
                        e.0 += c;
                        e.1 += 1;
                    }
                }
            }
            charged
        }));
    }
    let mut total: HashMap<AccountId, (i64, usize)> = HashMap::new();
    for t in tasks {
        for (a, (c, n)) in t.await.unwrap() {
            let e = total.entry(a).or_default();
            e.0 += c;
            e.1 += n;
        }
    }
    let ledger = RedisLedger::connect(base).await.unwrap();
    for &a in &accounts {
        let s = ledger.account(a).await.unwrap().unwrap();
        let (c, n) = total.get(&a).copied().unwrap_or_default();
        assert!(s.is_conserved(), "{s:?}");
        assert_eq!((s.debited, s.reserved), (c, 0), "account {a}");
        assert!(ledger.reservations(a).await.unwrap().is_empty());
        let cdrs = ledger.account_cdrs(a).await.unwrap();
        assert_eq!(cdrs.len(), n, "one CDR per debit of account {a}");
        assert_eq!(cdrs.iter().map(|c| c.cdr.amount).sum::<i64>(), s.debited);
        let mut nodes: Vec<&str> = cdrs.iter().map(|c| c.cdr.node_id.as_str()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        assert_eq!(
            nodes,
            ["node-a", "node-b"],
            "both nodes charged account {a}"
        );
    }
}
