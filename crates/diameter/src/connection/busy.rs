//! The cheap DIAMETER_TOO_BUSY (3004) answer of a shedding connection
//! ([`super::Connection::shed_until`]): built from the request's header
//! and one walk over its top-level AVP headers, without validation, a
//! dictionary or the application.
//!
//! The answer is the generic error answer of RFC 6733 section 7.2 (E bit
//! set, as section 7.1.3 requires of every 3xxx answer; P copied, R and T
//! cleared; same Command Code, Application-ID, Hop-by-Hop and End-to-End
//! Identifiers):
//!
//! ```text
//! <Session-Id> {Origin-Host} {Origin-Realm} {Result-Code = 3004}
//! [Error-Message] [Auth-Application-Id] [CC-Request-Type]
//! [CC-Request-Number] *[Proxy-Info]
//! ```
//!
//! Session-Id, CC-Request-Type and CC-Request-Number are repeated from the
//! request when it has them (RFC 8506 section 3.2: a CCA carries them,
//! error answers included), with the flags gyro sends them with (M set,
//! the other bits clear), whatever the request's were; Auth-Application-Id
//! is the header's Application-ID, for a CCR and for any request that
//! carries one; Proxy-Info AVPs are copied as they are, in their order
//! (RFC 6733 section 6.2). The constant part (Origin-Host,
//! Origin-Realm, Result-Code, Error-Message) is encoded once per
//! connection ([`template`]) and copied.

use bytes::BytesMut;

use crate::avp::flags as avp_flags;
use crate::codes::{avp, result};
use crate::encode::Encoder;
use crate::header::{flags, HEADER_LEN};
use crate::peer::PeerConfig;

// The codes `answer` matches, spelled as numbers there.
const _: () = assert!(
    avp::SESSION_ID.code == 263
        && avp::AUTH_APPLICATION_ID.code == 258
        && avp::CC_REQUEST_TYPE.code == 416
        && avp::CC_REQUEST_NUMBER.code == 415
        && avp::PROXY_INFO.code == 284
);

/// Command Code of Credit-Control.
const CREDIT_CONTROL: u32 = crate::codes::cmd::CREDIT_CONTROL;

/// What the 3004 answer says in its Error-Message.
pub(super) const ERROR_MESSAGE: &str = "overloaded; try again later or another server";

/// The AVPs every 3004 answer of this endpoint carries, encoded: its
/// Origin-Host and Origin-Realm, Result-Code 3004 and the Error-Message.
pub(super) fn template(peer: &PeerConfig) -> Vec<u8> {
    let mut b = BytesMut::new();
    let mut e = Encoder::new(&mut b, 0, 0, 0, 0, 0);
    e.str(avp::ORIGIN_HOST, &peer.origin_host)
        .str(avp::ORIGIN_REALM, &peer.origin_realm)
        .u32(avp::RESULT_CODE, result::TOO_BUSY)
        .str(avp::ERROR_MESSAGE, ERROR_MESSAGE);
    // The identity is checked at configuration: it fits.
    let _ = e.finish();
    b[HEADER_LEN..].to_vec()
}

/// Where one copied AVP lies in the request: start and padded end (an
/// empty span for none).
type Span = (usize, usize);
/// The AVP at `at` of a message of `len` bytes: its code, whether it is
/// vendor-specific, and its padded end; `None` when its header does not
/// fit, or its length is below a header's or runs past the message.
/// Nothing else is checked (a vendor-specific AVP shorter than its
/// 12-byte header is still stepped over; its contents are never read).
#[inline(always)]
fn avp_at(request: &[u8], at: usize, len: usize) -> Option<(u32, bool, usize)> {
    let h: [u8; 8] = request.get(at..at + 8)?.try_into().ok()?;
    let word = u64::from_be_bytes(h);
    let avp_len = (word & 0x00FF_FFFF) as usize;
    let end = at + ((avp_len + 3) & !3);
    if avp_len < 8 || end > len {
        return None;
    }
    let vendor = (word >> 24) as u8 & avp_flags::VENDOR != 0;
    Some(((word >> 32) as u32, vendor, end))
}

/// Appends to `out` the 3004 answer to `request`, a whole request whose
/// header was checked (its length is `request.len()`), after the
/// constant AVPs in `template`, and returns what kind of request it
/// refused. Returns `None`, with `out` unchanged, when its top-level AVPs
/// cannot be walked (a length that overruns the message): such a request
/// is left to validation, which answers it as RFC 6733 prescribes.
pub(super) fn answer(out: &mut BytesMut, request: &[u8], template: &[u8]) -> Option<Kind> {
    let len = request.len();
    // Session-Id, Auth-Application-Id, CC-Request-Type, CC-Request-Number.
    let mut copied: [Span; 4] = [(0, 0); 4];
    // Proxy-Info AVPs: where the first starts, and their bytes in all.
    let (mut first_proxy_info, mut proxy_bytes) = (0, 0);
    let mut at = HEADER_LEN;
    while at < len {
        let (code, vendor, end) = avp_at(request, at, len)?;
        if matches!(code, 258 | 263 | 284 | 415 | 416) && !vendor {
            let slot = match code {
                263 => 0, // Session-Id
                258 => 1, // Auth-Application-Id
                416 => 2, // CC-Request-Type
                415 => 3, // CC-Request-Number
                _ => {
                    // Proxy-Info
                    if proxy_bytes == 0 {
                        first_proxy_info = at;
                    }
                    proxy_bytes += end - at;
                    4
                }
            };
            if slot < 4 && copied[slot].1 == 0 {
                copied[slot] = (at, end);
            }
        }
        at = end;
    }
    // The three Unsigned32 AVPs are repeated only with their 4 bytes of
    // data (a 12-byte AVP); anything else cannot be read as their value.
    for span in &mut copied[1..] {
        if span.1 - span.0 != 12 {
            *span = (0, 0);
        }
    }
    // A CCR's answer names the application whether or not the request's
    // AVP did (RFC 8506 section 3.2), with the header's Application-ID.
    let command_code = u32::from_be_bytes([0, request[5], request[6], request[7]]);
    let application = (copied[1].1 != 0 || command_code == CREDIT_CONTROL)
        .then(|| u32::from_be_bytes(request[8..12].try_into().expect("four bytes")));
    let size = HEADER_LEN
        + template.len()
        + copied.iter().map(|(a, b)| b - a).sum::<usize>()
        + if copied[1].1 == 0 && application.is_some() {
            12
        } else {
            0
        }
        + proxy_bytes;
    let start = out.len();
    out.extend_from_slice(&request[..HEADER_LEN]);
    let (a, b) = copied[0];
    echo(out, &request[a..b]);
    out.extend_from_slice(template);
    if let Some(id) = application {
        out.extend_from_slice(&[0, 0, 1, 2, avp_flags::MANDATORY, 0, 0, 12]);
        out.extend_from_slice(&id.to_be_bytes());
    }
    for &(a, b) in &copied[2..] {
        echo(out, &request[a..b]);
    }
    let mut at = first_proxy_info;
    while proxy_bytes > 0 {
        // Walked once already: these AVPs are sound.
        let Some((code, vendor, end)) = avp_at(request, at, len) else {
            break;
        };
        if code == avp::PROXY_INFO.code && !vendor {
            out.extend_from_slice(&request[at..end]);
            proxy_bytes -= end - at;
        }
        at = end;
    }
    let h = &mut out[start..start + HEADER_LEN];
    h[1..4].copy_from_slice(&(size as u32).to_be_bytes()[1..]);
    h[4] = (h[4] & flags::PROXIABLE) | flags::ERROR;
    // CC-Request-Type's value: the four bytes after its 8-byte header.
    let (a, b) = copied[2];
    let request_type = (b >= a + 12)
        .then(|| u32::from_be_bytes(request[a + 8..a + 12].try_into().expect("four bytes")));
    Some(Kind {
        command_code,
        request_type,
    })
}

/// Appends `avp`, a whole top-level AVP of the request without a vendor
/// (8-byte header, then data and padding), as the answer's own: M set and
/// the other flag bits clear, padding zero (RFC 6733 section 4.1: the
/// sender sets them, whatever the request had). Nothing for an empty span.
fn echo(out: &mut BytesMut, avp: &[u8]) {
    let Some(len) = avp.get(5..8) else { return };
    let data_end = u32::from_be_bytes([0, len[0], len[1], len[2]]) as usize;
    let at = out.len();
    out.extend_from_slice(avp);
    out[at + 4] = avp_flags::MANDATORY;
    out[at + data_end.min(avp.len())..].fill(0);
}

/// What one refusal answered: the request's Command Code and its
/// CC-Request-Type, if it had one, for counting refusals by request kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// The request's Command Code.
    pub command_code: u32,
    /// The value of its CC-Request-Type AVP.
    pub request_type: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::{app, cmd, AvpId};
    use crate::message::Message;
    use crate::validate::{validate_answer, Options};

    fn peer() -> PeerConfig {
        PeerConfig::new("ocs.example.net", "example.net")
    }

    fn ccr(proxy_infos: usize) -> Vec<u8> {
        let mut b = BytesMut::new();
        let mut e = Encoder::request(&mut b, cmd::CREDIT_CONTROL, app::CREDIT_CONTROL, true, 7, 9);
        e.str(avp::SESSION_ID, "pgw.example.net;1;2")
            .str(avp::ORIGIN_HOST, "pgw.example.net")
            .str(avp::ORIGIN_REALM, "example.net")
            .str(avp::DESTINATION_REALM, "example.net")
            .u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL)
            .str(avp::SERVICE_CONTEXT_ID, "32251@3gpp.org")
            .u32(avp::CC_REQUEST_TYPE, 2)
            .u32(avp::CC_REQUEST_NUMBER, 5);
        for i in 0..proxy_infos {
            let g = e.begin_group(avp::PROXY_INFO);
            e.str(AvpId::m(280, 0), &format!("proxy{i}.example.net"))
                .octets(AvpId::m(33, 0), &[i as u8; 3]);
            e.end_group(g);
        }
        e.finish().unwrap();
        b.to_vec()
    }

    fn u32_of(m: &Message<'_>, id: AvpId) -> Option<u32> {
        m.find(id).and_then(|a| a.u32().ok())
    }

    #[test]
    fn a_3004_cca_is_a_generic_error_answer_that_echoes_what_a_cca_must_carry() {
        let req = ccr(2);
        let mut out = BytesMut::from(&b"before"[..]);
        let kind = answer(&mut out, &req, &template(&peer())).expect("answered");
        assert_eq!(
            kind,
            Kind {
                command_code: cmd::CREDIT_CONTROL,
                request_type: Some(2)
            }
        );
        let m = Message::parse(&out[6..]).unwrap();
        let h = m.header();
        assert_eq!(h.flags, flags::PROXIABLE | flags::ERROR);
        assert_eq!(
            (h.command_code, h.application_id, h.hop_by_hop, h.end_to_end),
            (cmd::CREDIT_CONTROL, app::CREDIT_CONTROL, 7, 9)
        );
        let codes: Vec<u32> = m.avps().map(|a| a.unwrap().code()).collect();
        assert_eq!(
            codes,
            [263, 264, 296, 268, 281, 258, 416, 415, 284, 284],
            "Session-Id first, then identity and result, echoes, Proxy-Info in order"
        );
        assert_eq!(
            m.find(avp::SESSION_ID).unwrap().data(),
            b"pgw.example.net;1;2"
        );
        assert_eq!(m.find(avp::ORIGIN_HOST).unwrap().data(), b"ocs.example.net");
        assert_eq!(u32_of(&m, avp::RESULT_CODE), Some(3004));
        assert_eq!(u32_of(&m, avp::AUTH_APPLICATION_ID), Some(4));
        assert_eq!(u32_of(&m, avp::CC_REQUEST_TYPE), Some(2));
        assert_eq!(u32_of(&m, avp::CC_REQUEST_NUMBER), Some(5));
        let proxies: Vec<&[u8]> = m
            .avps()
            .map(|a| a.unwrap())
            .filter(|a| a.code() == 284)
            .map(|a| a.data())
            .collect();
        let want: Vec<Vec<u8>> = Message::parse(&req)
            .unwrap()
            .avps()
            .map(|a| a.unwrap())
            .filter(|a| a.code() == 284)
            .map(|a| a.data().to_vec())
            .collect();
        assert_eq!(proxies, want);
        // And the dictionary agrees it is a well-formed answer.
        let dict = crate::dict::Dictionary::builtin();
        if let Err(p) = validate_answer(dict, &out[6..], &Options::strict()) {
            panic!("not a valid answer: {} {}", p.result_code, p.message);
        }
    }

    #[test]
    fn what_a_3004_repeats_of_the_request_has_the_answers_own_flags() {
        let mut req = ccr(1);
        let at_of = |req: &[u8], code: u32| {
            let m = Message::parse(req).unwrap();
            let a = m.avps().map(|a| a.unwrap()).find(|a| a.code() == code);
            a.unwrap().offset()
        };
        // Reserved bits on Session-Id, P on CC-Request-Type, no M on
        // CC-Request-Number, Auth-Application-Id 5.
        for (code, f) in [(263, 0x47), (416, 0x60), (415, 0x00), (258, 0x00)] {
            let at = at_of(&req, code);
            req[at + 4] = f;
        }
        let at = at_of(&req, 258);
        req[at + 8..at + 12].copy_from_slice(&5u32.to_be_bytes());
        let mut out = BytesMut::new();
        answer(&mut out, &req, &template(&peer())).expect("answered");
        let m = Message::parse(&out).unwrap();
        for code in [263, 258, 416, 415] {
            let a = m.avps().map(|a| a.unwrap()).find(|a| a.code() == code);
            assert_eq!(a.unwrap().flags(), avp_flags::MANDATORY, "AVP {code}");
        }
        assert_eq!(m.session_id(), Some("pgw.example.net;1;2"));
        assert_eq!(u32_of(&m, avp::AUTH_APPLICATION_ID), Some(4));
        assert_eq!(u32_of(&m, avp::CC_REQUEST_TYPE), Some(2));
        assert_eq!(u32_of(&m, avp::CC_REQUEST_NUMBER), Some(5));
        let dict = crate::dict::Dictionary::builtin();
        if let Err(p) = validate_answer(dict, &out, &Options::strict()) {
            panic!("not a valid answer: {} {}", p.result_code, p.message);
        }
    }

    #[test]
    fn a_ccr_without_auth_application_id_gets_a_3004_that_has_it() {
        let req = ccr(0);
        let m = Message::parse(&req).unwrap();
        let app_avp = m.find(avp::AUTH_APPLICATION_ID).unwrap();
        let (at, end) = (app_avp.offset(), app_avp.offset() + 12);
        let mut cut = [&req[..at], &req[end..]].concat();
        let n = cut.len() as u32;
        cut[1..4].copy_from_slice(&n.to_be_bytes()[1..]);
        let mut out = BytesMut::new();
        answer(&mut out, &cut, &template(&peer())).expect("answered");
        let m = Message::parse(&out).unwrap();
        let codes: Vec<u32> = m.avps().map(|a| a.unwrap().code()).collect();
        assert_eq!(codes, [263, 264, 296, 268, 281, 258, 416, 415]);
        assert_eq!(u32_of(&m, avp::AUTH_APPLICATION_ID), Some(4));
    }

    #[test]
    fn a_request_whose_avps_cannot_be_walked_is_left_to_validation() {
        let mut req = ccr(0);
        // The second AVP's length runs past the message.
        let at =
            HEADER_LEN + ((u32::from_be_bytes([0, req[25], req[26], req[27]]) as usize + 3) & !3);
        req[at + 5] = 0x7f;
        let mut out = BytesMut::new();
        assert!(answer(&mut out, &req, &template(&peer())).is_none());
        assert!(out.is_empty());
        // An AVP header cut short by the end of the message.
        let mut short = ccr(0);
        short.truncate(HEADER_LEN + 4);
        let n = short.len() as u32;
        short[1..4].copy_from_slice(&n.to_be_bytes()[1..]);
        assert!(answer(&mut out, &short, &template(&peer())).is_none());
        // A length below an AVP header.
        let mut tiny = ccr(0);
        tiny[HEADER_LEN + 7] = 4;
        assert!(answer(&mut out, &tiny, &template(&peer())).is_none());
        assert!(out.is_empty());
    }

    #[test]
    fn a_request_without_session_or_cc_avps_gets_the_constant_part_only() {
        let mut b = BytesMut::new();
        let mut e = Encoder::request(&mut b, 999, 16777216, false, 1, 2);
        e.str(avp::ORIGIN_HOST, "x.example.net");
        e.finish().unwrap();
        let mut out = BytesMut::new();
        let kind = answer(&mut out, &b, &template(&peer())).expect("answered");
        assert_eq!(
            kind,
            Kind {
                command_code: 999,
                request_type: None
            }
        );
        let m = Message::parse(&out).unwrap();
        assert_eq!(m.header().flags, flags::ERROR);
        let codes: Vec<u32> = m.avps().map(|a| a.unwrap().code()).collect();
        assert_eq!(codes, [264, 296, 268, 281]);
    }
}
