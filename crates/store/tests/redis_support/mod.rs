//! A real Redis Cluster for the Redis ledger tests.
//!
//! `GYRO_REDIS_NODES` (comma-separated seeds) names a running cluster;
//! without it the tests start one with `scripts/redis-cluster.sh start`
//! (installing redis-server when missing) and leave it running for the
//! next test binary (`scripts/redis-cluster.sh stop` tears it down; the
//! test command does). The tests are skipped, loudly, only when
//! redis-server cannot be installed, and never when `GYRO_REDIS_REQUIRED=1`
//! (the test command sets it).

#![allow(dead_code)]

pub mod failover;

use gyro_charging::{AccountId, Cdr, RatingKey, Timestamp};
use gyro_store::redis::{RedisLedger, RedisOptions};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The seed nodes, or `None` when the tests must be skipped.
pub fn cluster_nodes() -> Option<Vec<String>> {
    static NODES: OnceLock<Option<Vec<String>>> = OnceLock::new();
    NODES
        .get_or_init(|| {
            if let Ok(v) = std::env::var("GYRO_REDIS_NODES") {
                let nodes: Vec<String> = v
                    .split([',', ' ', '\n'])
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                if !nodes.is_empty() {
                    return Some(nodes);
                }
            }
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-cluster.sh");
            let out = Command::new("bash").arg(&script).arg("start").output();
            let required = std::env::var("GYRO_REDIS_REQUIRED").is_ok_and(|v| v == "1");
            match out {
                Ok(o) if o.status.success() => Some(
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .map(String::from)
                        .collect(),
                ),
                Ok(o) if o.status.code() == Some(3) && !required => {
                    eprintln!(
                        "\n\
                         ************************************************************\n\
                         SKIPPED: the Redis Cluster tests need redis-server, which\n\
                         could not be installed:\n{}\
                         ************************************************************\n",
                        String::from_utf8_lossy(&o.stderr)
                    );
                    None
                }
                Ok(o) => panic!(
                    "scripts/redis-cluster.sh start failed ({}):\n{}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => panic!("cannot run {}: {e}", script.display()),
            }
        })
        .clone()
}

/// Options for a ledger on the test cluster under a namespace of its own
/// (so tests running at once never share keys).
pub fn options(nodes: &[String], test: &str, node_id: &str) -> RedisOptions {
    static N: AtomicU32 = AtomicU32::new(0);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    RedisOptions {
        nodes: nodes.to_vec(),
        namespace: format!(
            "t{}-{}-{stamp}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            test
        ),
        node_id: node_id.into(),
        answer_ttl: Duration::from_secs(600),
        ..RedisOptions::default()
    }
}

/// Connects a ledger, or returns `None` (the test is skipped).
pub async fn ledger(test: &str) -> Option<RedisLedger> {
    let nodes = cluster_nodes()?;
    Some(
        RedisLedger::connect(options(&nodes, test, "node-a"))
            .await
            .expect("connect to the test cluster"),
    )
}

/// A CDR template as the engine would hand it.
pub fn cdr(session: &str, request_number: u32, key: RatingKey) -> Cdr {
    Cdr {
        session_id: session.to_string(),
        subscriber: "e164:46700000001".into(),
        service_context: "32251@3gpp.org".into(),
        rating_group: key.rating_group,
        service_id: key.service_id,
        request_number,
        result_code: 2001,
        started: Timestamp(1_700_000_000_000),
        ended: Timestamp(1_700_000_060_000),
        total_octets: 1000,
        rated_units: 1000,
        plan: "default".into(),
        rate: "data".into(),
        ..Cdr::default()
    }
}

/// Rating group `rg`.
pub fn rg(rg: u32) -> RatingKey {
    RatingKey {
        rating_group: Some(rg),
        service_id: None,
    }
}

/// A fixed "now".
pub const NOW: Timestamp = Timestamp(1_700_000_000_000);

/// Account `id`.
pub fn acct(id: u64) -> AccountId {
    AccountId(id)
}

/// Runs `redis-cli -c` against the first seed node and returns its output
/// (for tests that tamper with keys behind the ledger's back).
pub fn redis_cli(args: &[&str]) -> String {
    let seed = cluster_nodes().expect("a test cluster")[0].clone();
    let port = seed
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .trim_end_matches('/')
        .to_string();
    let out = Command::new("redis-cli")
        .args(["-c", "-p", &port])
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).to_string()
}
