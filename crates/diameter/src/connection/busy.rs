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
//! Session-Id, Auth-Application-Id, CC-Request-Type and CC-Request-Number
//! are copied from the request when it has them (RFC 8506 section 3.2: a
//! CCA carries them, error answers included), and Proxy-Info AVPs in their
//! order (RFC 6733 section 6.2). The constant part (Origin-Host,
//! Origin-Realm, Result-Code, Error-Message) is encoded once per
//! connection ([`template`]) and copied.

use bytes::BytesMut;

use crate::avp::flags as avp_flags;
use crate::codes::{avp, result};
use crate::encode::Encoder;
use crate::header::{flags, HEADER_LEN};
use crate::peer::PeerConfig;

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

/// Where one copied AVP lies in the request: start and padded end.
type Span = (usize, usize);

/// Appends to `out` the 3004 answer to `request`, a whole request whose
/// header was checked (its length is `request.len()`), after the
/// constant AVPs in `template`. Returns false, with `out` unchanged, when
/// its top-level AVPs cannot be walked (a length that overruns the
/// message): such a request is left to validation, which answers it as
/// RFC 6733 prescribes.
pub(super) fn answer(out: &mut BytesMut, request: &[u8], template: &[u8]) -> bool {
    // Session-Id, Auth-Application-Id, CC-Request-Type, CC-Request-Number.
    let mut copied: [Option<Span>; 4] = [None; 4];
    let mut first_proxy_info = None;
    let mut at = HEADER_LEN;
    while at < request.len() {
        let Some(h) = request.get(at..at + 8) else {
            return false;
        };
        let code = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let vendor = h[4] & avp_flags::VENDOR != 0;
        let len = u32::from_be_bytes([0, h[5], h[6], h[7]]) as usize;
        let end = at + ((len + 3) & !3);
        if len < if vendor { 12 } else { 8 } || end > request.len() {
            return false;
        }
        if !vendor {
            let slot = match code {
                c if c == avp::SESSION_ID.code => Some(0),
                c if c == avp::AUTH_APPLICATION_ID.code => Some(1),
                c if c == avp::CC_REQUEST_TYPE.code => Some(2),
                c if c == avp::CC_REQUEST_NUMBER.code => Some(3),
                c if c == avp::PROXY_INFO.code => {
                    first_proxy_info.get_or_insert(at);
                    None
                }
                _ => None,
            };
            if let Some(i) = slot {
                copied[i].get_or_insert((at, end));
            }
        }
        at = end;
    }
    let start = out.len();
    let copy = |out: &mut BytesMut, s: Option<Span>| {
        if let Some((from, to)) = s {
            out.extend_from_slice(&request[from..to]);
        }
    };
    out.extend_from_slice(&request[..HEADER_LEN]);
    copy(out, copied[0]);
    out.extend_from_slice(template);
    for s in &copied[1..] {
        copy(out, *s);
    }
    if let Some(mut at) = first_proxy_info {
        // Walked once already: the lengths are sane.
        while at < request.len() {
            let h = &request[at..at + 8];
            let code = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
            let len = u32::from_be_bytes([0, h[5], h[6], h[7]]) as usize;
            let end = at + ((len + 3) & !3);
            if code == avp::PROXY_INFO.code && h[4] & avp_flags::VENDOR == 0 {
                out.extend_from_slice(&request[at..end]);
            }
            at = end;
        }
    }
    let len = (out.len() - start) as u32;
    let h = &mut out[start..start + HEADER_LEN];
    h[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
    h[4] = (h[4] & flags::PROXIABLE) | flags::ERROR;
    true
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
        assert!(answer(&mut out, &req, &template(&peer())));
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
    fn a_request_whose_avps_cannot_be_walked_is_left_to_validation() {
        let mut req = ccr(0);
        // The second AVP's length runs past the message.
        let at =
            HEADER_LEN + ((u32::from_be_bytes([0, req[25], req[26], req[27]]) as usize + 3) & !3);
        req[at + 5] = 0x7f;
        let mut out = BytesMut::new();
        assert!(!answer(&mut out, &req, &template(&peer())));
        assert!(out.is_empty());
        // An AVP header cut short by the end of the message.
        let mut short = ccr(0);
        short.truncate(HEADER_LEN + 4);
        let n = short.len() as u32;
        short[1..4].copy_from_slice(&n.to_be_bytes()[1..]);
        assert!(!answer(&mut out, &short, &template(&peer())));
        // A length below an AVP header.
        let mut tiny = ccr(0);
        tiny[HEADER_LEN + 7] = 4;
        assert!(!answer(&mut out, &tiny, &template(&peer())));
        assert!(out.is_empty());
    }

    #[test]
    fn a_request_without_session_or_cc_avps_gets_the_constant_part_only() {
        let mut b = BytesMut::new();
        let mut e = Encoder::request(&mut b, 999, 16777216, false, 1, 2);
        e.str(avp::ORIGIN_HOST, "x.example.net");
        e.finish().unwrap();
        let mut out = BytesMut::new();
        assert!(answer(&mut out, &b, &template(&peer())));
        let m = Message::parse(&out).unwrap();
        assert_eq!(m.header().flags, flags::ERROR);
        let codes: Vec<u32> = m.avps().map(|a| a.unwrap().code()).collect();
        assert_eq!(codes, [264, 296, 268, 281]);
    }
}
