//! The operator API of a `gyro serve` node on a real Redis Cluster (the
//! one the Redis ledger tests use; see `redis_support`), over real HTTP:
//! an account is shown with the cluster's figures, a top-up retried with
//! its idempotency key is applied once, the same key with another amount
//! is refused with the embedded store's 409, another key tops up again, the
//! command line (`gyro account show|top-up`) works against the node
//! unchanged, `gyro ledger --config` finds the books balanced, a change of
//! status and credit limit holds for the next session, an account with
//! open sessions is not deleted and one without is (for good: a node
//! starting again does not recreate it), accounts are listed a page at a
//! time, and an operation the Redis
//! backend does not offer answers 501 with a problem body (creating
//! accounts is `redis_serve_accounts.rs`).

mod redis_serve_support;
#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use gyro_charging::RequestType;
use redis_serve_support::{embedded_node, Node};
use redis_support::{cluster_nodes, options};
use serde_json::{json, Value};
use support::common::result_code;
use support::gateway::{exchange, Gateway};
use support::server::{http, is_problem};
use support::{data_ccr, gyro, scratch};

/// A subscriber of the load account range (its account has 10 000 000).
const MSISDN: &str = "46700000007";
/// Another subscriber of the load range, whose account is deleted.
const OTHER: &str = "46700000009";

#[test]
fn accounts_are_shown_and_topped_up_once_per_key_on_the_redis_ledger() {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let namespace = options(&seeds, "serve-admin", "checker").namespace;
    let root = scratch("redis-serve-admin");
    let node = Node::new(&root, "node-admin", &seeds, &namespace);
    let server = node.start();
    let url = |p: &str| format!("http://127.0.0.1:{}{p}", node.admin_port);
    let account = format!("/v1/accounts/{MSISDN}");

    // A session holds a reservation, so reserved and open_sessions show.
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5200_0000,
    };
    let mut c = gw.connect(node.diameter);
    let ccr = data_ccr(
        gw.host,
        gw.ids,
        "pgw.gyro.test;admin;1",
        MSISDN,
        RequestType::Initial,
        0,
        0,
    );
    assert_eq!(
        result_code(&exchange(&mut c, &gw.encode(&ccr, 0))),
        Some(2001)
    );

    let (status, _, before) = http(&url(&account), "GET", None, None).unwrap();
    assert_eq!(status, 200, "{before}");
    assert_eq!(before["msisdn"], MSISDN, "{before}");
    assert_eq!(before["initial_balance"], 10_000_000, "{before}");
    assert_eq!(before["topped_up"], 0, "{before}");
    assert_eq!(before["status"], "active", "{before}");
    assert_eq!(before["plan"], "default", "{before}");
    assert_eq!(before["open_sessions"], 1, "{before}");
    let reserved = before["reserved"].as_i64().unwrap();
    assert!(reserved > 0, "{before}");
    assert_eq!(
        before["balance"].as_i64().unwrap() + reserved,
        10_000_000,
        "{before}"
    );
    let balance = before["balance"].as_i64().unwrap();

    // The same key twice: one top-up, the second answer says so.
    let top_up = |amount: i64, key: &str| {
        let body = json!({ "amount": amount, "idempotency_key": key });
        http(
            &url(&format!("{account}/top-ups")),
            "POST",
            Some(body),
            None,
        )
        .unwrap()
    };
    let (status, _, first) = top_up(500, "refill-1");
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["replayed"], false, "{first}");
    assert_eq!(first["balance"], balance + 500, "{first}");
    let (status, _, again) = top_up(500, "refill-1");
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["balance"], balance + 500, "{again}");
    // The same key with another amount: 409 and nothing added, with the
    // problem body the embedded store answers.
    let conflict = top_up(600, "refill-1");
    is_problem(&conflict, 409);
    let charging = std::fs::read_to_string(node.dir.join("charging.toml")).unwrap();
    let embedded = embedded_node(&root, &charging);
    assert_eq!(embedded.top_up(MSISDN, 500, "refill-1").0, 200);
    let on_embedded = embedded.top_up(MSISDN, 600, "refill-1");
    is_problem(&on_embedded, 409);
    assert_eq!(conflict.2, on_embedded.2);
    assert_eq!(
        conflict.2["detail"],
        "idempotency key \"refill-1\" was used for a top-up of 500"
    );
    embedded.stop();
    let (status, _, unchanged) = http(&url(&account), "GET", None, None).unwrap();
    assert_eq!(status, 200, "{unchanged}");
    assert_eq!(unchanged["balance"], balance + 500, "{unchanged}");
    assert_eq!(unchanged["topped_up"], 500, "{unchanged}");
    // Another key, through the command line.
    let config = node.config.to_str().unwrap();
    let (code, out, err) = gyro(&[
        "account", "top-up", MSISDN, "250", "--key", "refill-2", "-c", config,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("topped up 250"), "{out}");
    let (code, out, err) = gyro(&["account", "show", MSISDN, "--json", "-c", config]);
    assert_eq!(code, 0, "{out}\n{err}");
    let after: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(after["balance"], balance + 750, "{after}");
    assert_eq!(after["topped_up"], 750, "{after}");
    assert_eq!(after["reserved"], reserved, "{after}");

    // Unknown subscriber, bad amount, unsupported operations.
    is_problem(
        &http(&url("/v1/accounts/46799999999"), "GET", None, None).unwrap(),
        404,
    );
    is_problem(&top_up(0, "refill-3"), 422);
    let r = http(&url("/v1/sessions"), "GET", None, None).unwrap();
    is_problem(&r, 501);
    assert!(
        r.2["detail"].as_str().unwrap().contains("redis-cluster"),
        "{}",
        r.2
    );
    let abort = url("/v1/sessions/pgw.gyro.test;admin;1");
    is_problem(&http(&abort, "DELETE", None, None).unwrap(), 501);
    assert_eq!(http(&url("/readyz"), "GET", None, None).unwrap().0, 200);

    // A change of status and credit limit: in the cluster, so a new
    // session is denied while the account is blocked, served once it is
    // active again.
    let patch = |body: Value| http(&url(&account), "PATCH", Some(body), None).unwrap();
    let initial = |n: u32| {
        let session = format!("pgw.gyro.test;admin;{n}");
        let ccr = data_ccr(
            gw.host,
            gw.ids | (n << 8),
            &session,
            MSISDN,
            RequestType::Initial,
            0,
            0,
        );
        (session, ccr)
    };
    let (status, _, blocked) = patch(json!({ "status": "blocked", "credit_limit": 300 }));
    assert_eq!(status, 200, "{blocked}");
    assert_eq!(blocked["status"], "blocked", "{blocked}");
    assert_eq!(blocked["credit_limit"], 300, "{blocked}");
    assert_eq!(blocked["balance"], balance + 750, "{blocked}");
    let (_, ccr) = initial(2);
    assert_eq!(
        result_code(&exchange(&mut c, &gw.encode(&ccr, 2))),
        Some(4010)
    );
    let (status, _, active) = patch(json!({ "status": "active" }));
    assert_eq!(status, 200, "{active}");
    assert_eq!(active["status"], "active", "{active}");
    assert_eq!(active["credit_limit"], 300, "{active}");
    let (open, ccr) = initial(3);
    assert_eq!(
        result_code(&exchange(&mut c, &gw.encode(&ccr, 3))),
        Some(2001)
    );
    let r = patch(json!({ "plan": "default" }));
    is_problem(&r, 501);
    assert!(r.2["detail"].as_str().unwrap().contains("plan"), "{}", r.2);
    is_problem(&patch(json!({})), 422);
    is_problem(&patch(json!({ "credit_limit": -1 })), 422);
    is_problem(
        &http(
            &url("/v1/accounts/46799999999"),
            "PATCH",
            Some(json!({ "status": "blocked" })),
            None,
        )
        .unwrap(),
        404,
    );
    // An account with open sessions is not deleted.
    let r = http(&url(&account), "DELETE", None, None).unwrap();
    is_problem(&r, 409);
    assert!(
        r.2["detail"]
            .as_str()
            .unwrap()
            .ends_with("has open sessions"),
        "{}",
        r.2
    );
    assert_eq!(http(&url(&account), "GET", None, None).unwrap().0, 200);
    let terminate = data_ccr(
        gw.host,
        gw.ids | (4 << 8),
        &open,
        MSISDN,
        RequestType::Termination,
        1,
        0,
    );
    assert_eq!(
        result_code(&exchange(&mut c, &gw.encode(&terminate, 4))),
        Some(2001)
    );

    // The books: initial + top-ups = balance + reserved + debited.
    let (code, out, err) = gyro(&["ledger", "--config", config, "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["backend"], "redis-cluster", "{report}");
    assert_eq!(report["violations"], 0, "{report}");
    assert_eq!(report["topped_up"], 750, "{report}");
    // Deleting an account without sessions: gone from the cluster, for
    // every node (a CCR is answered 5030), and not created again when a
    // node starts with the charging configuration that lists it.
    let other = format!("/v1/accounts/{OTHER}");
    assert_eq!(http(&url(&other), "GET", None, None).unwrap().0, 200);
    let (status, _, _) = http(&url(&other), "DELETE", None, None).unwrap();
    assert_eq!(status, 204);
    is_problem(&http(&url(&other), "GET", None, None).unwrap(), 404);
    is_problem(&http(&url(&other), "DELETE", None, None).unwrap(), 404);
    let ccr = data_ccr(
        gw.host,
        gw.ids | (5 << 8),
        "pgw.gyro.test;admin;5",
        OTHER,
        RequestType::Initial,
        0,
        0,
    );
    assert_eq!(
        result_code(&exchange(&mut c, &gw.encode(&ccr, 5))),
        Some(5030)
    );
    // The accounts in id order, a page at a time; the deleted one is not
    // listed.
    let ids = |query: &str| {
        let (status, _, list) =
            http(&url(&format!("/v1/accounts{query}")), "GET", None, None).unwrap();
        assert_eq!(status, 200, "{list}");
        list["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids("?limit=3"), vec![1000, 1001, 1002]);
    assert_eq!(ids("?after=1006&limit=4"), vec![1007, 1008, 1010, 1011]);
    assert_eq!(ids("").len(), 100);
    let all = ids("?limit=1000");
    assert_eq!(all.len(), 200, "200 load accounts and 5000, one deleted");
    assert_eq!(all.last(), Some(&5000));
    let (_, _, page) = http(&url("/v1/accounts?after=1006&limit=1"), "GET", None, None).unwrap();
    assert_eq!(page["accounts"][0]["msisdn"], MSISDN, "{page}");
    assert_eq!(page["accounts"][0]["credit_limit"], 300, "{page}");
    // (A peer still connected would be sent a Disconnect-Peer-Request and
    // waited for.)
    drop(c);
    server.stop();
    let server = node.start();
    is_problem(&http(&url(&other), "GET", None, None).unwrap(), 404);
    assert_eq!(http(&url(&account), "GET", None, None).unwrap().0, 200);
    let (code, out, err) = gyro(&["ledger", "--config", config, "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["violations"], 0, "{report}");
    server.stop();
    let _ = std::fs::remove_dir_all(&root);
}
