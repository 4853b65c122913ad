#![allow(dead_code)]
//! The scripted exchange of the golden tests.

use gyro_charging::*;

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
