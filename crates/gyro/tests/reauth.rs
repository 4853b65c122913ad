//! Requests the server starts, over real sockets against a real
//! `gyro serve` driven through its admin API over real HTTP: a
//! Re-Auth-Request after a top-up to a session that got its final units,
//! then the client's CCR-Update granted; an Abort-Session-Request on
//! `DELETE /v1/sessions/{id}` and the reservation released by the
//! client's CCR-Terminate; an RAA saying the client forgot the session
//! (5002) releases it; and failover to a second connection of the same
//! peer when the first closes with the ASR unanswered.

mod support;

use std::time::{Duration, Instant};

use bytes::BytesMut;
use gyro_charging::RequestType;
use gyro_diameter::codes::{avp, cmd};
use gyro_diameter::Encoder;
use serde_json::{json, Value};
use support::common::{parse, result_code, Client};
use support::gateway::{exchange, Gateway};
use support::scratch;
use support::server::{http, Server, SHORT_ANSWER_TIMEOUT};

const PGW: Gateway = Gateway {
    host: "pgw.reauth.test",
    realm: "reauth.test",
    ids: 0x0b00,
};

/// A running `gyro serve` with its admin API in a fresh scratch
/// directory `name`.
fn start(name: &str) -> Server {
    Server::in_dir(&scratch(name), SHORT_ANSWER_TIMEOUT, &[])
}

/// `gyro session abort <sid> --json` on another thread (it waits for the
/// ASA): (exit success, its JSON output).
fn abort_with_cli(server: &Server, sid: &str) -> std::thread::JoinHandle<(bool, Value)> {
    let (admin, sid) = (server.admin.clone(), sid.to_string());
    std::thread::spawn(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gyro"))
            .args(["session", "abort", &sid, "--json", "--admin", &admin])
            .output()
            .expect("gyro session abort");
        let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.success(), json)
    })
}

/// `DELETE /v1/sessions/{sid}` on another thread (it waits for the ASA):
/// (status, body).
fn abort_later(server: &Server, sid: &str) -> std::thread::JoinHandle<(u16, Value)> {
    let url = server.url(&format!("/v1/sessions/{sid}"));
    std::thread::spawn(move || {
        let (status, _, body) = http(&url, "DELETE", None, None).expect("DELETE");
        (status, body)
    })
}

/// A data CCR on rating group 10 (1.00 per 100 MiB), reporting `used`
/// octets and asking for more (not on a Terminate).
fn ccr(sid: &str, msisdn: &str, kind: RequestType, number: u32, used: u64) -> Vec<u8> {
    PGW.encode(&PGW.data_ccr(sid, msisdn, kind, number, used), number)
}

/// Whether a CCA carries a Final-Unit-Indication (in any MSCC) or a 4012.
fn final_units(cca: &[u8]) -> bool {
    let m = parse(cca);
    m.avps().flatten().any(|a| {
        a.code() == avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code
            && (a.child(avp::FINAL_UNIT_INDICATION).is_some()
                || a.child(avp::RESULT_CODE).and_then(|r| r.u32().ok()) == Some(4012))
    }) || m.find(avp::FINAL_UNIT_INDICATION).is_some()
}

/// Reads the next request the server sends (skipping nothing: the
/// watchdog is far off).
fn server_request(c: &mut Client) -> Vec<u8> {
    let frame = c.recv().expect("a request from the server");
    assert!(parse(&frame).is_request(), "a request, not an answer");
    frame
}

/// Answers a server request with `code`, echoing its Session-Id.
fn answer_with(c: &mut Client, request: &[u8], code: u32) {
    let req = parse(request);
    let mut b = BytesMut::new();
    // Encoder::answer writes the request's Session-Id first.
    let mut e = Encoder::answer(&mut b, &req, false);
    e.u32(avp::RESULT_CODE, code)
        .str(avp::ORIGIN_HOST, PGW.host)
        .str(avp::ORIGIN_REALM, "reauth.test");
    e.finish().unwrap();
    c.send(&b);
}

fn str_avp(frame: &[u8], id: gyro_diameter::AvpId) -> String {
    parse(frame)
        .find(id)
        .and_then(|a| a.utf8().ok().map(str::to_string))
        .unwrap_or_default()
}

/// Waits until `f` holds for the account, or fails with its last state.
fn wait_for(server: &Server, msisdn: &str, f: impl Fn(&Value) -> bool) -> Value {
    let t = Instant::now();
    loop {
        let a = server.account(msisdn);
        if f(&a) {
            return a;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "account stays {a}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server in a scratch directory `name` with an account for `msisdn`
/// holding `balance`, and a gateway connection on which the session `sid`
/// was opened: (server, connection, the CCA-Initial, answered 2001).
fn open_session(name: &str, msisdn: &str, balance: i64, sid: &str) -> (Server, Client, Vec<u8>) {
    let server = start(name);
    server.create_account(msisdn, balance);
    let mut pgw = PGW.connect(server.diameter);
    let cca = exchange(&mut pgw, &ccr(sid, msisdn, RequestType::Initial, 0, 0));
    assert_eq!(result_code(&cca), Some(2001));
    (server, pgw, cca)
}

#[test]
fn a_top_up_re_authorizes_a_session_that_got_its_final_units_and_its_update_is_granted() {
    let (msisdn, sid) = ("46708880001", "pgw.reauth.test;1;1");
    // 0.03: 3 MiB of rating group 10, less than one default grant (10 MiB).
    let (server, mut pgw, cca) = open_session("reauth-top-up", msisdn, 3, sid);
    assert!(final_units(&cca), "a small balance gives final units");

    let (status, _, topped) = server.top_up(msisdn, 100000, "t-1");
    assert_eq!(status, 200, "{topped}");

    let rar = server_request(&mut pgw);
    let m = parse(&rar);
    assert_eq!(m.command_code(), cmd::RE_AUTH);
    assert_eq!(m.header().application_id, 4);
    assert!(m.header().flags & 0x40 != 0, "proxiable");
    assert_eq!(str_avp(&rar, avp::SESSION_ID), sid);
    assert_eq!(str_avp(&rar, avp::DESTINATION_HOST), PGW.host);
    assert_eq!(str_avp(&rar, avp::DESTINATION_REALM), "test");
    assert_eq!(str_avp(&rar, avp::ORIGIN_HOST), "ocs.gyro.test");
    assert_eq!(m.find(avp::AUTH_APPLICATION_ID).unwrap().u32().unwrap(), 4);
    assert_eq!(
        m.find(avp::RE_AUTH_REQUEST_TYPE).unwrap().u32().unwrap(),
        0,
        "AUTHORIZE_ONLY"
    );
    answer_with(&mut pgw, &rar, 2001);

    // The client asks again: granted in full now.
    let cca = exchange(&mut pgw, &ccr(sid, msisdn, RequestType::Update, 1, 0));
    assert_eq!(result_code(&cca), Some(2001));
    assert!(
        !final_units(&cca),
        "granted without final units after the top-up"
    );
    assert!(server.account(msisdn)["reserved"].as_i64().unwrap() > 0);

    // A second top-up finds no session waiting: nothing more is sent.
    let (status, _, _) = server.top_up(msisdn, 1, "t-2");
    assert_eq!(status, 200);
    let cca = exchange(&mut pgw, &ccr(sid, msisdn, RequestType::Termination, 2, 0));
    assert_eq!(
        result_code(&cca),
        Some(2001),
        "the next message is the CCA, not an RAR"
    );
    assert_eq!(parse(&cca).command_code(), cmd::CREDIT_CONTROL);
}

/// A gateway behind a relay: its requests reach gyro on the relay's
/// connection.
const BEHIND: Gateway = Gateway {
    host: "pgw.behind.test",
    realm: "behind.test",
    ids: 0x0c00,
};

#[test]
fn a_re_auth_for_a_client_behind_a_relay_is_addressed_to_that_client() {
    let (msisdn, sid) = ("46708880009", "pgw.behind.test;1;1");
    let server = start("reauth-relayed");
    server.create_account(msisdn, 3);
    let mut relay = support::gateway::connect(server.diameter, "relay.reauth.test");
    let ccr = |kind, number| BEHIND.encode(&BEHIND.data_ccr(sid, msisdn, kind, number, 0), number);
    let cca = exchange(&mut relay, &ccr(RequestType::Initial, 0));
    assert_eq!(result_code(&cca), Some(2001));
    assert!(final_units(&cca), "a small balance gives final units");
    let (status, _, topped) = server.top_up(msisdn, 100000, "t-relayed");
    assert_eq!(status, 200, "{topped}");
    // Sent on the relay's connection, addressed to the gateway behind it
    // (RFC 6733 section 6.5): the relay forwards it by Destination-Host.
    let rar = server_request(&mut relay);
    assert_eq!(parse(&rar).command_code(), cmd::RE_AUTH);
    assert_eq!(str_avp(&rar, avp::SESSION_ID), sid);
    assert_eq!(str_avp(&rar, avp::DESTINATION_HOST), BEHIND.host);
    assert_eq!(str_avp(&rar, avp::DESTINATION_REALM), BEHIND.realm);
    answer_with(&mut relay, &rar, 2001);
    let cca = exchange(&mut relay, &ccr(RequestType::Termination, 1));
    assert_eq!(result_code(&cca), Some(2001));
}

#[test]
fn deleting_a_session_sends_an_abort_and_its_terminate_releases_the_reservation() {
    let (msisdn, sid) = ("46708880002", "pgw.reauth.test;2;1");
    let (server, mut pgw, _) = open_session("reauth-abort", msisdn, 100_000, sid);
    assert!(server.account(msisdn)["reserved"].as_i64().unwrap() > 0);

    let (status, _, body) = server.call("DELETE", "/v1/sessions/no-such-session", None);
    assert_eq!(status, 404, "{body}");
    assert!(body["detail"].as_str().is_some());

    let deleting = abort_with_cli(&server, sid);
    let asr = server_request(&mut pgw);
    let m = parse(&asr);
    assert_eq!(m.command_code(), cmd::ABORT_SESSION);
    assert_eq!(str_avp(&asr, avp::SESSION_ID), sid);
    assert_eq!(str_avp(&asr, avp::DESTINATION_HOST), PGW.host);
    assert_eq!(m.find(avp::AUTH_APPLICATION_ID).unwrap().u32().unwrap(), 4);
    assert!(m.find(avp::RE_AUTH_REQUEST_TYPE).is_none());
    answer_with(&mut pgw, &asr, 2001);
    let (ok, body) = deleting.join().unwrap();
    assert!(ok, "gyro session abort: {body}");
    assert_eq!(body["session_id"], sid);
    assert_eq!(body["asr_sent"], true);
    assert_eq!(body["result_code"], 2001);
    assert_eq!(body["peer"], PGW.host);

    // The client ends the session: the reservation goes back.
    let cca = exchange(
        &mut pgw,
        &ccr(sid, msisdn, RequestType::Termination, 1, 1_048_576),
    );
    assert_eq!(result_code(&cca), Some(2001));
    let after = server.account(msisdn);
    assert_eq!(after["reserved"], 0, "{after}");
    assert_eq!(after["open_sessions"], 0, "{after}");
    assert_eq!(after["balance"], 100_000 - 1, "1 MiB charged: {after}");
}

#[test]
fn a_client_that_forgot_the_session_gets_it_released() {
    let (msisdn, sid) = ("46708880003", "pgw.reauth.test;3;1");
    let (server, mut pgw, _) = open_session("reauth-unknown", msisdn, 100_000, sid);
    assert!(server.account(msisdn)["reserved"].as_i64().unwrap() > 0);

    // A change of the account re-authorizes its sessions.
    let (status, _, body) = server.call(
        "PATCH",
        &format!("/v1/accounts/{msisdn}"),
        Some(json!({"credit_limit": 500})),
    );
    assert_eq!(status, 200, "{body}");
    let rar = server_request(&mut pgw);
    assert_eq!(parse(&rar).command_code(), cmd::RE_AUTH);
    answer_with(&mut pgw, &rar, 5002);

    let after = wait_for(&server, msisdn, |a| a["open_sessions"] == 0);
    assert_eq!(after["reserved"], 0, "{after}");
    assert_eq!(after["balance"], 100_000, "nothing charged: {after}");
    let (_, _, listed) = server.call("GET", &format!("/v1/sessions?subscriber={msisdn}"), None);
    assert_eq!(listed["sessions"], json!([]), "{listed}");
}

#[test]
fn an_abort_unanswered_on_a_closed_connection_is_retransmitted_on_another_of_the_peer() {
    let server = start("reauth-failover");
    let msisdn = "46708880004";
    server.create_account(msisdn, 100_000);
    let mut first = PGW.connect(server.diameter);
    let mut second = PGW.connect(server.diameter);
    let sid = "pgw.reauth.test;4;1";
    let cca = exchange(&mut first, &ccr(sid, msisdn, RequestType::Initial, 0, 0));
    assert_eq!(result_code(&cca), Some(2001));

    let deleting = abort_later(&server, sid);
    let asr = server_request(&mut first);
    let sent = parse(&asr);
    assert_eq!(sent.command_code(), cmd::ABORT_SESSION);
    assert!(!sent.header().is_retransmit());
    let e2e = sent.header().end_to_end;
    // The connection goes away with the ASR unanswered.
    drop(first);

    let again = server_request(&mut second);
    let m = parse(&again);
    assert_eq!(m.command_code(), cmd::ABORT_SESSION);
    assert!(m.header().is_retransmit(), "T flag on the retransmission");
    assert_eq!(m.header().end_to_end, e2e, "same End-to-End Identifier");
    assert_eq!(str_avp(&again, avp::SESSION_ID), sid);
    answer_with(&mut second, &again, 2001);
    let (status, body) = deleting.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result_code"], 2001);

    // The CCR-Terminate on the second connection closes the session.
    let cca = exchange(
        &mut second,
        &ccr(sid, msisdn, RequestType::Termination, 1, 0),
    );
    assert_eq!(result_code(&cca), Some(2001));
    assert_eq!(server.account(msisdn)["reserved"], 0);

    // With no connection of the peer left, the ASR cannot be sent: 502.
    let sid = "pgw.reauth.test;4;2";
    let cca = exchange(&mut second, &ccr(sid, msisdn, RequestType::Initial, 0, 0));
    assert_eq!(result_code(&cca), Some(2001));
    drop(second);
    std::thread::sleep(Duration::from_millis(200));
    let (status, _, body) = server.call("DELETE", &format!("/v1/sessions/{sid}"), None);
    assert_eq!(status, 502, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("gone"), "{body}");
}

#[test]
fn gyro_load_answers_re_auth_and_abort_and_counts_them() {
    let server = start("reauth-load");
    let msisdn = "46708889000";
    server.create_account(msisdn, 10_000_000);
    let load = {
        let target = server.diameter.to_string();
        std::thread::spawn(move || {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_gyro"))
                .args(["load", "--json", "--quiet", "--threads", "1", "--target"])
                .arg(target)
                .args(["--connections", "1", "--window", "4", "--rate", "100"])
                .args(["--subscriber-start", "46708889000", "--subscribers", "1"])
                .args(["--updates", "1000000", "--duration", "4s"])
                .args(["--max-error-ratio", "1"])
                .env("GYRO_LOG", "error")
                .output()
                .expect("run gyro load");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("report ({e}): {text}"))
        })
    };
    // Wait for the load's sessions, then change the account (RAR to each)
    // and delete one session (ASR).
    let t = Instant::now();
    let sessions = loop {
        let (_, _, listed) = server.call("GET", &format!("/v1/sessions?subscriber={msisdn}"), None);
        let list = listed["sessions"].as_array().cloned().unwrap_or_default();
        if list.len() >= 2 {
            assert_eq!(listed["total"], json!(list.len()), "{listed}");
            break list;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no sessions: {listed}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // A limit lists fewer and still counts them all.
    let (_, _, one) = server.call(
        "GET",
        &format!("/v1/sessions?subscriber={msisdn}&limit=1"),
        None,
    );
    assert_eq!(one["sessions"].as_array().map(Vec::len), Some(1), "{one}");
    assert!(one["total"].as_u64().unwrap_or(0) >= 2, "{one}");
    let (_, _, none) = server.call("GET", "/v1/sessions?limit=0", None);
    assert_eq!(none["sessions"], json!([]), "{none}");
    assert!(none["total"].as_u64().unwrap_or(0) >= 2, "{none}");
    let (status, _, body) = server.call(
        "PATCH",
        &format!("/v1/accounts/{msisdn}"),
        Some(json!({"credit_limit": 1})),
    );
    assert_eq!(status, 200, "{body}");
    let sid = sessions[0]["session_id"].as_str().unwrap();
    let (status, _, body) = server.call("DELETE", &format!("/v1/sessions/{sid}"), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result_code"], 2001, "{body}");

    let report = load.join().unwrap();
    assert!(
        report["re_auth_requests"].as_u64().unwrap_or(0) >= 2,
        "{report}"
    );
    assert_eq!(report["abort_requests"], 1, "{report}");
    assert_eq!(report["server_requests"], 0, "none refused: {report}");
    // The aborted session ended with its CCR-Terminate: no longer open.
    let (_, _, listed) = server.call("GET", &format!("/v1/sessions?subscriber={msisdn}"), None);
    let open: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["session_id"].as_str())
        .collect();
    assert!(!open.contains(&sid), "{listed}");
}
