//! `gyro ledger --config FILE` on a configuration whose ledger is a Redis
//! Cluster: the books of every account of the namespace, read from a real
//! cluster (the one the Redis ledger tests use), and a tampered account
//! named with a failing exit status.

#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use gyro_charging::AccountId;
use gyro_store::redis::{Debit, RedisLedger, Reserve, Step};
use redis_support::{acct, cdr, cluster_nodes, options, redis_cli, rg, NOW};
use serde_json::Value;
use support::{gyro, scratch};

fn reserve(account: AccountId, request: &str, money: i64) -> Step {
    Step::Reserve(Reserve {
        account,
        request: request.into(),
        session: "s".into(),
        key: rg(10),
        money,
        units: money as u64 * 100,
        min_money: 1,
        expires: NOW.plus_secs(60),
        bundles: None,
    })
}

fn debit(account: AccountId, request: &str, amount: i64) -> Step {
    Step::Debit(Debit {
        account,
        request: request.into(),
        reservation: Some(("s".into(), rg(10))),
        amount,
        release: false,
        whole: false,
        cdr: cdr("s", 1, rg(10)),
        bundles: None,
    })
}

#[test]
fn ledger_checks_the_books_of_a_redis_cluster_and_names_an_account_that_does_not_add_up() {
    let Some(nodes) = cluster_nodes() else {
        return;
    };
    let opts = options(&nodes, "ledger-cli", "node-a");
    let namespace = opts.namespace.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ledger = rt.block_on(async {
        let ledger = RedisLedger::connect(opts).await.expect("connect");
        let accounts: Vec<AccountId> = (1..=12).map(acct).collect();
        for &a in &accounts {
            ledger.open_account(a, 1000, 0, false).await.unwrap();
        }
        let steps: Vec<Step> = accounts
            .iter()
            .flat_map(|&a| [reserve(a, "r;0", 100), debit(a, "r;1", 30)])
            .collect();
        for r in ledger.run(&steps, NOW).await {
            assert_eq!(r.unwrap().code, 2001);
        }
        ledger
    });

    let dir = scratch("ledger-redis");
    let config = dir.join("gyro.toml");
    let seeds: Vec<String> = nodes.iter().map(|n| format!("{n:?}")).collect();
    std::fs::write(
        &config,
        format!(
            "[storage]\nbackend = \"redis-cluster\"\n[storage.redis]\nnodes = [{}]\n\
             namespace = \"{namespace}\"\n",
            seeds.join(", ")
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let (code, out, err) = gyro(&["ledger", "--config", config, "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["backend"], "redis-cluster", "{report}");
    assert_eq!(report["accounts"], 12, "{report}");
    assert_eq!(report["initial_balance"], 12_000, "{report}");
    assert_eq!(report["balance"], 12 * 900, "{report}");
    assert_eq!(report["reserved"], 12 * 70, "{report}");
    assert_eq!(report["debited"], 12 * 30, "{report}");
    assert_eq!(report["violations"], 0, "{report}");
    let (code, out, _) = gyro(&["ledger", "--config", config]);
    assert_eq!(code, 0);
    assert!(out.contains("holds for every account"), "{out}");

    // Money from nowhere on one account: named, and the exit status says
    // the books do not hold.
    redis_cli(&["HINCRBY", &ledger.keys().account(acct(5)), "balance", "7"]);
    let (code, out, err) = gyro(&["ledger", "--config", config]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("VIOLATED for 1 accounts"), "{out}");
    assert!(err.contains("account 5:"), "{err}");

    // An unreachable cluster is a clear error, not a hang or a panic.
    std::fs::write(
        dir.join("down.toml"),
        "[storage]\nbackend = \"redis-cluster\"\n[storage.redis]\nnodes = [\"127.0.0.1:1\"]\n",
    )
    .unwrap();
    let (code, _, err) = gyro(&[
        "ledger",
        "--config",
        dir.join("down.toml").to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("connecting to the Redis Cluster at 127.0.0.1:1"),
        "{err}"
    );
}
