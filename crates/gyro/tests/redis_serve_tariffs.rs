//! A price change within a grant on the Redis Cluster ledger, against
//! the embedded store: the same plan (night data at 0.50 a MB until a
//! switch a few minutes from now, day data at 1.00 a MB after it) and the
//! same CCRs, over real sockets, to `gyro serve` on a real Redis Cluster
//! (two nodes: the session moves to the second half-way) and to `gyro
//! serve` on its own data directory. Both answer the same: each grant
//! carries the Tariff-Time-Change and holds the dearer price; a usage
//! report split by Tariff-Change-Usage is priced in two parts, each at
//! its rate, with a CDR for each part; usage not reported after the
//! change is priced at the rate in force when it began. A call's first
//! grant and the usage it reports are priced with the first interval (a
//! whole minute), later usage by the second. Then both hold the same
//! money and wrote the same usage CDRs.

mod redis_serve_support;
#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use std::path::Path;
use std::time::Duration;

use gyro_charging::{CcRequest, RequestType, ServiceUnits};
use gyro_diameter::codes::avp;
use gyro_diameter::Message;
use gyro_store::redis::RedisLedger;
use redis_serve_support::*;
use redis_support::{cluster_nodes, options};
use serde_json::Value;
use support::common::Client;
use support::gateway::{exchange, Gateway};
use support::scratch;
use support::server::Server;

const ACCOUNT: u64 = 7200;
const MSISDN: &str = "46709720001";
const MB: u64 = 1_000_000;

/// Night data (0.50 a MB) until `night_end` (minutes after midnight UTC),
/// day data (1.00 a MB) after it; voice at 0.01 a second, the first
/// minute charged whole; an account with 100.00.
fn charging(night_end: u32) -> String {
    let start = (night_end + 24 * 60 - 6 * 60) % (24 * 60);
    let hm = |m: u32| format!("{:02}:{:02}", m / 60, m % 60);
    let end = if night_end == 0 {
        "24:00".to_string()
    } else {
        hm(night_end)
    };
    format!(
        r#"
currency = "SEK"

[engine]
node_id = "tariffs"
supervision_secs = {TCC_SECS}
lenient = true

[plans.smart]
time_zone = "UTC"

[[plans.smart.rate]]
name = "data-night"
service_context = "32251@3gpp.org"
rating_group = 10
hours = "{start}-{end}"
unit = "octets"
price = 50
per = 1000000
default_quota = 10000000
validity_time = 3600

[[plans.smart.rate]]
name = "data-day"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 100
per = 1000000
default_quota = 10000000
validity_time = 3600

[[plans.smart.rate]]
name = "voice"
service_context = "32260@3gpp.org"
unit = "seconds"
price = 60
per = 60
first_interval = 60
default_quota = 300

[[account]]
id = {ACCOUNT}
balance = 10000
plan = "smart"
subscribers = ["e164:{MSISDN}"]
"#,
        start = hm(start),
    )
}

/// What a CCA says, for comparing the two backends: its Result-Code and,
/// per MSCC, its rating group, Result-Code, granted octets,
/// Tariff-Time-Change (Unix seconds) and whether it carries a
/// Final-Unit-Indication.
#[derive(Debug, PartialEq, Eq)]
struct Said {
    result: Option<u32>,
    mscc: Vec<Service>,
}

/// An MSCC's rating group, Result-Code, granted octets,
/// Tariff-Time-Change (Unix seconds) and whether it carries a
/// Final-Unit-Indication.
type Service = (Option<u32>, Option<u32>, Option<u64>, Option<i64>, bool);

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
            let gsu = a.child(avp::GRANTED_SERVICE_UNIT);
            let granted = gsu
                .as_ref()
                .and_then(|g| g.child(avp::CC_TOTAL_OCTETS))
                .and_then(|c| c.u64().ok());
            let change = gsu
                .as_ref()
                .and_then(|g| g.child(avp::TARIFF_TIME_CHANGE))
                .and_then(|c| c.time().ok())
                .map(|t| t.to_unix());
            let fui = a.child(avp::FINAL_UNIT_INDICATION).is_some();
            (rg, code, granted, change, fui)
        })
        .collect();
    Said { result, mscc }
}

/// The CCRs of the test, in order: (request, what it is, whether it goes
/// to the second Redis node).
fn script(gw: &Gateway) -> Vec<(CcRequest, &'static str, bool)> {
    let session = "pgw.gyro.test;tariffs;1";
    let ccr = |kind, number, used: u64, after: Option<u64>| {
        let mut r = gw.data_ccr(session, MSISDN, kind, number, used);
        r.mscc[0].used_after = after.map(|u| ServiceUnits {
            total_octets: Some(u),
            ..ServiceUnits::default()
        });
        r
    };
    let voice = |session: &str, e2e: u32, kind, number, used: Option<u32>| {
        let mut r = gw.data_ccr(session, MSISDN, kind, number, 0);
        r.end_to_end = gw.ids | e2e | number;
        r.service_context = "32260@3gpp.org".into();
        r.mscc[0].rating_group = None;
        r.mscc[0].requested = (kind != RequestType::Termination).then(|| ServiceUnits {
            time: Some(10),
            ..ServiceUnits::default()
        });
        r.mscc[0].used = used.map(|t| ServiceUnits {
            time: Some(t),
            ..ServiceUnits::default()
        });
        r
    };
    let call = "pgw.gyro.test;tariffs;call-1";
    let open = "pgw.gyro.test;tariffs;call-2";
    vec![
        (ccr(RequestType::Initial, 0, 0, None), "initial", false),
        // 4 MB before the change (2.00), 2 MB after it (2.00).
        (
            ccr(RequestType::Update, 1, 6 * MB, Some(2 * MB)),
            "split",
            false,
        ),
        // 3 MB, none reported after the change: at the night rate (1.50).
        (ccr(RequestType::Update, 2, 3 * MB, None), "before", true),
        // 1 MB, all of it after the change (1.00).
        (
            ccr(RequestType::Termination, 3, MB, Some(MB)),
            "after",
            true,
        ),
        // A call: its first grant (10 s) holds the first minute (0.60);
        // 5 s of it cost the first minute, 30 s more 0.30.
        (
            voice(call, 0x200, RequestType::Initial, 0, None),
            "call",
            false,
        ),
        (
            voice(call, 0x200, RequestType::Update, 1, Some(5)),
            "first minute",
            true,
        ),
        (
            voice(call, 0x200, RequestType::Termination, 2, Some(30)),
            "call ends",
            false,
        ),
        // A call left open: its grant holds the first minute.
        (
            voice(open, 0x300, RequestType::Initial, 0, None),
            "open call",
            true,
        ),
    ]
}

/// The usage CDRs of `records`: (request number, tariff change, rate,
/// rated units, total octets, amount), in order.
fn usage(records: &[Value]) -> Vec<(u64, String, String, u64, u64, i64)> {
    let mut v: Vec<_> = records
        .iter()
        .filter(|r| r["record_type"] == "usage")
        .map(|r| {
            (
                r["request_number"].as_u64().unwrap_or(0),
                r["tariff_change"].as_str().unwrap_or("").to_string(),
                r["rate"].as_str().unwrap_or("").to_string(),
                r["rated_units"].as_u64().unwrap_or(0),
                r["total_octets"].as_u64().unwrap_or(0),
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
fn a_price_change_within_a_grant_is_charged_on_redis_as_on_the_embedded_store() {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let opts = options(&seeds, "tariffs", "checker");
    let namespace = opts.namespace.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = scratch("redis-serve-tariffs");
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5400_0000,
    };
    // The night ends 10 to 11 minutes from now, on a whole minute.
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let change_s = (now_s / 60 + 11) * 60;
    let night_end = ((change_s / 60) % (24 * 60)) as u32;
    let plans = charging(night_end);
    let script = script(&gw);

    // The embedded store.
    let embedded = embedded_node(&root, &plans);
    let mut to_embedded = gw.connect(embedded.diameter);
    let expected: Vec<Said> = script
        .iter()
        .enumerate()
        .map(|(i, (r, _, _))| said(&exchange(&mut to_embedded, &gw.encode(r, i as u32))))
        .collect();

    // Two nodes on the Redis Cluster: the session starts at the first and
    // goes on at the second (which finds it in the cluster).
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
        .map(|(i, (r, _, second))| {
            let c = if *second { &mut to_b } else { &mut to_a };
            said(&exchange(c, &gw.encode(r, i as u32)))
        })
        .collect();

    for (((_, what, _), e), r) in script.iter().zip(&expected).zip(&answered) {
        assert_eq!(
            r, e,
            "{what}: Redis answered {r:?}, the embedded store {e:?}"
        );
    }
    // The story both told: every grant names the change.
    let grant = Some((
        Some(10),
        Some(2001),
        Some(10 * MB),
        Some(change_s as i64),
        false,
    ));
    for s in &expected[..3] {
        assert_eq!(s.result, Some(2001), "{s:?}");
        assert_eq!(s.mscc.first().cloned(), grant, "{s:?}");
    }
    for s in &expected[3..] {
        assert_eq!(s.result, Some(2001), "{s:?}");
    }

    // The same money on both: 2.00 + 2.00, 1.50, 1.00 of data, 0.60 +
    // 0.30 of voice; the open call holds 0.60.
    let e = embedded.account(MSISDN);
    let r = redis_a.account(MSISDN);
    assert_eq!(
        (
            e["balance"].as_i64(),
            e["reserved"].as_i64(),
            e["debited"].as_i64()
        ),
        (Some(10000 - 740 - 60), Some(60), Some(740)),
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

    // The same usage CDRs: a part before and a part after the change,
    // each at its rate.
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
    let s = |x: &str| x.to_string();
    assert_eq!(
        usage(&on_embedded),
        vec![
            (1, s(""), s("voice"), 60, 0, 60),
            (1, s("after"), s("data-day"), 2 * MB, 2 * MB, 200),
            (1, s("before"), s("data-night"), 4 * MB, 4 * MB, 200),
            (2, s(""), s("data-night"), 3 * MB, 3 * MB, 150),
            (2, s(""), s("voice"), 30, 0, 30),
            (3, s("after"), s("data-day"), MB, MB, 100),
            (3, s("before"), s("data-night"), 0, 0, 0),
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

/// What an event's CCA says: its Result-Code, its MSCC's, the
/// Check-Balance-Result and the Cost-Information's value.
type EventSaid = (Option<u32>, Option<u32>, Option<u32>, Option<i64>);

fn event_said(cca: &[u8]) -> EventSaid {
    let m = Message::parse(cca).expect("a CCA");
    let result = m.find(avp::RESULT_CODE).and_then(|a| a.u32().ok());
    let mscc = m
        .find(avp::MULTIPLE_SERVICES_CREDIT_CONTROL)
        .and_then(|a| a.child(avp::RESULT_CODE))
        .and_then(|c| c.u32().ok());
    let check = m.find(avp::CHECK_BALANCE_RESULT).and_then(|a| a.u32().ok());
    let cost = m
        .find(avp::COST_INFORMATION)
        .and_then(|c| c.child(avp::UNIT_VALUE))
        .and_then(|u| u.child(avp::VALUE_DIGITS))
        .and_then(|v| v.i64().ok());
    (result, mscc, check, cost)
}

/// The event CDRs of `records`: (session, requested action, Result-Code,
/// amount, rated units, rate, total octets), in order.
fn events(records: &[Value]) -> Vec<(String, String, u64, i64, u64, String, u64)> {
    let mut v: Vec<_> = records
        .iter()
        .filter(|r| r["record_type"] == "event")
        .map(|r| {
            (
                r["session_id"].as_str().unwrap_or("").to_string(),
                r["requested_action"].as_str().unwrap_or("").to_string(),
                r["result_code"].as_u64().unwrap_or(0),
                r["amount"].as_i64().unwrap_or(-1),
                r["rated_units"].as_u64().unwrap_or(0),
                r["rate"].as_str().unwrap_or("").to_string(),
                r["total_octets"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    v.sort();
    v
}

/// CHECK_BALANCE and PRICE_ENQUIRY on Redis write the event CDR the
/// embedded store writes (amount 0, the answer's Result-Code), once for a
/// retransmission, also when the account is blocked (4010).
#[test]
fn balance_checks_and_price_enquiries_write_event_cdrs_on_redis_as_on_the_embedded_store() {
    use gyro_charging::RequestedAction;
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let opts = options(&seeds, "events", "checker");
    let namespace = opts.namespace.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = scratch("redis-serve-events");
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5500_0000,
    };
    // No price change near: the night lasts another hour or so.
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let night_end = ((now_s / 60 + 90) % (24 * 60)) as u32;
    let plans = charging(night_end);
    let event = |n: u32, action| {
        let mut r = gw.data_ccr(
            &format!("pgw.gyro.test;events;{n}"),
            MSISDN,
            RequestType::Event,
            0,
            0,
        );
        r.end_to_end = gw.ids | (n << 4);
        r.requested_action = Some(action);
        r.mscc[0].used = None;
        r.mscc[0].requested = Some(ServiceUnits {
            total_octets: Some(2 * MB),
            ..ServiceUnits::default()
        });
        r
    };
    let mut again = event(1, RequestedAction::CheckBalance);
    again.retransmit = true;
    let before = [
        event(1, RequestedAction::CheckBalance),
        event(2, RequestedAction::PriceEnquiry),
        again,
    ];
    let after = [
        event(3, RequestedAction::CheckBalance),
        event(4, RequestedAction::PriceEnquiry),
    ];
    let block = |s: &Server| {
        let (status, _, body) = s.call(
            "PATCH",
            &format!("/v1/accounts/{MSISDN}"),
            Some(serde_json::json!({ "status": "blocked" })),
        );
        assert_eq!(status, 200, "{body}");
    };
    let run = |c: &mut Client, s: &Server| -> Vec<EventSaid> {
        let mut out: Vec<EventSaid> = before
            .iter()
            .enumerate()
            .map(|(i, r)| event_said(&exchange(c, &gw.encode(r, i as u32 % 2))))
            .collect();
        block(s);
        out.extend(
            after
                .iter()
                .enumerate()
                .map(|(i, r)| event_said(&exchange(c, &gw.encode(r, 8 + i as u32)))),
        );
        out
    };

    let embedded = embedded_node(&root, &plans);
    let mut to_embedded = gw.connect(embedded.diameter);
    let expected = run(&mut to_embedded, &embedded);

    let node = Node::new(&root, "node-events", &seeds, &namespace);
    std::fs::write(node.dir.join("charging.toml"), &plans).unwrap();
    let redis = node.start();
    let mut to_redis = gw.connect(node.diameter);
    let answered = run(&mut to_redis, &redis);
    assert_eq!(answered, expected);
    assert_eq!(
        expected,
        vec![
            (Some(2001), Some(2001), Some(0), None),
            (Some(2001), Some(2001), None, Some(100)),
            (Some(2001), Some(2001), Some(0), None),
            (Some(4010), Some(4010), None, None),
            (Some(4010), Some(4010), None, None),
        ],
        "ENOUGH_CREDIT (0); 2 MB at 0.50 a MB; blocked"
    );

    let ledger = rt.block_on(RedisLedger::connect(opts)).expect("connect");
    // Each has amount 0: wait until all four are exported.
    let t = std::time::Instant::now();
    let on_redis = loop {
        let all: Vec<Value> = exported(&[node.data().join("cdr")])
            .into_values()
            .flatten()
            .collect();
        if events(&all).len() >= 4 || t.elapsed() > Duration::from_secs(20) {
            break all;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // Nothing debited; the slot's sequence has no gap or repeat.
    cdrs_match_debits(
        &rt,
        &ledger,
        &[node.data().join("cdr")],
        &[ACCOUNT],
        Duration::from_secs(20),
    );
    drop(to_embedded);
    let embedded_data = embedded.data.clone();
    embedded.stop();
    let on_embedded = embedded_cdrs(&embedded_data);
    let s = |x: &str| x.to_string();
    let session = |n: u32| format!("pgw.gyro.test;events;{n}");
    assert_eq!(
        events(&on_embedded),
        vec![
            (
                session(1),
                s("check-balance"),
                2001,
                0,
                0,
                s("data-night"),
                2 * MB
            ),
            (
                session(2),
                s("price-enquiry"),
                2001,
                0,
                0,
                s("data-night"),
                2 * MB
            ),
            (
                session(3),
                s("check-balance"),
                4010,
                0,
                0,
                s("data-night"),
                2 * MB
            ),
            (
                session(4),
                s("price-enquiry"),
                4010,
                0,
                0,
                s("data-night"),
                2 * MB
            ),
        ],
        "{on_embedded:?}"
    );
    assert_eq!(events(&on_redis), events(&on_embedded), "{on_redis:?}");

    drop(to_redis);
    redis.stop();
    let _ = std::fs::remove_dir_all(&root);
}
