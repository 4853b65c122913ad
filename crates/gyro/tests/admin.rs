//! The operator API of a real `gyro serve` (two workers) over real HTTP:
//! accounts created, read, changed, topped up and deleted while CCRs
//! charge them; every change durable when it is answered (kill -9 right
//! after the answer loses nothing); errors as problem+json; the bearer
//! token; health, readiness, Prometheus metrics and the OpenAPI document;
//! and `gyro ledger`'s books balance with run-time accounts and top-ups.

mod support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use gyro_charging::RequestType;
use serde_json::{json, Value};
use support::gateway::{answer, Gateway};
use support::prometheus::{promtool_check, sum};
use support::server::{config, http, is_problem, ledger, Server};
use support::{free_port, scratch};

/// 100 MiB: 1.00 (100 minor units) on the demo tariff of rating group 10.
const HUNDRED_MIB: u64 = 104_857_600;

const PGW: Gateway = Gateway {
    host: "pgw.admin.test",
    realm: "admin.test",
    ids: 0x0a00,
};

/// A data CCR on rating group 10 for `msisdn`, reporting `used` octets
/// (none on an Initial) and asking for more (not on a Terminate).
fn ccr(session: &str, msisdn: &str, kind: RequestType, number: u32, used: u64) -> Vec<u8> {
    PGW.encode(&PGW.data_ccr(session, msisdn, kind, number, used), number)
}

#[test]
fn accounts_created_and_topped_up_over_http_are_charged_and_survive_kill_9() {
    let dir = scratch("admin-accounts");
    let data = dir.join("data");
    let port = free_port();
    let cfg = config(&dir, port, "");
    let server = Server::start_admin(&data, &cfg, port, &[]);

    let (status, _, health) = server.call("GET", "/healthz", None);
    assert_eq!((status, &health["status"]), (200, &json!("ok")));
    let (status, _, created) = server.call(
        "POST",
        "/v1/accounts",
        Some(json!({"msisdn": "46709990001", "balance": 100000})),
    );
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["msisdn"], "46709990001");
    assert_eq!(created["balance"], 100000);
    assert_eq!(created["reserved"], 0);
    assert_eq!(created["status"], "active");

    // CCR-I, -U (100 MiB), -T (50 MiB) for the new account.
    let mut pgw = PGW.connect(server.diameter);
    let sid = "pgw.admin.test;1;1";
    let msisdn = "46709990001";
    assert_eq!(
        answer(&mut pgw, &ccr(sid, msisdn, RequestType::Initial, 0, 0)),
        2001
    );
    let during = server.account(msisdn);
    assert!(during["reserved"].as_i64().unwrap() > 0, "{during}");
    assert_eq!(during["open_sessions"], 1);
    let (_, _, listed) = server.call("GET", &format!("/v1/sessions?subscriber={msisdn}"), None);
    assert_eq!(listed["sessions"][0]["session_id"], sid, "{listed}");
    let r = server.call("DELETE", &format!("/v1/accounts/{msisdn}"), None);
    is_problem(&r, 409);
    let update = ccr(sid, msisdn, RequestType::Update, 1, HUNDRED_MIB);
    assert_eq!(answer(&mut pgw, &update), 2001);
    let end = ccr(sid, msisdn, RequestType::Termination, 2, HUNDRED_MIB / 2);
    assert_eq!(answer(&mut pgw, &end), 2001);
    let after = server.account(msisdn);
    assert_eq!(
        after["debited"], 150,
        "150 MiB at 1.00 per 100 MiB: {after}"
    );
    assert_eq!(after["balance"], 100000 - 150);
    assert_eq!(after["reserved"], 0);
    assert_eq!(after["open_sessions"], 0);

    // Top-up: the same key twice tops up once.
    let (status, _, topped) = server.top_up(msisdn, 5000, "order-1");
    assert_eq!(status, 200, "{topped}");
    assert_eq!(topped["balance"], 100000 - 150 + 5000);
    assert_eq!(topped["replayed"], false);
    let (status, _, again) = server.top_up(msisdn, 5000, "order-1");
    assert_eq!(status, 200);
    assert_eq!(again["balance"], topped["balance"]);
    assert_eq!(again["replayed"], true);
    is_problem(&server.top_up(msisdn, 7000, "order-1"), 409);

    // Answered means durable: kill -9 right after a top-up and a 201.
    let (status, _, _) = server.top_up(msisdn, 250, "order-2");
    assert_eq!(status, 200);
    let (status, _, late) = server.call(
        "POST",
        "/v1/accounts",
        Some(json!({"msisdn": "+46709990002", "imsi": "240019990000002", "balance": 777})),
    );
    assert_eq!(status, 201, "{late}");
    server.kill();

    let server = Server::start_admin(&data, &cfg, port, &[]);
    let back = server.account(msisdn);
    assert_eq!(back["balance"], 100000 - 150 + 5000 + 250, "{back}");
    assert_eq!(back["topped_up"], 5250);
    assert_eq!(back["debited"], 150);
    let (_, _, again) = server.top_up(msisdn, 5000, "order-1");
    assert_eq!(
        again["replayed"], true,
        "the key is remembered across a crash"
    );
    assert_eq!(again["balance"], back["balance"]);
    for subscriber in ["46709990002", "240019990000002"] {
        let b = server.account(subscriber);
        assert_eq!((b["balance"].as_i64(), &b["id"]), (Some(777), &late["id"]));
        assert_eq!(b["imsi"], "240019990000002");
    }
    // The run-time account is charged after the restart too (it may be
    // on the other shard).
    let mut pgw = PGW.connect(server.diameter);
    let sid = "pgw.admin.test;1;2";
    let other = "46709990002";
    assert_eq!(
        answer(&mut pgw, &ccr(sid, other, RequestType::Initial, 0, 0)),
        2001
    );
    let end = ccr(sid, other, RequestType::Termination, 1, HUNDRED_MIB);
    assert_eq!(answer(&mut pgw, &end), 2001);
    assert_eq!(server.account(other)["balance"], 677);

    // PATCH and DELETE.
    let (status, _, patched) = server.call(
        "PATCH",
        &format!("/v1/accounts/{other}"),
        Some(json!({"status": "blocked", "credit_limit": 300})),
    );
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        (&patched["status"], &patched["credit_limit"]),
        (&json!("blocked"), &json!(300))
    );
    let (status, _, _) = server.call("DELETE", "/v1/accounts/240019990000002", None);
    assert_eq!(status, 204);
    is_problem(
        &server.call("GET", &format!("/v1/accounts/{other}"), None),
        404,
    );
    let sid = "pgw.admin.test;1;3";
    assert_eq!(
        answer(&mut pgw, &ccr(sid, other, RequestType::Initial, 0, 0)),
        5030,
        "a deleted account's subscriber is unknown"
    );
    drop(pgw);
    server.stop();

    // The books balance with run-time accounts and top-ups.
    let books = ledger(&data, &[]);
    assert_eq!(books["violations"], 0, "{books}");
    let mine = books["books"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["account"] == created["id"])
        .expect("the created account is in the books");
    assert_eq!(mine["topped_up"], 5250);
    assert_eq!(mine["initial_balance"], 100000);
    assert!(books["books"]
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["account"] != late["id"]));
}

#[test]
fn errors_are_problem_documents_and_metrics_and_openapi_are_served() {
    let dir = scratch("admin-errors");
    let data = dir.join("data");
    let port = free_port();
    let server = Server::start_admin(&data, &config(&dir, port, ""), port, &[]);

    is_problem(&server.call("GET", "/v1/accounts/46709999999", None), 404);
    is_problem(&server.call("GET", "/v1/no-such-thing", None), 404);
    is_problem(&server.top_up("46709999999", 1, "k"), 404);
    // The demo configuration's accounts exist.
    let existing = json!({"msisdn": "46700000001", "balance": 1});
    is_problem(&server.call("POST", "/v1/accounts", Some(existing)), 409);
    for invalid in [
        json!({"msisdn": "not-a-number", "balance": 1}),
        json!({"balance": 1}),
        json!({"msisdn": "46709990010", "balance": -5}),
        json!({"msisdn": "46709990010", "balance": 1, "colour": "red"}),
        json!({"msisdn": "46709990010", "balance": "lots"}),
    ] {
        let r = server.call("POST", "/v1/accounts", Some(invalid.clone()));
        is_problem(&r, 422);
    }
    is_problem(&server.top_up("46700000001", 0, "k"), 422);
    is_problem(&server.top_up("46700000001", 10, ""), 422);
    let r = server.call("PATCH", "/v1/accounts/46700000001", Some(json!({})));
    is_problem(&r, 422);
    // Ids past what every JSON client reads exactly, and 0, are refused.
    for id in [json!(0), json!(1u64 << 53), json!(u64::MAX)] {
        let create = json!({"msisdn": "46709990011", "balance": 1, "id": id});
        is_problem(&server.call("POST", "/v1/accounts", Some(create)), 422);
    }
    // What the framework refuses before a handler runs is a problem
    // document too: a query string that does not parse, a method the
    // path does not take (its Allow header kept).
    let query = server.call("GET", "/v1/accounts?limit=abc", None);
    is_problem(&query, 400);
    // A body that is not a JSON object is refused as malformed JSON is,
    // even where serde could read the fields from an array, and moves no
    // money. One problem type has one title (RFC 9457 section 3.1.3).
    let before = server.account("46700000001")["balance"].clone();
    let top_up = "/v1/accounts/46700000001/top-ups";
    let array = server.call("POST", top_up, Some(json!([250, "key-array"])));
    is_problem(&array, 400);
    let raw: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = raw
        .post(&format!("{}{top_up}", server.admin))
        .header("content-type", "application/json")
        .send("{\"amount\": 250,")
        .unwrap();
    let content_type = r.headers()["content-type"].to_str().unwrap().to_string();
    let body: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
    let bad_json = (r.status().as_u16(), content_type, body);
    is_problem(&bad_json, 400);
    for r in [&array, &bad_json, &query] {
        assert_eq!(r.2["type"], "urn:gyro:problem:malformed", "{}", r.2);
        assert_eq!(r.2["title"], query.2["title"], "{}", r.2);
    }
    for body in [json!([]), json!(250), json!(null)] {
        for path in ["/v1/accounts", top_up, "/v1/rate"] {
            let r = server.call("POST", path, Some(body.clone()));
            is_problem(&r, 400);
            assert_eq!(r.2["type"], "urn:gyro:problem:malformed", "{path} {body}");
        }
    }
    assert_eq!(server.account("46700000001")["balance"], before);
    // /v1/rate takes and answers int64 numbers only (its OpenAPI schema):
    // more units are a 422 that names them, never an answer past int64.
    let rate = |units: u64| {
        let body = json!({"service": "data", "rating_group": 10, "units": units});
        server.call("POST", "/v1/rate", Some(body))
    };
    let (status, _, ok) = rate(1_000_000);
    assert_eq!(status, 200, "{ok}");
    for units in [i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX] {
        let r = rate(units);
        is_problem(&r, 422);
        assert!(
            r.2["detail"].as_str().unwrap().starts_with("units:"),
            "{}",
            r.2
        );
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut put = agent
        .put(&format!("{}/v1/accounts", server.admin))
        .send("{}")
        .unwrap();
    assert_eq!(put.status().as_u16(), 405);
    let allow = put
        .headers()
        .get("allow")
        .map(|v| v.to_str().unwrap().to_string());
    assert!(
        allow.as_deref().is_some_and(|a| a.contains("POST")),
        "{allow:?}"
    );
    let content_type = put
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = serde_json::from_str(&put.body_mut().read_to_string().unwrap()).unwrap();
    is_problem(&(405, content_type, body), 405);
    // Nothing invalid changed anything.
    assert!(server.call("GET", "/v1/accounts/46709990010", None).0 == 404);

    // Requests move the counters; the text passes promtool when present.
    let mut pgw = PGW.connect(server.diameter);
    let sid = "pgw.admin.test;2;1";
    let msisdn = "46700000001";
    assert_eq!(
        answer(&mut pgw, &ccr(sid, msisdn, RequestType::Initial, 0, 0)),
        2001
    );
    assert_eq!(
        answer(&mut pgw, &ccr(sid, msisdn, RequestType::Termination, 1, 1)),
        2001
    );
    let text = server.metrics();
    assert!(sum(&text, "gyro_requests_total") >= 2.0, "{text}");
    assert!(sum(&text, "gyro_group_commits_total") >= 1.0, "{text}");
    assert_eq!(sum(&text, "gyro_connections_open"), 1.0, "{text}");
    assert_eq!(sum(&text, "gyro_ready"), 1.0);
    promtool_check(&text);

    let (status, _, api) = server.call("GET", "/v1/openapi.json", None);
    assert_eq!(status, 200);
    for path in [
        "/v1/accounts",
        "/v1/accounts/{subscriber}",
        "/v1/accounts/{subscriber}/top-ups",
        "/v1/sessions",
        "/v1/peers",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        assert!(
            api["paths"][path].is_object(),
            "{path} missing from the OpenAPI document"
        );
    }
    // Query parameters are query parameters, optional; the probes need
    // no token; every other operation may answer 401.
    for path in ["/v1/accounts", "/v1/sessions"] {
        for p in api["paths"][path]["get"]["parameters"].as_array().unwrap() {
            assert_eq!(
                (&p["in"], &p["required"]),
                (&json!("query"), &json!(false)),
                "{p}"
            );
        }
    }
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(api["paths"][probe]["get"]["security"], json!([]), "{probe}");
    }
    assert!(api["paths"]["/v1/peers"]["get"]["responses"]["401"].is_object());
    assert!(api["paths"]["/v1/accounts"]["post"]["responses"]["400"].is_object());
    // /metrics answers either format; an account id is 1 to 2^53 - 1.
    let formats = &api["paths"]["/metrics"]["get"]["responses"]["200"]["content"];
    let mut formats: Vec<&str> = formats
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.split(';').next().unwrap())
        .collect();
    formats.sort_unstable();
    assert_eq!(
        formats,
        ["application/openmetrics-text", "text/plain"],
        "{formats:?}"
    );
    let id = &api["components"]["schemas"]["CreateAccount"]["properties"]["id"];
    assert_eq!(id["minimum"], 1, "{id}");
    assert_eq!(id["maximum"], 9007199254740991u64, "{id}");
    let (status, _, peers) = server.call("GET", "/v1/peers", None);
    assert_eq!((status, &peers["open_connections"]), (200, &json!(1)));
    drop(pgw);
    server.stop();
}

#[test]
fn a_token_is_required_when_configured_and_an_open_address_needs_one() {
    let dir = scratch("admin-token");
    let data = dir.join("data");
    let port = free_port();
    let token_file = dir.join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    // Bound to every address (not only loopback), as an operator reaching
    // it from elsewhere would: the token is what keeps others out.
    let token = format!("token_file = {:?}\n", token_file.to_string_lossy());
    let cfg = config(&dir, port, &token);
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("127.0.0.1:", "0.0.0.0:")).unwrap();
    let server = Server::start_admin(&data, &cfg, port, &[]);

    let url = |p: &str| format!("{}{p}", server.admin);
    for path in ["/v1/accounts/46700000001", "/metrics", "/v1/openapi.json"] {
        is_problem(&http(&url(path), "GET", None, None).unwrap(), 401);
        is_problem(&http(&url(path), "GET", None, Some("wrong")).unwrap(), 401);
        let (status, _, _) = http(&url(path), "GET", None, Some("s3cret-token")).unwrap();
        assert_eq!(status, 200, "{path} with the token");
    }
    let top_up = json!({"amount": 10, "idempotency_key": "x"});
    let r = http(
        &url("/v1/accounts/46700000001/top-ups"),
        "POST",
        Some(top_up),
        None,
    )
    .unwrap();
    is_problem(&r, 401);
    // The scheme name is case-insensitive (RFC 9110 section 11.1).
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let lower = agent
        .get(&url("/v1/accounts/46700000001"))
        .header("Authorization", "bearer s3cret-token")
        .call()
        .unwrap();
    assert_eq!(lower.status().as_u16(), 200);
    // Probes need no token.
    assert_eq!(http(&url("/healthz"), "GET", None, None).unwrap().0, 200);
    assert_eq!(http(&url("/readyz"), "GET", None, None).unwrap().0, 200);
    // The command line reads the address and the token from the config.
    let cfg = dir.join("gyro.toml");
    let cfg = cfg.to_str().unwrap();
    let (code, out, err) = support::gyro(&["account", "show", "46700000001", "--json", "-c", cfg]);
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["msisdn"], "46700000001");
    server.stop();

    // Every address, not only loopback, without a token: refused.
    let open = dir.join("open.toml");
    std::fs::write(&open, format!("[admin]\nlisten = \"0.0.0.0:{port}\"\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args([
            "serve",
            "--workers",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(&data)
        .arg("-c")
        .arg(&open)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "an open admin address without a token starts"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("token_file"), "{stderr}");
}

#[test]
fn the_command_line_creates_tops_up_shows_lists_and_deletes() {
    let dir = scratch("admin-cli");
    let data = dir.join("data");
    let port = free_port();
    let cfg = config(&dir, port, "");
    let server = Server::start_admin(&data, &cfg, port, &[]);
    let gyro = |args: &[&str]| -> (bool, String, String) {
        let (code, out, err) = support::gyro(&[args, &["-c", cfg.to_str().unwrap()]].concat());
        (code == 0, out, err)
    };
    let (ok, out, err) = gyro(&["account", "create", "46709990050", "--balance", "1000"]);
    assert!(ok, "{err}");
    assert!(out.contains("balance 1000"), "{out}");
    let (ok, out, _) = gyro(&["account", "top-up", "46709990050", "250", "--key", "k"]);
    assert!(ok && out.contains("balance 1250"), "{out}");
    let (ok, out, _) = gyro(&["account", "top-up", "46709990050", "250", "--key", "k"]);
    assert!(
        ok && out.contains("nothing added") && out.contains("balance 1250"),
        "{out}"
    );
    let (ok, out, _) = gyro(&["account", "list", "--json", "--limit", "100000"]);
    assert!(ok);
    let list: Value = serde_json::from_str(&out).unwrap();
    let listed = list["accounts"].as_array().unwrap();
    assert!(listed.iter().any(|a| a["msisdn"] == "46709990050"));
    assert!(listed
        .windows(2)
        .all(|w| w[0]["id"].as_u64() < w[1]["id"].as_u64()));
    let (ok, out, _) = gyro(&["session", "list"]);
    assert!(ok && out.contains("0 open sessions"), "{out}");
    let (ok, _, err) = gyro(&["account", "create", "46709990050"]);
    assert!(!ok && err.contains("409"), "{err}");
    let (ok, _, err) = gyro(&["account", "delete", "46709990050"]);
    assert!(ok, "{err}");
    let (ok, _, err) = gyro(&["account", "show", "46709990050"]);
    assert!(!ok && err.contains("404"), "{err}");
    server.stop();
}

#[test]
fn readiness_is_503_until_every_shard_has_recovered() {
    let dir = scratch("admin-ready");
    let port = free_port();
    let cfg = config(&dir, port, "");
    // Enough accounts that building the shards takes a noticeable time.
    let charging = dir.join("charging.toml");
    let demo = std::fs::read_to_string(support::testdata().join("../config/example-charging.toml"))
        .unwrap();
    std::fs::write(
        &charging,
        format!(
            "{demo}\n[[account_range]]\nfirst_id = 100000\ncount = 300000\n\
             e164_first = \"46800000000\"\nbalance = 1000\n"
        ),
    )
    .unwrap();
    let diameter = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let child = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["serve", "--workers", "2", "--listen"])
        .arg(diameter.to_string())
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--charging")
        .arg(&charging)
        .arg("-c")
        .arg(&cfg)
        .env("GYRO_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let server = Server::adopt(child, diameter, &dir.join("data"), Some(port));
    let t = std::time::Instant::now();
    let mut seen = Vec::new();
    loop {
        if let Ok((status, _, body)) = server.try_call("GET", "/readyz", None) {
            if seen.last() != Some(&status) {
                seen.push(status);
            }
            if status == 200 {
                break;
            }
            is_problem(&(status, "application/problem+json".into(), body), 503);
            // Alive but not ready: the probe of liveness says so.
            assert_eq!(server.call("GET", "/healthz", None).0, 200);
            // Account operations wait for readiness too (it may have come
            // meanwhile).
            let r = server.call("GET", "/v1/accounts/46800000001", None);
            if r.0 != 200 {
                is_problem(&r, 503);
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "never ready: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(seen, [503, 200], "not ready while recovering, then ready");
    assert!(
        std::net::TcpStream::connect(diameter).is_ok(),
        "listening once ready"
    );
    assert_eq!(server.account("46800000001")["balance"], 1000);
    server.stop();
}
