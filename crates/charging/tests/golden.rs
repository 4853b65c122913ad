//! Golden tests: a fixed CCR-I/U/T session with MSCC and a CCR-Event, on
//! the demo configuration, produce exactly the recorded answers and CDRs.
//! Regenerate with `GYRO_BLESS=1 cargo test -p gyro-charging --test golden`
//! after an intended change, and review the diff.

use gyro_charging::*;

const EXAMPLE: &str = include_str!("../../../config/example-charging.toml");
const MIB: u64 = 1 << 20;

fn mscc(rg: u32, used: Option<u64>, more: bool) -> Mscc {
    Mscc {
        rating_group: Some(rg),
        requested: more.then(ServiceUnits::default),
        used: used.map(|n| ServiceUnits {
            input_octets: Some(n / 4),
            output_octets: Some(n - n / 4),
            ..ServiceUnits::default()
        }),
        ..Mscc::default()
    }
}

fn base(kind: RequestType, number: u32, e2e: u32) -> CcRequest {
    CcRequest {
        session_id: "pgw.example;1700000000;1".into(),
        origin_host: "pgw.example".into(),
        end_to_end: e2e,
        request_type: kind,
        request_number: number,
        service_context: "12.32251@3gpp.org".into(),
        subscription_ids: vec![
            SubscriptionId::e164("46700000001"),
            SubscriptionId::new(SubscriptionType::Imsi, "240010000001001"),
        ],
        ..CcRequest::default()
    }
}

/// The scripted exchange, shared with the CCA-bytes golden test.
pub fn script() -> Vec<(CcRequest, Timestamp)> {
    let t0 = 1_767_225_600 + 86_400; // 2026-01-02
    let mut i = base(RequestType::Initial, 0, 1);
    i.multiple_services = Some(true);
    i.mscc = vec![mscc(10, None, true), mscc(20, None, true)];
    let mut u = base(RequestType::Update, 1, 2);
    u.mscc = vec![
        mscc(10, Some(5 * MIB), true),
        mscc(20, Some(MIB + 1), false),
    ];
    let mut t = base(RequestType::Termination, 2, 3);
    t.mscc = vec![mscc(10, Some(3 * MIB), false)];
    t.termination_cause = Some(1);
    let mut ev = base(RequestType::Event, 0, 4);
    ev.session_id = "smsc.example;1700000000;7".into();
    ev.origin_host = "smsc.example".into();
    ev.service_context = "32274@3gpp.org".into();
    ev.requested_action = Some(RequestedAction::DirectDebiting);
    ev.requested = Some(ServiceUnits {
        service_specific: Some(1),
        ..ServiceUnits::default()
    });
    let mut retransmit = u.clone();
    retransmit.retransmit = true;
    vec![
        (i, Timestamp::from_secs(t0)),
        (u, Timestamp::from_secs(t0 + 60)),
        (retransmit, Timestamp::from_secs(t0 + 61)),
        (t, Timestamp::from_secs(t0 + 90)),
        (ev, Timestamp::from_secs(t0 + 100)),
    ]
}

fn transcript() -> String {
    let mut e = ChargingConfig::from_toml_str(EXAMPLE)
        .unwrap()
        .build_engine()
        .unwrap();
    let mut out = Output::default();
    let mut text = String::new();
    for (req, now) in script() {
        out.clear();
        let a = e.handle_request(&req, now, &mut out);
        text.push_str(&format!(
            "request {:?} {} {}\n",
            req.request_type, req.request_number, req.session_id
        ));
        text.push_str(&format!("answer {}\n", serde_json::to_string(&a).unwrap()));
        for c in &out.cdrs {
            text.push_str(&format!("cdr {}\n", serde_json::to_string(c).unwrap()));
        }
    }
    let a = e.account(AccountId(1001)).unwrap();
    text.push_str(&format!(
        "account balance={} reserved={} debited={}\n",
        a.balance, a.reserved, a.debited
    ));
    text
}

#[test]
fn session_and_event_produce_the_recorded_answers_and_cdrs() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/engine-transcript.txt"
    );
    let got = transcript();
    if std::env::var_os("GYRO_BLESS").is_some() {
        std::fs::write(path, &got).unwrap();
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        got, want,
        "transcript changed; rerun with GYRO_BLESS=1 and review"
    );
}

#[test]
fn recorded_numbers_are_the_expected_ones() {
    // Spelled out so the golden file is not the only witness.
    let text = transcript();
    // rg10: 10 MiB at 1.00/100 MiB = 10 cents reserved; rg20: 20 cents.
    // Usage: 5 MiB rg10 = 5; 1 MiB + 1 octet rg20 is rounded to 1025 kB =
    // 2.002 cents, rounded up to 3; 3 MiB rg10 = 3; one SMS = 50. Total 61.
    assert!(
        text.ends_with("account balance=4939 reserved=0 debited=61\n"),
        "{text}"
    );
    assert_eq!(text.matches("\"duplicate\":true").count(), 1);
    assert_eq!(text.lines().filter(|l| l.starts_with("cdr ")).count(), 5);
}
