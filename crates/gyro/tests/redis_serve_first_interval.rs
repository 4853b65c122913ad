//! A tariff's first interval ("60/1") on the Redis Cluster ledger,
//! against the embedded store: the reservation a session's CCR-Initial
//! made for a service pays the first interval when its usage is first
//! reported, whichever request reports it; a reservation a later request
//! made does not, nor does usage reported without a reservation, even by
//! the session's request number 1. The same CCRs go over real sockets to
//! `gyro serve` on its own data directory and to two `gyro serve` nodes
//! on a real Redis Cluster (each session's requests alternate between
//! them, so what a reservation was made by is read from the cluster, not
//! from a node's memory); both answer the same, hold the same money and
//! write the same usage CDRs.

mod redis_serve_support;
#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use std::path::Path;
use std::time::Duration;

use gyro_charging::{CcRequest, Mscc, RequestType, ServiceUnits};
use gyro_diameter::codes::avp;
use gyro_diameter::Message;
use gyro_store::redis::RedisLedger;
use redis_serve_support::*;
use redis_support::{cluster_nodes, options};
use serde_json::Value;
use support::common::Client;
use support::gateway::{exchange, Gateway};
use support::scratch;

const ACCOUNT: u64 = 7300;
const MSISDN: &str = "46709730001";
const CONTEXT: &str = "32260@3gpp.org";

/// Two services (rating groups 1 and 2) at 0.01 a second, the first
/// minute charged whole; an account with 100.00.
fn charging() -> String {
    let rate = |rg: u32| {
        format!(
            r#"
[[plans.calls.rate]]
name = "service-{rg}"
service_context = "{CONTEXT}"
rating_group = {rg}
unit = "seconds"
price = 60
per = 60
first_interval = 60
default_quota = 300
"#
        )
    };
    format!(
        r#"
currency = "SEK"

[engine]
node_id = "first-interval"
supervision_secs = {TCC_SECS}
lenient = true

[plans.calls]
time_zone = "UTC"
{}{}
[[account]]
id = {ACCOUNT}
balance = 10000
plan = "calls"
subscribers = ["e164:{MSISDN}"]
"#,
        rate(1),
        rate(2)
    )
}

/// One MSCC of a request: its rating group, the seconds it reports (if
/// any) and whether it asks for more (10 s).
type Ask = (u32, Option<u32>, bool);

/// A CCR of `session` carrying `asks`.
fn ccr(gw: &Gateway, session: &str, kind: RequestType, number: u32, asks: &[Ask]) -> CcRequest {
    let mut r = gw.data_ccr(session, MSISDN, kind, number, 0);
    r.service_context = CONTEXT.into();
    r.mscc = asks
        .iter()
        .map(|&(rg, used, more)| Mscc {
            rating_group: Some(rg),
            requested: more.then(|| ServiceUnits {
                time: Some(10),
                ..ServiceUnits::default()
            }),
            used: used.map(|t| ServiceUnits {
                time: Some(t),
                ..ServiceUnits::default()
            }),
            ..Mscc::default()
        })
        .collect();
    r
}

/// The CCRs of the test, in order, with what each is.
fn script(gw: &Gateway) -> Vec<(CcRequest, &'static str)> {
    use RequestType::{Initial, Termination, Update};
    let mut out = Vec::new();
    let mut session = |n: u32, requests: Vec<(RequestType, &[Ask], &'static str)>| {
        let id = format!("pgw.gyro.test;first-interval;{n}");
        let mut sent: Vec<(CcRequest, &'static str)> = requests
            .into_iter()
            .enumerate()
            .map(|(number, (kind, asks, what))| {
                let mut r = ccr(gw, &id, kind, number as u32, asks);
                r.end_to_end = gw.ids | (n << 8) | number as u32;
                (r, what)
            })
            .collect();
        out.append(&mut sent);
    };
    // Both services reserved by the CCR-Initial; service 2's usage is
    // first reported by request 2 (request 1 reports service 1 only): it
    // pays the first minute (0.60), as service 1's did in request 1.
    session(
        1,
        vec![
            (Initial, &[(1, None, true), (2, None, true)], "two services"),
            (Update, &[(1, Some(5), true)], "service 1 reported"),
            (Update, &[(2, Some(5), true)], "service 2 first reported"),
            (
                Termination,
                &[(1, Some(3), false), (2, Some(3), false)],
                "both end",
            ),
        ],
    );
    // Service 2's first report comes with the CCR-Terminate (request 2):
    // the first minute too.
    session(
        2,
        vec![
            (Initial, &[(1, None, true), (2, None, true)], "two services"),
            (Update, &[(1, Some(5), true)], "service 1 reported"),
            (
                Termination,
                &[(1, Some(2), false), (2, Some(7), false)],
                "service 2 first reported at the end",
            ),
        ],
    );
    // Request 1 reports service 1 and asks service 2 for more without
    // reporting it: service 2's opening reservation goes, the one request
    // 1 made in its place is not the opening one (5 s cost 0.05).
    session(
        3,
        vec![
            (Initial, &[(1, None, true), (2, None, true)], "two services"),
            (
                Update,
                &[(1, Some(5), true), (2, None, true)],
                "service 2 reserved again",
            ),
            (
                Termination,
                &[(2, Some(5), false)],
                "service 2 reported on the new reservation",
            ),
        ],
    );
    // The CCR-Initial reserves service 1 only; request 1 reports usage of
    // service 2, which no reservation covered: no first minute (0.05),
    // nor on the reservation request 1 then makes.
    session(
        4,
        vec![
            (Initial, &[(1, None, true)], "one service"),
            (
                Update,
                &[(1, Some(5), true), (2, Some(5), true)],
                "service 2 reported without a reservation",
            ),
            (
                Termination,
                &[(2, Some(4), false)],
                "service 2 reported on a later reservation",
            ),
        ],
    );
    out
}

/// What a CCA says, for comparing the two backends: its Result-Code and,
/// per MSCC, its rating group, Result-Code and granted seconds.
type Said = (Option<u32>, Vec<(Option<u32>, Option<u32>, Option<u32>)>);

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
                .and_then(|g| g.child(avp::CC_TIME))
                .and_then(|c| c.u32().ok());
            (rg, code, granted)
        })
        .collect();
    (result, mscc)
}

/// The usage CDRs of `records`: (session, request number, rating group,
/// rated units, amount), in order.
fn usage(records: &[Value]) -> Vec<(String, u64, u64, u64, i64)> {
    let mut v: Vec<_> = records
        .iter()
        .filter(|r| r["record_type"] == "usage")
        .map(|r| {
            (
                r["session_id"].as_str().unwrap_or("").to_string(),
                r["request_number"].as_u64().unwrap_or(0),
                r["rating_group"].as_u64().unwrap_or(0),
                r["rated_units"].as_u64().unwrap_or(0),
                r["amount"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    v.sort();
    v
}

/// Every CDR the embedded store wrote under `data` (closed and open
/// files).
fn embedded_cdrs(data: &Path) -> Vec<Value> {
    fn walk(dir: &Path, out: &mut Vec<Value>) {
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

#[test]
fn the_first_interval_is_paid_by_the_opening_reservation_on_redis_as_on_the_embedded_store() {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let opts = options(&seeds, "first-interval", "checker");
    let namespace = opts.namespace.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = scratch("redis-serve-first-interval");
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5600_0000,
    };
    let plans = charging();
    let script = script(&gw);

    // The embedded store.
    let embedded = embedded_node(&root, &plans);
    let mut to_embedded = gw.connect(embedded.diameter);
    let expected: Vec<Said> = script
        .iter()
        .enumerate()
        .map(|(i, (r, _))| said(&exchange(&mut to_embedded, &gw.encode(r, i as u32))))
        .collect();

    // Two nodes on the Redis Cluster: a session's requests alternate
    // between them.
    let a = Node::new(&root, "node-a", &seeds, &namespace);
    let b = Node::new(&root, "node-b", &seeds, &namespace);
    std::fs::write(a.dir.join("charging.toml"), &plans).unwrap();
    std::fs::write(b.dir.join("charging.toml"), &plans).unwrap();
    let (redis_a, redis_b) = (a.start(), b.start());
    let mut to_a: Client = gw.connect(a.diameter);
    let mut to_b: Client = gw.connect(b.diameter);
    let answered: Vec<Said> = script
        .iter()
        .enumerate()
        .map(|(i, (r, _))| {
            let c = if r.request_number % 2 == 1 {
                &mut to_b
            } else {
                &mut to_a
            };
            said(&exchange(c, &gw.encode(r, i as u32)))
        })
        .collect();

    for (((_, what), e), r) in script.iter().zip(&expected).zip(&answered) {
        assert_eq!(
            r, e,
            "{what}: Redis answered {r:?}, the embedded store {e:?}"
        );
    }
    for (s, (_, what)) in expected.iter().zip(&script) {
        assert_eq!(s.0, Some(2001), "{what}: {s:?}");
    }

    // The same money on both: 0.60 + 0.60 + 0.03 + 0.03; 0.60 + 0.02 +
    // 0.60; 0.60 + 0.05; 0.60 + 0.05 + 0.04.
    let e = embedded.account(MSISDN);
    let r = redis_a.account(MSISDN);
    assert_eq!(
        (
            e["balance"].as_i64(),
            e["reserved"].as_i64(),
            e["debited"].as_i64()
        ),
        (Some(10000 - 382), Some(0), Some(382)),
        "{e}"
    );
    assert_eq!(
        (&r["balance"], &r["reserved"], &r["debited"]),
        (&e["balance"], &e["reserved"], &e["debited"]),
        "{r}\n{e}"
    );
    let ledger = rt.block_on(RedisLedger::connect(opts)).expect("connect");
    let books = books_once_tcc_passed(&rt, &ledger, Duration::from_secs(3 * TCC_SECS + 10));
    assert!(books.is_balanced(), "{books:?}");

    // The same usage CDRs.
    let files = cdrs_match_debits(
        &rt,
        &ledger,
        &[a.data().join("cdr"), b.data().join("cdr")],
        &[ACCOUNT],
        Duration::from_secs(20),
    );
    let on_redis: Vec<Value> = files.values().flatten().cloned().collect();
    drop(to_embedded);
    let embedded_data = embedded.data.clone();
    embedded.stop();
    let on_embedded = embedded_cdrs(&embedded_data);
    let s = |n: u32| format!("pgw.gyro.test;first-interval;{n}");
    assert_eq!(
        usage(&on_embedded),
        vec![
            (s(1), 1, 1, 60, 60),
            (s(1), 2, 2, 60, 60),
            (s(1), 3, 1, 3, 3),
            (s(1), 3, 2, 3, 3),
            (s(2), 1, 1, 60, 60),
            (s(2), 2, 1, 2, 2),
            (s(2), 2, 2, 60, 60),
            (s(3), 1, 1, 60, 60),
            (s(3), 2, 2, 5, 5),
            (s(4), 1, 1, 60, 60),
            (s(4), 1, 2, 5, 5),
            (s(4), 2, 2, 4, 4),
        ],
        "{on_embedded:?}"
    );
    assert_eq!(usage(&on_redis), usage(&on_embedded), "{on_redis:?}");

    drop(to_a);
    drop(to_b);
    redis_a.stop();
    redis_b.stop();
    let _ = std::fs::remove_dir_all(&root);
}
