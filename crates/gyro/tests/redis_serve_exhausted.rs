//! A CCR-Update whose services are all refused for want of credit, on the
//! Redis Cluster ledger against the embedded store: the service's MSCC is
//! 4012 DIAMETER_CREDIT_LIMIT_REACHED, the command 2001, and the session
//! stays open (a later CCR-Update is charged, not 5002; the
//! CCR-Terminate ends it). Only a CCR-Initial none of whose services
//! succeeded fails with the first one's code. The same CCRs go over real
//! sockets to `gyro serve` on its own data directory and to two `gyro
//! serve` nodes on a real Redis Cluster (each session's requests
//! alternate between them); both answer the same and hold the same money.

mod redis_serve_support;
#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use gyro_charging::{CcRequest, RequestType};
use gyro_diameter::codes::avp;
use gyro_diameter::Message;
use redis_serve_support::*;
use redis_support::{cluster_nodes, options};
use support::common::Client;
use support::gateway::{exchange, Gateway};
use support::scratch;

const MSISDN: &str = "46709750001";

/// Data at 1.00 a MB (rating group 10); an account with 0.50.
fn charging() -> String {
    format!(
        r#"
currency = "SEK"

[engine]
node_id = "exhausted"
supervision_secs = {TCC_SECS}
lenient = true

[[tariff]]
name = "data-rg10"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 100
per = 1000000
increment = 1000
default_quota = 10000000
validity_time = 600

[[account]]
id = 7501
balance = 50
subscribers = ["e164:{MSISDN}"]
"#
    )
}

/// The CCRs of the test, in order, with what each is.
fn script(gw: &Gateway) -> Vec<(CcRequest, &'static str)> {
    let id = "pgw.gyro.test;exhausted;1";
    let ccr = |kind, number, used| gw.data_ccr(id, MSISDN, kind, number, used);
    vec![
        // 0.50 buys 500,000 octets.
        (ccr(RequestType::Initial, 0, 0), "partial grant"),
        (ccr(RequestType::Update, 1, 500_000), "used up, more asked"),
        (ccr(RequestType::Update, 2, 0), "asked again"),
        (ccr(RequestType::Termination, 3, 0), "end"),
    ]
}

/// What a CCA says: its Result-Code and, per MSCC, its Result-Code and
/// granted octets.
type Said = (Option<u32>, Vec<(Option<u32>, Option<u64>)>);

fn said(cca: &[u8]) -> Said {
    let m = Message::parse(cca).expect("a CCA");
    let result = m.find(avp::RESULT_CODE).and_then(|a| a.u32().ok());
    let mscc = m
        .avps()
        .filter_map(|a| a.ok())
        .filter(|a| a.code() == avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code)
        .map(|a| {
            let code = a.child(avp::RESULT_CODE).and_then(|c| c.u32().ok());
            let granted = a
                .child(avp::GRANTED_SERVICE_UNIT)
                .and_then(|g| g.child(avp::CC_TOTAL_OCTETS))
                .and_then(|c| c.u64().ok());
            (code, granted)
        })
        .collect();
    (result, mscc)
}

#[test]
fn an_update_refused_for_credit_keeps_its_session_on_redis_as_on_the_embedded_store() {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let opts = options(&seeds, "exhausted", "checker");
    let namespace = opts.namespace.clone();
    let root = scratch("redis-serve-exhausted");
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5800_0000,
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
    assert_eq!(
        expected,
        vec![
            (Some(2001), vec![(Some(2001), Some(500_000))]),
            (Some(2001), vec![(Some(4012), None)]),
            (Some(2001), vec![(Some(4012), None)]),
            (Some(2001), vec![]),
        ]
    );

    // Two nodes on the Redis Cluster: the requests alternate between them.
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

    // The same money on both: 0.50 debited.
    let e = embedded.account(MSISDN);
    let r = redis_a.account(MSISDN);
    assert_eq!(e["debited"].as_i64(), Some(50), "{e}");
    assert_eq!(
        (&r["balance"], &r["reserved"], &r["debited"]),
        (&e["balance"], &e["reserved"], &e["debited"]),
        "{r}\n{e}"
    );

    drop(to_embedded);
    drop(to_a);
    drop(to_b);
    embedded.stop();
    redis_a.stop();
    redis_b.stop();
    let _ = std::fs::remove_dir_all(&root);
}
