//! Sessions followed from any connection, through a restart: a real
//! `gyro serve` with two workers; 1,000 data sessions opened on one
//! connection and updated and terminated on others without
//! Subscription-Id (as most gateways send them after the CCR-Initial),
//! retransmitted CCR-Terminates on yet another connection, before and
//! after a restart. Every answer is 2001 or the identical remembered
//! answer, and the books show nothing reserved and every reported usage
//! charged.

mod support;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::process::Command;

use bytes::BytesMut;
use gyro_charging::{CcRequest, Mscc, RequestType, ServiceUnits, SubscriptionId};
use gyro_diameter::codes::avp;
use gyro_diameter::Message;
use gyro_ocs::gy::encode_ccr;
use support::common::{result_code, Client};
use support::gateway::connect;
use support::server::{ledger, Server};
use support::{free_port, scratch};

const SESSIONS: u32 = 1000;
const USED: u64 = 1_000_000;

fn session_id(i: u32) -> String {
    format!("pgw.routing.test;1700000000;{i}")
}

/// The CCR of session `i`: Initial with its Subscription-Id, Update and
/// Terminate without, each reporting `USED` octets on rating group 10.
fn ccr(i: u32, kind: RequestType, number: u32, host: &str, retransmit: bool) -> Vec<u8> {
    ccr_to(i, kind, number, host, retransmit, "gyro.test")
}

/// [`ccr`] with its Destination-Realm `realm`.
fn ccr_to(
    i: u32,
    kind: RequestType,
    number: u32,
    host: &str,
    retransmit: bool,
    realm: &str,
) -> Vec<u8> {
    let used = (kind != RequestType::Initial).then(|| ServiceUnits {
        total_octets: Some(USED),
        ..ServiceUnits::default()
    });
    let req = CcRequest {
        session_id: session_id(i),
        origin_host: host.into(),
        end_to_end: (i << 4) | number,
        request_type: kind,
        request_number: number,
        service_context: "32251@3gpp.org".into(),
        subscription_ids: if kind == RequestType::Initial {
            vec![SubscriptionId::e164(format!("46700000{:03}", i % 1000))]
        } else {
            Vec::new()
        },
        multiple_services: Some(true),
        mscc: vec![Mscc {
            rating_group: Some(10),
            requested: (kind != RequestType::Termination).then(ServiceUnits::default),
            used,
            ..Mscc::default()
        }],
        retransmit,
        ..CcRequest::default()
    };
    let mut b = BytesMut::new();
    encode_ccr(&mut b, &req, (i << 4) | number, "routing.test", realm).expect("encode");
    b.to_vec()
}

/// The CCRs of kind `kind`, number `number`, of the sessions `ids` (see
/// [`ccr`]).
fn batch(
    ids: &[u32],
    kind: RequestType,
    number: u32,
    host: &str,
    retransmit: bool,
) -> Vec<Vec<u8>> {
    ids.iter()
        .map(|&i| ccr(i, kind, number, host, retransmit))
        .collect()
}

/// Every CDR the server wrote under `data` (JSON Lines, every shard).
fn cdrs(data: &std::path::Path) -> Vec<serde_json::Value> {
    let mut all = Vec::new();
    for shard in std::fs::read_dir(data.join("cdr")).unwrap() {
        for file in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
            for line in text.lines() {
                all.push(serde_json::from_str(line).unwrap());
            }
        }
    }
    all
}

/// Sends every request in one write and returns the answers by Session-Id
/// (each answer with its header's hop-by-hop identifier zeroed, so a
/// retransmission's answer compares byte for byte).
fn exchange(c: &mut Client, requests: &[Vec<u8>]) -> HashMap<String, Vec<u8>> {
    c.send(&requests.concat());
    let mut answers = HashMap::new();
    for _ in requests {
        let mut a = c.recv().expect("an answer");
        a[12..16].fill(0);
        let sid = Message::parse(&a)
            .expect("answer parses")
            .find(avp::SESSION_ID)
            .and_then(|s| s.utf8().ok().map(str::to_string))
            .expect("Session-Id");
        answers.insert(sid, a);
    }
    answers
}

fn all_2001(answers: &HashMap<String, Vec<u8>>, what: &str) {
    let bad: Vec<_> = answers
        .iter()
        .filter(|(_, a)| result_code(a) != Some(2001))
        .map(|(s, a)| (s.clone(), result_code(a)))
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: {} not 2001, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
}

/// Every answer to a retransmission is byte for byte the remembered one.
fn same_answers(again: &HashMap<String, Vec<u8>>, first: &HashMap<String, Vec<u8>>, what: &str) {
    assert_eq!(again.len(), first.len(), "{what}: answers");
    let differ: Vec<_> = first
        .iter()
        .filter(|(sid, a)| again.get(*sid) != Some(*a))
        .map(|(sid, _)| (sid.clone(), again.get(sid).and_then(|a| result_code(a))))
        .collect();
    assert!(
        differ.is_empty(),
        "{what}: {} answers differ from the remembered ones, e.g. {:?}",
        differ.len(),
        &differ[..differ.len().min(5)]
    );
}

#[test]
fn sessions_are_charged_from_any_connection_across_a_restart() {
    let dir = scratch("routing");
    let data = dir.join("data");
    let first_half: Vec<u32> = (0..SESSIONS / 2).collect();
    let second_half: Vec<u32> = (SESSIONS / 2..SESSIONS).collect();
    let all: Vec<u32> = (0..SESSIONS).collect();

    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let server = Server::start_on(addr, &data, &[]);
    // One owner per data directory: a second server refuses it while this
    // one runs (the books tool only reads it: see tests/tools.rs).
    let out = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["serve", "--workers", "1", "--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a second gyro serve shares a running server's data"
    );
    assert!(
        stderr.contains("in use by another gyro process"),
        "{stderr}"
    );
    let mut opener = connect(addr, "pgw-a.routing.test");
    let mut other = connect(addr, "pgw-b.routing.test");
    let mut third = connect(addr, "pgw-c.routing.test");
    let opened = exchange(
        &mut opener,
        &batch(&all, RequestType::Initial, 0, "pgw-a.routing.test", false),
    );
    all_2001(&opened, "CCR-I");
    let updated = exchange(
        &mut other,
        &batch(&all, RequestType::Update, 1, "pgw-b.routing.test", false),
    );
    all_2001(&updated, "CCR-U on another connection");
    let terminated = exchange(
        &mut other,
        &batch(
            &first_half,
            RequestType::Termination,
            2,
            "pgw-b.routing.test",
            false,
        ),
    );
    all_2001(&terminated, "CCR-T on another connection");
    let again = exchange(
        &mut third,
        &batch(
            &first_half,
            RequestType::Termination,
            2,
            "pgw-b.routing.test",
            true,
        ),
    );
    assert_eq!(
        again, terminated,
        "retransmitted CCR-T: the remembered answers"
    );
    drop((opener, other, third));
    server.stop();

    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let server = Server::start_on(addr, &data, &[]);
    let mut late = connect(addr, "pgw-c.routing.test");
    let mut other = connect(addr, "pgw-b.routing.test");
    let again = exchange(
        &mut late,
        &batch(
            &first_half,
            RequestType::Termination,
            2,
            "pgw-b.routing.test",
            true,
        ),
    );
    same_answers(&again, &terminated, "retransmitted CCR-T after a restart");
    let rest = exchange(
        &mut other,
        &batch(
            &second_half,
            RequestType::Termination,
            2,
            "pgw-b.routing.test",
            false,
        ),
    );
    all_2001(&rest, "CCR-T after a restart");
    let again = exchange(
        &mut late,
        &batch(
            &second_half,
            RequestType::Termination,
            2,
            "pgw-b.routing.test",
            true,
        ),
    );
    assert_eq!(
        again, rest,
        "retransmitted CCR-T of sessions ended after the restart"
    );
    drop((late, other));
    server.stop();

    // The books: nothing reserved, conservation for every account.
    let ledger = ledger(&data, &[]);
    assert_eq!(ledger["violations"], 0);
    assert_eq!(
        ledger["reserved"], 0,
        "every session ended: nothing reserved"
    );

    // Every reported usage charged: one usage CDR per session for its
    // update and one for its terminate, none twice.
    let mut seen = HashSet::new();
    for c in cdrs(&data) {
        if c["record_type"] != "usage" {
            continue;
        }
        let key = (
            c["session_id"].as_str().unwrap().to_string(),
            c["request_number"].as_u64().unwrap(),
        );
        assert_eq!(c["total_octets"].as_u64(), Some(USED), "{key:?}");
        assert!(seen.insert(key.clone()), "usage {key:?} charged twice");
    }
    for i in 0..SESSIONS {
        for n in [1, 2] {
            assert!(
                seen.contains(&(session_id(i), n)),
                "usage of request {n} of session {i} was not charged"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Strict validation (`[validation] mode = "strict"`), over a real socket:
/// gyro relays nothing, so a CCR for another realm is answered 3003
/// DIAMETER_REALM_NOT_SERVED (E bit, Failed-AVP its Destination-Realm)
/// and changes nothing; its own realm, in any letter case, is served.
#[test]
fn in_strict_mode_a_request_for_another_realm_is_refused_with_3003() {
    let dir = scratch("routing-strict");
    let server = Server::in_dir(&dir, "[validation]\nmode = \"strict\"\n", &[]);
    let mut c = connect(server.diameter, "pgw.strict.test");
    let to =
        |i: u32, realm: &str| ccr_to(i, RequestType::Initial, 0, "pgw.strict.test", false, realm);
    c.send(&to(1, "other.example.org"));
    let a = c.recv().expect("an answer");
    assert_eq!(result_code(&a), Some(3003));
    let m = Message::parse(&a).unwrap();
    assert_ne!(m.header().flags & gyro_diameter::header::flags::ERROR, 0);
    let failed = m.find(avp::FAILED_AVP).expect("Failed-AVP");
    assert_eq!(
        failed.child(avp::DESTINATION_REALM).unwrap().data(),
        b"other.example.org"
    );
    // Nothing was opened for it.
    c.send(&ccr(1, RequestType::Update, 1, "pgw.strict.test", false));
    assert_eq!(result_code(&c.recv().expect("an answer")), Some(5002));
    c.send(&to(2, "GYRO.test"));
    assert_eq!(result_code(&c.recv().expect("an answer")), Some(2001));
}

/// A gateway that restarted (it connects again announcing a higher
/// Origin-State-Id, RFC 6733 section 8.16) has the sessions it opened
/// before released at once, on every shard: their reservations go back,
/// each gets its session-end CDR, and a late update of one is 5002. A
/// second link of the same instance (the same Origin-State-Id) releases
/// nothing, nor do the sessions the gateway opens after its restart end.
#[test]
fn a_restarted_gateway_has_the_sessions_it_opened_before_released_at_once() {
    let dir = scratch("routing-restart");
    let data = dir.join("data");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let server = Server::start_on(addr, &data, &[]);
    let host = "pgw.routing.test";
    let link = |state: u32| {
        let mut c = Client::connect(addr);
        let cea = c.cer_with_state(host, &[4], Some(state));
        assert_eq!(result_code(&cea), Some(2001));
        c
    };
    let before: Vec<u32> = (0..20).collect();
    let mut first = link(1_700_000_000);
    let opened = exchange(
        &mut first,
        &batch(&before, RequestType::Initial, 0, host, false),
    );
    all_2001(&opened, "CCR-I before the restart");
    // Another link of the same instance: its sessions go on.
    let mut second = link(1_700_000_000);
    let updated = exchange(
        &mut second,
        &batch(&before[..10], RequestType::Update, 1, host, false),
    );
    all_2001(&updated, "CCR-U on a second link");
    assert!(ledger(&data, &[])["reserved"].as_i64().unwrap() > 0);
    drop((first, second));

    // The gateway restarts.
    let mut again = link(1_700_000_060);
    let after: Vec<u32> = (100..110).collect();
    let fresh = exchange(
        &mut again,
        &batch(&after, RequestType::Initial, 0, host, false),
    );
    all_2001(&fresh, "CCR-I after the restart");
    let released = support::settled(|| {
        let l = ledger(&data, &[]);
        (l["reserved"].as_i64().unwrap(), l["open_sessions"].clone())
    });
    eprintln!("after the restart: {released:?}");
    // What is still reserved is the new sessions' only: update them with
    // no more quota asked, then the earlier sessions are 5002.
    let late = exchange(
        &mut again,
        &[
            ccr(0, RequestType::Update, 2, host, false),
            ccr(15, RequestType::Update, 1, host, false),
        ],
    );
    for (sid, a) in &late {
        assert_eq!(result_code(a), Some(5002), "{sid}: released by the restart");
    }
    let kept = exchange(
        &mut again,
        &batch(&after, RequestType::Termination, 1, host, false),
    );
    all_2001(&kept, "the sessions opened after the restart go on");
    let books = support::settled(|| ledger(&data, &[])["reserved"].as_i64().unwrap());
    assert_eq!(books, 0, "nothing reserved once the new sessions ended");
    server.stop();
    let ledger = ledger(&data, &[]);
    assert_eq!(ledger["violations"], 0);

    // One session-end CDR for each session released, cause rejected, 5002.
    let mut ends = HashSet::new();
    for c in cdrs(&data) {
        if c["record_type"] == "session-end" && c["result_code"] == 5002 {
            assert_eq!(c["closing_cause"], "rejected", "{c}");
            ends.insert(c["session_id"].as_str().unwrap().to_string());
        }
    }
    let want: HashSet<String> = before.iter().map(|&i| session_id(i)).collect();
    assert_eq!(ends, want, "a session-end CDR for each session released");
}
