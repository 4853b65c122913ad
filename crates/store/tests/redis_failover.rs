//! A Redis master killed under load: the cluster fails over to its
//! replica. With `replicas_ack = 1` every debit acknowledged before, during
//! and after is in the books exactly once, with its CDR; with
//! `replicas_ack = 0` the books still add up and the test reports what the
//! failover lost.
//!
//! The test runs its own cluster (ports 7390-7395 unless
//! `GYRO_REDIS_FAILOVER_PORT` says otherwise), since it kills one of its
//! nodes, and tears it down at the end.

mod redis_support;

use gyro_charging::{AccountId, Timestamp};
use gyro_store::redis::{Debit, Outcome, RedisLedger, RedisOptions, Step};
use gyro_store::ErrorKind;
use redis_support::failover::{failed_over, kill9, master_serves, Cluster};
use redis_support::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

fn event_debit(account: AccountId, n: u32, amount: i64) -> Step {
    Step::Debit(Debit {
        account,
        request: format!("ev-{}-{n}", account.0),
        reservation: None,
        amount,
        release: false,
        whole: false,
        cdr: cdr(&format!("ev-{}", account.0), n, rg(1)),
        bundles: None,
    })
}

/// What a run of debits through a master failover saw.
struct Run {
    /// Every acknowledged debit: (account, request number, money charged).
    acknowledged: Vec<(AccountId, u32, i64)>,
    /// Step attempts answered with an error (all Unavailable).
    failures: usize,
}

/// Debits on `accounts` in batches; after half a second the master of the
/// first account's slot is killed with SIGKILL, and once its replica has
/// taken over it is started again (it rejoins as that replica's replica).
/// Steps answered with an error are sent again, with the same request key,
/// until they are acknowledged; new ones keep coming until the run has
/// been whole again for half a second.
async fn debits_through_a_failover(
    cluster: &Cluster,
    ledger: &RedisLedger,
    accounts: &[AccountId],
) -> Run {
    let victim_slot = ledger.keys().account_slot(accounts[0]);
    ledger.refresh_shards().await.unwrap();
    let victim = ledger
        .masters()
        .into_iter()
        .find(|m| master_serves(cluster, m, victim_slot))
        .expect("victim master");
    let victim_port = victim.rsplit(':').next().unwrap().to_string();
    let victim_pid = cluster.pid(&victim_port);

    let started = Instant::now();
    let deadline = started + Duration::from_secs(20);
    let mut run = Run {
        acknowledged: Vec::new(),
        failures: 0,
    };
    let mut pending: Vec<(Step, u32)> = Vec::new();
    let (mut n, mut killed, mut restarted) = (0u32, false, false);
    let mut recovered_at = None;
    loop {
        assert!(
            Instant::now() < deadline,
            "no recovery after the failover: {} steps still failing",
            pending.len()
        );
        if !killed && started.elapsed() > Duration::from_millis(500) {
            // SIGKILL: no shutdown, no last write to its append-only file.
            assert!(kill9(victim_pid), "kill {victim_pid}");
            killed = true;
        }
        // Once the replica took over, the old master comes back (as its
        // replica), so that WAIT 1 can be answered again on that shard.
        if killed && !restarted && failed_over(cluster, &victim_port) {
            cluster.restart(&victim_port);
            restarted = true;
        }
        let mut batch = std::mem::take(&mut pending);
        if recovered_at.is_none_or(|t: Instant| t.elapsed() < Duration::from_millis(500)) {
            for &a in accounts {
                n += 1;
                batch.push((event_debit(a, n, 1 + i64::from(n % 97)), n));
            }
        }
        if batch.is_empty() {
            break;
        }
        let steps: Vec<Step> = batch.iter().map(|(s, _)| s.clone()).collect();
        let answers = ledger.run(&steps, Timestamp(NOW.0 + u64::from(n))).await;
        for ((step, number), answer) in batch.into_iter().zip(answers) {
            match answer {
                Ok(a) => {
                    let Outcome::Debited { charged, .. } = a.outcome else {
                        panic!("{a:?}");
                    };
                    run.acknowledged.push((step.account(), number, charged));
                }
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
                    run.failures += 1;
                    pending.push((step, number));
                }
            }
        }
        if restarted && pending.is_empty() && recovered_at.is_none() {
            recovered_at = Some(Instant::now());
        }
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(killed && restarted);
    assert!(run.failures > 0, "the failover went unnoticed");
    // The old master is a replica again, in sync, before the next run.
    for _ in 0..100 {
        if cluster.healthy() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(cluster.healthy(), "the cluster did not heal");
    run
}

/// The acknowledged debits missing from the books (by their CDRs), after
/// checking that every account adds up and that its CDRs add up to what it
/// was charged (a step is kept or lost whole, never half).
async fn lost_debits(
    ledger: &RedisLedger,
    accounts: &[AccountId],
    run: &Run,
) -> Vec<(AccountId, u32, i64)> {
    let mut slots: Vec<u16> = accounts
        .iter()
        .map(|&a| ledger.keys().account_slot(a))
        .collect();
    slots.sort_unstable();
    slots.dedup();
    let mut in_streams: HashMap<(AccountId, u32), i64> = HashMap::new();
    let mut cdr_sums: HashMap<AccountId, i64> = HashMap::new();
    for slot in slots {
        let cdrs = ledger.cdrs(slot).await.unwrap();
        for (i, c) in cdrs.iter().enumerate() {
            assert_eq!(
                c.cdr.sequence,
                i as u64 + 1,
                "gap in the stream of slot {slot}"
            );
            let repeated = in_streams.insert((c.cdr.account, c.cdr.request_number), c.cdr.amount);
            assert!(repeated.is_none(), "two CDRs for one debit: {c:?}");
            *cdr_sums.entry(c.cdr.account).or_default() += c.cdr.amount;
        }
    }
    for &a in accounts {
        let s = ledger.account(a).await.unwrap().unwrap();
        assert!(s.is_conserved(), "{s:?}");
        assert_eq!(
            cdr_sums.get(&a).copied().unwrap_or(0),
            s.debited,
            "account {a}"
        );
    }
    run.acknowledged
        .iter()
        .filter(|(a, n, charged)| in_streams.get(&(*a, *n)) != Some(charged))
        .copied()
        .collect()
}

/// A master killed under load, first with `replicas_ack = 1`: nothing
/// acknowledged is lost. Then with `replicas_ack = 0` on the healed
/// cluster: the books still add up and every kept debit has its CDR, and
/// the test reports how many acknowledged debits the failover lost (the
/// replication lag on loopback is usually too short to lose any; the
/// point is that nothing hides a loss).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_under_load_loses_no_acknowledged_debit_with_replicas_ack() {
    let Some(cluster) = Cluster::start("GYRO_REDIS_FAILOVER_PORT", 7390) else {
        return;
    };
    for (replicas_ack, ns) in [(1u8, "failover-ack1"), (0, "failover-ack0")] {
        let ledger = RedisLedger::connect(RedisOptions {
            replicas_ack,
            wait_timeout: Duration::from_millis(300),
            connect_timeout: Duration::from_millis(500),
            response_timeout: Duration::from_millis(1000),
            ..options(&cluster.nodes, ns, "node-a")
        })
        .await
        .expect("connect");
        let accounts: Vec<AccountId> = (1..=9).map(acct).collect();
        // A fresh cluster's replicas may still be catching up: opening an
        // account (idempotent) is tried again until one has it.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        for &a in &accounts {
            loop {
                match ledger.open_account(a, 1_000_000, 0, false).await {
                    Ok(_) => break,
                    Err(e) if std::time::Instant::now() < deadline => {
                        eprintln!("opening account {a}: {e}; trying again");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Err(e) => panic!("opening account {a}: {e}"),
                }
            }
        }
        let run = debits_through_a_failover(&cluster, &ledger, &accounts).await;
        let lost = lost_debits(&ledger, &accounts, &run).await;
        eprintln!(
            "replicas_ack = {replicas_ack}: {} debits acknowledged, {} step attempts answered \
             Unavailable during the failover, {} acknowledged debits lost ({} money): {lost:?}",
            run.acknowledged.len(),
            run.failures,
            lost.len(),
            lost.iter().map(|l| l.2).sum::<i64>()
        );
        if replicas_ack == 1 {
            assert!(lost.is_empty(), "acknowledged debits lost: {lost:?}");
        }
    }
}
