//! Writes the seed corpus of the `answer_record` fuzz target: the answer
//! records the engine gives for a data session (CCR-Initial, -Update,
//! -Terminate), a price enquiry, a balance check and an unknown
//! subscriber, one file per record and one with the whole section.
//!
//! `cargo run -p gyro-charging --example answer_seeds -- fuzz/corpus/answer_record`

use gyro_charging::*;

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let out = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or("fuzz/corpus/answer_record".into()),
    );
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/example-charging.toml"
    ));
    let cfg = ChargingConfig::from_toml_str(text)?;
    let mut engine = cfg.build_shard(0, 1)?;
    let now = Timestamp::from_secs(1_772_323_200);
    let data = |kind, n: u32| CcRequest {
        session_id: "pgw.example;1".into(),
        origin_host: "pgw.example".into(),
        end_to_end: 0x1000 + n,
        request_type: kind,
        request_number: n,
        service_context: "32251@3gpp.org".into(),
        subscription_ids: vec![SubscriptionId::e164("46700000001")],
        multiple_services: Some(true),
        mscc: vec![Mscc {
            rating_group: Some(10),
            service_id: None,
            requested: (kind != RequestType::Termination).then(ServiceUnits::default),
            used: (n > 0).then(|| ServiceUnits::of(UnitKind::Octets, 1_000_000)),
            reporting_reason: None,
            used_after: None,
        }],
        ..CcRequest::default()
    };
    let event = |name: &str, action, msisdn: &str| CcRequest {
        session_id: format!("smsc.example;{name}"),
        origin_host: "smsc.example".into(),
        end_to_end: 0x2000,
        request_type: RequestType::Event,
        service_context: "32274@3gpp.org".into(),
        subscription_ids: vec![SubscriptionId::e164(msisdn)],
        requested_action: Some(action),
        requested: Some(ServiceUnits::of(UnitKind::Events, 1)),
        ..CcRequest::default()
    };
    let requests = [
        ("ccr-i", data(RequestType::Initial, 0)),
        ("ccr-u", data(RequestType::Update, 1)),
        ("ccr-t", data(RequestType::Termination, 2)),
        (
            "price-enquiry",
            event("price", RequestedAction::PriceEnquiry, "46700000002"),
        ),
        (
            "check-balance",
            event("balance", RequestedAction::CheckBalance, "46700000002"),
        ),
        (
            "unknown-subscriber",
            event("unknown", RequestedAction::DirectDebiting, "99999999999"),
        ),
    ];
    std::fs::create_dir_all(&out)?;
    let mut section = Vec::new();
    let mut output = Output::default();
    let mut answer = CcAnswer::default();
    for (name, req) in &requests {
        engine.handle(req, now, &mut answer, &mut output);
        let log = &output.answers;
        if log.count() == 1 {
            std::fs::write(out.join(format!("{name}.bin")), log.as_bytes())?;
            section.extend_from_slice(log.as_bytes());
        }
        output.clear();
    }
    std::fs::write(out.join("section.bin"), &section)?;
    Ok(())
}
