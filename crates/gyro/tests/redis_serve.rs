//! Two `gyro serve` nodes sharing their balances in a real Redis Cluster
//! (the one the Redis ledger tests use; see `redis_support`), under `gyro
//! load` on both; one is killed with SIGKILL and restarted. Then every
//! charge has exactly one exported CDR, each slot's CDR sequence has no
//! gaps, and the books of every account add up once the dead node's
//! reservations have expired (Tcc); a CCR-Update of a session opened on
//! the killed node, sent to the other node twice (the second time with
//! the T flag), is charged once.

#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gyro_charging::{AccountId, RequestType};
use gyro_store::redis::{Books, RedisLedger};
use redis_support::{cluster_nodes, options};
use serde_json::Value;
use support::common::{avp_u32, result_code};
use support::gateway::{exchange, Gateway};
use support::server::Server;
use support::{data_ccr, free_port, scratch, serve};

/// Tcc: a silent session's reservations go after this long.
const TCC_SECS: u64 = 2;

/// The account of the failover session, and its subscriber.
const FAILOVER_ACCOUNT: u64 = 5000;
const FAILOVER_MSISDN: &str = "46709000001";

/// Demo-like tariffs, 200 load accounts and the failover account.
fn charging() -> String {
    format!(
        r#"
[engine]
node_id = "unused-with-redis"
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
default_quota = 10485760
validity_time = 600

[[account]]
id = {FAILOVER_ACCOUNT}
balance = 100000
subscribers = ["e164:{FAILOVER_MSISDN}"]

[[account_range]]
first_id = 1000
count = 200
e164_first = "46700000000"
balance = 10000000
"#
    )
}

/// A node: its directory, configuration, data and addresses.
struct Node {
    dir: PathBuf,
    config: PathBuf,
    diameter: SocketAddr,
    admin_port: u16,
}

impl Node {
    fn new(root: &Path, name: &str, seeds: &[String], namespace: &str) -> Node {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let admin_port = free_port();
        let seeds: Vec<String> = seeds.iter().map(|n| format!("{n:?}")).collect();
        let config = dir.join("gyro.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\norigin_host = \"{name}.gyro.test\"\n\
                 [admin]\nlisten = \"127.0.0.1:{admin_port}\"\n\
                 [storage]\nbackend = \"redis-cluster\"\n\
                 [storage.redis]\nnodes = [{}]\nnamespace = \"{namespace}\"\n\
                 node_id = \"{name}\"\nexpire_interval_ms = 250\nexport_interval_ms = 250\n\
                 export_lease_ms = 3000\n",
                seeds.join(", ")
            ),
        )
        .unwrap();
        std::fs::write(dir.join("charging.toml"), charging()).unwrap();
        Node {
            diameter: SocketAddr::from(([127, 0, 0, 1], free_port())),
            config,
            admin_port,
            dir,
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn start(&self) -> Server {
        let (config, charging) = (
            self.config.to_string_lossy().into_owned(),
            self.dir
                .join("charging.toml")
                .to_string_lossy()
                .into_owned(),
        );
        let child = serve(
            self.diameter,
            &self.data(),
            &["-c", &config, "--charging", &charging],
        );
        let server = Server::adopt(child, self.diameter, &self.data(), Some(self.admin_port));
        server.wait_ready();
        server
    }
}

/// `gyro load` on `target` for `secs` seconds over subscribers
/// 46700000000.. (the account range).
fn load(target: SocketAddr, secs: u64, origin: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["load", "--target"])
        .arg(target.to_string())
        .args(["-c", "2", "-w", "8", "--subscribers", "200", "--quiet"])
        .args(["--origin-host", origin, "--json"])
        .arg("-d")
        .arg(format!("{secs}s"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gyro load")
}

/// The answers `gyro load` reports, by Result-Code (its JSON report).
fn answered(child: Child) -> u64 {
    let out = child.wait_with_output().expect("gyro load");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v["answered"].as_u64().unwrap_or(0)
}

/// Every exported CDR in `dirs`: file name -> its records.
fn exported(dirs: &[PathBuf]) -> BTreeMap<String, Vec<Value>> {
    let mut files = BTreeMap::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".jsonl") {
                continue;
            }
            let text = std::fs::read_to_string(e.path()).unwrap();
            let records: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).expect("a whole JSON line"))
                .collect();
            if let Some(earlier) = files.insert(name.clone(), records.clone()) {
                // The same range written by two nodes (a lease taken over
                // before the acknowledgement): the same records.
                assert_eq!(earlier, records, "{name} differs between nodes");
            }
        }
    }
    files
}

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

    // A session opened on node A, before it dies.
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5100_0000,
    };
    let session = "pgw.gyro.test;failover;1";
    let mut to_a = gw.connect(a.diameter);
    let ccr_i = data_ccr(
        gw.host,
        gw.ids,
        session,
        FAILOVER_MSISDN,
        RequestType::Initial,
        0,
        0,
    );
    let cca = exchange(&mut to_a, &gw.encode(&ccr_i, 0));
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

    // The session's CCR-Update at node B, twice (the second a
    // retransmission, T flag): one charge of 10 MiB at 1.00 per 100 MiB.
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
    let first = exchange(&mut to_b, &gw.encode(&ccr_u, 1));
    ccr_u.retransmit = true;
    let again = exchange(&mut to_b, &gw.encode(&ccr_u, 1));
    assert_eq!(result_code(&first), Some(2001));
    assert_eq!(result_code(&again), Some(2001));
    assert_eq!(
        avp_u32(&first, gyro_diameter::codes::avp::CC_REQUEST_NUMBER),
        Some(1)
    );
    let failover = AccountId(FAILOVER_ACCOUNT);
    let ledger = rt.block_on(RedisLedger::connect(opts)).expect("connect");
    let state = rt
        .block_on(ledger.account(failover))
        .unwrap()
        .expect("the failover account");
    assert_eq!(state.debited, 10, "charged once: {state:?}");

    // Node A comes back (same node id, same data directory) and serves.
    let node_a = a.start();
    let load_a2 = load(a.diameter, 1, "load-a2.gyro.test");
    assert!(answered(load_a2) > 10, "node A serves again");

    // The failover session ends at node A.
    let mut to_a = gw.connect(a.diameter);
    let ccr_t = data_ccr(
        gw.host,
        gw.ids,
        session,
        FAILOVER_MSISDN,
        RequestType::Termination,
        2,
        1024,
    );
    assert_eq!(
        result_code(&exchange(&mut to_a, &gw.encode(&ccr_t, 2))),
        Some(2001)
    );

    // Reservations of sessions nobody ended (the killed node's, and those
    // the load left open) go after Tcc; then the books add up with
    // nothing reserved.
    let t = Instant::now();
    let books: Books = loop {
        let books = rt.block_on(ledger.books()).expect("books");
        if books.reserved == 0 {
            break books;
        }
        assert!(
            t.elapsed() < Duration::from_secs(TCC_SECS + 15),
            "reservations never expired: {books:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(books.is_balanced(), "{books:?}");
    assert_eq!(books.accounts, 201);
    assert!(books.debited > 0);

    // Every charge has its one CDR in the exported files: per account the
    // CDRs add up to what was debited, each (slot, sequence) once, and
    // each slot's sequence numbers run from 1 without a gap.
    let dirs = [a.data().join("cdr"), b.data().join("cdr")];
    let debited: HashMap<u64, i64> = rt.block_on(async {
        let mut m = HashMap::new();
        for id in (1000..1200).chain([FAILOVER_ACCOUNT]) {
            let s = ledger.account(AccountId(id)).await.unwrap().unwrap();
            m.insert(id, s.debited);
        }
        m
    });
    let t = Instant::now();
    let files = loop {
        let files = exported(&dirs);
        let mut by_account: HashMap<u64, i64> = HashMap::new();
        for r in files.values().flatten() {
            *by_account
                .entry(r["account"].as_u64().unwrap())
                .or_default() += r["amount"].as_i64().unwrap();
        }
        if debited
            .iter()
            .all(|(id, d)| by_account.get(id).copied().unwrap_or(0) == *d)
        {
            break files;
        }
        if t.elapsed() > Duration::from_secs(15) {
            let wrong: Vec<String> = debited
                .iter()
                .filter(|(id, d)| by_account.get(id).copied().unwrap_or(0) != **d)
                .map(|(id, d)| format!("account {id}: debited {d}, CDRs {:?}", by_account.get(id)))
                .collect();
            panic!("CDRs never all exported: {wrong:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut by_slot: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (name, records) in &files {
        let slot: u64 = name[5..10].parse().expect("cdr-r<slot>-...");
        for r in records {
            by_slot
                .entry(slot)
                .or_default()
                .push(r["sequence"].as_u64().unwrap());
        }
    }
    for (slot, seqs) in &mut by_slot {
        seqs.sort_unstable();
        let expect: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(*seqs, expect, "slot {slot}: a gap or a CDR written twice");
    }
    // Sessions nobody ended were closed by their Tcc deadline, each with a
    // session-end CDR.
    assert!(
        files
            .values()
            .flatten()
            .any(|r| r["record_type"] == "session-end"
                && r["closing_cause"] == "supervision-expired"),
        "no session expired"
    );
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
    // The failover session: one usage CDR for its CCR-Update.
    let updates = files
        .values()
        .flatten()
        .filter(|r| r["session_id"] == session && r["request_number"] == 1)
        .count();
    assert_eq!(updates, 1);

    // /metrics of node B shows the Redis families.
    let metrics = node_b.metrics();
    for family in [
        "gyro_redis_round_trip_seconds_bucket",
        "gyro_redis_batch_steps_count",
        "gyro_redis_steps_total",
        "gyro_redis_errors_total{kind=\"unavailable\"}",
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
