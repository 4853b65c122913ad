//! Building CCRs and reading CCAs.

use bytes::BytesMut;
use gyro_diameter::codes::{app, avp, cmd, result};
use gyro_diameter::types::DiameterTime;
use gyro_diameter::{Encoder, Message};

use crate::args::LoadArgs;
use crate::stats::{Counts, ReqType};

/// Subscription-Id-Type values (RFC 8506 section 8.47).
const END_USER_E164: i32 = 0;
const END_USER_IMSI: i32 = 1;
/// Reporting-Reason values (3GPP TS 32.299).
const REPORTING_REASON_FINAL: i32 = 2;
const REPORTING_REASON_QUOTA_EXHAUSTED: i32 = 3;
/// Termination-Cause DIAMETER_LOGOUT (RFC 6733 section 8.15).
const DIAMETER_LOGOUT: i32 = 1;
/// Requested-Action DIRECT_DEBITING.
const DIRECT_DEBITING: i32 = 0;

/// The constant parts of every request, taken from the options once.
#[derive(Debug, Clone)]
pub(crate) struct Builder {
    origin_host: String,
    origin_realm: String,
    destination_realm: String,
    destination_host: Option<String>,
    data_context: String,
    sms_context: String,
    sms_service_id: Option<u32>,
    rating_groups: Vec<u32>,
    requested_octets: u64,
    used_octets: u64,
    used_time: u32,
    imsi_start: Option<u64>,
    subscription_id_always: bool,
}

/// What changes from one request to the next.
pub(crate) struct Req<'a> {
    pub kind: ReqType,
    pub number: u32,
    pub session_id: &'a [u8],
    pub msisdn: u64,
    /// Offset of the subscriber in the range (for the IMSI).
    pub offset: u64,
    pub hop_by_hop: u32,
    pub end_to_end: u32,
    pub timestamp: DiameterTime,
}

impl Builder {
    pub(crate) fn new(a: &LoadArgs) -> Self {
        Builder {
            origin_host: a.origin_host.clone(),
            origin_realm: a.origin_realm.clone(),
            destination_realm: a.destination_realm.clone(),
            destination_host: a.destination_host.clone(),
            data_context: a.data_context.clone(),
            sms_context: a.sms_context.clone(),
            sms_service_id: a.sms_service_id,
            rating_groups: a.rating_groups.clone(),
            requested_octets: a.requested_octets,
            used_octets: a.used_octets,
            used_time: a.used_time,
            imsi_start: a.imsi.then_some(a.imsi_start),
            subscription_id_always: a.subscription_id_always,
        }
    }

    /// Appends one CCR to `out`.
    pub(crate) fn write(&self, out: &mut BytesMut, r: &Req<'_>) {
        let mut e = Encoder::request(
            out,
            cmd::CREDIT_CONTROL,
            app::CREDIT_CONTROL,
            true,
            r.hop_by_hop,
            r.end_to_end,
        );
        let context = if r.kind == ReqType::Event {
            &self.sms_context
        } else {
            &self.data_context
        };
        e.octets(avp::SESSION_ID, r.session_id)
            .str(avp::ORIGIN_HOST, &self.origin_host)
            .str(avp::ORIGIN_REALM, &self.origin_realm)
            .str(avp::DESTINATION_REALM, &self.destination_realm);
        if let Some(h) = &self.destination_host {
            e.str(avp::DESTINATION_HOST, h);
        }
        e.u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL)
            .str(avp::SERVICE_CONTEXT_ID, context)
            .i32(avp::CC_REQUEST_TYPE, r.kind.cc_request_type())
            .u32(avp::CC_REQUEST_NUMBER, r.number)
            .time(avp::EVENT_TIMESTAMP, r.timestamp);
        let with_subscription =
            self.subscription_id_always || matches!(r.kind, ReqType::Initial | ReqType::Event);
        if with_subscription {
            let mut digits = [0u8; 20];
            let g = e.begin_group(avp::SUBSCRIPTION_ID);
            e.i32(avp::SUBSCRIPTION_ID_TYPE, END_USER_E164)
                .octets(avp::SUBSCRIPTION_ID_DATA, decimal(r.msisdn, 0, &mut digits));
            e.end_group(g);
            if let Some(start) = self.imsi_start {
                let g = e.begin_group(avp::SUBSCRIPTION_ID);
                e.i32(avp::SUBSCRIPTION_ID_TYPE, END_USER_IMSI).octets(
                    avp::SUBSCRIPTION_ID_DATA,
                    decimal(start.wrapping_add(r.offset), 15, &mut digits),
                );
                e.end_group(g);
            }
        }
        match r.kind {
            ReqType::Initial => {
                e.i32(avp::MULTIPLE_SERVICES_INDICATOR, 1);
                for &rg in &self.rating_groups {
                    let m = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
                    self.rsu(&mut e);
                    e.u32(avp::RATING_GROUP, rg);
                    e.end_group(m);
                }
            }
            ReqType::Update => {
                for &rg in &self.rating_groups {
                    let m = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
                    self.rsu(&mut e);
                    self.usu(&mut e);
                    e.u32(avp::RATING_GROUP, rg)
                        .i32(avp::REPORTING_REASON, REPORTING_REASON_QUOTA_EXHAUSTED);
                    e.end_group(m);
                }
            }
            ReqType::Terminate => {
                e.i32(avp::TERMINATION_CAUSE, DIAMETER_LOGOUT);
                for &rg in &self.rating_groups {
                    let m = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
                    self.usu(&mut e);
                    e.u32(avp::RATING_GROUP, rg)
                        .i32(avp::REPORTING_REASON, REPORTING_REASON_FINAL);
                    e.end_group(m);
                }
            }
            ReqType::Event => {
                e.i32(avp::REQUESTED_ACTION, DIRECT_DEBITING);
                if let Some(id) = self.sms_service_id {
                    e.u32(avp::SERVICE_IDENTIFIER, id);
                }
                let g = e.begin_group(avp::REQUESTED_SERVICE_UNIT);
                e.u64(avp::CC_SERVICE_SPECIFIC_UNITS, 1);
                e.end_group(g);
            }
        }
        // Only an AVP or message above 16 MiB fails, and ours are a few
        // hundred bytes: the options bound every variable part.
        let _ = e.finish();
    }

    fn rsu(&self, e: &mut Encoder<'_>) {
        let g = e.begin_group(avp::REQUESTED_SERVICE_UNIT);
        e.u64(avp::CC_TOTAL_OCTETS, self.requested_octets);
        e.end_group(g);
    }

    fn usu(&self, e: &mut Encoder<'_>) {
        let input = self.used_octets / 4;
        let g = e.begin_group(avp::USED_SERVICE_UNIT);
        e.u32(avp::CC_TIME, self.used_time)
            .u64(avp::CC_TOTAL_OCTETS, self.used_octets)
            .u64(avp::CC_INPUT_OCTETS, input)
            .u64(avp::CC_OUTPUT_OCTETS, self.used_octets - input);
        e.end_group(g);
    }
}

/// Writes `v` in decimal, left-padded with zeros to `width` digits, into
/// `buf`, and returns the digits.
pub(crate) fn decimal(mut v: u64, width: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let start = buf.len().saturating_sub(width).min(i);
    for b in &mut buf[start..i] {
        *b = b'0';
    }
    &buf[start..]
}

/// What a CCA says, as far as the load generator cares.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    /// Command-level Result-Code.
    pub result_code: Option<u32>,
    /// Experimental-Result-Code inside Experimental-Result.
    pub experimental: Option<u32>,
    /// The AVPs could be read and the Session-Id is the expected one.
    pub well_formed: bool,
    /// The quota runs out: a Final-Unit-Indication (for the command or a
    /// service) or DIAMETER_CREDIT_LIMIT_REACHED (4012) on a service.
    pub starved: bool,
}

impl Answer {
    /// The code that decides success: Result-Code, else
    /// Experimental-Result-Code.
    pub(crate) fn code(&self) -> Option<u32> {
        self.result_code.or(self.experimental)
    }

    /// A readable answer with a 2xxx code.
    pub(crate) fn is_success(&self) -> bool {
        self.well_formed && matches!(self.code(), Some(2000..=2999))
    }
}

/// Reads a CCA in one pass over its top-level AVPs, counting per-MSCC
/// Result-Codes and Experimental-Result-Codes into the given counters.
pub(crate) fn read_answer(
    msg: &Message<'_>,
    session_id: &[u8],
    mscc_codes: &mut Counts,
    experimental_codes: &mut Counts,
) -> Answer {
    let mut a = Answer {
        well_formed: true,
        ..Answer::default()
    };
    let mut session_ok = None;
    for x in msg.avps() {
        let Ok(x) = x else {
            a.well_formed = false;
            break;
        };
        if x.vendor_id() != 0 {
            continue;
        }
        match x.code() {
            263 => session_ok = Some(x.data() == session_id),
            430 => a.starved = true,
            268 => a.result_code = a.result_code.or(x.u32().ok()),
            297 => {
                let code = x
                    .child(avp::EXPERIMENTAL_RESULT_CODE)
                    .and_then(|c| c.u32().ok());
                if let Some(c) = code {
                    experimental_codes.add(c);
                    a.experimental = a.experimental.or(Some(c));
                }
            }
            456 => {
                for c in x.grouped() {
                    match c {
                        Ok(c) if c.code() == 268 && c.vendor_id() == 0 => {
                            if let Ok(v) = c.u32() {
                                mscc_codes.add(v);
                                a.starved |= v == result::CREDIT_LIMIT_REACHED;
                            }
                        }
                        Ok(c) if c.code() == 430 && c.vendor_id() == 0 => a.starved = true,
                        Ok(_) => {}
                        Err(_) => {
                            a.well_formed = false;
                            break;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    // A generic error answer may leave the Session-Id out (RFC 6733 7.2);
    // a success must carry the request's.
    let session_fine = match session_ok {
        Some(same) => same,
        None => !matches!(a.code(), Some(2000..=2999)),
    };
    a.well_formed &= session_fine && a.code().is_some();
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyro_diameter::Avp;

    fn build(kind: ReqType, a: &LoadArgs) -> BytesMut {
        let mut out = BytesMut::new();
        Builder::new(a).write(
            &mut out,
            &Req {
                kind,
                number: 2,
                session_id: b"load.gyro.test;1;2;3",
                msisdn: 46_700_000_007,
                offset: 7,
                hop_by_hop: 11,
                end_to_end: 12,
                timestamp: DiameterTime(3_900_000_000),
            },
        );
        out
    }

    fn codes(m: &Message<'_>) -> Vec<u32> {
        m.avps().map(|a| a.unwrap().code()).collect()
    }

    fn mscc<'a>(m: &Message<'a>) -> Vec<Avp<'a>> {
        m.avps()
            .map(|a| a.unwrap())
            .filter(|a| a.code() == 456)
            .collect()
    }

    #[test]
    fn every_ccr_starts_with_the_required_avps() {
        let a = LoadArgs::default();
        for kind in ReqType::ALL {
            let buf = build(kind, &a);
            let m = Message::parse(&buf).unwrap();
            let h = m.header();
            assert!(h.is_request() && h.is_proxiable());
            assert_eq!((h.command_code, h.application_id), (272, 4));
            assert_eq!((h.hop_by_hop, h.end_to_end), (11, 12));
            // Session-Id, Origin-Host, Origin-Realm, Destination-Realm,
            // Auth-Application-Id, Service-Context-Id, CC-Request-Type,
            // CC-Request-Number, Event-Timestamp.
            assert_eq!(
                codes(&m)[..9],
                [263, 264, 296, 283, 258, 461, 416, 415, 55],
                "{kind:?}"
            );
            assert_eq!(m.session_id(), Some("load.gyro.test;1;2;3"));
            let rt = m.find(avp::CC_REQUEST_TYPE).unwrap().i32().unwrap();
            assert_eq!(rt, kind.cc_request_type());
            let ctx = m.find(avp::SERVICE_CONTEXT_ID).unwrap().utf8().unwrap();
            let want = if kind == ReqType::Event {
                "32274@3gpp.org"
            } else {
                "32251@3gpp.org"
            };
            assert_eq!(ctx, want);
        }
    }

    #[test]
    fn initial_asks_quota_per_rating_group_with_subscription_id() {
        let a = LoadArgs {
            imsi: true,
            ..LoadArgs::default()
        };
        let buf = build(ReqType::Initial, &a);
        let m = Message::parse(&buf).unwrap();
        let subs: Vec<(i32, String)> = m
            .avps()
            .map(|x| x.unwrap())
            .filter(|x| x.code() == 443)
            .map(|x| {
                let t = x.child(avp::SUBSCRIPTION_ID_TYPE).unwrap().i32().unwrap();
                let d = x.child(avp::SUBSCRIPTION_ID_DATA).unwrap().utf8().unwrap();
                (t, d.to_string())
            })
            .collect();
        assert_eq!(
            subs,
            vec![
                (0, "46700000007".to_string()),
                (1, "001010000000007".to_string())
            ]
        );
        assert_eq!(
            m.find(avp::MULTIPLE_SERVICES_INDICATOR)
                .unwrap()
                .i32()
                .unwrap(),
            1
        );
        let groups = mscc(&m);
        assert_eq!(groups.len(), 2);
        for (g, rg) in groups.iter().zip([10, 20]) {
            assert_eq!(g.child(avp::RATING_GROUP).unwrap().u32().unwrap(), rg);
            let rsu = g.child(avp::REQUESTED_SERVICE_UNIT).unwrap();
            let octets = rsu.child(avp::CC_TOTAL_OCTETS).unwrap().u64().unwrap();
            assert_eq!(octets, 1_000_000);
            assert!(g.child(avp::USED_SERVICE_UNIT).is_none());
        }
    }

    #[test]
    fn update_reports_usage_and_asks_again_terminate_reports_final_usage() {
        let a = LoadArgs::default();
        let buf = build(ReqType::Update, &a);
        let m = Message::parse(&buf).unwrap();
        assert!(m.find(avp::SUBSCRIPTION_ID).is_none());
        for g in mscc(&m) {
            assert!(g.child(avp::REQUESTED_SERVICE_UNIT).is_some());
            let usu = g.child(avp::USED_SERVICE_UNIT).unwrap();
            let get = |id| usu.child(id).unwrap().u64().unwrap();
            assert_eq!(get(avp::CC_TOTAL_OCTETS), 500_000);
            assert_eq!(
                get(avp::CC_INPUT_OCTETS) + get(avp::CC_OUTPUT_OCTETS),
                500_000
            );
            assert_eq!(usu.child(avp::CC_TIME).unwrap().u32().unwrap(), 10);
            let reason = g.child(avp::REPORTING_REASON).unwrap();
            assert_eq!((reason.vendor_id(), reason.i32().unwrap()), (10415, 3));
        }
        let buf = build(ReqType::Terminate, &a);
        let m = Message::parse(&buf).unwrap();
        let cause = m.find(avp::TERMINATION_CAUSE).unwrap().i32().unwrap();
        assert_eq!(cause, 1);
        let groups = mscc(&m);
        assert_eq!(groups.len(), 2);
        for g in groups {
            assert!(g.child(avp::REQUESTED_SERVICE_UNIT).is_none());
            assert!(g.child(avp::USED_SERVICE_UNIT).is_some());
            assert_eq!(g.child(avp::REPORTING_REASON).unwrap().i32().unwrap(), 2);
        }
    }

    #[test]
    fn event_is_a_direct_debit_of_one_unit() {
        let a = LoadArgs {
            sms_service_id: Some(7),
            ..LoadArgs::default()
        };
        let buf = build(ReqType::Event, &a);
        let m = Message::parse(&buf).unwrap();
        assert_eq!(m.find(avp::REQUESTED_ACTION).unwrap().i32().unwrap(), 0);
        assert_eq!(m.find(avp::SERVICE_IDENTIFIER).unwrap().u32().unwrap(), 7);
        let rsu = m.find(avp::REQUESTED_SERVICE_UNIT).unwrap();
        let units = rsu.child(avp::CC_SERVICE_SPECIFIC_UNITS).unwrap();
        assert_eq!(units.u64().unwrap(), 1);
        assert!(m.find(avp::SUBSCRIPTION_ID).is_some());
        assert!(mscc(&m).is_empty());
    }

    #[test]
    fn every_ccr_passes_strict_dictionary_validation() {
        use gyro_diameter::validate::{validate_request, Options};
        let dict = gyro_diameter::Dictionary::builtin();
        let variants = [
            LoadArgs::default(),
            LoadArgs {
                imsi: true,
                subscription_id_always: true,
                sms_service_id: Some(1),
                destination_host: Some("ocs.gyro.test".to_string()),
                rating_groups: vec![1, 2, 3],
                ..LoadArgs::default()
            },
        ];
        for a in &variants {
            for kind in ReqType::ALL {
                let buf = build(kind, a);
                if let Err(p) = validate_request(dict, &buf, &Options::strict()) {
                    panic!("{kind:?} fails validation: {p}");
                }
            }
        }
    }

    fn answer(build: impl FnOnce(&mut Encoder<'_>)) -> BytesMut {
        let mut out = BytesMut::new();
        let mut e = Encoder::new(&mut out, 0x40, 272, 4, 1, 1);
        build(&mut e);
        e.finish().unwrap();
        out
    }

    fn read(buf: &[u8]) -> (Answer, Counts, Counts) {
        let m = Message::parse(buf).unwrap();
        let (mut a, mut b) = (Counts::default(), Counts::default());
        let ans = read_answer(&m, b"s;1;2", &mut a, &mut b);
        (ans, a, b)
    }

    #[test]
    fn answers_are_read_by_result_code_then_experimental_result() {
        let ok = answer(|e| {
            e.str(avp::SESSION_ID, "s;1;2").u32(avp::RESULT_CODE, 2001);
            let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
            e.u32(avp::RESULT_CODE, 4012);
            e.end_group(g);
        });
        let (a, mscc, _) = read(&ok);
        assert!(a.is_success());
        assert!(a.starved, "4012 on a service: its quota ran out");
        assert_eq!(mscc.0, vec![(4012, 1)]);

        let exp = answer(|e| {
            e.str(avp::SESSION_ID, "s;1;2");
            let g = e.begin_group(avp::EXPERIMENTAL_RESULT);
            e.u32(avp::VENDOR_ID, 10415)
                .u32(avp::EXPERIMENTAL_RESULT_CODE, 5030);
            e.end_group(g);
        });
        let (a, _, exp_codes) = read(&exp);
        assert_eq!(
            (a.code(), a.is_success(), a.well_formed),
            (Some(5030), false, true)
        );
        assert_eq!(exp_codes.0, vec![(5030, 1)]);
    }

    #[test]
    fn final_units_anywhere_mean_the_quota_runs_out() {
        let granted = answer(|e| {
            e.str(avp::SESSION_ID, "s;1;2").u32(avp::RESULT_CODE, 2001);
            let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
            e.u32(avp::RESULT_CODE, 2001).u32(avp::RATING_GROUP, 10);
            e.end_group(g);
        });
        assert!(!read(&granted).0.starved);
        let in_mscc = answer(|e| {
            e.str(avp::SESSION_ID, "s;1;2").u32(avp::RESULT_CODE, 2001);
            let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
            e.u32(avp::RESULT_CODE, 2001);
            let f = e.begin_group(avp::FINAL_UNIT_INDICATION);
            e.i32(avp::FINAL_UNIT_ACTION, 0);
            e.end_group(f);
            e.end_group(g);
        });
        let (a, mscc, _) = read(&in_mscc);
        assert!(a.is_success() && a.starved);
        assert_eq!(mscc.0, vec![(2001, 1)]);
        let at_command_level = answer(|e| {
            e.str(avp::SESSION_ID, "s;1;2").u32(avp::RESULT_CODE, 2001);
            let f = e.begin_group(avp::FINAL_UNIT_INDICATION);
            e.i32(avp::FINAL_UNIT_ACTION, 1);
            e.end_group(f);
        });
        assert!(read(&at_command_level).0.starved);
    }

    #[test]
    fn wrong_or_missing_session_and_missing_code_are_protocol_errors() {
        let other = answer(|e| {
            e.str(avp::SESSION_ID, "s;1;3").u32(avp::RESULT_CODE, 2001);
        });
        assert!(!read(&other).0.well_formed);
        let no_sid_ok = answer(|e| {
            e.u32(avp::RESULT_CODE, 2001);
        });
        assert!(!read(&no_sid_ok).0.well_formed);
        // A generic error answer may leave the Session-Id out.
        let no_sid_err = answer(|e| {
            e.u32(avp::RESULT_CODE, 3004);
        });
        let (a, _, _) = read(&no_sid_err);
        assert!(a.well_formed && !a.is_success());
        let no_code = answer(|e| {
            e.str(avp::SESSION_ID, "s;1;2");
        });
        assert!(!read(&no_code).0.well_formed);
    }

    #[test]
    fn malformed_avps_do_not_panic() {
        let mut buf = answer(|e| {
            e.str(avp::SESSION_ID, "s;1;2").u32(avp::RESULT_CODE, 2001);
        });
        // Make the Result-Code AVP claim more bytes than there are.
        let n = buf.len();
        buf[n - 5] = 200;
        let (a, _, _) = read(&buf);
        assert!(!a.is_success());
    }

    #[test]
    fn decimal_pads_and_handles_zero() {
        let mut b = [0u8; 20];
        assert_eq!(decimal(0, 0, &mut b), b"0");
        assert_eq!(decimal(46_700_000_123, 0, &mut b), b"46700000123");
        assert_eq!(decimal(1_010_000_000_007, 15, &mut b), b"001010000000007");
        assert_eq!(decimal(u64::MAX, 0, &mut b), b"18446744073709551615");
        assert_eq!(decimal(u64::MAX, 25, &mut b), b"18446744073709551615");
    }
}
