//! Price plans against a real `gyro serve` over sockets: a voice call (Ro,
//! seconds) to a premium number, a night-time data session across the
//! morning price change (Tariff-Time-Change, usage split before and after
//! it), a roaming session and an SMS, each with its CDR naming the rate
//! applied; the plan of an account read and changed through the admin
//! API; `POST /v1/rate` and `gyro rate --json` giving the same answer; and
//! tshark dissecting the new AVPs of the exchange without complaint.
//!
//! The server reads the wall clock, so the night window of the test plan
//! is written to end a few minutes after the test starts.
//!
//! Needs `tshark` (Debian package tshark); fails when it is missing.

#[path = "../../charging/tests/common/requests.rs"]
mod requests;
mod support;

use std::time::Duration;

use gyro_charging::{CcRequest, RequestType, RequestedAction, ServiceUnits};
use gyro_diameter::codes::avp;
use gyro_diameter::Message;
use requests::{mscc, octets, request, secs, DATA, SMS, VOICE};
use serde_json::{json, Value};
use support::common::{result_code, Client};
use support::gateway::{connect, encode, exchange};
use support::server::{Server, SHORT_ANSWER_TIMEOUT};
use support::{require, run, scratch, tcp_pcap};

const MSISDN: &str = "46701000001";

/// The test's plans: night data ending at `night_end` (minutes after
/// midnight UTC), premium voice 60/1, roaming in the EU, SMS, and a EUR
/// plan to try moving to.
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
node_id = "rating-it"

[destinations]
premium = ["46900", "46939"]
sweden = ["46"]

[zones]
eu = ["262", "208"]

[plans.smart]
time_zone = "UTC"

[[plans.smart.rate]]
name = "data-roaming-eu"
service_context = "32251@3gpp.org"
zone = "eu"
unit = "octets"
price = 500
per = 1000000
default_quota = 5000000
validity_time = 3600

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
volume_quota_threshold = 1000000
quota_holding_time = 300

[[plans.smart.rate]]
name = "data-day"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 100
per = 1000000
default_quota = 10000000
validity_time = 3600
volume_quota_threshold = 1000000
quota_holding_time = 300

[[plans.smart.rate]]
name = "voice-premium"
service_context = "32260@3gpp.org"
destination = "premium"
unit = "seconds"
price = 300
per = 60
first_interval = 60
default_quota = 300
time_quota_threshold = 30

[[plans.smart.rate]]
name = "voice"
service_context = "32260@3gpp.org"
unit = "seconds"
price = 60
per = 60
first_interval = 60
default_quota = 300

[[plans.smart.rate]]
name = "sms-premium"
service_context = "32274@3gpp.org"
destination = "premium"
unit = "events"
price = 500
default_quota = 1

[[plans.smart.rate]]
name = "sms"
service_context = "32274@3gpp.org"
unit = "events"
price = 50
default_quota = 1

[plans.flat]

[[plans.flat.rate]]
name = "flat-data"
service_context = "32251@3gpp.org"
unit = "octets"
price = 10
per = 1000000
default_quota = 10000000

[plans.travel-eur]
currency = "EUR"

[[plans.travel-eur.rate]]
name = "travel-data"
service_context = "32251@3gpp.org"
unit = "octets"
price = 1
per = 1000000
default_quota = 1000000

[[account]]
id = 1
balance = 1000000
plan = "smart"
subscribers = ["e164:{MSISDN}"]
"#,
        start = hm(start),
    )
}

/// A Diameter exchange kept for the capture.
struct Peer {
    client: Client,
    hop: u32,
    captured: Vec<(bool, Vec<u8>)>,
}

impl Peer {
    fn send(&mut self, req: &CcRequest) -> Vec<u8> {
        // Requests of a session a few milliseconds apart, as on a network.
        std::thread::sleep(Duration::from_millis(3));
        self.hop += 1;
        let b = encode(req, self.hop, "gw.rating.test");
        let answer = exchange(&mut self.client, &b);
        self.captured.push((true, b));
        self.captured.push((false, answer.clone()));
        answer
    }
}

/// The first MSCC of an answer.
fn first_mscc(cca: &[u8]) -> gyro_diameter::Avp<'_> {
    Message::parse(cca)
        .unwrap()
        .find(avp::MULTIPLE_SERVICES_CREDIT_CONTROL)
        .expect("an MSCC")
}

fn u32_in(a: &gyro_diameter::Avp<'_>, id: gyro_diameter::AvpId) -> Option<u32> {
    a.child(id).and_then(|c| c.u32().ok())
}

/// Every CDR the server wrote (JSON lines, closed and open files).
fn cdrs(data: &std::path::Path) -> Vec<Value> {
    fn walk(dir: &std::path::Path, out: &mut Vec<Value>) {
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
    out.sort_by_key(|c| c["sequence"].as_u64());
    out
}

#[test]
fn plans_rate_voice_data_roaming_and_sms_over_diameter() {
    require("tshark");
    let dir = scratch("rating");
    let data = dir.join("data");
    // The night ends 10 to 11 minutes from now, on a whole minute.
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let change_s = (now_s / 60 + 11) * 60;
    let night_end = ((change_s / 60) % (24 * 60)) as u32;
    let plans = dir.join("plans.toml");
    std::fs::write(&plans, charging(night_end)).unwrap();
    let server = Server::in_dir(
        &dir,
        SHORT_ANSWER_TIMEOUT,
        &["--charging", plans.to_str().unwrap()],
    );
    let mut peer = Peer {
        client: connect(server.diameter, "gw.rating.test"),
        hop: 0,
        captured: Vec::new(),
    };

    // A voice call to a premium number: 300 s granted with a 30 s
    // threshold; 5 s cost the first minute, 30 s more by the second. Only
    // the CCR-Initial carries IMS-Information (as gateways send it): the
    // session remembers the called party.
    let called = "tel:+46900123456";
    let mut r = request("gw;voice;1", RequestType::Initial, 0, MSISDN, VOICE);
    r.called_party = called.into();
    r.mscc = vec![mscc(None, true, None)];
    let cca = peer.send(&r);
    assert_eq!(result_code(&cca), Some(2001));
    let m = first_mscc(&cca);
    let gsu = m.child(avp::GRANTED_SERVICE_UNIT).unwrap();
    assert_eq!(u32_in(&gsu, avp::CC_TIME), Some(300));
    assert_eq!(u32_in(&m, avp::TIME_QUOTA_THRESHOLD), Some(30));
    assert_eq!(u32_in(&m, avp::VOLUME_QUOTA_THRESHOLD), None);
    for (kind, n, used, more) in [
        (RequestType::Update, 1, 5, true),
        (RequestType::Termination, 2, 30, false),
    ] {
        let mut r = request("gw;voice;1", kind, n, MSISDN, VOICE);
        r.mscc = vec![mscc(None, more, Some(secs(used)))];
        assert_eq!(result_code(&peer.send(&r)), Some(2001));
    }

    // Night data: the grant carries the change of price, thresholds and
    // holding time; the gateway reports usage before and after it.
    let mut r = request("gw;data;1", RequestType::Initial, 0, MSISDN, DATA);
    r.mscc = vec![mscc(Some(10), true, None)];
    let cca = peer.send(&r);
    assert_eq!(result_code(&cca), Some(2001));
    let m = first_mscc(&cca);
    let gsu = m.child(avp::GRANTED_SERVICE_UNIT).unwrap();
    let ttc = gsu
        .child(avp::TARIFF_TIME_CHANGE)
        .expect("Tariff-Time-Change")
        .time()
        .unwrap();
    assert_eq!(ttc.to_unix(), change_s as i64);
    assert_eq!(u32_in(&m, avp::VOLUME_QUOTA_THRESHOLD), Some(1_000_000));
    assert_eq!(u32_in(&m, avp::QUOTA_HOLDING_TIME), Some(300));
    let mut u = request("gw;data;1", RequestType::Update, 1, MSISDN, DATA);
    let mut split = mscc(Some(10), true, Some(octets(6_000_000)));
    split.used_after = Some(octets(2_000_000));
    u.mscc = vec![split];
    assert_eq!(result_code(&peer.send(&u)), Some(2001));
    let mut t = request("gw;data;1", RequestType::Termination, 2, MSISDN, DATA);
    t.mscc = vec![mscc(Some(10), false, Some(octets(1_000_000)))];
    assert_eq!(result_code(&peer.send(&t)), Some(2001));

    // Roaming in Germany: the zone's rate. Only the CCR-Initial carries
    // PS-Information with 3GPP-SGSN-MCC-MNC; the CCR-Update and
    // CCR-Terminate are rated by the zone the session remembers.
    for (kind, n, used) in [
        (RequestType::Initial, 0, None),
        (RequestType::Update, 1, Some(octets(1_000_000))),
        (RequestType::Termination, 2, Some(octets(2_000_000))),
    ] {
        let mut r = request("gw;roam;1", kind, n, MSISDN, DATA);
        if kind == RequestType::Initial {
            r.visited_plmn = "26201".into();
        }
        r.mscc = vec![mscc(Some(10), kind != RequestType::Termination, used)];
        let cca = peer.send(&r);
        assert_eq!(result_code(&cca), Some(2001));
        if kind == RequestType::Update {
            // The new grant is the roaming rate's quota.
            let gsu = first_mscc(&cca).child(avp::GRANTED_SERVICE_UNIT).unwrap();
            assert_eq!(
                gsu.child(avp::CC_TOTAL_OCTETS).and_then(|a| a.u64().ok()),
                Some(5_000_000)
            );
        }
    }

    // An SMS to a premium number, per event.
    let mut s = request("smsc;1", RequestType::Event, 0, MSISDN, SMS);
    s.requested_action = Some(RequestedAction::DirectDebiting);
    s.called_party = "46939555".into();
    s.multiple_services = None;
    s.requested = Some(ServiceUnits {
        service_specific: Some(1),
        ..ServiceUnits::default()
    });
    assert_eq!(result_code(&peer.send(&s)), Some(2001));

    // The account's plan through the admin API.
    let (status, _, acc) = server.call("GET", &format!("/v1/accounts/{MSISDN}"), None);
    assert_eq!(status, 200, "{acc}");
    assert_eq!(acc["plan"], "smart");
    let (status, _, problem) = server.call(
        "PATCH",
        &format!("/v1/accounts/{MSISDN}"),
        Some(json!({ "plan": "travel-eur" })),
    );
    assert_eq!(status, 422, "{problem}");
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("EUR (978") && detail.contains("SEK (752"),
        "{detail}"
    );

    // POST /v1/rate and gyro rate --json agree.
    let at = "2026-01-15T12:00:30+00:00";
    let (status, _, quote) = server.call(
        "POST",
        "/v1/rate",
        Some(json!({ "subscriber": MSISDN, "service": "voice",
                     "called": "+46900123456", "units": 90, "at": at })),
    );
    assert_eq!(status, 200, "{quote}");
    assert_eq!(quote["parts"][0]["rate"], "voice-premium");
    assert_eq!(quote["amount"], "4.50");
    let (code, out, err) = support::gyro(&[
        "rate",
        "--charging",
        plans.to_str().unwrap(),
        "--subscriber",
        MSISDN,
        "--service",
        "voice",
        "--called",
        "+46900123456",
        "--units",
        "90",
        "--at",
        at,
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let cli: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(cli, quote);

    let (status, _, acc) = server.call(
        "PATCH",
        &format!("/v1/accounts/{MSISDN}"),
        Some(json!({ "plan": "flat" })),
    );
    assert_eq!(status, 200, "{acc}");
    assert_eq!(acc["plan"], "flat");
    let mut r = request("gw;flat;1", RequestType::Event, 0, MSISDN, DATA);
    r.requested_action = Some(RequestedAction::DirectDebiting);
    r.multiple_services = None;
    r.requested = Some(octets(10_000_000));
    assert_eq!(result_code(&peer.send(&r)), Some(2001));

    server.stop();

    // The CDRs name the rate each usage was priced at.
    let cdrs = cdrs(&data);
    let usage = |session: &str| -> Vec<(String, i64, Option<String>)> {
        cdrs.iter()
            .filter(|c| c["session_id"] == session && c["record_type"] != "session-end")
            .map(|c| {
                (
                    c["rate"].as_str().unwrap_or("").to_string(),
                    c["amount"].as_i64().unwrap(),
                    c["tariff_change"].as_str().map(str::to_string),
                )
            })
            .collect()
    };
    assert_eq!(
        usage("gw;voice;1"),
        [
            ("voice-premium".into(), 300, None),
            ("voice-premium".into(), 150, None)
        ]
    );
    let usage_records = |session: &'static str| {
        cdrs.iter()
            .filter(move |c| c["session_id"] == session && c["record_type"] == "usage")
    };
    assert!(
        usage_records("gw;voice;1").all(|c| c["destination"] == "premium" && c["plan"] == "smart")
    );
    assert_eq!(
        usage("gw;data;1"),
        [
            ("data-night".into(), 200, Some("before".into())),
            ("data-day".into(), 200, Some("after".into())),
            // Reported without a split, at the price of its grant (the
            // night had not ended yet).
            ("data-night".into(), 50, None),
        ]
    );
    assert_eq!(
        usage("gw;roam;1"),
        [
            ("data-roaming-eu".into(), 500, None),
            ("data-roaming-eu".into(), 1000, None)
        ]
    );
    assert!(usage_records("gw;roam;1").all(|c| c["zone"] == "eu"));
    assert_eq!(usage("smsc;1"), [("sms-premium".into(), 500, None)]);
    assert_eq!(usage("gw;flat;1"), [("flat-data".into(), 100, None)]);
    let (code, books, err) = support::gyro(&[
        "ledger",
        "--data-dir",
        data.to_str().unwrap(),
        "--charging",
        plans.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{books}\n{err}");

    // tshark reads every new AVP of the exchange, nothing malformed.
    let cap = dir.join("rating.pcap");
    std::fs::write(&cap, tcp_pcap(&peer.captured)).unwrap();
    let v = run("tshark", &["-r", cap.to_str().unwrap(), "-V"]);
    for bad in ["Malformed", "Expert Info (Error", "Unknown AVP", "[Unknown"] {
        assert!(!v.contains(bad), "tshark reports {bad:?}:\n{v}");
    }
    for want in [
        "Tariff-Time-Change: ",
        "Tariff-Change-Usage: UNIT_AFTER_TARIFF_CHANGE (1)",
        "Tariff-Change-Usage: UNIT_BEFORE_TARIFF_CHANGE (0)",
        "Volume-Quota-Threshold: 1000000",
        "Time-Quota-Threshold: 30",
        "Quota-Holding-Time: 300",
        "IMS-Information",
        "Called-Party-Address: tel:+46900123456",
        "SMS-Information",
        "Recipient-Address",
        "Address-Data: 46939555",
        "3GPP-SGSN-MCC-MNC: 26201",
    ] {
        assert!(v.contains(want), "tshark output lacks {want:?}:\n{v}");
    }
}
