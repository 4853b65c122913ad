//! Mapping between Diameter Credit-Control messages (RFC 8506, 3GPP Gy)
//! and the engine's types, on top of the `gyro-diameter` codec, so a server
//! only moves bytes:
//!
//! * [`decode_ccr`] reads a CCR in place into a reused [`CcRequest`];
//! * [`encode_cca`] writes the CCA for a [`CcAnswer`] straight into an
//!   output buffer;
//! * [`encode_ccr`] writes a CCR from a [`CcRequest`] (for clients, load
//!   generators and tests).
//!
//! Validation against the dictionary (M bits, grammar, lengths) is the
//! codec's job and runs before [`decode_ccr`]; what `decode_ccr` still
//! refuses is returned as [`Error::InvalidCcr`] with the Result-Code to
//! answer with.

use crate::error::{Error, Result};
use bytes::BytesMut;
use gyro_charging::{
    CcAnswer, CcRequest, FailedAvp, FinalUnitIndication, Mscc, RequestType, RequestedAction,
    ServiceUnits, SubscriptionId, SubscriptionType,
};
use gyro_diameter::codes::{app, avp, cmd, AvpId, VENDOR_3GPP};
use gyro_diameter::header::flags;
use gyro_diameter::{Avp, AvpIter, DiameterTime, Encoder, Message};

/// The server's identity, written into every answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalIdentity {
    /// Origin-Host.
    pub origin_host: String,
    /// Origin-Realm.
    pub origin_realm: String,
}

fn invalid(result_code: u32, avp_code: u32) -> Error {
    Error::InvalidCcr {
        result_code,
        avp_code,
    }
}

fn next<'a>(item: gyro_diameter::Result<Avp<'a>>) -> Result<Avp<'a>> {
    item.map_err(|_| invalid(gyro_diameter::codes::result::INVALID_AVP_LENGTH, 0))
}

fn bad(a: &Avp<'_>) -> Error {
    invalid(gyro_diameter::codes::result::INVALID_AVP_VALUE, a.code())
}

fn u32_of(a: &Avp<'_>) -> Result<u32> {
    a.u32().map_err(|_| bad(a))
}

fn u64_of(a: &Avp<'_>) -> Result<u64> {
    a.u64().map_err(|_| bad(a))
}

fn enum_of(a: &Avp<'_>) -> Result<u32> {
    a.enumerated()
        .map_err(|_| bad(a))
        .and_then(|v| u32::try_from(v).map_err(|_| bad(a)))
}

fn utf8_into(a: &Avp<'_>, out: &mut String) -> Result<()> {
    out.clear();
    out.push_str(a.utf8().map_err(|_| bad(a))?);
    Ok(())
}

fn is(a: &Avp<'_>, id: AvpId) -> bool {
    a.code() == id.code && a.vendor_id() == id.vendor
}

/// Tariff-Change-Usage UNIT_AFTER_TARIFF_CHANGE (RFC 8506 section 8.27).
const UNIT_AFTER_TARIFF_CHANGE: u32 = 1;

/// What a USU says besides its counters.
#[derive(Default)]
struct UsedExtras {
    reporting_reason: Option<u32>,
    tariff_change_usage: Option<u32>,
}

/// Reads the unit counters of an RSU, GSU or USU; returns the
/// Reporting-Reason and Tariff-Change-Usage inside it, if any.
fn units(iter: AvpIter<'_>, u: &mut ServiceUnits) -> Result<UsedExtras> {
    let mut x = UsedExtras::default();
    for a in iter {
        let a = next(a)?;
        if a.vendor_id() == 0 {
            match a.code() {
                420 => u.time = Some(u32_of(&a)?),
                421 => u.total_octets = Some(u64_of(&a)?),
                412 => u.input_octets = Some(u64_of(&a)?),
                414 => u.output_octets = Some(u64_of(&a)?),
                417 => u.service_specific = Some(u64_of(&a)?),
                452 => x.tariff_change_usage = Some(enum_of(&a)?),
                _ => {}
            }
        } else if is(&a, avp::REPORTING_REASON) {
            x.reporting_reason = Some(enum_of(&a)?);
        }
    }
    Ok(x)
}

/// Adds a USU to `used`, and to `after` when it reports units used after
/// a tariff change; returns its Reporting-Reason.
fn used_units(
    a: &Avp<'_>,
    used: &mut Option<ServiceUnits>,
    after: &mut Option<ServiceUnits>,
) -> Result<Option<u32>> {
    let mut u = ServiceUnits::default();
    let x = units(a.grouped(), &mut u)?;
    used.get_or_insert_with(ServiceUnits::default)
        .accumulate(&u);
    if x.tariff_change_usage == Some(UNIT_AFTER_TARIFF_CHANGE) {
        after
            .get_or_insert_with(ServiceUnits::default)
            .accumulate(&u);
    }
    Ok(x.reporting_reason)
}

/// The MCC and MNC digits of the PLMN identity (TS 24.008 BCD: MCC 2,
/// MCC 1; MNC 3, MCC 3; MNC 2, MNC 1) at the start of `b`, into `out`.
fn plmn_digits(b: &[u8], out: &mut String) -> bool {
    let Some(p) = b.get(..3) else { return false };
    let nibbles = [
        p[0] & 0xf,
        p[0] >> 4,
        p[1] & 0xf,
        p[2] & 0xf,
        p[2] >> 4,
        p[1] >> 4,
    ];
    let n = if nibbles[5] == 0xf { 5 } else { 6 };
    if nibbles[..n].iter().any(|&d| d > 9) {
        return false;
    }
    out.clear();
    out.extend(nibbles[..n].iter().map(|&d| char::from(b'0' + d)));
    true
}

/// The visited network of a 3GPP-User-Location-Info (TS 29.061 section
/// 16.4.7.2): every location type (CGI, SAI, RAI, TAI, ECGI, NCGI, 5GS TAI
/// and their combinations) starts with the PLMN identity after the type
/// byte.
fn uli_plmn(data: &[u8], out: &mut String) -> bool {
    data.len() >= 4 && plmn_digits(&data[1..], out)
}

/// Where a CCR's Service-Information says the request goes and comes
/// from: the called party (IMS-Information Called-Party-Address, or
/// SMS-Information's first recipient's Address-Data) and the visited
/// network (PS-Information 3GPP-SGSN-MCC-MNC, else its
/// 3GPP-User-Location-Info).
fn service_information(a: &Avp<'_>, req: &mut CcRequest, from_uli: &mut bool) -> Result<()> {
    for c in a.grouped() {
        let c = next(c)?;
        if is(&c, avp::IMS_INFORMATION) {
            for i in c.grouped() {
                let i = next(i)?;
                if is(&i, avp::CALLED_PARTY_ADDRESS) {
                    utf8_into(&i, &mut req.called_party)?;
                }
            }
        } else if is(&c, avp::SMS_INFORMATION) {
            for i in c.grouped() {
                let i = next(i)?;
                // Recipient-Info (Rel-8 on), or Recipient-Address directly
                // in SMS-Information (earlier releases).
                let address = if is(&i, avp::RECIPIENT_INFO) {
                    i.child(avp::RECIPIENT_ADDRESS)
                } else if is(&i, avp::RECIPIENT_ADDRESS) {
                    Some(i)
                } else {
                    None
                };
                if let Some(d) = address.and_then(|r| r.child(avp::ADDRESS_DATA)) {
                    if req.called_party.is_empty() {
                        utf8_into(&d, &mut req.called_party)?;
                    }
                }
            }
        } else if is(&c, avp::PS_INFORMATION) {
            for i in c.grouped() {
                let i = next(i)?;
                visited(&i, req, from_uli)?;
            }
        }
    }
    Ok(())
}

/// Reads 3GPP-SGSN-MCC-MNC or 3GPP-User-Location-Info into the request's
/// visited network (the first wins over the second).
fn visited(a: &Avp<'_>, req: &mut CcRequest, from_uli: &mut bool) -> Result<()> {
    if is(a, avp::TGPP_SGSN_MCC_MNC) {
        utf8_into(a, &mut req.visited_plmn)?;
        *from_uli = false;
    } else if is(a, avp::TGPP_USER_LOCATION_INFO)
        && (req.visited_plmn.is_empty() || *from_uli)
        && uli_plmn(a.octets(), &mut req.visited_plmn)
    {
        *from_uli = true;
    }
    Ok(())
}

/// Reads a Multiple-Services-Credit-Control into `m` (a fresh one, filled
/// in place: the struct is large, and moving it out of a return value and
/// into the request's list cost two copies).
fn mscc(a: &Avp<'_>, m: &mut Mscc) -> Result<()> {
    for c in a.grouped() {
        let c = next(c)?;
        if c.vendor_id() == 0 {
            match c.code() {
                432 => m.rating_group = Some(u32_of(&c)?),
                439 if m.service_id.is_none() => m.service_id = Some(u32_of(&c)?),
                437 => {
                    let mut u = ServiceUnits::default();
                    units(c.grouped(), &mut u)?;
                    m.requested = Some(u);
                }
                446 => {
                    if let Some(r) = used_units(&c, &mut m.used, &mut m.used_after)? {
                        m.reporting_reason = Some(r);
                    }
                }
                _ => {}
            }
        } else if is(&c, avp::REPORTING_REASON) {
            m.reporting_reason = Some(enum_of(&c)?);
        }
    }
    Ok(())
}

/// The identity a Subscription-Id-Extension (RFC 8506 section 8.58)
/// names: its child Subscription-Id-E164 (660), -IMSI (661), -SIP-URI
/// (662), -NAI (663) or -Private (664), whose codes follow the
/// Subscription-Id-Type values. The RFC 4006 Subscription-Id and this AVP
/// are both identities of the request, in message order.
pub fn subscription_extension<'a>(a: &Avp<'a>) -> Option<(SubscriptionType, &'a str)> {
    a.grouped()
        .flatten()
        .find_map(|c| match (c.vendor_id(), c.code()) {
            (0, code @ 660..=664) => {
                Some((SubscriptionType::from_code(code - 660)?, c.utf8().ok()?))
            }
            _ => None,
        })
}

/// Reads a CCR into `req`, reusing its buffers. The message must be a
/// Credit-Control request; Session-Id, Origin-Host, Service-Context-Id,
/// CC-Request-Type and CC-Request-Number are required (5005 otherwise).
pub fn decode_ccr(msg: &Message<'_>, req: &mut CcRequest) -> Result<()> {
    let h = msg.header();
    if h.command_code != cmd::CREDIT_CONTROL || !msg.is_request() {
        return Err(invalid(
            gyro_diameter::codes::result::COMMAND_UNSUPPORTED,
            0,
        ));
    }
    req.end_to_end = h.end_to_end;
    req.retransmit = h.flags & flags::RETRANSMIT != 0;
    req.session_id.clear();
    req.origin_host.clear();
    req.service_context.clear();
    req.subscription_ids.clear();
    req.multiple_services = None;
    req.requested_action = None;
    req.service_id = None;
    req.requested = None;
    req.used = None;
    req.mscc.clear();
    req.termination_cause = None;
    req.used_after = None;
    req.called_party.clear();
    req.visited_plmn.clear();
    let mut from_uli = false;
    let (mut sid, mut host, mut ctx, mut kind, mut number) = (false, false, false, None, None);
    for a in msg.avps() {
        let a = next(a)?;
        if a.vendor_id() != 0 {
            if a.vendor_id() == VENDOR_3GPP {
                if is(&a, avp::SERVICE_INFORMATION) {
                    service_information(&a, req, &mut from_uli)?;
                } else {
                    visited(&a, req, &mut from_uli)?;
                }
            }
            continue;
        }
        match a.code() {
            263 => {
                utf8_into(&a, &mut req.session_id)?;
                sid = true;
            }
            264 => {
                req.origin_host.clear();
                req.origin_host.push_str(a.identity().map_err(|_| bad(&a))?);
                host = true;
            }
            461 => {
                utf8_into(&a, &mut req.service_context)?;
                ctx = true;
            }
            416 => kind = Some(RequestType::from_code(enum_of(&a)?).ok_or_else(|| bad(&a))?),
            415 => number = Some(u32_of(&a)?),
            443 => {
                let (mut t, mut data) = (None, None);
                for c in a.grouped() {
                    let c = next(c)?;
                    match (c.vendor_id(), c.code()) {
                        (0, 450) => t = Some(enum_of(&c)?),
                        (0, 444) => data = Some(c.utf8().map_err(|_| bad(&c))?),
                        _ => {}
                    }
                }
                // An identity of an unknown type cannot match an account.
                if let (Some(kind), Some(data)) = (t.and_then(SubscriptionType::from_code), data) {
                    req.subscription_ids.push(SubscriptionId::new(kind, data));
                }
            }
            659 => {
                if let Some((kind, data)) = subscription_extension(&a) {
                    req.subscription_ids.push(SubscriptionId::new(kind, data));
                }
            }
            455 => req.multiple_services = Some(enum_of(&a)? == 1),
            436 => {
                req.requested_action =
                    Some(RequestedAction::from_code(enum_of(&a)?).ok_or_else(|| bad(&a))?)
            }
            439 => req.service_id = Some(u32_of(&a)?),
            437 => {
                let mut u = ServiceUnits::default();
                units(a.grouped(), &mut u)?;
                req.requested = Some(u);
            }
            446 => {
                used_units(&a, &mut req.used, &mut req.used_after)?;
            }
            456 => {
                req.mscc.push(Mscc::default());
                let last = req.mscc.len() - 1;
                mscc(&a, &mut req.mscc[last])?;
            }
            295 => req.termination_cause = Some(enum_of(&a)?),
            _ => {}
        }
    }
    let missing = |code| invalid(gyro_diameter::codes::result::MISSING_AVP, code);
    if !sid {
        return Err(missing(263));
    }
    if !host {
        return Err(missing(264));
    }
    if !ctx {
        return Err(missing(461));
    }
    req.request_type = kind.ok_or_else(|| missing(416))?;
    req.request_number = number.ok_or_else(|| missing(415))?;
    check_mscc_list(&req.mscc)
}

/// Most Multiple-Services-Credit-Control AVPs gyro takes in one CCR. Each
/// becomes an MSCC of the answer (up to about 150 bytes, more with a
/// Final-Unit-Indication), so the answer to the largest request taken stays
/// well within [`MAX_ANSWER_LEN`]. Gateways send a few; a request with more
/// is answered 5009.
pub const MAX_MSCC: usize = 128;

/// Largest answer gyro sends: 64 KiB, its own default limit on a message
/// (`limits.max_message_size`), which peers commonly share. An answer that
/// would be larger is not sent; the request gets 5012 instead.
pub const MAX_ANSWER_LEN: usize = 65_536;

/// Refuses an MSCC list gyro cannot answer within [`MAX_ANSWER_LEN`] (more
/// than [`MAX_MSCC`]) and one that names the same quota twice, both with
/// 5009 DIAMETER_AVP_OCCURS_TOO_MANY_TIMES (RFC 6733 section 7.1.5: an AVP
/// appeared more often than permitted; Failed-AVP: a
/// Multiple-Services-Credit-Control of the request).
///
/// RFC 8506 gives no Result-Code of its own for a duplicate: section 5.1.2
/// makes each quota, identified by its Service-Identifier and/or
/// Rating-Group, an independent object with its own result code and
/// validity time, and section 8.16 says each MSCC instance carries the
/// units of one or more services or of a single rating group; the one
/// case of two instances for one rating group (a tariff time change,
/// sections 5.1.2 and 8.16) is in the answer, and the client reports the
/// usage before and after it inside one instance (Tariff-Change-Usage). A
/// second instance with the same (Service-Identifier, Rating-Group) key in
/// a request thus occurs more often than the command permits: answering
/// it would grant and charge one quota twice and repeat it in the answer.
fn check_mscc_list(list: &[Mscc]) -> Result<()> {
    let too_many = || {
        invalid(
            gyro_diameter::codes::result::AVP_OCCURS_TOO_MANY_TIMES,
            avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code,
        )
    };
    if list.len() > MAX_MSCC {
        return Err(too_many());
    }
    for (i, m) in list.iter().enumerate() {
        let key = (m.service_id, m.rating_group);
        if list[..i]
            .iter()
            .any(|o| (o.service_id, o.rating_group) == key)
        {
            return Err(too_many());
        }
    }
    Ok(())
}

fn put_units(e: &mut Encoder<'_>, id: AvpId, u: &ServiceUnits) {
    put_units_with(e, id, u, None);
}

/// A Requested-, Granted- or Used-Service-Unit: the Tariff-Time-Change of
/// a grant first (RFC 8506 section 8.17), or a usage report's
/// Tariff-Change-Usage (section 8.19), then the counters.
fn put_units_with(e: &mut Encoder<'_>, id: AvpId, u: &ServiceUnits, tcu: Option<u32>) {
    let g = e.begin_group(id);
    if let Some(t) = u.tariff_time_change {
        let secs = i64::try_from(t.as_secs()).unwrap_or(i64::MAX);
        if let Some(t) = DiameterTime::from_unix(secs) {
            e.time(avp::TARIFF_TIME_CHANGE, t);
        }
    }
    if let Some(v) = tcu {
        e.u32(avp::TARIFF_CHANGE_USAGE, v);
    }
    if let Some(v) = u.time {
        e.u32(avp::CC_TIME, v);
    }
    if let Some(v) = u.total_octets {
        e.u64(avp::CC_TOTAL_OCTETS, v);
    }
    if let Some(v) = u.input_octets {
        e.u64(avp::CC_INPUT_OCTETS, v);
    }
    if let Some(v) = u.output_octets {
        e.u64(avp::CC_OUTPUT_OCTETS, v);
    }
    if let Some(v) = u.service_specific {
        e.u64(avp::CC_SERVICE_SPECIFIC_UNITS, v);
    }
    e.end_group(g);
}

fn put_fui(e: &mut Encoder<'_>, f: &FinalUnitIndication) {
    let g = e.begin_group(avp::FINAL_UNIT_INDICATION);
    e.u32(avp::FINAL_UNIT_ACTION, f.action as u32);
    for r in &f.restriction_filter_rules {
        e.str(avp::RESTRICTION_FILTER_RULE, r);
    }
    for id in &f.filter_ids {
        e.str(avp::FILTER_ID, id);
    }
    if let Some(r) = &f.redirect {
        let rg = e.begin_group(avp::REDIRECT_SERVER);
        e.u32(avp::REDIRECT_ADDRESS_TYPE, r.address_type as u32);
        e.str(avp::REDIRECT_SERVER_ADDRESS, &r.address);
        e.end_group(rg);
    }
    e.end_group(g);
}

/// Failed-AVP for `f`: the offending AVP copied from the request. An AVP
/// the request lacks is written the way RFC 6733 section 7.5 asks for an
/// omitted required AVP (its code and a zero-filled payload of the minimum
/// length), except Subscription-Id: a CCR without one is answered 5030
/// DIAMETER_USER_UNKNOWN with no Failed-AVP, since no AVP was wrong and
/// the AVP is optional in the CCR grammar (RFC 8506 section 3.1).
fn put_failed(e: &mut Encoder<'_>, request: &Message<'_>, f: FailedAvp) {
    let copy = |id: AvpId| request.find(id);
    if f == FailedAvp::SubscriptionId && copy(avp::SUBSCRIPTION_ID).is_none() {
        return;
    }
    let g = e.begin_group(avp::FAILED_AVP);
    match f {
        FailedAvp::ServiceContextId => match copy(avp::SERVICE_CONTEXT_ID) {
            Some(a) => e.raw_avp(&a),
            None => e.str(avp::SERVICE_CONTEXT_ID, ""),
        },
        FailedAvp::SubscriptionId => match copy(avp::SUBSCRIPTION_ID) {
            Some(a) => e.raw_avp(&a),
            None => e,
        },
        FailedAvp::RequestedAction => match copy(avp::REQUESTED_ACTION) {
            Some(a) => e.raw_avp(&a),
            None => e.u32(avp::REQUESTED_ACTION, 0),
        },
        FailedAvp::MultipleServicesCreditControl => {
            match copy(avp::MULTIPLE_SERVICES_CREDIT_CONTROL) {
                Some(a) => e.raw_avp(&a),
                None => {
                    let m = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
                    e.end_group(m)
                }
            }
        }
        FailedAvp::RatingGroup(rg) => e.u32(avp::RATING_GROUP, rg),
        FailedAvp::ServiceIdentifier(s) => e.u32(avp::SERVICE_IDENTIFIER, s),
    };
    e.end_group(g);
}

/// Writes the CCA for `answer` to `request` at the end of `buf`: Session-Id,
/// Result-Code, Origin-Host/Realm, Auth-Application-Id, CC-Request-Type and
/// -Number, then Granted-Service-Unit, MSCC, Cost-Information,
/// Final-Unit-Indication, Check-Balance-Result, Validity-Time, the
/// request's Proxy-Info and Failed-AVP, in the order of RFC 8506
/// section 3.2. Returns the message length.
pub fn encode_cca(
    buf: &mut BytesMut,
    request: &Message<'_>,
    answer: &CcAnswer,
    local: &LocalIdentity,
) -> Result<usize> {
    let start = buf.len();
    let mut e = Encoder::answer(buf, request, false);
    e.u32(avp::RESULT_CODE, answer.result_code);
    e.str(avp::ORIGIN_HOST, &local.origin_host);
    e.str(avp::ORIGIN_REALM, &local.origin_realm);
    e.u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL);
    e.u32(avp::CC_REQUEST_TYPE, answer.request_type.code());
    e.u32(avp::CC_REQUEST_NUMBER, answer.request_number);
    if let Some(g) = &answer.granted {
        put_units(&mut e, avp::GRANTED_SERVICE_UNIT, g);
    }
    for m in &answer.mscc {
        let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
        if let Some(gsu) = &m.granted {
            put_units(&mut e, avp::GRANTED_SERVICE_UNIT, gsu);
        }
        if let Some(s) = m.service_id {
            e.u32(avp::SERVICE_IDENTIFIER, s);
        }
        if let Some(rg) = m.rating_group {
            e.u32(avp::RATING_GROUP, rg);
        }
        if let Some(v) = m.validity_time {
            e.u32(avp::VALIDITY_TIME, v);
        }
        e.u32(avp::RESULT_CODE, m.result_code);
        if let Some(f) = &m.final_unit {
            put_fui(&mut e, f);
        }
        if let Some(v) = m.time_quota_threshold {
            e.u32(avp::TIME_QUOTA_THRESHOLD, v);
        }
        if let Some(v) = m.volume_quota_threshold {
            e.u32(avp::VOLUME_QUOTA_THRESHOLD, v);
        }
        if let Some(v) = m.quota_holding_time {
            e.u32(avp::QUOTA_HOLDING_TIME, v);
        }
        e.end_group(g);
    }
    if let Some(c) = &answer.cost {
        let g = e.begin_group(avp::COST_INFORMATION);
        let uv = e.begin_group(avp::UNIT_VALUE);
        e.i64(avp::VALUE_DIGITS, c.value_digits);
        e.i32(avp::EXPONENT, c.exponent);
        e.end_group(uv);
        e.u32(avp::CURRENCY_CODE, c.currency_code);
        e.end_group(g);
    }
    if let Some(f) = &answer.final_unit {
        put_fui(&mut e, f);
    }
    if let Some(c) = answer.check_balance {
        e.u32(avp::CHECK_BALANCE_RESULT, c as u32);
    }
    if let Some(v) = answer.validity_time {
        e.u32(avp::VALIDITY_TIME, v);
    }
    let mut avps = request.avps();
    while let Some(a) = avps.next_matching(avp::PROXY_INFO.code, avp::PROXY_INFO.vendor) {
        e.raw_avp(&a);
    }
    if let Some(f) = answer.failed_avp {
        put_failed(&mut e, request, f);
    }
    let len = e.finish().map_err(|err| Error::Encode(err.to_string()))?;
    if len > MAX_ANSWER_LEN {
        buf.truncate(start);
        return Err(Error::Encode(format!(
            "a {len}-byte answer is larger than {MAX_ANSWER_LEN} bytes"
        )));
    }
    Ok(len)
}

/// Writes a CCR for `req` at the end of `buf` (the T flag from
/// `req.retransmit`). Returns the message length.
pub fn encode_ccr(
    buf: &mut BytesMut,
    req: &CcRequest,
    hop_by_hop: u32,
    origin_realm: &str,
    destination_realm: &str,
) -> Result<usize> {
    let mut f = flags::REQUEST | flags::PROXIABLE;
    if req.retransmit {
        f |= flags::RETRANSMIT;
    }
    let mut e = Encoder::new(
        buf,
        f,
        cmd::CREDIT_CONTROL,
        app::CREDIT_CONTROL,
        hop_by_hop,
        req.end_to_end,
    );
    e.str(avp::SESSION_ID, &req.session_id);
    e.str(avp::ORIGIN_HOST, &req.origin_host);
    e.str(avp::ORIGIN_REALM, origin_realm);
    e.str(avp::DESTINATION_REALM, destination_realm);
    e.u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL);
    e.str(avp::SERVICE_CONTEXT_ID, &req.service_context);
    e.u32(avp::CC_REQUEST_TYPE, req.request_type.code());
    e.u32(avp::CC_REQUEST_NUMBER, req.request_number);
    for s in &req.subscription_ids {
        let g = e.begin_group(avp::SUBSCRIPTION_ID);
        e.u32(avp::SUBSCRIPTION_ID_TYPE, s.kind.code());
        e.str(avp::SUBSCRIPTION_ID_DATA, &s.data);
        e.end_group(g);
    }
    if let Some(t) = req.termination_cause {
        e.u32(avp::TERMINATION_CAUSE, t);
    }
    if let Some(u) = &req.requested {
        put_units(&mut e, avp::REQUESTED_SERVICE_UNIT, u);
    }
    if let Some(a) = req.requested_action {
        e.u32(avp::REQUESTED_ACTION, a.code());
    }
    if let Some(u) = &req.used {
        put_used(&mut e, u, req.used_after.as_ref());
    }
    if let Some(m) = req.multiple_services {
        e.u32(avp::MULTIPLE_SERVICES_INDICATOR, u32::from(m));
    }
    if let Some(s) = req.service_id {
        e.u32(avp::SERVICE_IDENTIFIER, s);
    }
    for m in &req.mscc {
        let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
        if let Some(u) = &m.requested {
            put_units(&mut e, avp::REQUESTED_SERVICE_UNIT, u);
        }
        if let Some(u) = &m.used {
            put_used(&mut e, u, m.used_after.as_ref());
        }
        if let Some(s) = m.service_id {
            e.u32(avp::SERVICE_IDENTIFIER, s);
        }
        if let Some(rg) = m.rating_group {
            e.u32(avp::RATING_GROUP, rg);
        }
        if let Some(r) = m.reporting_reason {
            e.u32(AvpId::m(avp::REPORTING_REASON.code, VENDOR_3GPP), r);
        }
        e.end_group(g);
    }
    put_service_information(&mut e, req);
    e.finish().map_err(|err| Error::Encode(err.to_string()))
}

/// Used-Service-Unit: one, or with units after a tariff change two, the
/// first UNIT_BEFORE_TARIFF_CHANGE and the second UNIT_AFTER_TARIFF_CHANGE.
fn put_used(e: &mut Encoder<'_>, used: &ServiceUnits, after: Option<&ServiceUnits>) {
    match after {
        None => put_units(e, avp::USED_SERVICE_UNIT, used),
        Some(a) => {
            put_units_with(e, avp::USED_SERVICE_UNIT, &used.minus(a), Some(0));
            put_units_with(e, avp::USED_SERVICE_UNIT, a, Some(UNIT_AFTER_TARIFF_CHANGE));
        }
    }
}

/// Service-Information for a request with a called party or a visited
/// network: SMS-Information (for the SMS context 32274@3gpp.org) or
/// IMS-Information with the called party, PS-Information with the
/// visited network's 3GPP-SGSN-MCC-MNC (TS 32.299).
fn put_service_information(e: &mut Encoder<'_>, req: &CcRequest) {
    if req.called_party.is_empty() && req.visited_plmn.is_empty() {
        return;
    }
    let si = e.begin_group(avp::SERVICE_INFORMATION);
    if !req.visited_plmn.is_empty() {
        let ps = e.begin_group(avp::PS_INFORMATION);
        e.str(avp::TGPP_SGSN_MCC_MNC, &req.visited_plmn);
        e.end_group(ps);
    }
    if !req.called_party.is_empty() {
        if req.service_context.ends_with("32274@3gpp.org") {
            let sms = e.begin_group(avp::SMS_INFORMATION);
            let ri = e.begin_group(avp::RECIPIENT_INFO);
            let ra = e.begin_group(avp::RECIPIENT_ADDRESS);
            e.u32(avp::ADDRESS_TYPE, 1); // MSISDN
            e.str(avp::ADDRESS_DATA, &req.called_party);
            e.end_group(ra);
            e.end_group(ri);
            e.end_group(sms);
        } else {
            let ims = e.begin_group(avp::IMS_INFORMATION);
            e.u32(avp::ROLE_OF_NODE, 0); // ORIGINATING_ROLE
            e.u32(avp::NODE_FUNCTIONALITY, 6); // AS
            e.str(avp::CALLED_PARTY_ADDRESS, &req.called_party);
            e.end_group(ims);
        }
    }
    e.end_group(si);
}
