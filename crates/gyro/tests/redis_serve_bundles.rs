//! Bundles on the Redis Cluster ledger, against the embedded store: the
//! same charging configuration (an account with a data bundle covering
//! rating group 10 only, and a little money) and the same CCRs, over
//! real sockets, to a `gyro serve` on a real Redis Cluster and to a
//! `gyro serve` on its own data directory. Both answer the same (Result-
//! Codes, granted units, Final-Unit-Indication): the bundle pays first,
//! money only once it runs out, then the account runs dry. A
//! retransmitted CCR-Update is answered the same and charged once; a
//! service the bundle does not cover (rating group 20) is paid with
//! money from the start. Then both hold the same money and bundle units,
//! the exported CDRs carry the bundle units and add up to the debits, and
//! the books of the cluster add up (money and bundle units).

mod redis_serve_support;
#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use std::time::Duration;

use gyro_charging::{AccountId, CcRequest, RequestType, ServiceUnits};
use gyro_diameter::codes::avp;
use gyro_diameter::Message;
use gyro_store::redis::RedisLedger;
use redis_serve_support::*;
use redis_support::{cluster_nodes, options};
use support::common::Client;
use support::gateway::{exchange, Gateway};
use support::scratch;

const ACCOUNT: u64 = 7000;
const MSISDN: &str = "46709700001";
const MIB: u64 = 1024 * 1024;

/// 1.00 per 100 MiB on rating group 10 (so 1 per MiB), 2.00 on rating
/// group 20; an account with 25 MiB of bundle for rating group 10 and
/// 0.22 of money.
fn charging() -> String {
    format!(
        r#"
[engine]
node_id = "bundles"
supervision_secs = {TCC_SECS}
lenient = true

[currency]
code = 752
exponent = 2

[[tariff]]
name = "data-rg10"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 100
per = 104857600
increment = 1024
default_quota = 10485760
validity_time = 600

[[tariff]]
name = "data-rg20"
service_context = "32251@3gpp.org"
rating_group = 20
unit = "octets"
price = 200
per = 104857600
increment = 1024
default_quota = 1048576
validity_time = 600

[[account]]
id = {ACCOUNT}
balance = 22
subscribers = ["e164:{MSISDN}"]

[[account.bundle]]
id = 1
unit = "octets"
units = {units}
rating_groups = [10]
"#,
        units = 25 * MIB
    )
}

/// What a CCA says, for comparing the two backends: its Result-Code and,
/// per MSCC, its rating group, Result-Code, granted octets and whether it
/// carries a Final-Unit-Indication.
#[derive(Debug, PartialEq, Eq)]
struct Said {
    result: Option<u32>,
    mscc: Vec<Service>,
}

/// An MSCC's rating group, Result-Code, granted octets and whether it
/// carries a Final-Unit-Indication.
type Service = (Option<u32>, Option<u32>, Option<u64>, bool);

fn said(cca: &[u8]) -> Said {
    let m = Message::parse(cca).expect("a CCA");
    let result = m.find(avp::RESULT_CODE).and_then(|a| a.u32().ok());
    let mscc = m
        .avps()
        .filter_map(|a| a.ok())
        .filter(|a| a.code() == avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code)
        .map(|a| {
            let rg = a.child(avp::RATING_GROUP).and_then(|c| c.u32().ok());
            let code = a.child(avp::RESULT_CODE).and_then(|c| c.u32().ok());
            let granted = a
                .child(avp::GRANTED_SERVICE_UNIT)
                .and_then(|g| g.child(avp::CC_TOTAL_OCTETS))
                .and_then(|c| c.u64().ok());
            let fui = a.child(avp::FINAL_UNIT_INDICATION).is_some();
            (rg, code, granted, fui)
        })
        .collect();
    Said { result, mscc }
}

/// The CCRs of the test, in order: (request, what it is).
fn script(gw: &Gateway) -> Vec<(CcRequest, &'static str)> {
    let session = "pgw.gyro.test;bundles;1";
    let ccr = |kind, number, used_rg10: u64, used_rg20: Option<u64>| {
        let mut r = gw.data_ccr(session, MSISDN, kind, number, used_rg10);
        if kind == RequestType::Initial || used_rg20.is_some() {
            let mut rg20 = r.mscc[0].clone();
            rg20.rating_group = Some(20);
            rg20.used = used_rg20.map(|u| ServiceUnits {
                total_octets: Some(u),
                ..ServiceUnits::default()
            });
            r.mscc.push(rg20);
        }
        r
    };
    let mut v = vec![
        // 10 MiB of bundle; 1 MiB of rating group 20 for money (2).
        (ccr(RequestType::Initial, 0, 0, None), "initial"),
        // 10 MiB used from the bundle; 10 MiB more of it; rating group
        // 20's MiB used (2) and granted again (2).
        (
            ccr(RequestType::Update, 1, 10 * MIB, Some(MIB)),
            "bundle pays",
        ),
        // 10 MiB used from the bundle; its last 5 MiB and 5 MiB of money.
        (
            ccr(RequestType::Update, 2, 10 * MIB, None),
            "bundle runs out",
        ),
    ];
    let mut again = ccr(RequestType::Update, 2, 10 * MIB, None);
    again.retransmit = true;
    v.push((again, "retransmission"));
    v.extend([
        // 5 MiB from the bundle's hold, 5 MiB of money; 10 MiB of money.
        (ccr(RequestType::Update, 3, 10 * MIB, None), "money pays"),
        // 10 MiB of money; 3 MiB left to pay 10 MiB: 3 MiB granted, with
        // a Final-Unit-Indication.
        (
            ccr(RequestType::Update, 4, 10 * MIB, None),
            "money runs out",
        ),
        // 3 MiB used; rating group 20's MiB used (2).
        (
            ccr(RequestType::Termination, 5, 3 * MIB, Some(MIB)),
            "terminate",
        ),
    ]);
    // A new session: no bundle, no money.
    let mut dry = gw.data_ccr(
        "pgw.gyro.test;bundles;2",
        MSISDN,
        RequestType::Initial,
        0,
        0,
    );
    dry.end_to_end = gw.ids | 0x100;
    v.push((dry, "dry"));
    v
}

fn run(client: &mut Client, gw: &Gateway, script: &[(CcRequest, &str)]) -> Vec<Said> {
    script
        .iter()
        .enumerate()
        .map(|(i, (r, _))| said(&exchange(client, &gw.encode(r, i as u32))))
        .collect()
}

#[test]
fn bundles_pay_before_money_on_redis_as_on_the_embedded_store() {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let opts = options(&seeds, "bundles", "checker");
    let namespace = opts.namespace.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = scratch("redis-serve-bundles");
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5200_0000,
    };
    let script = script(&gw);

    // The embedded store.
    let embedded = embedded_node(&root, &charging());
    let mut to_embedded = gw.connect(embedded.diameter);
    let expected = run(&mut to_embedded, &gw, &script);

    // The Redis Cluster.
    let node = Node::new(&root, "node-a", &seeds, &namespace);
    std::fs::write(node.dir.join("charging.toml"), charging()).unwrap();
    let redis = node.start();
    let mut to_redis = gw.connect(node.diameter);
    let answered = run(&mut to_redis, &gw, &script);

    for (((_, what), e), r) in script.iter().zip(&expected).zip(&answered) {
        assert_eq!(
            r, e,
            "{what}: Redis answered {r:?}, the embedded store {e:?}"
        );
    }
    // The story both told.
    let rg10 = |s: &Said| s.mscc.iter().find(|m| m.0 == Some(10)).cloned();
    let granted: Vec<Option<u64>> = expected.iter().map(|s| rg10(s).and_then(|m| m.2)).collect();
    assert_eq!(
        granted,
        vec![
            Some(10 * MIB),
            Some(10 * MIB),
            Some(10 * MIB),
            Some(10 * MIB),
            Some(10 * MIB),
            Some(3 * MIB),
            None,
            None,
        ]
    );
    assert!(expected[5].mscc[0].3, "a Final-Unit-Indication");
    assert!(!expected[4].mscc[0].3);
    assert_eq!(expected[6].result, Some(2001), "terminated");
    assert_eq!(
        rg10(&expected[7]).map(|m| m.1),
        Some(Some(4012)),
        "no bundle, no money"
    );
    assert_eq!(rg10(&expected[1]).map(|m| m.1), Some(Some(2001)));

    // The same money and bundle units on both: 25 MiB of bundle consumed;
    // money: rating group 20's two MiB (4), then 5 + 10 + 3 MiB of data.
    let ledger = rt.block_on(RedisLedger::connect(opts)).expect("connect");
    let account = AccountId(ACCOUNT);
    let books = books_once_tcc_passed(&rt, &ledger, Duration::from_secs(3 * TCC_SECS + 10));
    assert_eq!(
        (books.bundles, books.bundle_consumed, books.bundle_reserved),
        (1, u128::from(25 * MIB), 0),
        "{books:?}"
    );
    let state = rt.block_on(ledger.account(account)).unwrap().unwrap();
    let e = embedded.account(MSISDN);
    assert_eq!(
        (state.balance, state.reserved, state.debited),
        (0, 0, 22),
        "{state:?}"
    );
    assert_eq!(
        (
            e["balance"].as_i64(),
            e["reserved"].as_i64(),
            e["debited"].as_i64()
        ),
        (Some(state.balance), Some(0), Some(state.debited)),
        "{e}"
    );
    let b = &state.bundles[0];
    let eb = &e["bundles"][0];
    assert_eq!(
        (b.remaining, b.reserved, b.consumed),
        (0, 0, 25 * MIB),
        "{state:?}"
    );
    assert_eq!(
        (
            eb["remaining"].as_u64(),
            eb["reserved"].as_u64(),
            eb["consumed"].as_u64()
        ),
        (Some(b.remaining), Some(b.reserved), Some(b.consumed)),
        "{e}"
    );

    // The operator API shows the same bundles on both.
    let r = redis.account(MSISDN);
    assert_eq!(r["bundles"], e["bundles"], "{r}\n{e}");
    assert_eq!(
        (&r["balance"], &r["debited"]),
        (&e["balance"], &e["debited"])
    );

    // The CDRs: one per usage (the retransmission wrote none), adding up
    // to the debits, with the bundle units beside the money.
    let files = cdrs_match_debits(
        &rt,
        &ledger,
        &[node.data().join("cdr")],
        &[ACCOUNT],
        Duration::from_secs(20),
    );
    let usage: Vec<_> = files
        .values()
        .flatten()
        .filter(|r| r["record_type"] == "usage")
        .collect();
    let bundle_units: u64 = usage
        .iter()
        .filter_map(|r| r["bundle_units"].as_u64())
        .sum();
    assert_eq!(bundle_units, 25 * MIB);
    let rg10_usage = |n: u32| {
        usage
            .iter()
            .filter(|r| r["rating_group"] == 10 && r["request_number"] == n)
            .map(|r| {
                (
                    r["bundle_units"].as_u64().unwrap_or(0),
                    r["amount"].as_i64(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(rg10_usage(1), vec![(10 * MIB, Some(0))]);
    assert_eq!(rg10_usage(2), vec![(10 * MIB, Some(0))], "once");
    assert_eq!(rg10_usage(3), vec![(5 * MIB, Some(5))]);
    assert_eq!(rg10_usage(4), vec![(0, Some(10))]);
    assert_eq!(rg10_usage(5), vec![(0, Some(3))]);

    // `gyro ledger` on the node's configuration: the money and the
    // bundle units add up; a bundle unit from nowhere is named.
    let config = node.config.to_str().unwrap();
    let (code, out, err) = support::gyro(&["ledger", "--config", config, "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["violations"], 0, "{report}");
    assert_eq!(report["bundles"]["bundles"], 1, "{report}");
    assert_eq!(report["bundles"]["consumed"], 25 * MIB, "{report}");
    let key = ledger.keys().account(account);
    let tampered = format!("{} 1 0 {}", 25 * MIB, 25 * MIB);
    redis_support::redis_cli(&["HSET", &key, "b:1", &tampered]);
    let (code, out, err) = support::gyro(&["ledger", "--config", config]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("VIOLATED for 1 bundles"), "{out}");
    assert!(
        err.contains(&format!("account {ACCOUNT} bundle 1")),
        "{err}"
    );

    drop(to_redis);
    drop(to_embedded);
    redis.stop();
    embedded.stop();
    let _ = std::fs::remove_dir_all(&root);
}

const PARTIAL_ACCOUNT: u64 = 7100;
const PARTIAL_MSISDN: &str = "46709710001";
/// 3 per MiB in whole MiB on rating group 10, 1 per MiB on rating group
/// 20; an account with 11 and no bundle.
fn partial_charging() -> String {
    format!(
        r#"
[engine]
node_id = "partial"
supervision_secs = {TCC_SECS}
lenient = true

[currency]
code = 752
exponent = 2

[[tariff]]
name = "data-rg10"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 3
per = {MIB}
increment = {MIB}
default_quota = {ten}
validity_time = 600

[[tariff]]
name = "data-rg20"
service_context = "32251@3gpp.org"
rating_group = 20
unit = "octets"
price = 1
per = {MIB}
increment = {MIB}
default_quota = {MIB}
validity_time = 600

[[account]]
id = {PARTIAL_ACCOUNT}
balance = 11
subscribers = ["e164:{PARTIAL_MSISDN}"]
"#,
        ten = 10 * MIB
    )
}

/// A partial grant without bundles reserves only the price of the units it
/// grants, on Redis as on the embedded store: 10 MiB asked at 3 a MiB of
/// an account holding 11 grants 3 MiB and reserves 9, so a second session
/// still buys a MiB of rating group 20 with the 2 left.
#[test]
fn a_partial_grant_reserves_the_price_of_its_units_on_redis_as_on_the_embedded_store() {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let namespace = options(&seeds, "partial", "checker").namespace;
    let root = scratch("redis-serve-partial");
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5300_0000,
    };
    let first = gw.data_ccr(
        "pgw.gyro.test;partial;1",
        PARTIAL_MSISDN,
        RequestType::Initial,
        0,
        0,
    );
    let mut second = gw.data_ccr(
        "pgw.gyro.test;partial;2",
        PARTIAL_MSISDN,
        RequestType::Initial,
        0,
        0,
    );
    second.mscc[0].rating_group = Some(20);
    second.end_to_end = gw.ids | 0x100;
    let script = vec![(first, "partial grant"), (second, "second session")];

    let embedded = embedded_node(&root, &partial_charging());
    let mut to_embedded = gw.connect(embedded.diameter);
    let expected = run(&mut to_embedded, &gw, &script);

    let node = Node::new(&root, "node-partial", &seeds, &namespace);
    std::fs::write(node.dir.join("charging.toml"), partial_charging()).unwrap();
    let redis = node.start();
    let mut to_redis = gw.connect(node.diameter);
    let answered = run(&mut to_redis, &gw, &script);

    for (((_, what), e), r) in script.iter().zip(&expected).zip(&answered) {
        assert_eq!(
            r, e,
            "{what}: Redis answered {r:?}, the embedded store {e:?}"
        );
    }
    assert_eq!(
        expected[0].mscc,
        vec![(Some(10), Some(2001), Some(3 * MIB), true)],
        "3 MiB of the 10 asked, the last ones"
    );
    assert_eq!(
        expected[1].mscc,
        vec![(Some(20), Some(2001), Some(MIB), false)],
        "the 2 left buy a MiB"
    );
    // The same money held on both: 9 for the first grant, 1 for the
    // second.
    let e = embedded.account(PARTIAL_MSISDN);
    let r = redis.account(PARTIAL_MSISDN);
    assert_eq!(
        (e["balance"].as_i64(), e["reserved"].as_i64()),
        (Some(1), Some(10)),
        "{e}"
    );
    assert_eq!(
        (&r["balance"], &r["reserved"]),
        (&e["balance"], &e["reserved"]),
        "{r}\n{e}"
    );

    drop(to_redis);
    drop(to_embedded);
    redis.stop();
    embedded.stop();
    let _ = std::fs::remove_dir_all(&root);
}

const INCREMENT_ACCOUNT: u64 = 7200;
const INCREMENT_MSISDN: &str = "46709720001";
/// 1 an octet in 1024-octet increments on rating group 10, 2048 octets
/// a grant; an account with 1000.00 and a bundle of 1500 octets.
fn increment_charging() -> String {
    format!(
        r#"
[engine]
node_id = "increment"
supervision_secs = {TCC_SECS}
lenient = true

[currency]
code = 752
exponent = 2

[[tariff]]
name = "data-rg10"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 1
per = 1
increment = 1024
default_quota = 2048
validity_time = 600

[[account]]
id = {INCREMENT_ACCOUNT}
balance = 100000
subscribers = ["e164:{INCREMENT_MSISDN}"]

[[account.bundle]]
id = 1
unit = "octets"
units = 1500
rating_groups = [10]
"#
    )
}

/// Every CDR the embedded store wrote under `data` (closed and open
/// files).
fn embedded_cdrs(data: &std::path::Path) -> Vec<serde_json::Value> {
    fn walk(dir: &std::path::Path, out: &mut Vec<serde_json::Value>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.to_string_lossy().contains(".jsonl") {
                for line in std::fs::read_to_string(&p).unwrap().lines() {
                    out.push(serde_json::from_str(line).unwrap());
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&data.join("cdr"), &mut out);
    out
}

/// The usage CDRs of `records`: (request number, total octets, rated
/// units, bundle units, amount), in order.
fn usage_rated(records: &[serde_json::Value]) -> Vec<(u64, u64, u64, u64, i64)> {
    let mut v: Vec<_> = records
        .iter()
        .filter(|r| r["record_type"] == "usage")
        .map(|r| {
            (
                r["request_number"].as_u64().unwrap_or(0),
                r["total_octets"].as_u64().unwrap_or(0),
                r["rated_units"].as_u64().unwrap_or(0),
                r["bundle_units"].as_u64().unwrap_or(0),
                r["amount"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    v.sort();
    v
}

/// Usage is rounded up to the increment before bundles pay for it, and a
/// grant holds bundle units in whole increments, on Redis as on the
/// embedded store: of a 1500-octet bundle a 2048-octet grant holds 1024
/// (money buys the other 1024); 1 octet used is rated 1024, all paid by
/// the hold; 3000 octets past a 2048-octet grant are rated 3072, the
/// bundle's last 476 octets pay part and money the other 2596 (not
/// rounded up again to 3072); 1 octet more costs 1024.
#[test]
fn usage_is_rounded_up_before_bundles_pay_on_redis_as_on_the_embedded_store() {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let opts = options(&seeds, "increment", "checker");
    let namespace = opts.namespace.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = scratch("redis-serve-increment");
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5500_0000,
    };
    let session = "pgw.gyro.test;increment;1";
    let ccr = |kind, number, used| gw.data_ccr(session, INCREMENT_MSISDN, kind, number, used);
    let script = vec![
        (ccr(RequestType::Initial, 0, 0), "initial"),
        (ccr(RequestType::Update, 1, 1), "one octet"),
        (ccr(RequestType::Update, 2, 3000), "past the grant"),
        (ccr(RequestType::Termination, 3, 1), "terminate"),
    ];

    let embedded = embedded_node(&root, &increment_charging());
    let mut to_embedded = gw.connect(embedded.diameter);
    let expected = run(&mut to_embedded, &gw, &script);
    let node = Node::new(&root, "node-increment", &seeds, &namespace);
    std::fs::write(node.dir.join("charging.toml"), increment_charging()).unwrap();
    let redis = node.start();
    let mut to_redis = gw.connect(node.diameter);
    let answered = run(&mut to_redis, &gw, &script);
    for (((_, what), e), r) in script.iter().zip(&expected).zip(&answered) {
        assert_eq!(
            r, e,
            "{what}: Redis answered {r:?}, the embedded store {e:?}"
        );
    }
    for s in &expected[..3] {
        assert_eq!(
            s.mscc,
            vec![(Some(10), Some(2001), Some(2048), false)],
            "{s:?}"
        );
    }

    // The same money and bundle units on both.
    let e = embedded.account(INCREMENT_MSISDN);
    let r = redis.account(INCREMENT_MSISDN);
    assert_eq!(
        (
            e["balance"].as_i64(),
            e["reserved"].as_i64(),
            e["debited"].as_i64()
        ),
        (Some(100_000 - 3620), Some(0), Some(3620)),
        "{e}"
    );
    assert_eq!(
        (&r["balance"], &r["reserved"], &r["debited"]),
        (&e["balance"], &e["reserved"], &e["debited"]),
        "{r}\n{e}"
    );
    assert_eq!(r["bundles"], e["bundles"], "{r}\n{e}");
    assert_eq!(e["bundles"][0]["consumed"].as_u64(), Some(1500), "{e}");

    // The same usage CDRs: the units rated, what the bundle paid, the
    // money.
    let ledger = rt.block_on(RedisLedger::connect(opts)).expect("connect");
    let files = cdrs_match_debits(
        &rt,
        &ledger,
        &[node.data().join("cdr")],
        &[INCREMENT_ACCOUNT],
        Duration::from_secs(20),
    );
    let on_redis: Vec<serde_json::Value> = files.values().flatten().cloned().collect();
    drop(to_embedded);
    let embedded_data = embedded.data.clone();
    embedded.stop();
    let on_embedded = embedded_cdrs(&embedded_data);
    assert_eq!(
        usage_rated(&on_embedded),
        vec![
            (1, 1, 1024, 1024, 0),
            (2, 3000, 3072, 476, 2596),
            (3, 1, 1024, 0, 1024),
        ],
        "{on_embedded:?}"
    );
    assert_eq!(
        usage_rated(&on_redis),
        usage_rated(&on_embedded),
        "{on_redis:?}"
    );

    drop(to_redis);
    redis.stop();
    let _ = std::fs::remove_dir_all(&root);
}
