//! Two `gyro serve` nodes sharing their balances in a real Redis Cluster
//! (the one the Redis ledger tests use; see `redis_support`), under `gyro
//! load` on both; one is killed with SIGKILL and restarted. Then every
//! charge has exactly one exported CDR, each slot's CDR sequence has no
//! gaps, and the books of every account add up once the dead node's
//! reservations have expired (Tcc). A session opened on the killed node
//! (two services) goes on at the other node without Subscription-Id, as
//! a gateway that fails over sends it (RFC 8506 section 5.7): its
//! CCR-Update, sent twice (the second time with the T flag), is charged
//! once, and its CCR-Terminate, reporting one service only, releases both
//! reservations. A session neither node knows is answered 5002.

mod redis_serve_support;
#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use gyro_charging::{AccountId, RequestType};
use gyro_store::redis::RedisLedger;
use redis_serve_support::*;
use redis_support::{cluster_nodes, options};
use support::common::{avp_u32, result_code};
use support::gateway::{exchange, Gateway};
use support::server::Server;
use support::{data_ccr, free_port, scratch, serve};

#[test]
fn two_nodes_share_the_books_and_a_killed_node_loses_no_cdr_and_no_money() {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let opts = options(&seeds, "serve", "checker");
    let namespace = opts.namespace.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = scratch("redis-serve");
    let a = Node::new(&root, "node-a", &seeds, &namespace);
    let b = Node::new(&root, "node-b", &seeds, &namespace);
    let node_a = a.start();
    let node_b = b.start();

    // A session opened on node A, before it dies, with two services
    // (rating groups 10 and 20).
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5100_0000,
    };
    let session = "pgw.gyro.test;failover;1";
    let mut to_a = gw.connect(a.diameter);
    let mut ccr_i = data_ccr(
        gw.host,
        gw.ids,
        session,
        FAILOVER_MSISDN,
        RequestType::Initial,
        0,
        0,
    );
    let mut rg20 = ccr_i.mscc[0].clone();
    rg20.rating_group = Some(20);
    ccr_i.mscc.push(rg20);
    let cca = exchange(&mut to_a, &gw.encode(&ccr_i, 0));
    assert_eq!(result_code(&cca), Some(2001));
    let failover = AccountId(FAILOVER_ACCOUNT);
    let ledger = rt.block_on(RedisLedger::connect(opts)).expect("connect");
    let held = |ledger: &RedisLedger| {
        let r = rt.block_on(ledger.reservations(failover)).unwrap();
        r.iter().filter(|r| r.session == session).count()
    };
    assert_eq!(held(&ledger), 2, "one reservation per service");
    // And one that nobody will end: node A dies holding it, so its
    // reservation goes at the Tcc deadline with a session-end CDR
    // (whatever the load on node A managed to open before the kill).
    let orphan = data_ccr(
        gw.host,
        gw.ids,
        "pgw.gyro.test;orphan;1",
        "46700000199",
        RequestType::Initial,
        0,
        0,
    );
    let cca = exchange(&mut to_a, &gw.encode(&orphan, 9));
    assert_eq!(result_code(&cca), Some(2001));

    // Load on both nodes; node A killed half-way.
    let load_a = load(a.diameter, 3, "load-a.gyro.test");
    let load_b = load(b.diameter, 3, "load-b.gyro.test");
    std::thread::sleep(Duration::from_millis(1500));
    node_a.kill();
    drop(to_a);
    let answered_a = answered(load_a);
    let answered_b = answered(load_b);
    assert!(answered_b > 100, "node B kept answering: {answered_b}");

    // The session's CCR-Update at node B, without Subscription-Id, twice
    // (the second a retransmission, T flag): one charge of 10 MiB at 1.00
    // per 100 MiB.
    let mut to_b = gw.connect(b.diameter);
    let used = 10 * 1024 * 1024;
    let mut ccr_u = data_ccr(
        gw.host,
        gw.ids,
        session,
        FAILOVER_MSISDN,
        RequestType::Update,
        1,
        used,
    );
    ccr_u.subscription_ids.clear();
    let first = exchange(&mut to_b, &gw.encode(&ccr_u, 1));
    ccr_u.retransmit = true;
    let again = exchange(&mut to_b, &gw.encode(&ccr_u, 1));
    assert_eq!(result_code(&first), Some(2001));
    assert_eq!(result_code(&again), Some(2001));
    assert_eq!(
        avp_u32(&first, gyro_diameter::codes::avp::CC_REQUEST_NUMBER),
        Some(1)
    );
    let state = rt
        .block_on(ledger.account(failover))
        .unwrap()
        .expect("the failover account");
    assert_eq!(state.debited, 10, "charged once: {state:?}");

    // Its CCR-Terminate at node B, without Subscription-Id, reporting
    // rating group 10 only: charged, and both reservations released (not
    // left to the Tcc deadline); its retransmission changes nothing.
    let mut ccr_t = data_ccr(
        gw.host,
        gw.ids,
        session,
        FAILOVER_MSISDN,
        RequestType::Termination,
        2,
        1024,
    );
    ccr_t.subscription_ids.clear();
    assert_eq!(
        result_code(&exchange(&mut to_b, &gw.encode(&ccr_t, 2))),
        Some(2001)
    );
    let ended = rt.block_on(ledger.account(failover)).unwrap().unwrap();
    assert_eq!(
        (ended.debited, ended.reserved, held(&ledger)),
        (11, 0, 0),
        "1 KiB charged, nothing left reserved: {ended:?}"
    );
    ccr_t.retransmit = true;
    assert_eq!(
        result_code(&exchange(&mut to_b, &gw.encode(&ccr_t, 2))),
        Some(2001)
    );
    assert_eq!(
        rt.block_on(ledger.account(failover)).unwrap().unwrap(),
        ended
    );

    // Node A comes back (same node id, same data directory) and serves.
    let node_a = a.start();
    let load_a2 = load(a.diameter, 1, "load-a2.gyro.test");
    assert!(answered(load_a2) > 10, "node A serves again");

    // At node A, which never saw it end, the ended session is unknown, as
    // is one nobody opened: 5002, nothing charged.
    let mut to_a = gw.connect(a.diameter);
    let mut late = data_ccr(
        gw.host,
        gw.ids,
        session,
        FAILOVER_MSISDN,
        RequestType::Update,
        3,
        1024,
    );
    assert_eq!(
        result_code(&exchange(&mut to_a, &gw.encode(&late, 3))),
        Some(5002)
    );
    late.session_id = "pgw.gyro.test;never-opened;1".into();
    assert_eq!(
        result_code(&exchange(&mut to_a, &gw.encode(&late, 4))),
        Some(5002)
    );
    assert_eq!(
        rt.block_on(ledger.account(failover)).unwrap().unwrap(),
        ended
    );

    // Reservations of sessions nobody ended (the killed node's, and those
    // the load left open) go after Tcc; then the books add up with
    // nothing reserved.
    let books = books_once_tcc_passed(&rt, &ledger, Duration::from_secs(TCC_SECS + 15));
    assert_eq!(books.accounts, 201);
    assert!(books.debited > 0);

    // Every charge has its one CDR in the exported files: per account the
    // CDRs add up to what was debited, each (slot, sequence) once, and
    // each slot's sequence numbers run from 1 without a gap.
    let dirs = [a.data().join("cdr"), b.data().join("cdr")];
    let accounts: Vec<u64> = (1000..1200).chain([FAILOVER_ACCOUNT]).collect();
    let files = cdrs_match_debits(&rt, &ledger, &dirs, &accounts, Duration::from_secs(15));
    // Sessions nobody ended were closed by their Tcc deadline, each with a
    // session-end CDR (of amount 0: the CDRs above may add up before the
    // export of the last expiries, so they are waited for): the orphan
    // session at least.
    let expired = |files: &std::collections::BTreeMap<String, Vec<serde_json::Value>>| {
        files.values().flatten().any(|r| {
            r["record_type"] == "session-end"
                && r["closing_cause"] == "supervision-expired"
                && r["session_id"] == "pgw.gyro.test;orphan;1"
        })
    };
    let mut files = files;
    let waited = std::time::Instant::now();
    while !expired(&files) && waited.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
        files = exported(&dirs);
    }
    assert!(expired(&files), "the orphan session did not expire");
    // Usage CDRs name their subscriber, also for requests without
    // Subscription-Id (the node remembers the session's).
    for r in files.values().flatten() {
        if r["record_type"] == "usage" {
            assert!(
                r["subscriber"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("e164:")),
                "{r}"
            );
        }
    }
    // The failover session: one usage CDR for its CCR-Update, one for its
    // CCR-Terminate, and no expiry (the CCR-Terminate released it all).
    assert_eq!(usage_cdrs(&files, session, 1), 1);
    assert_eq!(usage_cdrs(&files, session, 2), 1);
    assert!(
        !files
            .values()
            .flatten()
            .any(|r| r["session_id"] == session && r["record_type"] == "session-end"),
        "the failover session expired instead of ending"
    );

    // /metrics of node B shows the Redis families.
    let metrics = node_b.metrics();
    for family in [
        "gyro_redis_round_trip_seconds_bucket",
        "gyro_redis_batch_steps_count",
        "gyro_redis_steps_total",
        "gyro_redis_errors_total{kind=\"unavailable\"}",
        "gyro_redis_session_lookups",
        "gyro_diameter_requests_total{",
    ] {
        assert!(metrics.contains(family), "{family} missing:\n{metrics}");
    }
    let _ = answered_a;
    drop((to_a, to_b));
    node_a.stop();
    node_b.stop();
}

/// What a CCA says: Result-Code, and per MSCC its Result-Code, granted
/// octets and whether it carries a Final-Unit-Indication.
type Said = (Option<u32>, Vec<(Option<u32>, Option<u64>, bool)>);

fn said(answer: &[u8]) -> Said {
    use gyro_diameter::codes::avp;
    let m = support::common::parse(answer);
    let mscc = m
        .avps()
        .flatten()
        .filter(|a| a.code() == avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code)
        .map(|g| {
            let code = g.child(avp::RESULT_CODE).and_then(|a| a.u32().ok());
            let octets = g
                .child(avp::GRANTED_SERVICE_UNIT)
                .and_then(|u| u.child(avp::CC_TOTAL_OCTETS))
                .and_then(|a| a.u64().ok());
            (code, octets, g.child(avp::FINAL_UNIT_INDICATION).is_some())
        })
        .collect();
    (result_code(answer), mscc)
}

/// An SMS direct debit of one event (0.50).
fn sms(session: &str, msisdn: &str) -> gyro_charging::CcRequest {
    use gyro_charging::{CcRequest, RequestedAction, ServiceUnits, SubscriptionId};
    CcRequest {
        session_id: session.into(),
        origin_host: "smsc.gyro.test".into(),
        end_to_end: 0x7700_0000,
        request_type: RequestType::Event,
        request_number: 0,
        service_context: "32274@3gpp.org".into(),
        subscription_ids: vec![SubscriptionId::e164(msisdn)],
        requested_action: Some(RequestedAction::DirectDebiting),
        requested: Some(ServiceUnits {
            service_specific: Some(1),
            ..ServiceUnits::default()
        }),
        ..CcRequest::default()
    }
}

#[test]
fn a_node_on_the_cluster_answers_grants_limits_and_refusals_as_the_embedded_store_does() {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let opts = options(&seeds, "answers", "checker");
    let root = scratch("redis-answers");
    let node = Node::new(&root, "answers", &seeds, &opts.namespace);
    // A poor account: 0.25 pays for 25 MiB of data, not for an SMS.
    let poor = "46709000007";
    let chg = charging().replace("balance = 10000000", "balance = 10000000\n")
        + "\n[[tariff]]\nname = \"sms\"\nservice_context = \"32274@3gpp.org\"\n\
           unit = \"events\"\nprice = 50\nper = 1\ndefault_quota = 1\n\
           [[account]]\nid = 7\nbalance = 25\nsubscribers = [\"e164:46709000007\"]\n";
    std::fs::write(node.dir.join("charging.toml"), &chg).unwrap();
    let redis_node = node.start();
    let embedded_dir = root.join("embedded");
    std::fs::create_dir_all(&embedded_dir).unwrap();
    std::fs::write(embedded_dir.join("charging.toml"), &chg).unwrap();
    let embedded_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let embedded = Server::adopt(
        serve(
            embedded_addr,
            &embedded_dir.join("data"),
            &[
                "--charging",
                embedded_dir.join("charging.toml").to_str().unwrap(),
            ],
        ),
        embedded_addr,
        &embedded_dir.join("data"),
        None,
    );
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x6100_0000,
    };
    let script = |addr: SocketAddr| -> Vec<Said> {
        let mut c = gw.connect(addr);
        let mut out = Vec::new();
        let mut send = |req: &gyro_charging::CcRequest, n: u32| {
            out.push(said(&exchange(&mut c, &gw.encode(req, n))));
        };
        let mib = 1024 * 1024;
        let ccr = |s: &str, kind, n, used| data_ccr(gw.host, gw.ids, s, poor, kind, n, used);
        // A full grant of 10 MiB (0.10), then 10 MiB used and 10 more
        // granted: 0.05 left.
        send(&ccr("s1", RequestType::Initial, 0, 0), 0);
        send(&ccr("s1", RequestType::Update, 1, 10 * mib), 1);
        // What 0.05 pays for: 5 MiB, the final units.
        send(&ccr("s2", RequestType::Initial, 0, 0), 0);
        // Nothing left: 4012.
        send(&ccr("s3", RequestType::Initial, 0, 0), 0);
        // An SMS the account cannot pay: 4012, nothing charged.
        send(&sms("e1", poor), 0);
        // s1 ends having used 1 MiB of its 10: 0.09 back, then an SMS
        // can be paid... not quite (0.14 left but s2 holds 0.05): 0.09.
        send(&ccr("s1", RequestType::Termination, 2, mib), 2);
        send(&ccr("s2", RequestType::Termination, 1, 5 * mib), 1);
        // 0.50 still out of reach; an unknown subscriber is 5030.
        send(&sms("e2", poor), 0);
        send(&sms("e3", "46799999999"), 0);
        // A CCR-Update of a session never opened, and one after its
        // CCR-Terminate: 5002.
        send(&ccr("s9", RequestType::Update, 1, mib), 1);
        send(&ccr("s1", RequestType::Update, 3, mib), 3);
        out
    };
    let from_redis = script(node.diameter);
    let from_embedded = script(embedded_addr);
    assert_eq!(from_redis, from_embedded);
    // And what they said is what the scenario expects.
    assert_eq!(
        from_redis[0],
        (
            Some(2001),
            vec![(Some(2001), Some(10 * 1024 * 1024), false)]
        )
    );
    assert_eq!(
        from_redis[2],
        (Some(2001), vec![(Some(2001), Some(5 * 1024 * 1024), true)])
    );
    assert_eq!(from_redis[3].0, Some(4012));
    assert_eq!(from_redis[4].0, Some(4012));
    assert_eq!(from_redis[8].0, Some(5030));
    assert_eq!(from_redis[9].0, Some(5002));
    assert_eq!(from_redis[10].0, Some(5002));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ledger = rt.block_on(RedisLedger::connect(opts)).expect("connect");
    let poor = rt.block_on(ledger.account(AccountId(7))).unwrap().unwrap();
    assert_eq!(
        (poor.debited, poor.balance, poor.reserved),
        (16, 9, 0),
        "{poor:?}"
    );
    drop((redis_node, embedded));
}
