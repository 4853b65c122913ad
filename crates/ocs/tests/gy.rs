//! The Diameter mapping: CCR bytes in, CCA bytes out, compared with a
//! recorded transcript and checked AVP by AVP.
//! Regenerate with `GYRO_BLESS=1 cargo test -p gyro-ocs --test gy`.

#[path = "../../charging/tests/common/script.rs"]
mod script;

use bytes::BytesMut;
use gyro_charging::*;
use gyro_diameter::codes::avp;
use gyro_diameter::{Avp, Message};
use gyro_ocs::gy::{decode_ccr, encode_cca, encode_ccr, LocalIdentity};
use script::script;

const EXAMPLE: &str = include_str!("../../../config/example-charging.toml");

fn local() -> LocalIdentity {
    LocalIdentity {
        origin_host: "ocs.gyro.example".into(),
        origin_realm: "gyro.example".into(),
    }
}

fn ccr_bytes(req: &CcRequest, hop: u32) -> BytesMut {
    let mut buf = BytesMut::new();
    encode_ccr(&mut buf, req, hop, "pgw-realm.example", "gyro.example").unwrap();
    buf
}

/// Runs a CCR through decode, engine and encode; returns the CCA bytes.
fn exchange(e: &mut Engine, ccr: &[u8], now: Timestamp, scratch: &mut CcRequest) -> BytesMut {
    let msg = Message::parse(ccr).unwrap();
    decode_ccr(&msg, scratch).unwrap();
    let mut out = Output::default();
    let mut answer = CcAnswer::default();
    // The answer records journaled so far (one engine per test thread).
    thread_local!(static ANSWERS: std::cell::RefCell<AnswerArchive> = Default::default());
    ANSWERS.with_borrow_mut(|archive| {
        e.handle_with(scratch, now, &mut answer, &mut out, |seq| archive.read(seq));
        archive.append(&out.answers);
    });
    let mut cca = BytesMut::new();
    let n = encode_cca(&mut cca, &msg, &answer, &local()).unwrap();
    assert_eq!(n, cca.len());
    cca
}

fn u32_child(a: &Avp<'_>, id: gyro_diameter::AvpId) -> Option<u32> {
    a.child(id).and_then(|c| c.u32().ok())
}

#[test]
fn ccr_round_trips_through_the_codec() {
    let mut scratch = CcRequest::default();
    for (i, (req, _)) in script().into_iter().enumerate() {
        let bytes = ccr_bytes(&req, i as u32);
        let msg = Message::parse(&bytes).unwrap();
        decode_ccr(&msg, &mut scratch).unwrap();
        assert_eq!(scratch, req);
    }
}

#[test]
fn session_and_event_produce_the_recorded_cca_bytes() {
    let mut e = ChargingConfig::from_toml_str(EXAMPLE)
        .unwrap()
        .build_engine()
        .unwrap();
    let mut scratch = CcRequest::default();
    let mut text = String::new();
    for (i, (req, now)) in script().into_iter().enumerate() {
        let ccr = ccr_bytes(&req, 0x1000 + i as u32);
        let cca = exchange(&mut e, &ccr, now, &mut scratch);
        text.push_str(&format!(
            "ccr {}\ncca {}\n",
            hex::encode(&ccr),
            hex::encode(&cca)
        ));
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/cca-transcript.txt"
    );
    if std::env::var_os("GYRO_BLESS").is_some() {
        std::fs::write(path, &text).unwrap();
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        text, want,
        "CCA bytes changed; rerun with GYRO_BLESS=1 and review"
    );
}

#[test]
fn cca_carries_every_avp_avp_by_avp() {
    let mut e = ChargingConfig::from_toml_str(EXAMPLE)
        .unwrap()
        .build_engine()
        .unwrap();
    let mut scratch = CcRequest::default();
    let steps = script();
    let ccr_i = ccr_bytes(&steps[0].0, 7);
    let cca = exchange(&mut e, &ccr_i, steps[0].1, &mut scratch);
    let m = Message::parse(&cca).unwrap();
    assert!(!m.is_request());
    assert_eq!(m.header().hop_by_hop, 7);
    assert_eq!(m.header().end_to_end, steps[0].0.end_to_end);
    let first = m.avps().next().unwrap().unwrap();
    assert_eq!(first.code(), 263, "Session-Id first");
    assert_eq!(first.utf8().unwrap(), "pgw.example;1700000000;1");
    assert_eq!(m.find(avp::RESULT_CODE).unwrap().u32().unwrap(), 2001);
    assert_eq!(
        m.find(avp::ORIGIN_HOST).unwrap().utf8().unwrap(),
        "ocs.gyro.example"
    );
    assert_eq!(m.find(avp::AUTH_APPLICATION_ID).unwrap().u32().unwrap(), 4);
    assert_eq!(m.find(avp::CC_REQUEST_TYPE).unwrap().u32().unwrap(), 1);
    assert_eq!(m.find(avp::CC_REQUEST_NUMBER).unwrap().u32().unwrap(), 0);
    let msccs: Vec<Avp<'_>> = m
        .avps()
        .flatten()
        .filter(|a| a.code() == avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code)
        .collect();
    assert_eq!(msccs.len(), 2);
    for (mscc, rg) in msccs.iter().zip([10, 20]) {
        assert_eq!(u32_child(mscc, avp::RATING_GROUP), Some(rg));
        assert_eq!(u32_child(mscc, avp::RESULT_CODE), Some(2001));
        assert_eq!(u32_child(mscc, avp::VALIDITY_TIME), Some(600));
        let gsu = mscc.child(avp::GRANTED_SERVICE_UNIT).unwrap();
        assert_eq!(
            gsu.child(avp::CC_TOTAL_OCTETS).unwrap().u64().unwrap(),
            10 * 1024 * 1024
        );
    }
    // The event: GSU and Cost-Information at command level.
    let ev = ccr_bytes(&steps[4].0, 8);
    let cca = exchange(&mut e, &ev, steps[4].1, &mut scratch);
    let m = Message::parse(&cca).unwrap();
    assert_eq!(m.find(avp::CC_REQUEST_TYPE).unwrap().u32().unwrap(), 4);
    let gsu = m.find(avp::GRANTED_SERVICE_UNIT).unwrap();
    assert_eq!(
        gsu.child(avp::CC_SERVICE_SPECIFIC_UNITS)
            .unwrap()
            .u64()
            .unwrap(),
        1
    );
    let cost = m.find(avp::COST_INFORMATION).unwrap();
    let uv = cost.child(avp::UNIT_VALUE).unwrap();
    assert_eq!(uv.child(avp::VALUE_DIGITS).unwrap().i64().unwrap(), 50);
    assert_eq!(uv.child(avp::EXPONENT).unwrap().i32().unwrap(), -2);
    assert_eq!(u32_child(&cost, avp::CURRENCY_CODE), Some(752));
}

#[test]
fn final_unit_indication_with_redirect_is_encoded() {
    let mut cfg = ChargingConfig::from_toml_str(EXAMPLE).unwrap();
    cfg.account_ranges[0].balance = 1;
    let mut e = cfg.build_engine().unwrap();
    let mut req = script()[0].0.clone();
    req.mscc.remove(0); // rating group 20 only: redirect on final units
    let ccr = ccr_bytes(&req, 1);
    let cca = exchange(&mut e, &ccr, script()[0].1, &mut CcRequest::default());
    let m = Message::parse(&cca).unwrap();
    let mscc = m.find(avp::MULTIPLE_SERVICES_CREDIT_CONTROL).unwrap();
    let fui = mscc.child(avp::FINAL_UNIT_INDICATION).unwrap();
    assert_eq!(u32_child(&fui, avp::FINAL_UNIT_ACTION), Some(1));
    let rs = fui.child(avp::REDIRECT_SERVER).unwrap();
    assert_eq!(u32_child(&rs, avp::REDIRECT_ADDRESS_TYPE), Some(2));
    assert_eq!(
        rs.child(avp::REDIRECT_SERVER_ADDRESS)
            .unwrap()
            .utf8()
            .unwrap(),
        "http://top-up.example.invalid/"
    );
}

#[test]
fn unknown_subscriber_answer_carries_failed_avp() {
    let mut e = ChargingConfig::from_toml_str(EXAMPLE)
        .unwrap()
        .build_engine()
        .unwrap();
    let mut req = script()[0].0.clone();
    req.subscription_ids = vec![SubscriptionId::e164("1")];
    let cca = exchange(
        &mut e,
        &ccr_bytes(&req, 1),
        script()[0].1,
        &mut CcRequest::default(),
    );
    let m = Message::parse(&cca).unwrap();
    assert_eq!(m.find(avp::RESULT_CODE).unwrap().u32().unwrap(), 5030);
    assert_eq!(m.header().flags & 0x20, 0, "E bit clear for 5xxx");
    let failed = m.find(avp::FAILED_AVP).unwrap();
    let sub = failed.child(avp::SUBSCRIPTION_ID).unwrap();
    assert_eq!(
        sub.child(avp::SUBSCRIPTION_ID_DATA)
            .unwrap()
            .utf8()
            .unwrap(),
        "1"
    );
    // CC-Request-Type and -Number are echoed in error answers too.
    assert_eq!(m.find(avp::CC_REQUEST_TYPE).unwrap().u32().unwrap(), 1);
}

#[test]
fn a_ccr_without_subscription_id_gets_5030_without_a_made_up_failed_avp() {
    let mut e = ChargingConfig::from_toml_str(EXAMPLE)
        .unwrap()
        .build_engine()
        .unwrap();
    let mut req = script()[0].0.clone();
    req.subscription_ids.clear();
    let cca = exchange(
        &mut e,
        &ccr_bytes(&req, 1),
        script()[0].1,
        &mut CcRequest::default(),
    );
    let m = Message::parse(&cca).unwrap();
    assert_eq!(m.find(avp::RESULT_CODE).unwrap().u32().unwrap(), 5030);
    assert!(
        m.find(avp::FAILED_AVP).is_none(),
        "no AVP was wrong: no Failed-AVP (an empty Subscription-Id-Data is flagged by dissectors)"
    );
    assert_eq!(m.find(avp::CC_REQUEST_TYPE).unwrap().u32().unwrap(), 1);
}

#[test]
fn a_subscription_id_extension_identifies_the_subscriber() {
    let mut e = ChargingConfig::from_toml_str(EXAMPLE)
        .unwrap()
        .build_engine()
        .unwrap();
    let (mut req, now) = script()[0].clone();
    let identity = req.subscription_ids.remove(0);
    req.subscription_ids.clear();
    // The CCR without Subscription-Id, plus a Subscription-Id-Extension
    // (RFC 8506 section 8.58) holding the same identity in the child its
    // type names (E.164: 660, IMSI: 661, ...).
    let mut ccr = ccr_bytes(&req, 1).to_vec();
    let mut ext = BytesMut::new();
    {
        let mut enc = gyro_diameter::Encoder::new(&mut ext, 0, 0, 0, 0, 0);
        let g = enc.begin_group(gyro_diameter::AvpId {
            code: 659,
            vendor: 0,
            flags: 0,
        });
        enc.str(
            gyro_diameter::AvpId {
                code: 660 + identity.kind.code(),
                vendor: 0,
                flags: 0,
            },
            &identity.data,
        );
        enc.end_group(g);
        enc.finish().unwrap();
    }
    ccr.extend_from_slice(&ext[20..]);
    let len = ccr.len() as u32;
    ccr[1..4].copy_from_slice(&len.to_be_bytes()[1..]);

    let mut decoded = CcRequest::default();
    let cca = exchange(&mut e, &ccr, now, &mut decoded);
    assert_eq!(decoded.subscription_ids, vec![identity]);
    let m = Message::parse(&cca).unwrap();
    assert_eq!(m.find(avp::RESULT_CODE).unwrap().u32().unwrap(), 2001);
}

#[test]
fn ccr_missing_a_required_avp_is_refused_with_5005() {
    let mut buf = BytesMut::new();
    let mut e = gyro_diameter::Encoder::request(&mut buf, 272, 4, true, 1, 1);
    e.str(avp::SESSION_ID, "s;1;1");
    e.str(avp::ORIGIN_HOST, "pgw");
    e.str(avp::SERVICE_CONTEXT_ID, "32251@3gpp.org");
    e.u32(avp::CC_REQUEST_NUMBER, 0);
    e.finish().unwrap();
    let msg = Message::parse(&buf).unwrap();
    let err = decode_ccr(&msg, &mut CcRequest::default()).unwrap_err();
    assert_eq!(
        err,
        gyro_ocs::Error::InvalidCcr {
            result_code: 5005,
            avp_code: 416
        }
    );
}

#[test]
fn retransmission_flag_is_read() {
    let mut req = script()[1].0.clone();
    req.retransmit = true;
    let bytes = ccr_bytes(&req, 1);
    let mut back = CcRequest::default();
    decode_ccr(&Message::parse(&bytes).unwrap(), &mut back).unwrap();
    assert!(back.retransmit);
}

fn mscc_ccr(msccs: Vec<Mscc>) -> BytesMut {
    let req = CcRequest {
        session_id: "pgw.example;1;mscc".into(),
        origin_host: "pgw.example".into(),
        request_type: RequestType::Initial,
        service_context: "32251@3gpp.org".into(),
        subscription_ids: vec![SubscriptionId::e164("46700000001")],
        multiple_services: Some(true),
        mscc: msccs,
        ..CcRequest::default()
    };
    ccr_bytes(&req, 1)
}

fn rg(rating_group: u32, service_id: Option<u32>) -> Mscc {
    Mscc {
        rating_group: Some(rating_group),
        service_id,
        requested: Some(ServiceUnits::default()),
        ..Mscc::default()
    }
}

#[test]
fn the_same_rating_group_twice_in_one_ccr_is_refused_with_5009() {
    let bytes = mscc_ccr(vec![rg(10, None), rg(20, None), rg(10, None)]);
    let err = decode_ccr(&Message::parse(&bytes).unwrap(), &mut CcRequest::default());
    assert_eq!(
        err,
        Err(gyro_ocs::Error::InvalidCcr {
            result_code: 5009,
            avp_code: avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code,
        })
    );
    // One rating group with two services is two quotas, not a duplicate.
    let bytes = mscc_ccr(vec![rg(10, Some(1)), rg(10, Some(2)), rg(10, None)]);
    decode_ccr(&Message::parse(&bytes).unwrap(), &mut CcRequest::default())
        .expect("distinct (Service-Identifier, Rating-Group) keys");
}

#[test]
fn more_msccs_than_an_answer_can_carry_are_refused_with_5009() {
    use gyro_ocs::gy::MAX_MSCC;
    let list = |n: u32| (0..n).map(|i| rg(i, None)).collect::<Vec<_>>();
    let bytes = mscc_ccr(list(MAX_MSCC as u32));
    let mut req = CcRequest::default();
    decode_ccr(&Message::parse(&bytes).unwrap(), &mut req).expect("the most taken");
    assert_eq!(req.mscc.len(), MAX_MSCC);
    let bytes = mscc_ccr(list(MAX_MSCC as u32 + 1));
    let err = decode_ccr(&Message::parse(&bytes).unwrap(), &mut req).unwrap_err();
    assert!(
        matches!(
            err,
            gyro_ocs::Error::InvalidCcr {
                result_code: 5009,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn the_answer_to_the_largest_mscc_list_taken_fits_the_limit() {
    use gyro_ocs::gy::{MAX_ANSWER_LEN, MAX_MSCC};
    let config = ChargingConfig::from_toml_str(EXAMPLE).unwrap();
    let mut engine = config.build_shard(0, 1).unwrap();
    let list = (0..MAX_MSCC as u32)
        .map(|i| rg(10 + (i % 2) * 10, Some(i)))
        .collect();
    let bytes = mscc_ccr(list);
    let cca = exchange(&mut engine, &bytes, Timestamp(1), &mut CcRequest::default());
    let msg = Message::parse(&cca).unwrap();
    let n = msg
        .avps()
        .flatten()
        .filter(|a| a.code() == avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code)
        .count();
    assert_eq!(n, MAX_MSCC, "every quota answered");
    assert!(cca.len() <= MAX_ANSWER_LEN, "{} bytes", cca.len());
}
