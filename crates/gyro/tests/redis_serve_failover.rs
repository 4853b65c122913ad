//! A Redis master killed with SIGKILL under a `gyro serve` load: two
//! nodes on a Redis Cluster of the test's own (so the shared one stays
//! whole), `gyro load` on both, and a gateway whose sessions hop between
//! the nodes (each request to the other node than the last, without
//! Subscription-Id after the CCR-Initial) on an account whose slot the
//! killed master served. The cluster fails over to the master's replica;
//! the old master comes back as its replica.
//!
//! With `replicas_ack = 1`: the books add up once Tcc has passed, every
//! debit has exactly one exported CDR, no slot's sequence has a gap, and
//! every usage the gateway was told was charged (2001) has exactly one
//! CDR. With `replicas_ack = 0` the books must still add up; what the
//! failover lost (acknowledged usage without its CDR, CDRs exported
//! before their step was lost, sequence faults, sessions whose record the
//! failover lost, so that their next request was answered 5002) is
//! printed, not hidden. The replication lag on loopback is usually too
//! short to lose anything.

mod redis_serve_support;
#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gyro_charging::{AccountId, RequestType};
use gyro_store::redis::RedisLedger;
use redis_serve_support::*;
use redis_support::failover::{master_serves, Cluster};
use redis_support::options;
use support::common::result_code;
use support::gateway::Gateway;
use support::{data_ccr, scratch};

/// What the gateway saw.
#[derive(Debug, Default)]
struct Seen {
    /// Usage it was told was charged: (Session-Id, CC-Request-Number).
    acknowledged: Vec<(String, u32)>,
    /// Answers 3004 (or none) it retried with the T flag.
    retried: u64,
    /// Sessions answered 5002 part-way (silent past Tcc during the
    /// outage, or, with `replicas_ack = 0`, their record lost in the
    /// failover).
    lost_sessions: u64,
    /// The longest wait for one answer.
    slowest: Duration,
}

/// Sessions on the failover account until `stop`: CCR-Initial, three
/// CCR-Updates and a CCR-Terminate, 1 MiB used in each but the first,
/// every request to the other node than the one before; a request
/// answered 3004 (or not at all) is sent again with the T flag, as a
/// gateway does.
fn gateway(nodes: [SocketAddr; 2], stop: Arc<AtomicBool>) -> Seen {
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5200_0000,
    };
    let mut conns = [gw.connect(nodes[0]), gw.connect(nodes[1])];
    let mut seen = Seen::default();
    let (mut turn, mut hop, mut s) = (0usize, 0u32, 0u32);
    'sessions: while !stop.load(Ordering::Relaxed) {
        s += 1;
        let session = format!("pgw.gyro.test;hop;{s}");
        for number in 0..=4u32 {
            let kind = match number {
                0 => RequestType::Initial,
                4 => RequestType::Termination,
                _ => RequestType::Update,
            };
            let used = if number == 0 { 0 } else { 1024 * 1024 };
            let mut req = data_ccr(
                gw.host,
                gw.ids,
                &session,
                FAILOVER_MSISDN,
                kind,
                number,
                used,
            );
            if number > 0 {
                req.subscription_ids.clear();
            }
            let started = Instant::now();
            loop {
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "{session} request {number} never answered"
                );
                let i = turn % 2;
                turn += 1;
                hop += 1;
                conns[i].send(&gw.encode(&req, hop));
                let sent = Instant::now();
                let answer = conns[i].recv();
                seen.slowest = seen.slowest.max(sent.elapsed());
                match answer.as_deref().and_then(result_code) {
                    Some(2001) => {
                        if number > 0 {
                            seen.acknowledged.push((session.clone(), number));
                        }
                        break;
                    }
                    Some(5002) => {
                        seen.lost_sessions += 1;
                        continue 'sessions;
                    }
                    Some(3004) => {}
                    None => conns[i] = gw.connect(nodes[i]),
                    Some(code) => panic!("{session} request {number}: {code}"),
                }
                seen.retried += 1;
                req.retransmit = true;
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    seen
}

#[test]
fn a_redis_master_killed_under_serve_load_loses_nothing_acknowledged_with_replicas_ack() {
    let Some(cluster) = Cluster::start("GYRO_REDIS_SERVE_FAILOVER_PORT", 7400) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    for replicas_ack in [1u8, 0] {
        // Every replica in sync before the nodes start (with
        // `replicas_ack = 1` a node opens its accounts through WAIT).
        let t = Instant::now();
        while !cluster.healthy() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the cluster is not whole"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let opts = options(
            &cluster.nodes,
            &format!("serve-failover-ack{replicas_ack}"),
            "checker",
        );
        let root = scratch(&format!("redis-serve-failover-{replicas_ack}"));
        let extra = format!(
            "replicas_ack = {replicas_ack}\nwait_timeout_ms = 300\nresponse_timeout_ms = 1000"
        );
        let a = Node::with(&root, "node-a", &cluster.nodes, &opts.namespace, &extra);
        let b = Node::with(&root, "node-b", &cluster.nodes, &opts.namespace, &extra);
        let (node_a, node_b) = (a.start_within(5), b.start_within(5));
        let ledger = rt.block_on(RedisLedger::connect(opts)).expect("connect");

        // The master of the gateway's account's slot is the victim.
        let slot = ledger.keys().account_slot(AccountId(FAILOVER_ACCOUNT));
        rt.block_on(ledger.refresh_shards()).unwrap();
        let victim = ledger
            .masters()
            .into_iter()
            .find(|m| master_serves(&cluster, m, slot))
            .expect("the master of the account's slot");
        let victim_port = victim.rsplit(':').next().unwrap().to_string();

        let load_a = load(a.diameter, 4, "load-a.gyro.test");
        let load_b = load(b.diameter, 4, "load-b.gyro.test");
        let stop = Arc::new(AtomicBool::new(false));
        let driver = {
            let (nodes, stop) = ([a.diameter, b.diameter], stop.clone());
            std::thread::spawn(move || gateway(nodes, stop))
        };
        std::thread::sleep(Duration::from_millis(700));
        let promoted = cluster.kill_and_heal(&victim_port, Duration::from_secs(20));
        // Some more traffic on the healed cluster, then the gateway stops.
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
        let seen = driver.join().expect("the gateway");
        let (answered_a, answered_b) = (answered(load_a), answered(load_b));
        assert!(
            seen.acknowledged.len() > 4,
            "the gateway was served: {seen:?}"
        );

        // The books add up once every session has ended or expired.
        let books = books_once_tcc_passed(&rt, &ledger, Duration::from_secs(TCC_SECS + 20));
        assert_eq!(books.accounts, 201);

        let dirs = [a.data().join("cdr"), b.data().join("cdr")];
        let accounts: Vec<u64> = (1000..1200).chain([FAILOVER_ACCOUNT]).collect();
        let within = Duration::from_secs(15);
        let report = cdr_report(&rt, &ledger, &dirs, &accounts, within);
        let unmatched: Vec<&(String, u32)> = seen
            .acknowledged
            .iter()
            .filter(|(s, n)| usage_cdrs(&report.files, s, *n) != 1)
            .collect();
        eprintln!(
            "replicas_ack = {replicas_ack}: master {victim} killed, replica promoted after \
             {promoted:?}; gyro load answered {answered_a} + {answered_b}; the gateway had \
             {} usages acknowledged, retried {} requests (longest wait {:?}), had {} sessions \
             answered 5002 part-way; \
             acknowledged usages without exactly one CDR: {unmatched:?}; accounts whose CDRs \
             do not add up to their debits: {:?}; sequence faults: {:?}",
            seen.acknowledged.len(),
            seen.retried,
            seen.slowest,
            seen.lost_sessions,
            report.unmatched_accounts,
            report.sequence_faults,
        );
        if replicas_ack == 1 {
            assert!(
                unmatched.is_empty(),
                "acknowledged usage lost: {unmatched:?}"
            );
            assert!(
                report.unmatched_accounts.is_empty(),
                "{:?}",
                report.unmatched_accounts
            );
            assert!(
                report.sequence_faults.is_empty(),
                "{:?}",
                report.sequence_faults
            );
        }
        node_a.stop();
        node_b.stop();
    }
}
