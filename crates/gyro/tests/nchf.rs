//! Nchf_ConvergedCharging (TS 32.291) against a real `gyro serve`, over
//! real HTTP/2 connections: create/update/release on two rating groups,
//! quota exhaustion, unknown subscribers, a retransmitted update, a
//! release after supervision closed the session, ProblemDetails for bad
//! requests, HTTP/2 abuse bounded, and the books balanced with Gy and
//! Nchf sessions charged side by side. Every body sent and received is
//! checked against the TS 32.291 data model (`support/nchf.rs`).

#[path = "support/nchf.rs"]
mod nchf;
mod support;

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use gyro_nchf::client::{Answer, Client};
use nchf::{kb, smf_request, validate, violations, Server};
use serde_json::{json, Value};
use support::prometheus::{promtool_check, value};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

const API: &str = "/nchf-convergedcharging/v3/chargingdata";

async fn post(c: &Client, path: &str, body: &Value) -> Answer {
    c.post(path, Bytes::from(serde_json::to_vec(body).unwrap()))
        .await
        .expect("an HTTP/2 answer")
}

/// Checks a success answer's body; returns it.
fn charged(a: &Answer, status: u16) -> Value {
    assert_eq!(a.status, status, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.content_type.as_deref(), Some("application/json"));
    let body = a.json();
    validate("ChargingDataResponse", &body);
    body
}

/// Checks an error answer: status, ProblemDetails with `cause`.
fn problem(a: &Answer, status: u16, cause: Option<&str>) -> Value {
    assert_eq!(a.status, status, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.content_type.as_deref(), Some("application/problem+json"));
    let body = a.json();
    validate("ProblemDetails", &body);
    assert_eq!(body["status"], status);
    assert_eq!(body["cause"].as_str(), cause, "{body}");
    body
}

fn unit(body: &Value, rg: u32) -> &Value {
    body["multipleUnitInformation"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["ratingGroup"] == rg)
        .unwrap_or_else(|| panic!("no rating group {rg} in {body}"))
}

fn without_time(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("invocationTimeStamp");
    v
}

fn cdrs(data: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for shard in std::fs::read_dir(data.join("cdr")).unwrap() {
        for f in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            out.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap()),
            );
        }
    }
    out
}

fn ledger(data: &Path) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["ledger", "--json", "--expire-sessions", "--data-dir"])
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The schema checks the bodies go through are not vacuous: each rule of
/// the TS 32.291 data model they carry refuses a body that breaks it.
#[test]
fn the_schema_checks_refuse_what_the_data_model_does_not_allow() {
    let ok = json!({
        "invocationTimeStamp": "2025-06-01T12:00:00Z",
        "invocationSequenceNumber": 1,
        "multipleUnitInformation": [{
            "ratingGroup": 10,
            "resultCode": "SUCCESS",
            "grantedUnit": {"totalVolume": 1000},
            "validityTime": 600,
            "finalUnitIndication": {
                "finalUnitAction": "REDIRECT",
                "redirectServer": {"redirectAddressType": "URL", "redirectServerAddress": "http://x"}
            }
        }]
    });
    assert!(violations("ChargingDataResponse", &ok).is_empty());
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut v = ok.clone();
        edit(&mut v);
        violations("ChargingDataResponse", &v)
    };
    let m = "/multipleUnitInformation/0";
    for (what, errors, at) in [
        (
            "a required attribute missing (6.1.6.2.1.2)",
            broken(&|v| {
                v.as_object_mut()
                    .unwrap()
                    .remove("invocationSequenceNumber");
            }),
            "/invocationSequenceNumber".to_string(),
        ),
        (
            "Uint32 out of range (TS 29.571)",
            broken(&|v| v["invocationSequenceNumber"] = json!(4294967296u64)),
            "/invocationSequenceNumber".to_string(),
        ),
        (
            "not an RFC 3339 DateTime",
            broken(&|v| v["invocationTimeStamp"] = json!("yesterday")),
            "/invocationTimeStamp".to_string(),
        ),
        (
            "a ResultCode the specification does not define (6.1.6.3)",
            broken(&|v| v["multipleUnitInformation"][0]["resultCode"] = json!("OK")),
            format!("{m}/resultCode"),
        ),
        (
            "a negative Uint64 volume (6.1.6.2.1.12)",
            broken(&|v| v["multipleUnitInformation"][0]["grantedUnit"]["totalVolume"] = json!(-1)),
            format!("{m}/grantedUnit/totalVolume"),
        ),
        (
            "a string where an integer goes",
            broken(&|v| v["multipleUnitInformation"][0]["ratingGroup"] = json!("10")),
            format!("{m}/ratingGroup"),
        ),
        (
            "RedirectServer without its address (6.1.6.2.1.14)",
            broken(&|v| {
                v["multipleUnitInformation"][0]["finalUnitIndication"]["redirectServer"]
                    .as_object_mut()
                    .unwrap()
                    .remove("redirectServerAddress");
            }),
            format!("{m}/finalUnitIndication/redirectServer/redirectServerAddress"),
        ),
        (
            "an attribute the data model does not have",
            broken(&|v| v["multipleUnitInformation"][0]["grantedUnits"] = json!({})),
            format!("{m}/grantedUnits"),
        ),
    ] {
        assert!(
            errors.iter().any(|e| e.starts_with(&format!("{at}:"))),
            "{what}: {errors:?}"
        );
    }
    // ProblemDetails (TS 29.571 5.2.4.1): invalidParams need their param.
    let p =
        json!({"status": 400, "cause": "MANDATORY_IE_MISSING", "invalidParams": [{"reason": "x"}]});
    assert!(!violations("ProblemDetails", &p).is_empty());
    // Requests stay open to attributes gyro does not read.
    let mut r = smf_request("46700000001", 0, &[(10, 0, true)]);
    r["someFutureAttribute"] = json!(1);
    assert!(violations("ChargingDataRequest", &r).is_empty());
    r["invocationSequenceNumber"] = json!(-1);
    assert!(!violations("ChargingDataRequest", &r).is_empty());
}

#[test]
fn nchf_sessions_are_charged_like_gy_with_problem_details_for_errors() {
    let dir = support::scratch("nchf-charging");
    let mut server = Server::start(&dir, "", None);
    let rt = rt();
    rt.block_on(async {
        let c = Client::connect(server.nchf).await.unwrap();

        // Create, update and release with rating groups 10 and 20.
        let msisdn = "46709880001";
        server.account_with(msisdn, 1_000_000);
        let a = post(
            &c,
            API,
            &smf_request(msisdn, 0, &[(10, 0, true), (20, 0, true)]),
        )
        .await;
        let body = charged(&a, 201);
        let location = a.location.clone().expect("a Location");
        assert!(
            location.starts_with(&format!("http://{}{API}/nchf-", server.nchf)),
            "{location}"
        );
        let reference = a.reference().unwrap().to_string();
        assert_eq!(body["invocationSequenceNumber"], 0);
        assert_eq!(body["sessionFailover"], "FAILOVER_NOT_SUPPORTED");
        for rg in [10, 20] {
            let m = unit(&body, rg);
            assert_eq!(m["resultCode"], "SUCCESS");
            assert_eq!(m["grantedUnit"]["totalVolume"], 10_485_760, "{m}");
            assert_eq!(m["validityTime"], 600);
            assert!(m.get("finalUnitIndication").is_none());
        }
        let account = server.account(msisdn);
        assert_eq!(account["reserved"], 10 + 20, "{account}");
        assert_eq!(account["open_sessions"], 1);
        // The admin API lists it as an Nchf session, by its reference.
        let (st, list) = server.admin("GET", &format!("/v1/sessions?subscriber={msisdn}"), None);
        assert_eq!(st, 200, "{list}");
        let session = &list["sessions"][0];
        assert_eq!(session["session_id"], reference.as_str(), "{list}");
        assert_eq!(session["interface"], "nchf", "{list}");
        assert_eq!(session["reserved"], 30, "{list}");

        let update = smf_request(msisdn, 1, &[(10, 5_000_000, true), (20, 3_000_000, true)]);
        let body = charged(
            &post(&c, &format!("{API}/{reference}/update"), &update).await,
            200,
        );
        assert_eq!(body["invocationSequenceNumber"], 1);
        assert!(body.get("sessionFailover").is_none());
        assert_eq!(unit(&body, 10)["resultCode"], "SUCCESS");
        let release = smf_request(msisdn, 2, &[(10, 1_000_000, false), (20, 0, false)]);
        let a = post(&c, &format!("{API}/{reference}/release"), &release).await;
        assert_eq!(a.status, 204, "{}", String::from_utf8_lossy(&a.body));
        assert!(a.body.is_empty());
        // 1.00 per 100 MiB on 10, 2.00 on 20, rounded up per report.
        let cost = |octets: u64, price: u64| (kb(octets) * price).div_ceil(104_857_600) as i64;
        let expected = cost(5_000_000, 100) + cost(3_000_000, 200) + cost(1_000_000, 100);
        let account = server.account(msisdn);
        assert_eq!(account["debited"], expected, "{account}");
        assert_eq!(account["reserved"], 0);
        assert_eq!(account["open_sessions"], 0);
        // Released: an update or a release again is 404.
        let again = smf_request(msisdn, 3, &[(10, 1, false)]);
        let a = post(&c, &format!("{API}/{reference}/update"), &again).await;
        problem(&a, 404, Some("CONTEXT_NOT_FOUND"));

        // An operator ends an Nchf session: released at once (no ASR to
        // send), its reservation back, and the SMF's next update is 404.
        let a = post(&c, API, &smf_request(msisdn, 0, &[(10, 0, true)])).await;
        charged(&a, 201);
        let reference = a.reference().unwrap().to_string();
        assert_eq!(server.account(msisdn)["reserved"], 10);
        let (st, ended) = server.admin("DELETE", &format!("/v1/sessions/{reference}"), None);
        assert_eq!(st, 200, "{ended}");
        assert_eq!(ended["released"], true, "{ended}");
        assert_eq!(ended["asr_sent"], false, "{ended}");
        let account = server.account(msisdn);
        assert_eq!(account["reserved"], 0, "{account}");
        assert_eq!(account["open_sessions"], 0, "{account}");
        let late = smf_request(msisdn, 1, &[(10, 1_000, true)]);
        let a = post(&c, &format!("{API}/{reference}/update"), &late).await;
        problem(&a, 404, Some("CONTEXT_NOT_FOUND"));
        let (st, _) = server.admin("DELETE", &format!("/v1/sessions/{reference}"), None);
        assert_eq!(st, 404, "ended already");

        // Blocking an account with an Nchf session open releases it there
        // and then (there is no Abort-Session-Request for its SMF).
        let blocked = "46709880009";
        server.account_with(blocked, 100_000);
        let a = post(&c, API, &smf_request(blocked, 0, &[(10, 0, true)])).await;
        charged(&a, 201);
        let reference = a.reference().unwrap().to_string();
        assert_eq!(server.account(blocked)["open_sessions"], 1);
        let (st, patched) = server.admin(
            "PATCH",
            &format!("/v1/accounts/{blocked}"),
            Some(json!({"status": "blocked"})),
        );
        assert_eq!(st, 200, "{patched}");
        let account = server.account(blocked);
        assert_eq!(account["reserved"], 0, "{account}");
        assert_eq!(account["open_sessions"], 0, "{account}");
        let late = smf_request(blocked, 1, &[(10, 1_000, true)]);
        let a = post(&c, &format!("{API}/{reference}/update"), &late).await;
        problem(&a, 404, Some("CONTEXT_NOT_FOUND"));

        // A retransmitted update is answered the same and charged once.
        let a = post(&c, API, &smf_request(msisdn, 0, &[(10, 0, true)])).await;
        charged(&a, 201);
        let reference = a.reference().unwrap().to_string();
        let before = server.account(msisdn)["debited"].as_i64().unwrap();
        let update = smf_request(msisdn, 1, &[(10, 2_000_000, true)]);
        let first = charged(
            &post(&c, &format!("{API}/{reference}/update"), &update).await,
            200,
        );
        let mut again = update.clone();
        again["retransmissionIndicator"] = json!(true);
        let second = charged(
            &post(&c, &format!("{API}/{reference}/update"), &again).await,
            200,
        );
        let third = charged(
            &post(&c, &format!("{API}/{reference}/update"), &update).await,
            200,
        );
        assert_eq!(without_time(first.clone()), without_time(second));
        assert_eq!(without_time(first), without_time(third));
        let after = server.account(msisdn)["debited"].as_i64().unwrap();
        assert_eq!(after - before, cost(2_000_000, 100), "charged once");
        let a = post(
            &c,
            &format!("{API}/{reference}/release"),
            &smf_request(msisdn, 2, &[]),
        )
        .await;
        assert_eq!(a.status, 204);

        // Quota exhaustion: the last units come with a final-unit
        // indication (terminate on 10, redirect on 20), then
        // QUOTA_LIMIT_REACHED per rating group, then 403 at create.
        let poor = "46709880002";
        server.account_with(poor, 15);
        let a = post(
            &c,
            API,
            &smf_request(poor, 0, &[(10, 0, true), (20, 0, true)]),
        )
        .await;
        let body = charged(&a, 201);
        let reference = a.reference().unwrap().to_string();
        let m10 = unit(&body, 10);
        assert_eq!(m10["resultCode"], "SUCCESS");
        assert_eq!(m10["grantedUnit"]["totalVolume"], 10_485_760);
        assert!(m10.get("finalUnitIndication").is_none());
        let m20 = unit(&body, 20);
        assert_eq!(m20["resultCode"], "SUCCESS");
        let fui = &m20["finalUnitIndication"];
        assert_eq!(fui["finalUnitAction"], "REDIRECT", "{body}");
        assert_eq!(fui["redirectServer"]["redirectAddressType"], "URL");
        assert!(m20["grantedUnit"]["totalVolume"].as_u64().unwrap() < 10_485_760);
        let update = smf_request(poor, 1, &[(10, 10_485_760, true), (20, 0, true)]);
        let body = charged(
            &post(&c, &format!("{API}/{reference}/update"), &update).await,
            200,
        );
        for rg in [10, 20] {
            let m = unit(&body, rg);
            if m["resultCode"] == "SUCCESS" {
                assert!(m.get("finalUnitIndication").is_some(), "{m}");
            } else {
                assert_eq!(m["resultCode"], "QUOTA_LIMIT_REACHED", "{m}");
            }
        }
        assert_eq!(unit(&body, 10)["resultCode"], "QUOTA_LIMIT_REACHED");
        let a = post(
            &c,
            &format!("{API}/{reference}/release"),
            &smf_request(poor, 2, &[]),
        )
        .await;
        assert_eq!(a.status, 204);
        let empty = "46709880003";
        server.account_with(empty, 0);
        let a = post(&c, API, &smf_request(empty, 0, &[(10, 0, true)])).await;
        problem(&a, 403, Some("QUOTA_LIMIT_REACHED"));
        assert_eq!(server.account(empty)["open_sessions"], 0);

        // Unknown subscriber.
        let a = post(&c, API, &smf_request("46709889999", 0, &[(10, 0, true)])).await;
        let p = problem(&a, 404, Some("USER_UNKNOWN"));
        assert_eq!(p["invalidParams"][0]["param"], "/subscriberIdentifier");
        // The demo accounts are found by their IMSI too.
        let mut by_imsi = smf_request("46709889999", 0, &[(10, 0, true)]);
        by_imsi["subscriberIdentifier"] = json!("imsi-240010000001000");
        let a = post(&c, API, &by_imsi).await;
        charged(&a, 201);
        let r = a.reference().unwrap().to_string();
        assert_eq!(
            post(&c, &format!("{API}/{r}/release"), &by_imsi)
                .await
                .status,
            204
        );

        // Malformed JSON, wrong types, missing attributes.
        let raw = |b: &'static str| Bytes::from_static(b.as_bytes());
        let a = c
            .post(API, raw("{\"nfConsumerIdentification\":"))
            .await
            .unwrap();
        problem(&a, 400, Some("INVALID_MSG_FORMAT"));
        let a = c.post(API, raw("[]")).await.unwrap();
        problem(&a, 400, Some("INVALID_MSG_FORMAT"));
        // JSON that is valid up to a point and then goes on is malformed
        // as a whole, not a request missing attributes.
        for body in ["{\"a\":1} trailing", "{\"a\":1}]", "{\"a\":1}{\"b\":2}"] {
            let a = c.post(API, raw(body)).await.unwrap();
            problem(&a, 400, Some("INVALID_MSG_FORMAT"));
        }
        let mut wrong = smf_request(msisdn, 0, &[(10, 0, true)]);
        wrong["invocationSequenceNumber"] = json!("zero");
        let p = problem(
            &post(&c, API, &wrong).await,
            400,
            Some("MANDATORY_IE_INCORRECT"),
        );
        assert_eq!(p["invalidParams"][0]["param"], "/invocationSequenceNumber");
        let mut wrong = smf_request(msisdn, 0, &[(10, 0, true)]);
        wrong["multipleUnitUsage"][0]["requestedUnit"]["totalVolume"] = json!(-5);
        let p = problem(
            &post(&c, API, &wrong).await,
            400,
            Some("OPTIONAL_IE_INCORRECT"),
        );
        assert_eq!(
            p["invalidParams"][0]["param"],
            "/multipleUnitUsage/0/requestedUnit/totalVolume"
        );
        let mut wrong = smf_request(msisdn, 0, &[(10, 0, true)]);
        wrong["multipleUnitUsage"][0]["ratingGroup"] = json!(4294967296u64);
        problem(
            &post(&c, API, &wrong).await,
            400,
            Some("MANDATORY_IE_INCORRECT"),
        );
        let mut wrong = smf_request(msisdn, 0, &[(10, 0, true)]);
        wrong
            .as_object_mut()
            .unwrap()
            .remove("nfConsumerIdentification");
        let p = problem(
            &post(&c, API, &wrong).await,
            400,
            Some("MANDATORY_IE_MISSING"),
        );
        assert_eq!(p["invalidParams"][0]["param"], "/nfConsumerIdentification");
        // Unknown attributes are ignored.
        let mut extra = smf_request(msisdn, 0, &[(10, 0, true)]);
        extra["someFutureAttribute"] = json!({"x": [1, 2]});
        extra["multipleUnitUsage"][0]["vendorSpecific"] = json!(true);
        let a = post(&c, API, &extra).await;
        charged(&a, 201);
        let r = a.reference().unwrap().to_string();
        assert_eq!(
            post(&c, &format!("{API}/{r}/release"), &extra).await.status,
            204
        );
        // Wrong media type, too large, wrong API, wrong method, unknown
        // references.
        let ok = serde_json::to_vec(&smf_request(msisdn, 0, &[(10, 0, true)])).unwrap();
        let a = c
            .request("POST", API, Some("text/plain"), Bytes::from(ok.clone()))
            .await
            .unwrap();
        problem(&a, 415, None);
        let mut big = smf_request(msisdn, 0, &[(10, 0, true)]);
        big["padding"] = json!("x".repeat(100_000));
        problem(&post(&c, API, &big).await, 413, None);
        let a = c
            .post(
                "/nchf-convergedcharging/v2/chargingdata",
                Bytes::from(ok.clone()),
            )
            .await
            .unwrap();
        problem(&a, 400, Some("INVALID_API"));
        let a = c.request("GET", API, None, Bytes::new()).await.unwrap();
        problem(&a, 405, None);
        let update = format!("{API}/nchf-1-00/update");
        let a = c.request("PUT", &update, None, Bytes::new()).await.unwrap();
        problem(&a, 405, None);
        let a = c
            .post(&format!("{API}/x/y/update"), Bytes::from(ok.clone()))
            .await
            .unwrap();
        problem(&a, 404, Some("RESOURCE_URI_STRUCTURE_NOT_FOUND"));
        for r in ["nchf-1-0123456789abcdef", "not-ours"] {
            let a = c
                .post(&format!("{API}/{r}/update"), Bytes::from(ok.clone()))
                .await
                .unwrap();
            problem(&a, 404, Some("CONTEXT_NOT_FOUND"));
        }
        let mut event = smf_request(msisdn, 0, &[(10, 0, true)]);
        event["oneTimeEvent"] = json!(true);
        problem(&post(&c, API, &event).await, 400, Some("CHARGING_FAILED"));
    });
    server.stop();

    // Every CDR of an Nchf session says it was charged over Nchf, and
    // the books balance.
    let records = cdrs(&server.data);
    assert!(!records.is_empty());
    let mut debited: BTreeMap<u64, i64> = BTreeMap::new();
    for r in &records {
        assert!(
            r["session_id"].as_str().unwrap().starts_with("nchf-"),
            "{r}"
        );
        assert_eq!(r["interface"], "nchf", "{r}");
        assert_eq!(r["service_context"], "32251@3gpp.org");
        *debited.entry(r["account"].as_u64().unwrap()).or_default() +=
            r["amount"].as_i64().unwrap();
    }
    let books = ledger(&server.data);
    assert_eq!(books["violations"], 0, "{books}");
    for b in books["books"].as_array().unwrap() {
        let account = b["account"].as_u64().unwrap();
        assert_eq!(
            b["debited"].as_i64().unwrap(),
            debited.get(&account).copied().unwrap_or(0)
        );
    }
}

#[test]
fn a_release_after_supervision_closed_the_session_is_not_found_and_gy_and_nchf_balance() {
    let dir = support::scratch("nchf-supervision");
    let charging = dir.join("charging.toml");
    let demo = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/example-charging.toml"),
    )
    .unwrap();
    std::fs::write(
        &charging,
        demo.replace("supervision_secs = 1200", "supervision_secs = 2"),
    )
    .unwrap();
    let mut server = Server::start(&dir, "", Some(&charging));
    let rt = rt();
    let msisdn = "46700000500";
    let reference = rt.block_on(async {
        let c = Client::connect(server.nchf).await.unwrap();
        let a = post(
            &c,
            API,
            &smf_request(msisdn, 0, &[(10, 0, true), (20, 0, true)]),
        )
        .await;
        charged(&a, 201);
        a.reference().unwrap().to_string()
    });
    assert_eq!(server.account(msisdn)["reserved"], 30);
    // Supervision (2 s here) closes it at the shard's next tick.
    std::thread::sleep(Duration::from_millis(2500));
    let t = std::time::Instant::now();
    while server.account(msisdn)["reserved"] != 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let account = server.account(msisdn);
    assert_eq!(
        account["reserved"], 0,
        "supervision released the reservation: {account}"
    );
    assert_eq!(account["open_sessions"], 0);

    // Gy load and Nchf sessions at once on the same accounts' shards.
    let gy = std::process::Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["load", "--target"])
        .arg(server.diameter.to_string())
        .args([
            "--duration",
            "3s",
            "--connections",
            "2",
            "--subscribers",
            "400",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let nchf_sessions = rt.block_on(async {
        let c = Client::connect(server.nchf).await.unwrap();
        let a = post(
            &c,
            &format!("{API}/{reference}/release"),
            &smf_request(msisdn, 1, &[(10, 100, false)]),
        )
        .await;
        problem(&a, 404, Some("CONTEXT_NOT_FOUND"));
        let mut done = 0;
        let mut tasks = Vec::new();
        for i in 0..40u32 {
            let c = c.clone();
            tasks.push(tokio::spawn(async move {
                let msisdn = format!("467000005{:02}", i % 100);
                let a = post(
                    &c,
                    API,
                    &smf_request(&msisdn, 0, &[(10, 0, true), (20, 0, true)]),
                )
                .await;
                if a.status != 201 {
                    return false;
                }
                let r = a.reference().unwrap().to_string();
                for seq in 1..4 {
                    let u = smf_request(&msisdn, seq, &[(10, 700_000, true), (20, 300_000, true)]);
                    assert_eq!(post(&c, &format!("{API}/{r}/update"), &u).await.status, 200);
                }
                let last = smf_request(&msisdn, 4, &[(10, 1000, false), (20, 1000, false)]);
                post(&c, &format!("{API}/{r}/release"), &last).await.status == 204
            }));
        }
        for t in tasks {
            done += usize::from(t.await.unwrap());
        }
        done
    });
    assert_eq!(nchf_sessions, 40);
    let out = gy.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(out.status.success(), "{report}");
    server.stop();

    let records = cdrs(&server.data);
    // Each CDR names the interface that charged it: Nchf sessions' (the
    // one supervision closed included) say nchf, gyro load's Gy sessions'
    // gy.
    for r in &records {
        let over_nchf = r["session_id"].as_str().unwrap().starts_with("nchf-");
        assert_eq!(r["interface"], if over_nchf { "nchf" } else { "gy" }, "{r}");
    }
    let nchf = records.iter().filter(|r| r["interface"] == "nchf").count();
    assert!(
        nchf > 40 && nchf < records.len(),
        "{nchf} of {} CDRs",
        records.len()
    );
    assert!(records
        .iter()
        .any(|r| r["closing_cause"] == "supervision-expired"
            && r["session_id"].as_str().unwrap() == reference
            && r["interface"] == "nchf"));
    // `gyro cdr csv` shows it too, in its last column.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["cdr", "csv", "--data-dir"])
        .arg(&server.data)
        .output()
        .unwrap();
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).unwrap();
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().ends_with(",interface"));
    let (mut gy, mut over_nchf) = (0, 0);
    for l in lines {
        if l.ends_with(",nchf") {
            over_nchf += 1;
        } else {
            assert!(l.ends_with(",gy"), "{l}");
            gy += 1;
        }
    }
    assert_eq!((gy + over_nchf, over_nchf), (records.len(), nchf));
    let mut debited: BTreeMap<u64, i64> = BTreeMap::new();
    for r in &records {
        *debited.entry(r["account"].as_u64().unwrap()).or_default() +=
            r["amount"].as_i64().unwrap();
    }
    let books = ledger(&server.data);
    assert_eq!(books["violations"], 0, "{books}");
    assert_eq!(books["reserved"], 0);
    for b in books["books"].as_array().unwrap() {
        let account = b["account"].as_u64().unwrap();
        assert_eq!(
            b["debited"].as_i64().unwrap(),
            debited.get(&account).copied().unwrap_or(0)
        );
    }
}

#[test]
fn http2_abuse_is_bounded() {
    let dir = support::scratch("nchf-abuse");
    let server = Server::start(
        &dir,
        "max_concurrent_streams = 8\nmax_header_list_size = 4096\nmax_connections = 64\n",
        None,
    );
    let body = serde_json::to_vec(&smf_request("46700000001", 0, &[(10, 0, true)])).unwrap();

    // Many streams: past the advertised 8, HEADERS are refused
    // (RST_STREAM REFUSED_STREAM), or the connection is closed.
    let mut s = TcpStream::connect(server.nchf).unwrap();
    let mut out = nchf::preface();
    let headers = nchf::post_headers(API, &[]);
    for i in 0..50u32 {
        // END_HEADERS, no END_STREAM: each stream stays open, waiting for
        // a body that never comes.
        out.extend(nchf::frame(0x1, 0x4, 1 + 2 * i, &headers));
    }
    nchf::send(&mut s, &out);
    let (frames, closed) = nchf::read_frames(&mut s, Duration::from_millis(1500));
    let settings = frames
        .iter()
        .find(|f| f.0 == 0x4 && f.1 & 1 == 0)
        .expect("server SETTINGS");
    let advertised = settings
        .3
        .chunks(6)
        .find(|c| c[..2] == [0, 3])
        .map(|c| u32::from_be_bytes([c[2], c[3], c[4], c[5]]));
    assert_eq!(advertised, Some(8), "SETTINGS_MAX_CONCURRENT_STREAMS");
    let refused = frames
        .iter()
        .filter(|f| f.0 == 0x3 && f.3 == [0, 0, 0, 7])
        .count();
    let goaway = frames.iter().any(|f| f.0 == 0x7);
    println!("many streams: {refused} refused, GOAWAY {goaway}, closed {closed}");
    assert!(
        refused >= 42 || goaway || closed,
        "refused {refused}, frames {:?}",
        frames.len()
    );
    drop(s);

    // Oversized headers: a header list past 4096 bytes gets 431 or a
    // reset, never a charge; the connection stays bounded.
    let mut s = TcpStream::connect(server.nchf).unwrap();
    let big = "y".repeat(12_000);
    let headers = nchf::post_headers(API, &[("x-big", &big)]);
    let mut out = nchf::preface();
    out.extend(nchf::frame(0x1, 0x4, 1, &headers));
    nchf::send(&mut s, &out);
    let (frames, closed) = nchf::read_frames(&mut s, Duration::from_millis(1500));
    let answered_431 = frames.iter().any(|f| f.0 == 0x1 && f.2 == 1 && f.3.windows(3).any(|w| w == b"431"))
        // HPACK encodes :status 431 as a literal; look for the digits.
        ;
    let reset = frames
        .iter()
        .any(|f| (f.0 == 0x3 && f.2 == 1) || f.0 == 0x7);
    println!("oversized headers: 431 {answered_431}, reset {reset}, closed {closed}");
    assert!(answered_431 || reset || closed, "{frames:?}");
    drop(s);

    // Rapid reset (CVE-2023-44487): streams opened and reset at once, by
    // the thousand; the server closes the connection with GOAWAY (or
    // simply keeps up) and goes on serving others.
    let mut s = TcpStream::connect(server.nchf).unwrap();
    let headers = nchf::post_headers(API, &[]);
    let mut out = nchf::preface();
    for i in 0..5000u32 {
        out.extend(nchf::frame(0x1, 0x4, 1 + 2 * i, &headers));
        out.extend(nchf::frame(0x3, 0, 1 + 2 * i, &8u32.to_be_bytes()));
    }
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    nchf::send(&mut s, &out);
    let (frames, closed) = nchf::read_frames(&mut s, Duration::from_millis(1500));
    let calm = frames
        .iter()
        .any(|f| f.0 == 0x7 && f.3.len() >= 8 && f.3[4..8] == [0, 0, 0, 0xb]);
    println!("rapid reset: GOAWAY ENHANCE_YOUR_CALM {calm}, closed {closed}");
    assert!(
        calm || closed,
        "5000 rapid resets did not close the connection"
    );
    drop(s);

    // A body past the limit is refused once the limit is passed.
    let rt = rt();
    rt.block_on(async {
        let c = Client::connect(server.nchf).await.unwrap();
        let a = c.post(API, Bytes::from(vec![b' '; 200_000])).await.unwrap();
        assert_eq!(a.status, 413);
        // And the server still serves.
        let a = c.post(API, Bytes::from(body)).await.unwrap();
        assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
    });
    let account = server.account("46700000001");
    assert_eq!(
        account["open_sessions"], 1,
        "only the one good create was charged"
    );
}

/// Reads from a raw connection until the server closes it; true when it
/// did so within `wait` (what it sent before, its SETTINGS, is skipped).
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    let t = std::time::Instant::now();
    while t.elapsed() < wait {
        let (_, closed) = nchf::read_frames(s, Duration::from_millis(200));
        if closed {
            return true;
        }
    }
    false
}

/// A connection that does not start HTTP/2 (the preface and a first
/// SETTINGS frame) within `request_timeout_ms` is closed: connections that
/// say nothing, or only part of the preface, cannot hold every one of
/// `max_connections` and lock real clients out.
#[test]
fn connections_that_do_not_start_http2_in_time_are_dropped() {
    let dir = support::scratch("nchf-silent");
    let server = Server::start(
        &dir,
        "request_timeout_ms = 1000\nmax_connections = 3\n",
        None,
    );
    let msisdn = "46709880099";
    server.account_with(msisdn, 1_000_000);
    let preface = nchf::preface();
    let mut held: Vec<TcpStream> = [&[][..], &preface[..10], &preface[..24]]
        .into_iter()
        .map(|sent| {
            let mut s = TcpStream::connect(server.nchf).unwrap();
            nchf::send(&mut s, sent);
            s
        })
        .collect();
    let t = std::time::Instant::now();
    for (i, s) in held.iter_mut().enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(5)),
            "connection {i} still open after {:?}",
            t.elapsed()
        );
    }
    assert!(
        t.elapsed() >= Duration::from_millis(800),
        "{:?}",
        t.elapsed()
    );
    // The slots they held serve a real client.
    rt().block_on(async {
        let c = tokio::time::timeout(Duration::from_secs(5), Client::connect(server.nchf))
            .await
            .expect("connected in time")
            .unwrap();
        let a = post(&c, API, &smf_request(msisdn, 0, &[(10, 0, true)])).await;
        charged(&a, 201);
    });
}

/// HEAD gets the status and headers a GET would, without content
/// (RFC 9110 section 9.3.2): HEADERS with END_STREAM and no DATA.
#[test]
fn head_is_answered_without_content() {
    let dir = support::scratch("nchf-head");
    let server = Server::start(&dir, "", None);
    let mut headers = vec![0x02, 4]; // :method, literal: "HEAD"
    headers.extend(b"HEAD");
    headers.extend(&nchf::post_headers(API, &[])[1..]);
    let mut out = nchf::preface();
    // END_HEADERS and END_STREAM.
    out.extend(nchf::frame(0x1, 0x5, 1, &headers));
    let mut s = TcpStream::connect(server.nchf).unwrap();
    nchf::send(&mut s, &out);
    let (frames, _) = nchf::read_frames(&mut s, Duration::from_millis(1500));
    let answer: Vec<_> = frames.iter().filter(|f| f.2 == 1).collect();
    assert!(!answer.is_empty(), "no answer: {frames:?}");
    assert_eq!(answer[0].0, 0x1, "HEADERS first: {answer:?}");
    assert_eq!(answer[0].1 & 0x1, 0x1, "END_STREAM on HEADERS: {answer:?}");
    assert!(
        answer.iter().all(|f| f.0 != 0x0),
        "no DATA in a HEAD answer: {answer:?}"
    );
    // Through a client: 405 with its headers and no body.
    rt().block_on(async {
        let c = Client::connect(server.nchf).await.unwrap();
        let a = c.request("HEAD", API, None, Bytes::new()).await.unwrap();
        assert_eq!(a.status, 405);
        assert_eq!(a.content_type.as_deref(), Some("application/problem+json"));
        assert!(a.body.is_empty(), "{:?}", a.body);
    });
}

/// `/metrics` counts the Nchf requests by operation and HTTP status, and
/// times them by operation, as many as were sent; the text passes
/// `promtool check metrics` where promtool is installed.
#[test]
fn nchf_requests_are_counted_on_metrics_by_operation_and_status() {
    let dir = support::scratch("nchf-metrics");
    let mut server = Server::start(&dir, "", None);
    let msisdn = "46700000321";
    rt().block_on(async {
        let c = Client::connect(server.nchf).await.unwrap();
        for _ in 0..3 {
            let a = post(&c, API, &smf_request(msisdn, 0, &[(10, 0, true)])).await;
            charged(&a, 201);
            let r = a.reference().unwrap().to_string();
            for seq in 1..=2 {
                let u = smf_request(msisdn, seq, &[(10, 100_000, true)]);
                charged(&post(&c, &format!("{API}/{r}/update"), &u).await, 200);
            }
            let last = smf_request(msisdn, 3, &[(10, 1000, false)]);
            let a = post(&c, &format!("{API}/{r}/release"), &last).await;
            assert_eq!(a.status, 204);
        }
        let u = smf_request(msisdn, 1, &[(10, 1, true)]);
        let a = post(&c, &format!("{API}/nchf-1-00/update"), &u).await;
        problem(&a, 404, Some("CONTEXT_NOT_FOUND"));
        let a = c.post(API, Bytes::from_static(b"{")).await.unwrap();
        problem(&a, 400, Some("INVALID_MSG_FORMAT"));
        let a = c.request("GET", API, None, Bytes::new()).await.unwrap();
        problem(&a, 405, None);
        let update = format!("{API}/nchf-1-00/update");
        let a = c.request("PUT", &update, None, Bytes::new()).await.unwrap();
        problem(&a, 405, None);
        let a = c
            .post("/nchf-convergedcharging/v1/chargingdata", Bytes::new())
            .await
            .unwrap();
        problem(&a, 400, Some("INVALID_API"));
    });
    let text = server.metrics();
    server.stop();
    assert!(
        text.contains("# TYPE gyro_nchf_requests_total counter"),
        "{text}"
    );
    assert!(text.contains("# TYPE gyro_nchf_answer_latency_seconds histogram"));
    let requests = |op: &str, status: &str| {
        value(
            &text,
            "gyro_nchf_requests_total",
            &format!("operation=\"{op}\",status=\"{status}\""),
        )
    };
    assert_eq!(requests("create", "201"), Some(3.0), "{text}");
    assert_eq!(requests("update", "200"), Some(6.0));
    assert_eq!(requests("release", "204"), Some(3.0));
    assert_eq!(requests("update", "404"), Some(1.0));
    assert_eq!(requests("create", "400"), Some(1.0));
    // A wrong method on an operation's path is that operation's (the path
    // names it); another API version names none.
    assert_eq!(requests("create", "405"), Some(1.0), "{text}");
    assert_eq!(requests("update", "405"), Some(1.0), "{text}");
    assert_eq!(requests("other", "405"), None, "{text}");
    assert_eq!(requests("other", "400"), Some(1.0));
    let all: f64 = text
        .lines()
        .filter(|l| l.starts_with("gyro_nchf_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(all, 17.0, "no other answers were counted");
    for (op, n) in [
        ("create", 5.0),
        ("update", 8.0),
        ("release", 3.0),
        ("other", 1.0),
    ] {
        let labels = format!("operation=\"{op}\"");
        let name = "gyro_nchf_answer_latency_seconds";
        assert_eq!(
            value(&text, &format!("{name}_count"), &labels),
            Some(n),
            "{op}"
        );
        assert_eq!(
            value(
                &text,
                &format!("{name}_bucket"),
                &format!("le=\"+Inf\",{labels}")
            ),
            Some(n),
            "{op}"
        );
        let sum = value(&text, &format!("{name}_sum"), &labels).unwrap();
        assert!(sum > 0.0 && sum < n * 10.0, "{op}: {sum} s");
    }
    // The client's connection, and the probe that waited for the listener.
    let accepted = value(&text, "gyro_nchf_connections_accepted_total", "");
    assert!(accepted.is_some_and(|n| n >= 1.0), "{accepted:?}");
    promtool_check(&text);
}

/// Nchf over TLS (`[nchf] tls_listen` with the `[tls]` certificate): the
/// server offers HTTP/2 by ALPN and charges as over h2c.
#[test]
fn nchf_over_tls_negotiates_h2_and_charges_like_h2c() {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName};
    use std::sync::Arc;

    let dir = support::scratch("nchf-tls");
    let certs = dir.join("certs");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gyro"))
        .arg("certs")
        .arg(&certs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = support::free_port();
    let extra = format!(
        "request_timeout_ms = 2000\ntls_listen = \"127.0.0.1:{port}\"\n[tls]\ncert = \"{}\"\nkey = \"{}\"\nclient_auth = \"none\"\n",
        certs.join("server.pem").display(),
        certs.join("server.key").display()
    );
    let mut server = Server::start(&dir, &extra, None);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let t = std::time::Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(t.elapsed() < Duration::from_secs(30), "no TLS listener");
        std::thread::sleep(Duration::from_millis(20));
    }
    let msisdn = "46709880077";
    server.account_with(msisdn, 1_000_000);
    rt().block_on(async {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(certs.join("ca.pem")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let config = Arc::new(config);
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(config.clone())
            .connect(ServerName::try_from("ocs.gyro.test").unwrap(), tcp)
            .await
            .expect("a TLS handshake");
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let c = Client::over(tls, true, format!("ocs.gyro.test:{port}"))
            .await
            .unwrap();
        let a = post(&c, API, &smf_request(msisdn, 0, &[(10, 0, true)])).await;
        let body = charged(&a, 201);
        assert_eq!(unit(&body, 10)["resultCode"], "SUCCESS");
        let location = a.location.clone().expect("a Location");
        assert!(location.starts_with("https://"), "{location}");
        let reference = a.reference().unwrap().to_string();
        let update = smf_request(msisdn, 1, &[(10, 2_000_000, true)]);
        charged(
            &post(&c, &format!("{API}/{reference}/update"), &update).await,
            200,
        );
        let release = smf_request(msisdn, 2, &[(10, 1_000_000, false)]);
        let a = post(&c, &format!("{API}/{reference}/release"), &release).await;
        assert_eq!(a.status, 204, "{}", String::from_utf8_lossy(&a.body));

        // A client that finishes its TLS handshake and then says nothing
        // is closed once request_timeout_ms (2 s) has passed.
        use tokio::io::AsyncReadExt;
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut silent = tokio_rustls::TlsConnector::from(config)
            .connect(ServerName::try_from("ocs.gyro.test").unwrap(), tcp)
            .await
            .expect("a TLS handshake");
        let t = std::time::Instant::now();
        let mut sink = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(8), silent.read_to_end(&mut sink));
        assert!(
            read.await.is_ok(),
            "a silent TLS connection still open after {:?}",
            t.elapsed()
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    });
    let account = server.account(msisdn);
    assert_eq!(account["reserved"], 0, "{account}");
    assert!(
        account["balance"].as_i64().unwrap() < 1_000_000,
        "{account}"
    );

    // gyro load --protocol nchf: open loop over h2c, then over TLS
    // (closed and open loop); every session completes and releases what
    // it reserved.
    let load = |extra: &[&str]| -> Value {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gyro"))
            .args(["load", "--protocol", "nchf", "--quiet", "--json"])
            .args([
                "--connections",
                "2",
                "--updates",
                "2",
                "--subscribers",
                "200",
            ])
            .args(extra)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert!(
            out.status.success(),
            "gyro load {extra:?}: {report} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(report["errors"], 0, "{extra:?}: {report}");
        let s = &report["sessions"];
        assert!(s["completed"].as_u64().unwrap() > 0, "{report}");
        assert_eq!(s["started"], s["completed"], "{extra:?}: {report}");
        assert_eq!(report["sent"], report["answered"], "{report}");
        report
    };
    let h2c = server.nchf.to_string();
    let tls_target = format!("127.0.0.1:{port}");
    let ca = certs.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let tls = ["--tls", "--ca", ca, "--server-name", "ocs.gyro.test"];
    let open = load(&[
        "--target",
        &h2c,
        "--rate",
        "150",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
    ]);
    println!(
        "open loop h2c: offered {} req/s of {}, answered {}, p99 {} us",
        open["offered_rate"], open["target_rate"], open["answered"], open["latency_us"]["p99"]
    );
    assert_eq!(open["target_rate"], 150.0);
    let offered = open["offered_rate"].as_f64().unwrap();
    assert!(
        (120.0..=165.0).contains(&offered),
        "offered {offered} req/s of 150"
    );
    // The sessions cut by the end of the run were released after it.
    let answered = open["answered"].as_u64().unwrap();
    assert!((240..=400).contains(&answered), "{answered} answered");
    assert!(open["send_lag_us"]["count"].as_u64().unwrap() > 0, "{open}");
    // The first 500 ms are left out of the latency figures, not the counts.
    let measured = open["latency_us"]["count"].as_u64().unwrap();
    assert!(
        measured > 150 && measured < answered - 50,
        "{measured} of {answered} measured"
    );
    let closed = load(&[&["--target", &tls_target, "--duration", "1s"][..], &tls[..]].concat());
    assert_eq!(closed["tls_handshakes_us"]["count"], 2, "{closed}");
    assert!(closed["target_rate"].is_null());
    let open = load(
        &[
            &["--target", &tls_target, "--rate", "100", "--duration", "1s"][..],
            &tls[..],
        ]
        .concat(),
    );
    assert_eq!(open["tls_handshakes_us"]["count"], 2, "{open}");
    assert_eq!(open["target_rate"], 100.0);
    server.stop();
    // Nothing is left reserved: the runs released every session they
    // opened (no session expiry needed).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["ledger", "--json", "--data-dir"])
        .arg(&server.data)
        .output()
        .unwrap();
    let books: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(books["violations"], 0, "{books}");
    assert_eq!(books["reserved"], 0, "{books}");
}
