//! `/metrics` and `/v1/peers` of a real `gyro serve` (two workers) over
//! real HTTP, after a known set of CCRs: the counters by command,
//! CC-Request-Type and Result-Code equal what was sent, every answer is
//! in the latency histogram, the money counters add up to the tariff's
//! prices, the text passes `promtool check metrics`, and the test's
//! connection is listed with its Origin-Host and counters.

mod support;

use gyro_charging::{RequestType, RequestedAction, ServiceUnits};
use support::gateway::{answer, Gateway};
use support::prometheus::{promtool_check, sum, value};
use support::scratch;
use support::server::Server;

/// 100 MiB: 1.00 (100 minor units) on the demo tariff of rating group 10.
const HUNDRED_MIB: u64 = 104_857_600;
/// The demo SMS tariff: 0.50 a message.
const SMS_PRICE: f64 = 50.0;
const PGW: Gateway = Gateway {
    host: "pgw.metrics.test",
    realm: "metrics.test",
    ids: 0x0b00,
};
const ORIGIN_HOST: &str = PGW.host;

/// A CCR for `msisdn`: data on rating group 10 (reporting `used` octets
/// on an Update or Terminate), or an SMS direct debit for an Event.
fn ccr(session: &str, msisdn: &str, kind: RequestType, number: u32, used: u64) -> Vec<u8> {
    let mut req = PGW.data_ccr(session, msisdn, kind, number, used);
    if kind == RequestType::Event {
        req.service_context = "32274@3gpp.org".into();
        req.multiple_services = None;
        req.mscc.clear();
        req.requested_action = Some(RequestedAction::DirectDebiting);
        req.requested = Some(ServiceUnits {
            service_specific: Some(1),
            ..ServiceUnits::default()
        });
    }
    PGW.encode(&req, number)
}

#[test]
fn counters_by_command_type_and_result_code_equal_the_ccrs_sent_and_peers_list_the_connection() {
    let dir = scratch("metrics");
    let server = Server::in_dir(&dir, "", &[]);
    let mut pgw = PGW.connect(server.diameter);

    // Three data sessions on three subscribers (so on both shards): each
    // opened and updated once with 100 MiB; two terminated with 100 MiB
    // more, one left open. An Update of an unknown session; two SMS.
    let msisdns = ["46700000010", "46700000011", "46700000012"];
    let sid = |i: usize| format!("{ORIGIN_HOST};1;{i}");
    for (i, m) in msisdns.iter().enumerate() {
        let r = answer(&mut pgw, &ccr(&sid(i), m, RequestType::Initial, 0, 0));
        assert_eq!(r, 2001);
    }
    for (i, m) in msisdns.iter().enumerate() {
        let r = answer(
            &mut pgw,
            &ccr(&sid(i), m, RequestType::Update, 1, HUNDRED_MIB),
        );
        assert_eq!(r, 2001);
    }
    for (i, m) in msisdns.iter().enumerate().take(2) {
        let t = ccr(&sid(i), m, RequestType::Termination, 2, HUNDRED_MIB);
        assert_eq!(answer(&mut pgw, &t), 2001);
    }
    let unknown = ccr("no-such-session", msisdns[0], RequestType::Update, 1, 0);
    assert_eq!(answer(&mut pgw, &unknown), 5002);
    for i in 0..2 {
        let sms = ccr(&format!("sms;{i}"), msisdns[0], RequestType::Event, 0, 0);
        assert_eq!(answer(&mut pgw, &sms), 2001);
    }
    let sent = 3 + 3 + 2 + 1 + 2;

    let text = server.metrics();
    let requests = "gyro_diameter_requests_total";
    for (request_type, code, n) in [
        ("INITIAL", 2001, 3.0),
        ("UPDATE", 2001, 3.0),
        ("UPDATE", 5002, 1.0),
        ("TERMINATION", 2001, 2.0),
        ("EVENT", 2001, 2.0),
    ] {
        let labels =
            format!("command=\"CCR\",request_type=\"{request_type}\",result_code=\"{code}\"");
        assert_eq!(value(&text, requests, &labels), Some(n), "{labels}\n{text}");
    }
    assert_eq!(sum(&text, requests), f64::from(sent), "{text}");

    // Every answer went through a group commit and is in the histogram.
    let latency = "gyro_answer_latency_seconds";
    assert_eq!(sum(&text, &format!("{latency}_count")), f64::from(sent));
    let all = value(&text, &format!("{latency}_bucket"), "le=\"+Inf\"");
    assert_eq!(all, Some(f64::from(sent)), "{text}");
    assert!(sum(&text, &format!("{latency}_sum")) > 0.0);
    assert_eq!(sum(&text, "gyro_requests_in_flight"), 0.0);
    let commits = sum(&text, "gyro_group_commits_total");
    assert!(commits >= 1.0);
    assert_eq!(sum(&text, "gyro_records_per_commit_count"), commits);
    let syncs = sum(&text, "gyro_fsync_duration_seconds_count");
    assert!(syncs >= 1.0 && syncs <= commits, "{text}");

    // Money: 100 MiB per Update and per Terminate at 1.00, two SMS.
    let debited = 5.0 * 100.0 + 2.0 * SMS_PRICE;
    assert_eq!(sum(&text, "gyro_money_debited_minor_units_total"), debited);
    assert_eq!(sum(&text, "gyro_open_sessions"), 1.0, "{text}");
    assert!(sum(&text, "gyro_money_reserved_minor_units") > 0.0);
    assert_eq!(value(&text, "gyro_peers", "state=\"open\""), Some(1.0));
    assert_eq!(sum(&text, "gyro_peers"), 1.0);
    promtool_check(&text);

    let (status, _, peers) = server.call("GET", "/v1/peers", None);
    assert_eq!(status, 200, "{peers}");
    assert!(peers.is_object(), "{peers}");
    let list = peers["peers"].as_array().expect("peers");
    assert_eq!(list.len(), 1, "{peers}");
    let p = &list[0];
    assert_eq!(p["origin_host"], ORIGIN_HOST, "{p}");
    assert_eq!(p["origin_realm"], "test");
    assert_eq!(p["state"], "open");
    let local = pgw.stream.local_addr().unwrap().to_string();
    assert_eq!(p["remote_address"], local.as_str());
    assert_eq!(p["requests"], sent);
    assert_eq!(p["answers"], sent);
    assert!(p["connected_since"].as_u64().unwrap() > 1_600_000_000_000);
    drop(pgw);

    // The format follows the Accept header's q-values: q=0 is "not
    // acceptable", the higher weight wins, and OpenMetrics when named
    // with a weight as high as the classic text's.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(std::time::Duration::from_secs(30)))
        .build()
        .into();
    let format_for = |accept: &str| {
        let r = agent
            .get(&format!("{}/metrics", server.admin))
            .header("accept", accept)
            .call()
            .expect("GET /metrics");
        let content_type = r.headers()["content-type"].to_str().unwrap();
        content_type.split(';').next().unwrap().to_string()
    };
    for (accept, format) in [
        (
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
            "application/openmetrics-text",
        ),
        (
            "application/openmetrics-text;q=0, text/plain;version=0.0.4",
            "text/plain",
        ),
        (
            "application/openmetrics-text;q=0.3, text/plain;q=0.9",
            "text/plain",
        ),
        (
            "text/plain;q=0.3, application/openmetrics-text;q=0.9",
            "application/openmetrics-text",
        ),
        (
            "text/plain, application/openmetrics-text",
            "application/openmetrics-text",
        ),
        ("*/*", "text/plain"),
    ] {
        assert_eq!(format_for(accept), format, "Accept: {accept}");
    }
}
