//! Validation against the dictionary: one test per RFC 6733 error code, the
//! lenient and strict modes, padding and length corner cases, and the error
//! answers built from each problem.

use bytes::BytesMut;
use gyro_diameter::codes::{app, avp, cmd, result, AvpId, VENDOR_3GPP};
use gyro_diameter::dict::Dictionary;
use gyro_diameter::header::flags;
use gyro_diameter::validate::{
    encode_error_answer, validate_answer, validate_request, Offending, Options, Problem,
};
use gyro_diameter::{Avp, Encoder, Message};

const UNKNOWN_M: AvpId = AvpId::m(65000, 0);
const UNKNOWN_PLAIN: AvpId = AvpId::plain(65001, 0);

fn dict() -> &'static Dictionary {
    Dictionary::builtin()
}

/// A CCR-Initial as a PGW sends it. `tweak` writes extra AVPs at the end;
/// AVPs whose codes are in `skip` are left out.
fn ccr_with(skip: &[u32], tweak: impl FnOnce(&mut Encoder<'_>)) -> BytesMut {
    let mut buf = BytesMut::new();
    let mut e = Encoder::request(
        &mut buf,
        cmd::CREDIT_CONTROL,
        app::CREDIT_CONTROL,
        true,
        0x1111,
        0x2222,
    );
    let has = |c: u32| !skip.contains(&c);
    if has(263) {
        e.str(avp::SESSION_ID, "pgw.example;1;2");
    }
    if has(264) {
        e.str(avp::ORIGIN_HOST, "pgw.example");
    }
    if has(296) {
        e.str(avp::ORIGIN_REALM, "example");
    }
    if has(283) {
        e.str(avp::DESTINATION_REALM, "ocs.example");
    }
    if has(258) {
        e.u32(avp::AUTH_APPLICATION_ID, 4);
    }
    if has(461) {
        e.str(avp::SERVICE_CONTEXT_ID, "32251@3gpp.org");
    }
    if has(416) {
        e.i32(avp::CC_REQUEST_TYPE, 1);
    }
    if has(415) {
        e.u32(avp::CC_REQUEST_NUMBER, 0);
    }
    if has(443) {
        let g = e.begin_group(avp::SUBSCRIPTION_ID);
        e.i32(avp::SUBSCRIPTION_ID_TYPE, 0);
        e.str(avp::SUBSCRIPTION_ID_DATA, "41790000001");
        e.end_group(g);
    }
    if has(455) {
        e.i32(avp::MULTIPLE_SERVICES_INDICATOR, 1);
    }
    if has(456) {
        let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
        let r = e.begin_group(avp::REQUESTED_SERVICE_UNIT);
        e.end_group(r);
        e.u32(avp::RATING_GROUP, 10);
        e.end_group(g);
    }
    if has(873) {
        let si = e.begin_group(avp::SERVICE_INFORMATION);
        let ps = e.begin_group(avp::PS_INFORMATION);
        e.u32(avp::TGPP_CHARGING_ID, 7);
        e.i32(avp::TGPP_PDP_TYPE, 0);
        e.str(avp::CALLED_STATION_ID, "internet");
        e.octets(avp::TGPP_MS_TIMEZONE, &[0x40, 0]);
        e.end_group(ps);
        e.end_group(si);
    }
    tweak(&mut e);
    e.finish().unwrap();
    buf
}

fn ccr() -> BytesMut {
    ccr_with(&[], |_| {})
}

fn lenient() -> Options {
    Options::default()
}

fn check(buf: &[u8]) -> Problem<'_> {
    validate_request(dict(), buf, &lenient()).expect_err("request should be rejected")
}

fn check_strict(buf: &[u8]) -> Problem<'_> {
    validate_request(dict(), buf, &Options::strict()).expect_err("request should be rejected")
}

/// Builds the error answer and checks it is itself a valid answer.
fn answer(req: &[u8], p: &Problem<'_>) -> BytesMut {
    let mut out = BytesMut::new();
    let n = encode_error_answer(&mut out, req, p, "ocs.example", "example").unwrap();
    assert_eq!(n, out.len());
    let m = Message::parse(&out).unwrap();
    assert_eq!(m.header().flags & flags::REQUEST, 0);
    if p.is_protocol_error() && !matches!(p.result_code, 3001 | 3007) {
        // 3xxx answers follow the generic error answer grammar.
        validate_answer(dict(), &out, &Options::strict()).unwrap();
    }
    out
}

fn failed_avp<'a>(ans: &Message<'a>) -> Avp<'a> {
    ans.find(avp::FAILED_AVP)
        .expect("Failed-AVP")
        .grouped()
        .next()
        .expect("a child")
        .unwrap()
}

fn result_code(ans: &Message<'_>) -> u32 {
    ans.find(avp::RESULT_CODE).unwrap().u32().unwrap()
}

fn received(p: &Problem<'_>) -> Avp<'static> {
    panic!("not received: {p:?}")
}

fn offending<'a>(p: &Problem<'a>) -> Avp<'a> {
    match p.failed_avp.as_ref().map(|f| f.avp) {
        Some(Offending::Received(a)) => a,
        _ => received(p),
    }
}

fn patch_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Offset of the first top-level AVP with this code.
fn offset_of(buf: &[u8], code: u32) -> usize {
    Message::parse(buf)
        .unwrap()
        .avps()
        .map(|a| a.unwrap())
        .find(|a| a.code() == code)
        .unwrap()
        .offset()
}

#[test]
fn a_gateway_ccr_is_valid_in_both_modes() {
    let buf = ccr();
    let m = validate_request(dict(), &buf, &lenient()).unwrap();
    assert_eq!(m.command_code(), 272);
    validate_request(dict(), &buf, &Options::strict()).unwrap();
}

#[test]
fn unknown_avp_without_m_bit_is_skipped_even_with_m_children() {
    let buf = ccr_with(&[], |e| {
        e.u32(UNKNOWN_PLAIN, 1);
        let g = e.begin_group(AvpId::plain(65002, 0));
        e.u32(UNKNOWN_M, 1);
        e.end_group(g);
    });
    validate_request(dict(), &buf, &lenient()).unwrap();
    validate_request(dict(), &buf, &Options::strict()).unwrap();
}

#[test]
fn version_2_is_5011_and_the_answer_copies_the_broken_header() {
    let mut buf = ccr();
    buf[0] = 2;
    let p = check(&buf);
    assert_eq!(p.result_code, result::UNSUPPORTED_VERSION);
    assert!(p.failed_avp.is_none());
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let h = a.header();
    assert_eq!((h.command_code, h.application_id), (272, 4));
    assert_eq!((h.hop_by_hop, h.end_to_end), (0x1111, 0x2222));
    assert_eq!(h.flags, flags::PROXIABLE, "R cleared, P copied, E clear");
    assert_eq!(result_code(&a), 5011);
    let first = a.avps().next().unwrap().unwrap();
    assert_eq!(first.utf8().unwrap(), "pgw.example;1;2");
}

#[test]
fn length_field_not_matching_the_bytes_is_5015_with_cc_echo() {
    let mut buf = ccr();
    let len = buf.len() as u32 + 8;
    buf[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
    let p = check(&buf);
    assert_eq!(p.result_code, result::INVALID_MESSAGE_LENGTH);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    assert_eq!(result_code(&a), 5015);
    assert_eq!(a.find(avp::CC_REQUEST_TYPE).unwrap().i32().unwrap(), 1);
    assert_eq!(a.find(avp::CC_REQUEST_NUMBER).unwrap().u32().unwrap(), 0);
    assert_eq!(a.header().hop_by_hop, 0x1111);
}

#[test]
fn length_not_a_multiple_of_four_and_short_messages_are_5015() {
    let mut buf = ccr();
    buf.extend_from_slice(&[0, 0]);
    let len = buf.len() as u32;
    buf[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
    assert_eq!(check(&buf).result_code, result::INVALID_MESSAGE_LENGTH);
    let short = [1u8, 0, 0, 12, 0x80, 0, 1, 0x18, 0, 0, 0, 0];
    assert_eq!(check(&short).result_code, result::INVALID_MESSAGE_LENGTH);
    let mut out = BytesMut::new();
    let p = check(&short);
    assert!(encode_error_answer(&mut out, &short, &p, "h", "r").is_err());
}

#[test]
fn trailing_bytes_shorter_than_an_avp_header_are_5015() {
    let mut buf = ccr();
    buf.extend_from_slice(&[0, 0, 1, 7]);
    let len = buf.len() as u32;
    buf[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
    let p = check(&buf);
    assert_eq!(p.result_code, result::INVALID_MESSAGE_LENGTH);
    answer(&buf, &p);
}

#[test]
fn e_bit_in_a_request_is_3008_answered_with_e_set_echoing_the_cc_request() {
    let mut buf = ccr();
    buf[4] |= flags::ERROR;
    let p = check(&buf);
    assert_eq!(p.result_code, result::INVALID_HDR_BITS);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    assert_eq!(a.header().flags, flags::PROXIABLE | flags::ERROR);
    // The generic error grammar's *[AVP] allows what the CCA grammar
    // requires: the client matches the answer by them.
    for id in [
        avp::AUTH_APPLICATION_ID,
        avp::CC_REQUEST_TYPE,
        avp::CC_REQUEST_NUMBER,
    ] {
        assert!(a.find(id).is_some(), "{id:?} not echoed");
    }
    assert!(a.find(avp::ERROR_MESSAGE).is_some());
    assert_eq!(a.find(avp::ERROR_MESSAGE).unwrap().flags() & 0x40, 0);
}

#[test]
fn p_bit_rules_of_the_command_give_3008() {
    // DWR must not be proxiable: 3008 in both modes.
    let mut buf = BytesMut::new();
    let mut e = Encoder::request(&mut buf, cmd::DEVICE_WATCHDOG, 0, true, 1, 1);
    e.str(avp::ORIGIN_HOST, "a.example")
        .str(avp::ORIGIN_REALM, "example");
    e.finish().unwrap();
    assert_eq!(check(&buf).result_code, result::INVALID_HDR_BITS);
    buf[4] &= !flags::PROXIABLE;
    validate_request(dict(), &buf, &lenient()).unwrap();
    // CCR must be proxiable: strict only.
    let mut buf = ccr();
    buf[4] &= !flags::PROXIABLE;
    validate_request(dict(), &buf, &lenient()).unwrap();
    assert_eq!(check_strict(&buf).result_code, result::INVALID_HDR_BITS);
}

#[test]
fn unknown_command_is_3001() {
    let mut buf = ccr();
    buf[5..8].copy_from_slice(&[0, 0x03, 0xe7]); // 999
    let p = check(&buf);
    assert_eq!(p.result_code, result::COMMAND_UNSUPPORTED);
    let a_buf = answer(&buf, &p);
    let a = Message::parse(&a_buf).unwrap();
    assert!(a.header().is_error());
    assert_eq!(result_code(&a), 3001);
}

#[test]
fn ccr_on_the_common_application_is_3007() {
    let mut buf = ccr();
    patch_u32(&mut buf, 8, 0);
    let p = check(&buf);
    assert_eq!(p.result_code, result::APPLICATION_UNSUPPORTED);
    let a_buf = answer(&buf, &p);
    assert!(Message::parse(&a_buf).unwrap().header().is_error());
}

#[test]
fn m_bit_clear_where_it_must_be_set_is_accepted_leniently_and_3009_strictly() {
    // python-diameter 0.9.0 sends Origin-Host and Origin-Realm this way.
    let buf = ccr_with(&[264, 296], |e| {
        e.str(AvpId::plain(264, 0), "pgw.example");
        e.str(AvpId::plain(296, 0), "example");
    });
    validate_request(dict(), &buf, &lenient()).unwrap();
    let p = check_strict(&buf);
    assert_eq!(p.result_code, result::INVALID_AVP_BITS);
    assert_eq!(p.failed_avp.unwrap().code(), 264);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    assert!(a.header().is_error());
    let f = failed_avp(&a);
    assert_eq!((f.code(), f.identity().unwrap()), (264, "pgw.example"));
}

#[test]
fn m_bit_set_where_it_must_not_be_is_3009_in_strict_mode() {
    let mut buf = BytesMut::new();
    let mut e = Encoder::request(&mut buf, cmd::CAPABILITIES_EXCHANGE, 0, false, 1, 1);
    e.str(avp::ORIGIN_HOST, "a.example")
        .str(avp::ORIGIN_REALM, "example")
        .address(
            avp::HOST_IP_ADDRESS,
            &std::net::IpAddr::from([127, 0, 0, 1]).into(),
        )
        .u32(avp::VENDOR_ID, 0)
        .str(AvpId::m(269, 0), "client");
    e.finish().unwrap();
    validate_request(dict(), &buf, &lenient()).unwrap();
    let p = check_strict(&buf);
    assert_eq!((p.result_code, p.failed_avp.unwrap().code()), (3009, 269));
}

#[test]
fn v_bit_with_vendor_zero_is_3009_in_both_modes() {
    let buf = ccr_with(&[], |e| {
        // Origin-State-Id with V set and Vendor-Id 0.
        e.u32(AvpId::m(278, 0), 1);
    });
    let mut buf = buf.to_vec();
    // Rewrite the last AVP as a 16-byte vendor AVP with Vendor-Id 0.
    let at = buf.len() - 12;
    buf.truncate(at);
    buf.extend_from_slice(&[0, 0, 1, 22, 0xc0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 1]);
    let len = buf.len() as u32;
    buf[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
    let p = check(&buf);
    assert_eq!((p.result_code, p.failed_avp.unwrap().code()), (3009, 278));
}

#[test]
fn unknown_avp_with_m_bit_is_5001_with_the_avp_as_failed_avp() {
    let buf = ccr_with(&[], |e| {
        e.u32(UNKNOWN_M, 0xabcd);
    });
    let p = check(&buf);
    assert_eq!(p.result_code, result::AVP_UNSUPPORTED);
    assert_eq!(offending(&p).code(), 65000);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    assert!(!a.header().is_error(), "5xxx: E clear");
    let f = failed_avp(&a);
    assert_eq!((f.code(), f.u32().unwrap()), (65000, 0xabcd));
}

#[test]
fn unknown_m_avp_inside_a_group_is_5001_nested_in_its_parent() {
    let buf = ccr_with(&[456], |e| {
        let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
        e.u32(avp::RATING_GROUP, 10);
        e.u32(AvpId::m(65003, VENDOR_3GPP), 5);
        e.end_group(g);
    });
    let p = check(&buf);
    assert_eq!(p.result_code, result::AVP_UNSUPPORTED);
    let fa = p.failed_avp.unwrap();
    assert_eq!((fa.code(), fa.vendor()), (65003, VENDOR_3GPP));
    assert_eq!(fa.parents.offsets().len(), 1);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let outer = failed_avp(&a);
    assert_eq!(outer.code(), 456);
    let inner: Vec<_> = outer.grouped().map(|x| x.unwrap()).collect();
    assert_eq!(inner.len(), 1, "only the offending child is echoed");
    assert_eq!(
        (inner[0].code(), inner[0].vendor_id()),
        (65003, VENDOR_3GPP)
    );
}

#[test]
fn bad_values_are_5004() {
    // Not UTF-8.
    let buf = ccr_with(&[461], |e| {
        e.octets(avp::SERVICE_CONTEXT_ID, &[0xff, 0xfe]);
    });
    let p = check(&buf);
    assert_eq!((p.result_code, offending(&p).code()), (5004, 461));
    // An IETF enumerated value that does not exist, in both modes.
    let buf = ccr_with(&[416], |e| {
        e.i32(avp::CC_REQUEST_TYPE, 7);
    });
    assert_eq!(check(&buf).result_code, result::INVALID_AVP_VALUE);
    // Auth-Application-Id is pinned to 4 in a CCR.
    let buf = ccr_with(&[258], |e| {
        e.u32(avp::AUTH_APPLICATION_ID, 3);
    });
    let p = check(&buf);
    assert_eq!((p.result_code, offending(&p).code()), (5004, 258));
    answer(&buf, &p);
}

#[test]
fn unknown_vendor_enum_values_are_lenient_only() {
    let buf = ccr_with(&[456], |e| {
        let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
        let u = e.begin_group(avp::USED_SERVICE_UNIT);
        e.u32(avp::CC_TIME, 10);
        e.i32(avp::REPORTING_REASON, 42);
        e.end_group(u);
        e.end_group(g);
    });
    validate_request(dict(), &buf, &lenient()).unwrap();
    let p = check_strict(&buf);
    assert_eq!(p.result_code, result::INVALID_AVP_VALUE);
    assert_eq!(p.failed_avp.unwrap().parents.offsets().len(), 2);
}

#[test]
fn missing_required_avp_is_5005_with_a_zero_filled_example() {
    let buf = ccr_with(&[461], |_| {});
    let p = check(&buf);
    assert_eq!(p.result_code, result::MISSING_AVP);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let f = failed_avp(&a);
    assert_eq!((f.code(), f.data().len(), f.flags()), (461, 0, 0x40));

    let buf = ccr_with(&[415], |_| {});
    let p = check(&buf);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let f = failed_avp(&a);
    assert_eq!((f.code(), f.data()), (415, &[0u8, 0, 0, 0][..]));
    // The answer follows the CCA grammar: CC-Request-Type is echoed, and
    // CC-Request-Number cannot be (it was missing).
    assert_eq!(a.find(avp::CC_REQUEST_TYPE).unwrap().i32().unwrap(), 1);
    assert_eq!(a.find(avp::AUTH_APPLICATION_ID).unwrap().u32().unwrap(), 4);
}

#[test]
fn missing_session_id_is_5005() {
    let buf = ccr_with(&[263], |_| {});
    let p = check(&buf);
    assert_eq!((p.result_code, p.failed_avp.unwrap().code()), (5005, 263));
}

#[test]
fn missing_child_of_a_group_is_5005_nested_in_the_group() {
    let buf = ccr_with(&[443], |e| {
        let g = e.begin_group(avp::SUBSCRIPTION_ID);
        e.i32(avp::SUBSCRIPTION_ID_TYPE, 0);
        e.end_group(g);
    });
    let p = check(&buf);
    assert_eq!(p.result_code, result::MISSING_AVP);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let outer = failed_avp(&a);
    assert_eq!(outer.code(), 443);
    let inner = outer.grouped().next().unwrap().unwrap();
    assert_eq!((inner.code(), inner.data().len()), (444, 0));
}

#[test]
fn two_identities_in_one_extension_group_are_5007() {
    let buf = ccr_with(&[], |e| {
        let g = e.begin_group(AvpId::plain(659, 0));
        e.str(AvpId::plain(660, 0), "41790000001");
        e.str(AvpId::plain(661, 0), "228010000000001");
        e.end_group(g);
    });
    let p = check(&buf);
    assert_eq!(p.result_code, result::CONTRADICTING_AVPS);
    assert!(matches!(
        p.failed_avp.unwrap().avp,
        Offending::Pair(a, b) if a.code() == 660 && b.code() == 661
    ));
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let outer = failed_avp(&a);
    assert_eq!(outer.code(), 659);
    let codes: Vec<u32> = outer.grouped().map(|x| x.unwrap().code()).collect();
    assert_eq!(codes, [660, 661]);
}

#[test]
fn an_empty_extension_group_is_5005() {
    let buf = ccr_with(&[], |e| {
        let g = e.begin_group(AvpId::plain(659, 0));
        e.end_group(g);
    });
    let p = check(&buf);
    assert_eq!((p.result_code, p.failed_avp.unwrap().code()), (5005, 660));
}

#[test]
fn session_id_not_first_is_lenient_only_and_5008_strictly() {
    let buf = ccr_with(&[263], |e| {
        e.str(avp::SESSION_ID, "pgw.example;1;2");
    });
    validate_request(dict(), &buf, &lenient()).unwrap();
    let p = check_strict(&buf);
    assert_eq!((p.result_code, offending(&p).code()), (5008, 263));
    // The answer still starts with the Session-Id.
    let out = answer(&buf, &p);
    let first = Message::parse(&out)
        .unwrap()
        .avps()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(first.code(), 263);
}

#[test]
fn avp_outside_a_closed_grammar_is_5008() {
    // Subscription-Id has no *[AVP]: a known AVP with M set is not allowed.
    let buf = ccr_with(&[443], |e| {
        let g = e.begin_group(avp::SUBSCRIPTION_ID);
        e.i32(avp::SUBSCRIPTION_ID_TYPE, 0);
        e.str(avp::SUBSCRIPTION_ID_DATA, "41790000001");
        e.u32(avp::RATING_GROUP, 1);
        e.end_group(g);
    });
    let p = check(&buf);
    assert_eq!(p.result_code, result::AVP_NOT_ALLOWED);
    let out = answer(&buf, &p);
    let outer = failed_avp(&Message::parse(&out).unwrap());
    assert_eq!(outer.code(), 443);
    assert_eq!(outer.grouped().next().unwrap().unwrap().code(), 432);
    // With the M bit clear it is skipped leniently and refused strictly.
    let buf = ccr_with(&[443], |e| {
        let g = e.begin_group(avp::SUBSCRIPTION_ID);
        e.i32(avp::SUBSCRIPTION_ID_TYPE, 0);
        e.str(avp::SUBSCRIPTION_ID_DATA, "41790000001");
        e.octets(avp::CC_CORRELATION_ID, b"corr");
        e.end_group(g);
    });
    validate_request(dict(), &buf, &lenient()).unwrap();
    assert_eq!(check_strict(&buf).result_code, result::AVP_NOT_ALLOWED);
}

#[test]
fn a_second_cc_request_type_is_5009_naming_the_extra_one() {
    let buf = ccr_with(&[], |e| {
        e.i32(avp::CC_REQUEST_TYPE, 2);
    });
    let p = check(&buf);
    assert_eq!(p.result_code, result::AVP_OCCURS_TOO_MANY_TIMES);
    let a = offending(&p);
    assert_eq!((a.code(), a.i32().unwrap()), (416, 2));
    assert!(a.offset() > offset_of(&buf, 416));
    let out = answer(&buf, &p);
    let f = failed_avp(&Message::parse(&out).unwrap());
    assert_eq!((f.code(), f.i32().unwrap()), (416, 2));
}

#[test]
fn vendor_specific_application_id_with_both_ids_is_5009() {
    let mut buf = BytesMut::new();
    let mut e = Encoder::request(&mut buf, cmd::CAPABILITIES_EXCHANGE, 0, false, 1, 1);
    e.str(avp::ORIGIN_HOST, "a.example")
        .str(avp::ORIGIN_REALM, "example")
        .address(
            avp::HOST_IP_ADDRESS,
            &std::net::IpAddr::from([127, 0, 0, 1]).into(),
        )
        .u32(avp::VENDOR_ID, 0)
        .str(avp::PRODUCT_NAME, "client");
    let g = e.begin_group(avp::VENDOR_SPECIFIC_APPLICATION_ID);
    e.u32(avp::VENDOR_ID, VENDOR_3GPP)
        .u32(avp::AUTH_APPLICATION_ID, 4)
        .u32(avp::ACCT_APPLICATION_ID, 3);
    e.end_group(g);
    e.finish().unwrap();
    let p = check(&buf);
    assert_eq!((p.result_code, p.failed_avp.unwrap().code()), (5009, 259));
    answer(&buf, &p);
}

#[test]
fn avp_running_past_the_message_is_5014_with_header_and_zero_payload() {
    let mut buf = ccr();
    let at = offset_of(&buf, 415);
    // CC-Request-Number claims 200 bytes.
    buf[at + 5..at + 8].copy_from_slice(&[0, 0, 200]);
    let p = check(&buf);
    assert_eq!(p.result_code, result::INVALID_AVP_LENGTH);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let f = failed_avp(&a);
    assert_eq!((f.code(), f.length(), f.data()), (415, 12, &[0u8; 4][..]));
}

#[test]
fn avp_length_below_its_header_is_5014() {
    let mut buf = ccr();
    let at = offset_of(&buf, 461);
    buf[at + 5..at + 8].copy_from_slice(&[0, 0, 7]);
    let p = check(&buf);
    assert_eq!((p.result_code, p.failed_avp.unwrap().code()), (5014, 461));
    answer(&buf, &p);
}

#[test]
fn unsigned32_with_five_bytes_of_data_is_5014_copied_as_received() {
    let buf = ccr_with(&[415], |e| {
        e.octets(avp::CC_REQUEST_NUMBER, &[0, 0, 0, 0, 1]);
    });
    let p = check(&buf);
    assert_eq!(p.result_code, result::INVALID_AVP_LENGTH);
    assert_eq!(offending(&p).length(), 13);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let f = failed_avp(&a);
    assert_eq!((f.code(), f.length()), (415, 13));
    // The bad CC-Request-Number is not echoed as if it were valid.
    assert!(a.find(avp::CC_REQUEST_NUMBER).is_none());
}

#[test]
fn child_running_past_its_group_is_5014_nested() {
    let mut buf = ccr();
    let mscc = offset_of(&buf, 456);
    // The first child of MSCC (an empty RSU, 8 bytes) claims 12 bytes: its
    // own data is then 4 bytes, the start of the Rating-Group header.
    let child = mscc + 8;
    buf[child + 7] = 12;
    let p = check(&buf);
    assert_eq!(p.result_code, result::INVALID_AVP_LENGTH);
    let fa = p.failed_avp.unwrap();
    assert_eq!(fa.parents.offsets(), &[mscc as u32, child as u32]);
    assert_eq!(fa.code(), 432, "code read from the cut header");
    let out = answer(&buf, &p);
    assert_eq!(failed_avp(&Message::parse(&out).unwrap()).code(), 456);
}

#[test]
fn padding_is_outside_the_avp_length_but_inside_the_message() {
    // A 5-byte Session-Id has Length 13 and takes 16 bytes.
    let buf = ccr_with(&[263], |_| {});
    let mut b2 = BytesMut::new();
    let mut e = Encoder::request(&mut b2, 272, 4, true, 0x1111, 0x2222);
    e.str(avp::SESSION_ID, "a;1;2");
    e.finish().unwrap();
    let mut joined = b2.to_vec();
    joined.extend_from_slice(&buf[20..]);
    let len = joined.len() as u32;
    joined[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
    assert_eq!(&joined[25..28], &[0, 0, 13]);
    assert_eq!(&joined[33..36], &[0, 0, 0], "zero padding");
    validate_request(dict(), &joined, &Options::strict()).unwrap();
    // Without its padding the message length is no longer a multiple of 4.
    let mut unpadded = joined.clone();
    unpadded.drain(33..36);
    let len = unpadded.len() as u32;
    unpadded[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
    assert_eq!(check(&unpadded).result_code, result::INVALID_MESSAGE_LENGTH);
}

#[test]
fn cc_request_type_and_number_are_echoed_in_5xxx_answers_only() {
    let buf = ccr_with(&[], |e| {
        e.u32(UNKNOWN_M, 1);
    });
    let p = check(&buf);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let order: Vec<u32> = a.avps().map(|x| x.unwrap().code()).collect();
    assert_eq!(
        order,
        [263, 264, 296, 268, 258, 416, 415, 281, 279],
        "Session-Id first, then identities, Result-Code, CC echo, Error-Message, Failed-AVP"
    );
    validate_answer(dict(), &out, &Options::strict()).unwrap();
}

#[test]
fn proxy_info_is_copied_in_order() {
    let buf = ccr_with(&[], |e| {
        for (host, state) in [("p1.example", b"one"), ("p2.example", b"two")] {
            let g = e.begin_group(avp::PROXY_INFO);
            e.str(AvpId::m(280, 0), host);
            e.octets(AvpId::m(33, 0), state);
            e.end_group(g);
        }
        e.u32(UNKNOWN_M, 1);
    });
    let p = check(&buf);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let hosts: Vec<_> = a
        .avps()
        .map(|x| x.unwrap())
        .filter(|x| x.code() == 284)
        .map(|x| x.child(AvpId::m(280, 0)).unwrap().identity().unwrap())
        .collect();
    assert_eq!(hosts, ["p1.example", "p2.example"]);
}

#[test]
fn answers_are_validated_against_the_answer_grammar() {
    let req = ccr();
    let m = Message::parse(&req).unwrap();
    let mut out = BytesMut::new();
    let mut e = Encoder::answer(&mut out, &m, false);
    e.u32(avp::RESULT_CODE, 2001)
        .str(avp::ORIGIN_HOST, "ocs.example")
        .str(avp::ORIGIN_REALM, "example")
        .u32(avp::AUTH_APPLICATION_ID, 4)
        .i32(avp::CC_REQUEST_TYPE, 1)
        .u32(avp::CC_REQUEST_NUMBER, 0);
    let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
    let gsu = e.begin_group(avp::GRANTED_SERVICE_UNIT);
    e.u64(avp::CC_TOTAL_OCTETS, 1 << 20);
    e.end_group(gsu);
    e.u32(avp::RATING_GROUP, 10)
        .u32(avp::VALIDITY_TIME, 600)
        .u32(avp::VOLUME_QUOTA_THRESHOLD, 1000)
        .u32(avp::QUOTA_HOLDING_TIME, 30)
        .u32(avp::RESULT_CODE, 2001);
    e.end_group(g);
    e.finish().unwrap();
    validate_answer(dict(), &out, &Options::strict()).unwrap();
    // A request is not an answer.
    assert_eq!(
        validate_answer(dict(), &req, &lenient())
            .unwrap_err()
            .result_code,
        result::INVALID_HDR_BITS
    );
    // A CCA without Result-Code is 5005.
    let mut out = BytesMut::new();
    let mut e = Encoder::answer(&mut out, &m, false);
    e.str(avp::ORIGIN_HOST, "ocs.example")
        .str(avp::ORIGIN_REALM, "example")
        .u32(avp::AUTH_APPLICATION_ID, 4)
        .i32(avp::CC_REQUEST_TYPE, 1)
        .u32(avp::CC_REQUEST_NUMBER, 0);
    e.finish().unwrap();
    let p = validate_answer(dict(), &out, &lenient()).unwrap_err();
    assert_eq!((p.result_code, p.failed_avp.unwrap().code()), (5005, 268));
}

#[test]
fn no_input_makes_validation_panic() {
    // Every truncation and every single-byte corruption of a CCR.
    let buf = ccr();
    for n in 0..buf.len() {
        let _ = validate_request(dict(), &buf[..n], &lenient());
        let _ = validate_request(dict(), &buf[..n], &Options::strict());
    }
    for i in 0..buf.len() {
        for v in [0u8, 0x40, 0x80, 0xff] {
            let mut b = buf.to_vec();
            b[i] = v;
            for o in [lenient(), Options::strict()] {
                if let Err(p) = validate_request(dict(), &b, &o) {
                    let mut out = BytesMut::new();
                    let _ = encode_error_answer(&mut out, &b, &p, "h.example", "example");
                }
            }
        }
    }
}

/// The AVPs rating reads and writes, with their TS 32.299 / RFC 8506
/// codes and formats.
#[test]
fn the_rating_avps_have_their_specified_codes() {
    use gyro_diameter::AvpType;
    for (name, code, vendor, ty) in [
        ("Tariff-Time-Change", 451, 0, AvpType::Time),
        ("Tariff-Change-Usage", 452, 0, AvpType::Enumerated),
        (
            "Time-Quota-Threshold",
            868,
            VENDOR_3GPP,
            AvpType::Unsigned32,
        ),
        (
            "Volume-Quota-Threshold",
            869,
            VENDOR_3GPP,
            AvpType::Unsigned32,
        ),
        ("Quota-Holding-Time", 871, VENDOR_3GPP, AvpType::Unsigned32),
        ("Service-Information", 873, VENDOR_3GPP, AvpType::Grouped),
        ("IMS-Information", 876, VENDOR_3GPP, AvpType::Grouped),
        ("Event-Type", 823, VENDOR_3GPP, AvpType::Grouped),
        ("Role-Of-Node", 829, VENDOR_3GPP, AvpType::Enumerated),
        (
            "Calling-Party-Address",
            831,
            VENDOR_3GPP,
            AvpType::UTF8String,
        ),
        (
            "Called-Party-Address",
            832,
            VENDOR_3GPP,
            AvpType::UTF8String,
        ),
        ("Node-Functionality", 862, VENDOR_3GPP, AvpType::Enumerated),
        ("SMS-Information", 2000, VENDOR_3GPP, AvpType::Grouped),
        ("Recipient-Info", 2026, VENDOR_3GPP, AvpType::Grouped),
        ("Recipient-Address", 1201, VENDOR_3GPP, AvpType::Grouped),
        ("Address-Data", 897, VENDOR_3GPP, AvpType::UTF8String),
        ("3GPP-SGSN-MCC-MNC", 18, VENDOR_3GPP, AvpType::UTF8String),
        (
            "3GPP-User-Location-Info",
            22,
            VENDOR_3GPP,
            AvpType::OctetString,
        ),
    ] {
        let d = dict().avp_by_name(name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!((d.code, d.vendor, d.ty), (code, vendor, ty), "{name}");
    }
}

#[test]
fn a_voice_ccr_with_ims_information_is_valid_and_needs_node_functionality() {
    let ims = |with_node: bool| {
        ccr_with(&[873], move |e| {
            let si = e.begin_group(avp::SERVICE_INFORMATION);
            let ims = e.begin_group(avp::IMS_INFORMATION);
            e.u32(avp::ROLE_OF_NODE, 0);
            if with_node {
                e.u32(avp::NODE_FUNCTIONALITY, 0);
            }
            e.str(avp::CALLING_PARTY_ADDRESS, "tel:+46701234567");
            e.str(avp::CALLED_PARTY_ADDRESS, "tel:+46901234567");
            e.end_group(ims);
            e.end_group(si);
        })
    };
    let buf = ims(true);
    validate_request(dict(), &buf, &lenient()).unwrap();
    validate_request(dict(), &buf, &Options::strict()).unwrap();
    let buf = ims(false);
    assert_eq!(check(&buf).result_code, result::MISSING_AVP);
}

/// The flags byte of the first top-level AVP with this code.
fn flags_of(m: &Message<'_>, code: u32) -> u8 {
    m.avps()
        .map(|a| a.unwrap())
        .find(|a| a.code() == code)
        .unwrap()
        .flags()
}

#[test]
fn what_an_error_answer_repeats_of_a_ccr_has_the_answers_own_flags() {
    let mut buf = ccr_with(&[], |e| {
        e.u32(UNKNOWN_M, 1);
    })
    .to_vec();
    // Reserved bits on Session-Id, P on CC-Request-Type, no M on
    // CC-Request-Number and Auth-Application-Id: accepted leniently.
    for (code, f) in [(263, 0x47), (416, 0x60), (415, 0x00), (258, 0x00)] {
        let at = offset_of(&buf, code);
        buf[at + 4] = f;
    }
    let p = check(&buf);
    assert_eq!(p.result_code, 5001);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    for code in [263, 258, 416, 415] {
        assert_eq!(
            flags_of(&a, code),
            0x40,
            "AVP {code}: M only (RFC 6733 4.1)"
        );
    }
    assert_eq!(a.session_id(), Some("pgw.example;1;2"));
    assert_eq!(a.find(avp::CC_REQUEST_TYPE).unwrap().u32().unwrap(), 1);
    assert_eq!(a.find(avp::CC_REQUEST_NUMBER).unwrap().u32().unwrap(), 0);
    validate_answer(dict(), &out, &Options::strict()).unwrap();
}

#[test]
fn an_error_answer_to_a_ccr_names_application_4_whatever_the_request_said() {
    // Auth-Application-Id 5: refused, and named in Failed-AVP only.
    let mut buf = ccr().to_vec();
    let at = offset_of(&buf, 258);
    patch_u32(&mut buf, at + 8, 5);
    let p = check(&buf);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    let apps: Vec<u32> = a
        .avps()
        .map(|x| x.unwrap())
        .filter(|x| x.code() == 258)
        .map(|x| x.u32().unwrap())
        .collect();
    assert_eq!(
        apps,
        [4],
        "the answer's own Auth-Application-Id is the header's"
    );
    assert_eq!(failed_avp(&a).u32().unwrap(), 5);
    // Without Auth-Application-Id: 5005, and the answer still has it.
    let buf = ccr_with(&[258], |_| {});
    let p = check(&buf);
    assert_eq!(p.result_code, 5005);
    let out = answer(&buf, &p);
    let a = Message::parse(&out).unwrap();
    assert_eq!(a.find(avp::AUTH_APPLICATION_ID).unwrap().u32().unwrap(), 4);
    assert_eq!(failed_avp(&a).code(), 258);
    validate_answer(dict(), &out, &Options::strict()).unwrap();
}
