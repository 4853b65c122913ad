//! Accounts created through the operator API of `gyro serve` nodes on a
//! real Redis Cluster (the one the Redis ledger tests use; see
//! `redis_support`), over real HTTP and Diameter: an account created
//! through one node is charged through another (CCR-I/U/T, the balance
//! moves, the CDRs are exported) and shown by it; the 201, 409 and 422
//! answers are the embedded store's, byte for byte, and so is the account
//! after the same charges; the same subscriber created again is refused
//! through either node; of concurrent creations of one subscriber through
//! both nodes exactly one succeeds; a restarted node still finds the
//! account; an unknown subscriber is 5030 as before; a created account
//! deleted frees its subscriber for a new account, which a node that
//! remembered the old one charges at once; a CHECK_BALANCE event
//! is answered as the embedded store answers it, charging nothing; and
//! `gyro ledger` finds the books balanced with the created accounts'
//! initial balances.

mod redis_serve_support;
#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use std::time::Duration;

use gyro_charging::RequestType;
use gyro_store::redis::RedisLedger;
use redis_serve_support::{
    books_once_tcc_passed, cdrs_match_debits, embedded_node, Node, TCC_SECS,
};
use redis_support::{cluster_nodes, options};
use serde_json::{json, Value};
use support::common::{avp_u32, result_code};
use support::gateway::{exchange, Gateway};
use support::prometheus::sum;
use support::server::{http, is_problem};
use support::{data_ccr, gyro, scratch};

/// 100 MiB: 1.00 (100 minor units) on the test tariff of rating group 10.
const HUNDRED_MIB: u64 = 104_857_600;
const MSISDN: &str = "46709990001";
const IMSI: &str = "240019990000001";

const GW: Gateway = Gateway {
    host: "pgw.gyro.test",
    realm: "gyro.test",
    ids: 0x5300_0000,
};

/// CCR-I, -U (100 MiB) and -T (50 MiB) of session `n` for `msisdn`
/// through `addr`; the result codes.
fn charge(addr: std::net::SocketAddr, n: u32, msisdn: &str) -> Vec<Option<u32>> {
    charge_over(addr, addr, n, msisdn)
}

/// [`charge`] with the CCR-I sent to `first`, the rest to `then` (a
/// gateway failing over).
fn charge_over(
    first: std::net::SocketAddr,
    then: std::net::SocketAddr,
    n: u32,
    msisdn: &str,
) -> Vec<Option<u32>> {
    let mut c = GW.connect(first);
    let mut d = GW.connect(then);
    let session = format!("pgw.gyro.test;accounts;{n}");
    let steps = [
        (RequestType::Initial, 0),
        (RequestType::Update, HUNDRED_MIB),
        (RequestType::Termination, HUNDRED_MIB / 2),
    ];
    steps
        .iter()
        .enumerate()
        .map(|(i, &(kind, used))| {
            let ccr = data_ccr(
                GW.host,
                GW.ids | (n << 8),
                &session,
                msisdn,
                kind,
                i as u32,
                used,
            );
            let to = if i == 0 { &mut c } else { &mut d };
            result_code(&exchange(to, &GW.encode(&ccr, i as u32)))
        })
        .collect()
}

/// What a CHECK_BALANCE event for 100 MiB of data (rating group 10) for
/// `msisdn` is answered through `addr`: Result-Code, the MSCC's
/// Result-Code, Check-Balance-Result.
fn check_balance(
    addr: std::net::SocketAddr,
    n: u32,
    msisdn: &str,
) -> (Option<u32>, Option<u32>, Option<u32>) {
    use gyro_charging::{RequestedAction, ServiceUnits};
    use gyro_diameter::codes::avp;
    let mut c = GW.connect(addr);
    let mut ccr = data_ccr(
        GW.host,
        GW.ids | (n << 8),
        &format!("pgw.gyro.test;check;{n}"),
        msisdn,
        RequestType::Event,
        0,
        0,
    );
    ccr.requested_action = Some(RequestedAction::CheckBalance);
    ccr.mscc[0].used = None;
    ccr.mscc[0].requested = Some(ServiceUnits {
        total_octets: Some(HUNDRED_MIB),
        ..ServiceUnits::default()
    });
    let cca = exchange(&mut c, &GW.encode(&ccr, 0));
    let m = support::common::parse(&cca);
    let mscc = m
        .find(avp::MULTIPLE_SERVICES_CREDIT_CONTROL)
        .and_then(|g| g.child(avp::RESULT_CODE))
        .and_then(|a| a.u32().ok());
    (
        result_code(&cca),
        mscc,
        avp_u32(&cca, avp::CHECK_BALANCE_RESULT),
    )
}

/// The test's charging configuration: the shared one and a plan `gold`
/// at half the price of data on rating group 10.
fn charging() -> String {
    format!(
        "{}\n\
         [plans.gold]\n\
         [[plans.gold.rate]]\n\
         name = \"gold-data\"\n\
         service_context = \"32251@3gpp.org\"\n\
         rating_group = 10\n\
         unit = \"octets\"\n\
         price = 50\n\
         per = 104857600\n\
         increment = 1024\n\
         default_quota = 10485760\n\
         validity_time = 600\n",
        redis_serve_support::charging()
    )
}

/// An account view without its id (which differs between backends once
/// creations raced).
fn without_id(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("id");
    v
}

/// A CCR-Initial for `msisdn` (session `n`): its result code.
fn initial(addr: std::net::SocketAddr, n: u32, msisdn: &str) -> Option<u32> {
    let mut c = GW.connect(addr);
    let session = format!("pgw.gyro.test;accounts;{n}");
    let ccr = data_ccr(
        GW.host,
        GW.ids | (n << 8),
        &session,
        msisdn,
        RequestType::Initial,
        0,
        0,
    );
    result_code(&exchange(&mut c, &GW.encode(&ccr, 0)))
}

#[test]
fn accounts_created_through_one_node_are_found_and_charged_through_another() {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let opts = options(&seeds, "serve-accounts", "checker");
    let namespace = opts.namespace.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = scratch("redis-serve-accounts");
    let a = Node::new(&root, "node-a", &seeds, &namespace);
    let b = Node::new(&root, "node-b", &seeds, &namespace);
    for n in [&a, &b] {
        std::fs::write(n.dir.join("charging.toml"), charging()).unwrap();
    }
    let server_a = a.start();
    let mut server_b = b.start();
    let url = |n: &Node, p: &str| format!("http://127.0.0.1:{}{p}", n.admin_port);
    let post = |n: &Node, body: &Value| {
        http(&url(n, "/v1/accounts"), "POST", Some(body.clone()), None).unwrap()
    };
    // An embedded node with the same charging configuration answers the
    // same requests.
    let charging = std::fs::read_to_string(a.dir.join("charging.toml")).unwrap();
    let embedded = embedded_node(&root, &charging);

    // Created through node a: the embedded store's 201, the same id (the
    // first above the configured ones).
    let new = json!({ "msisdn": format!("+{MSISDN}"), "imsi": IMSI, "balance": 100000 });
    let created = post(&a, &new);
    assert_eq!(created.0, 201, "{}", created.2);
    let on_embedded = embedded.call("POST", "/v1/accounts", Some(new.clone()));
    assert_eq!(on_embedded.0, 201, "{}", on_embedded.2);
    assert_eq!(created.2, on_embedded.2);
    assert_eq!(created.2["id"], 5001, "{}", created.2);
    assert_eq!(created.2["msisdn"], MSISDN, "{}", created.2);

    // Created again, through either node: the embedded store's 409.
    let again = embedded.call("POST", "/v1/accounts", Some(new.clone()));
    is_problem(&again, 409);
    for node in [&a, &b] {
        let r = post(node, &new);
        is_problem(&r, 409);
        assert_eq!(r.2, again.2);
    }
    let by_imsi = json!({ "imsi": IMSI, "balance": 1 });
    let r = post(&b, &by_imsi);
    is_problem(&r, 409);
    assert_eq!(r.2, embedded.call("POST", "/v1/accounts", Some(by_imsi)).2);
    // A subscriber of the charging configuration, an id that is taken,
    // and invalid requests: the embedded store's answers.
    for (body, status) in [
        (json!({ "msisdn": "46700000001", "balance": 1 }), 409),
        (
            json!({ "msisdn": "46709990002", "balance": 1, "id": 1000 }),
            409,
        ),
        (json!({ "msisdn": "46709990002", "plan": "platinum" }), 422),
        (json!({ "msisdn": "not-a-number", "balance": 1 }), 422),
        (json!({ "balance": 1 }), 422),
        (json!({ "msisdn": "46709990002", "balance": -5 }), 422),
        (
            json!({ "msisdn": "46709990002", "bundles": [
                { "id": 1, "unit": "octets", "units": 10 },
                { "id": 1, "unit": "octets", "units": 20 }
            ] }),
            422,
        ),
    ] {
        let r = post(&a, &body);
        is_problem(&r, status);
        let e = embedded.call("POST", "/v1/accounts", Some(body.clone()));
        assert_eq!(r.2, e.2, "{body}");
    }

    // Found through node b (which never heard of it) by either identity.
    for subscriber in [MSISDN, IMSI] {
        let (status, _, shown) = http(
            &url(&b, &format!("/v1/accounts/{subscriber}")),
            "GET",
            None,
            None,
        )
        .unwrap();
        assert_eq!(status, 200, "{shown}");
        assert_eq!(shown, created.2);
    }
    // Charged through node b, as the embedded store charges it.
    assert_eq!(
        charge(b.diameter, 1, MSISDN),
        vec![Some(2001), Some(2001), Some(2001)]
    );
    assert_eq!(
        charge(embedded.diameter, 1, MSISDN),
        vec![Some(2001), Some(2001), Some(2001)]
    );
    let account = format!("/v1/accounts/{MSISDN}");
    let (status, _, after) = http(&url(&a, &account), "GET", None, None).unwrap();
    assert_eq!(status, 200, "{after}");
    assert_eq!(
        after["debited"], 150,
        "150 MiB at 1.00 per 100 MiB: {after}"
    );
    assert_eq!(after["balance"], 100000 - 150, "{after}");
    assert_eq!(after["reserved"], 0, "{after}");
    assert_eq!(after, embedded.account(MSISDN));
    // An unknown subscriber is still 5030, at once and a second later.
    assert_eq!(initial(b.diameter, 2, "46709990999"), Some(5030));
    assert_eq!(initial(a.diameter, 3, "46709990999"), Some(5030));
    // Node b looked the created subscriber up once (then kept it), and
    // the unknown one once.
    let metrics = server_b.metrics();
    assert!(
        sum(&metrics, "gyro_redis_subscriber_lookups_total") == 2.0,
        "{metrics}"
    );

    // Created through node a while node b has just been told the
    // subscriber is unknown: found within a second.
    let late = json!({ "msisdn": "46709990003", "balance": 5000 });
    assert_eq!(initial(b.diameter, 4, "46709990003"), Some(5030));
    assert_eq!(post(&a, &late).0, 201);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(
        charge(b.diameter, 5, "46709990003"),
        vec![Some(2001), Some(2001), Some(2001)]
    );

    // Concurrent creations of one subscriber through both nodes: exactly
    // one 201, the others 409.
    let racing = json!({ "msisdn": "46709990077", "balance": 10 });
    let answers: Vec<u16> = std::thread::scope(|s| {
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let node = if i % 2 == 0 { &a } else { &b };
                let body = racing.clone();
                s.spawn(move || post(node, &body).0)
            })
            .collect();
        tasks.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(
        answers.iter().filter(|&&s| s == 201).count(),
        1,
        "{answers:?}"
    );
    assert_eq!(
        answers.iter().filter(|&&s| s == 409).count(),
        7,
        "{answers:?}"
    );

    // A restarted node finds the created accounts.
    server_b.stop();
    server_b = b.start();
    assert_eq!(
        charge(b.diameter, 6, MSISDN),
        vec![Some(2001), Some(2001), Some(2001)]
    );
    let (_, _, after) = http(&url(&b, &account), "GET", None, None).unwrap();
    assert_eq!(after["debited"], 300, "{after}");

    // Deleted through node a while node b, which charged it, remembers
    // it: its identities are free again; a new account for the subscriber
    // (created through node a) is charged through node b at once, b
    // finding the old one gone and looking the subscriber up again.
    let (status, _, _) = http(&url(&a, &account), "DELETE", None, None).unwrap();
    assert_eq!(status, 204);
    is_problem(&http(&url(&b, &account), "GET", None, None).unwrap(), 404);
    let renewed = post(&a, &json!({ "msisdn": MSISDN, "balance": 700 }));
    assert_eq!(renewed.0, 201, "{}", renewed.2);
    assert_ne!(renewed.2["id"], created.2["id"]);
    assert_eq!(
        charge(b.diameter, 8, MSISDN),
        vec![Some(2001), Some(2001), Some(2001)]
    );
    let (_, _, shown) = http(&url(&b, &account), "GET", None, None).unwrap();
    assert_eq!(shown["id"], renewed.2["id"], "{shown}");
    assert_eq!(shown["balance"], 700 - 150, "{shown}");
    // Deleted through node a and not given a new account: unknown at
    // node b at once (5030), however long b remembered it.
    let gone = "/v1/accounts/46709990003";
    let (status, _, _) = http(&url(&a, gone), "DELETE", None, None).unwrap();
    assert_eq!(status, 204);
    assert_eq!(initial(b.diameter, 7, "46709990003"), Some(5030));
    is_problem(&http(&url(&b, gone), "GET", None, None).unwrap(), 404);

    // An account on plan gold with a bundle, created through node a,
    // whose session opens at node a and goes on at node b (which knows
    // neither the session nor the account): charged at gold's price,
    // the bundle first, as the embedded store charges it.
    let gold = json!({
        "msisdn": "46709990050", "balance": 100000, "plan": "gold",
        "bundles": [{ "unit": "octets", "units": 52428800, "rating_groups": [10] }]
    });
    let created_gold = post(&a, &gold);
    assert_eq!(created_gold.0, 201, "{}", created_gold.2);
    let embedded_gold = embedded.call("POST", "/v1/accounts", Some(gold));
    assert_eq!(
        without_id(created_gold.2.clone()),
        without_id(embedded_gold.2)
    );
    assert_eq!(created_gold.2["plan"], "gold", "{}", created_gold.2);
    assert_eq!(
        charge_over(a.diameter, b.diameter, 20, "46709990050"),
        vec![Some(2001), Some(2001), Some(2001)]
    );
    assert_eq!(
        charge(embedded.diameter, 20, "46709990050"),
        vec![Some(2001), Some(2001), Some(2001)]
    );
    let (_, _, charged) = http(&url(&b, "/v1/accounts/46709990050"), "GET", None, None).unwrap();
    assert_eq!(
        without_id(charged.clone()),
        without_id(embedded.account("46709990050"))
    );
    assert_eq!(
        charged["debited"], 50,
        "100 MiB past the 50 MiB bundle at 0.50 per 100 MiB: {charged}"
    );
    assert_eq!(charged["bundles"][0]["consumed"], 52428800, "{charged}");

    // Changed, topped up and created through the command line, through
    // any node.
    let patched = http(
        &url(&b, "/v1/accounts/46709990050"),
        "PATCH",
        Some(json!({ "credit_limit": 300 })),
        None,
    )
    .unwrap();
    assert_eq!(patched.0, 200, "{}", patched.2);
    assert_eq!(patched.2["credit_limit"], 300, "{}", patched.2);
    let top_up = json!({ "amount": 500, "idempotency_key": "refill-50" });
    let topped = http(
        &url(&a, "/v1/accounts/46709990050/top-ups"),
        "POST",
        Some(top_up.clone()),
        None,
    )
    .unwrap();
    assert_eq!(topped.0, 200, "{}", topped.2);
    let again = http(
        &url(&b, "/v1/accounts/46709990050/top-ups"),
        "POST",
        Some(top_up),
        None,
    )
    .unwrap();
    assert_eq!(again.2["replayed"], true, "{}", again.2);
    assert_eq!(again.2["balance"], topped.2["balance"], "{}", again.2);
    let (code, out, err) = gyro(&[
        "account",
        "create",
        "46709990070",
        "--balance",
        "300",
        "-c",
        b.config.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("created"), "{out}");
    let (code, out, err) = gyro(&[
        "account",
        "show",
        "46709990070",
        "--json",
        "-c",
        a.config.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["balance"], 300, "{shown}");

    // CHECK_BALANCE: answered as the embedded store answers it (enough
    // credit, not enough, blocked, unknown), charging nothing.
    for (msisdn, balance, status) in [
        ("46709990060", 100000, "active"),
        ("46709990061", 10, "active"),
        ("46709990062", 100000, "blocked"),
    ] {
        let body = json!({ "msisdn": msisdn, "balance": balance, "status": status });
        assert_eq!(post(&a, &body).0, 201);
        assert_eq!(embedded.call("POST", "/v1/accounts", Some(body)).0, 201);
    }
    let mut checked = Vec::new();
    for (n, msisdn) in [
        "46709990060",
        "46709990061",
        "46709990062",
        "46700000001",
        "46709990999",
    ]
    .into_iter()
    .enumerate()
    {
        let on_redis = check_balance(b.diameter, 30 + n as u32, msisdn);
        let on_embedded = check_balance(embedded.diameter, 30 + n as u32, msisdn);
        assert_eq!(on_redis, on_embedded, "{msisdn}");
        checked.push(on_redis);
    }
    assert_eq!(
        checked,
        vec![
            (Some(2001), Some(2001), Some(0)),
            (Some(2001), Some(2001), Some(1)),
            (Some(4010), Some(4010), None),
            (Some(2001), Some(2001), Some(0)),
            (Some(5030), None, None),
        ]
    );
    let (_, _, unchanged) = http(&url(&b, "/v1/accounts/46709990061"), "GET", None, None).unwrap();
    assert_eq!(
        (
            &unchanged["balance"],
            &unchanged["reserved"],
            &unchanged["debited"]
        ),
        (&json!(10), &json!(0), &json!(0))
    );

    // The books: every account adds up, the created ones included, and
    // every charge has its CDR.
    let ledger = rt.block_on(RedisLedger::connect(opts)).expect("connect");
    let books = books_once_tcc_passed(&rt, &ledger, Duration::from_secs(TCC_SECS + 15));
    assert!(books.is_balanced(), "{books:?}");
    let created_ids: Vec<u64> = rt
        .block_on(ledger.account_ids())
        .unwrap()
        .into_iter()
        .map(|a| a.0)
        .filter(|&id| id > 5000)
        .collect();
    assert_eq!(created_ids.len(), 7, "{created_ids:?}");
    let dirs = [a.data().join("cdr"), b.data().join("cdr")];
    cdrs_match_debits(&rt, &ledger, &dirs, &created_ids, Duration::from_secs(15));
    let (code, out, err) = gyro(&["ledger", "--config", a.config.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["violations"], 0, "{report}");

    embedded.stop();
    server_a.stop();
    server_b.stop();
    let _ = std::fs::remove_dir_all(&root);
}
