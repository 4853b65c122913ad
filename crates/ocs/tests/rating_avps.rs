//! The rating AVPs on the wire: what a CCR says about where a call goes
//! and where the subscriber roams, usage split at a tariff change, and
//! the Tariff-Time-Change, thresholds and Quota-Holding-Time of a CCA.

use bytes::BytesMut;
use gyro_charging::*;
use gyro_diameter::codes::{avp, VENDOR_3GPP};
use gyro_diameter::{AvpId, Encoder, Message};
use gyro_ocs::gy::{decode_ccr, encode_cca, encode_ccr, LocalIdentity};

fn ccr_bytes(req: &CcRequest) -> BytesMut {
    let mut buf = BytesMut::new();
    encode_ccr(&mut buf, req, 7, "gw.example", "gyro.example").unwrap();
    buf
}

fn decoded(bytes: &[u8]) -> CcRequest {
    let mut r = CcRequest::default();
    decode_ccr(&Message::parse(bytes).unwrap(), &mut r).unwrap();
    r
}

fn base(ctx: &str) -> CcRequest {
    CcRequest {
        session_id: "gw.example;1;1".into(),
        origin_host: "gw.example".into(),
        request_type: RequestType::Update,
        request_number: 1,
        service_context: ctx.into(),
        subscription_ids: vec![SubscriptionId::e164("46700000001")],
        multiple_services: Some(true),
        ..CcRequest::default()
    }
}

#[test]
fn called_party_visited_network_and_split_usage_round_trip() {
    for ctx in ["32260@3gpp.org", "32274@3gpp.org"] {
        let mut r = base(ctx);
        r.called_party = "tel:+46900123456".into();
        r.visited_plmn = "26201".into();
        r.mscc = vec![Mscc {
            rating_group: Some(10),
            requested: Some(ServiceUnits::default()),
            used: Some(ServiceUnits::of(UnitKind::Octets, 6_000_000)),
            used_after: Some(ServiceUnits::of(UnitKind::Octets, 2_000_000)),
            ..Mscc::default()
        }];
        r.used = Some(ServiceUnits::of(UnitKind::Seconds, 90));
        r.used_after = Some(ServiceUnits::of(UnitKind::Seconds, 30));
        assert_eq!(decoded(&ccr_bytes(&r)), r, "{ctx}");
    }
}

/// A CCR with 3GPP AVPs written by `extra` after the usual ones.
fn ccr_with(extra: impl FnOnce(&mut Encoder<'_>)) -> BytesMut {
    let r = base("32251@3gpp.org");
    let mut buf = BytesMut::new();
    let mut e = Encoder::new(
        &mut buf,
        gyro_diameter::header::flags::REQUEST,
        gyro_diameter::codes::cmd::CREDIT_CONTROL,
        gyro_diameter::codes::app::CREDIT_CONTROL,
        1,
        1,
    );
    e.str(avp::SESSION_ID, &r.session_id);
    e.str(avp::ORIGIN_HOST, &r.origin_host);
    e.str(avp::ORIGIN_REALM, "gw.example");
    e.str(avp::DESTINATION_REALM, "gyro.example");
    e.u32(avp::AUTH_APPLICATION_ID, 4);
    e.str(avp::SERVICE_CONTEXT_ID, &r.service_context);
    e.u32(avp::CC_REQUEST_TYPE, 2);
    e.u32(avp::CC_REQUEST_NUMBER, 1);
    extra(&mut e);
    e.finish().unwrap();
    buf
}

#[test]
fn the_visited_network_comes_from_the_user_location_info_when_alone() {
    // TAI+ECGI (130) in 262-01: MCC 262 MNC 01 -> 62 f2 10.
    let uli = [
        130u8, 0x62, 0xf2, 0x10, 0x00, 0x01, 0x62, 0xf2, 0x10, 0, 0, 0, 1,
    ];
    let r = decoded(&ccr_with(|e| {
        e.octets(avp::TGPP_USER_LOCATION_INFO, &uli);
    }));
    assert_eq!(r.visited_plmn, "26201");
    // A three-digit MNC: 310-410 -> 13 00 14, in a 5GS TAI (136).
    let uli = [136u8, 0x13, 0x00, 0x14, 0, 0, 1];
    let r = decoded(&ccr_with(|e| {
        e.octets(avp::TGPP_USER_LOCATION_INFO, &uli);
    }));
    assert_eq!(r.visited_plmn, "310410");
    // 3GPP-SGSN-MCC-MNC wins over the location, in either order.
    let r = decoded(&ccr_with(|e| {
        e.octets(avp::TGPP_USER_LOCATION_INFO, &uli);
        e.str(avp::TGPP_SGSN_MCC_MNC, "20801");
    }));
    assert_eq!(r.visited_plmn, "20801");
    let r = decoded(&ccr_with(|e| {
        e.str(avp::TGPP_SGSN_MCC_MNC, "20801");
        e.octets(avp::TGPP_USER_LOCATION_INFO, &uli);
    }));
    assert_eq!(r.visited_plmn, "20801");
    // Garbage is no location.
    let r = decoded(&ccr_with(|e| {
        e.octets(avp::TGPP_USER_LOCATION_INFO, &[130, 0xff, 0xff]);
    }));
    assert_eq!(r.visited_plmn, "");
}

#[test]
fn an_sms_recipient_is_read_from_either_release_layout() {
    // Rel-8 and later: SMS-Information / Recipient-Info / Recipient-Address.
    // Earlier: SMS-Information / Recipient-Address.
    for nested in [true, false] {
        let r = decoded(&ccr_with(|e| {
            let si = e.begin_group(avp::SERVICE_INFORMATION);
            let sms = e.begin_group(avp::SMS_INFORMATION);
            let ri = nested.then(|| e.begin_group(avp::RECIPIENT_INFO));
            let ra = e.begin_group(avp::RECIPIENT_ADDRESS);
            e.u32(avp::ADDRESS_TYPE, 1);
            e.str(avp::ADDRESS_DATA, "46939555");
            e.end_group(ra);
            if let Some(ri) = ri {
                e.end_group(ri);
            }
            e.end_group(sms);
            e.end_group(si);
        }));
        assert_eq!(r.called_party, "46939555", "nested {nested}");
    }
}

#[test]
fn a_cca_carries_tariff_time_change_thresholds_and_holding_time() {
    let req = base("32251@3gpp.org");
    let ccr = ccr_bytes(&req);
    let msg = Message::parse(&ccr).unwrap();
    let mut answer = CcAnswer::default();
    answer.reset(RequestType::Update, 1);
    let change = Timestamp::from_secs(1_768_453_200);
    answer.mscc.push(MsccAnswer {
        rating_group: Some(10),
        result_code: 2001,
        granted: Some(ServiceUnits {
            total_octets: Some(10_000_000),
            tariff_time_change: Some(change),
            ..ServiceUnits::default()
        }),
        volume_quota_threshold: Some(1_000_000),
        quota_holding_time: Some(300),
        ..MsccAnswer::default()
    });
    answer.mscc.push(MsccAnswer {
        rating_group: Some(20),
        result_code: 2001,
        granted: Some(ServiceUnits::of(UnitKind::Seconds, 300)),
        time_quota_threshold: Some(30),
        ..MsccAnswer::default()
    });
    let mut cca = BytesMut::new();
    let local = LocalIdentity {
        origin_host: "ocs.example".into(),
        origin_realm: "example".into(),
    };
    encode_cca(&mut cca, &msg, &answer, &local).unwrap();
    let m = Message::parse(&cca).unwrap();
    let msccs: Vec<_> = m
        .avps()
        .map(|a| a.unwrap())
        .filter(|a| a.code() == avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code)
        .collect();
    let u32_of = |a: &gyro_diameter::Avp<'_>, id: AvpId| a.child(id).map(|c| c.u32().unwrap());
    let gsu = msccs[0].child(avp::GRANTED_SERVICE_UNIT).unwrap();
    let ttc = gsu.child(avp::TARIFF_TIME_CHANGE).unwrap().time().unwrap();
    assert_eq!(ttc.to_unix(), 1_768_453_200);
    // Tariff-Time-Change comes first in the GSU.
    assert_eq!(gsu.grouped().next().unwrap().unwrap().code(), 451);
    assert_eq!(
        u32_of(&msccs[0], avp::VOLUME_QUOTA_THRESHOLD),
        Some(1_000_000)
    );
    assert_eq!(u32_of(&msccs[0], avp::QUOTA_HOLDING_TIME), Some(300));
    assert_eq!(u32_of(&msccs[0], avp::TIME_QUOTA_THRESHOLD), None);
    assert_eq!(u32_of(&msccs[1], avp::TIME_QUOTA_THRESHOLD), Some(30));
    assert_eq!(u32_of(&msccs[1], avp::VOLUME_QUOTA_THRESHOLD), None);
    assert!(msccs[1]
        .child(avp::GRANTED_SERVICE_UNIT)
        .unwrap()
        .child(avp::TARIFF_TIME_CHANGE)
        .is_none());
    for id in [
        avp::VOLUME_QUOTA_THRESHOLD,
        avp::QUOTA_HOLDING_TIME,
        avp::TIME_QUOTA_THRESHOLD,
    ] {
        assert_eq!(id.vendor, VENDOR_3GPP);
    }
    // The answer is valid against the dictionary.
    gyro_diameter::validate::validate_answer(
        gyro_diameter::Dictionary::builtin(),
        &cca,
        &gyro_diameter::validate::Options::strict(),
    )
    .unwrap();
}
