//! Answer records: every answer survives its binary record unchanged, a
//! log numbers its records consecutively, and damaged records are refused.

use gyro_charging::answer_log::{decode_record, encode_record, records, RecordKey};
use gyro_charging::*;
use proptest::prelude::*;

fn units() -> impl Strategy<Value = ServiceUnits> {
    (
        any::<Option<u32>>(),
        any::<Option<u64>>(),
        any::<Option<u64>>(),
        any::<Option<u64>>(),
        any::<Option<u64>>(),
        any::<Option<u64>>(),
    )
        .prop_map(
            |(time, total_octets, input_octets, output_octets, service_specific, change)| {
                ServiceUnits {
                    time,
                    total_octets,
                    input_octets,
                    output_octets,
                    service_specific,
                    tariff_time_change: change.map(Timestamp),
                }
            },
        )
}

fn fui() -> impl Strategy<Value = FinalUnitIndication> {
    (
        0u8..3,
        prop::option::of((0u8..4, ".{0,20}")),
        prop::collection::vec(".{0,12}", 0..3),
        prop::collection::vec(".{0,12}", 0..3),
    )
        .prop_map(|(action, redirect, rules, filters)| FinalUnitIndication {
            action: match action {
                0 => FinalUnitAction::Terminate,
                1 => FinalUnitAction::Redirect,
                _ => FinalUnitAction::RestrictAccess,
            },
            redirect: redirect.map(|(t, address)| RedirectServer {
                address_type: match t {
                    0 => RedirectAddressType::Ipv4,
                    1 => RedirectAddressType::Ipv6,
                    2 => RedirectAddressType::Url,
                    _ => RedirectAddressType::SipUri,
                },
                address,
            }),
            restriction_filter_rules: rules,
            filter_ids: filters,
        })
}

fn unit_kind() -> impl Strategy<Value = UnitKind> {
    prop_oneof![
        Just(UnitKind::Octets),
        Just(UnitKind::Seconds),
        Just(UnitKind::Events)
    ]
}

fn mscc() -> impl Strategy<Value = MsccAnswer> {
    (
        any::<Option<u32>>(),
        any::<Option<u32>>(),
        any::<u32>(),
        prop::option::of(units()),
        any::<Option<u32>>(),
        prop::option::of(fui()),
        prop::option::of(unit_kind()),
        any::<(Option<u32>, Option<u32>, Option<u32>)>(),
    )
        .prop_map(
            |(
                rating_group,
                service_id,
                result_code,
                granted,
                validity_time,
                final_unit,
                unit,
                quota,
            )| {
                MsccAnswer {
                    rating_group,
                    service_id,
                    result_code,
                    granted,
                    validity_time,
                    final_unit,
                    unit,
                    volume_quota_threshold: quota.0,
                    time_quota_threshold: quota.1,
                    quota_holding_time: quota.2,
                }
            },
        )
}

fn failed_avp() -> impl Strategy<Value = FailedAvp> {
    prop_oneof![
        Just(FailedAvp::ServiceContextId),
        Just(FailedAvp::SubscriptionId),
        Just(FailedAvp::RequestedAction),
        Just(FailedAvp::MultipleServicesCreditControl),
        any::<u32>().prop_map(FailedAvp::RatingGroup),
        any::<u32>().prop_map(FailedAvp::ServiceIdentifier),
    ]
}

fn answer() -> impl Strategy<Value = CcAnswer> {
    (
        any::<u32>(),
        1u32..5,
        prop::option::of(units()),
        any::<Option<u32>>(),
        prop::option::of(fui()),
        prop::collection::vec(mscc(), 0..4),
        prop::option::of((any::<i64>(), any::<i32>(), any::<u32>())),
        prop::option::of(any::<bool>()),
        prop::option::of(failed_avp()),
    )
        .prop_map(
            |(result_code, rt, granted, validity_time, final_unit, mscc, cost, cb, failed_avp)| {
                CcAnswer {
                    result_code,
                    request_type: RequestType::from_code(rt).unwrap(),
                    request_number: 0,
                    granted,
                    validity_time,
                    final_unit,
                    mscc,
                    cost: cost.map(|(value_digits, exponent, currency_code)| CostInformation {
                        value_digits,
                        exponent,
                        currency_code,
                    }),
                    check_balance: cb.map(|n| {
                        if n {
                            CheckBalanceResult::NoCredit
                        } else {
                            CheckBalanceResult::EnoughCredit
                        }
                    }),
                    failed_avp,
                    duplicate: false,
                }
            },
        )
}

fn request() -> impl Strategy<Value = CcRequest> {
    (".{0,60}", ".{0,30}", any::<u32>(), any::<u32>()).prop_map(
        |(session_id, origin_host, end_to_end, request_number)| CcRequest {
            session_id,
            origin_host,
            end_to_end,
            request_number,
            ..CcRequest::default()
        },
    )
}

proptest! {
    #[test]
    fn every_answer_survives_its_record(
        req in request(),
        mut a in answer(),
        at in any::<u64>(),
        junk in answer(),
    ) {
        a.request_number = req.request_number;
        let mut buf = vec![7u8];
        encode_record(&mut buf, &req, &a, Timestamp(at));
        let rec = &buf[1..];
        // Decoding reuses (and fully overwrites) another answer's buffers.
        let mut back = junk;
        let key = decode_record(rec, &mut back).unwrap();
        prop_assert_eq!(&back, &a);
        prop_assert_eq!(key, RecordKey {
            at: Timestamp(at),
            request_number: req.request_number,
            end_to_end: req.end_to_end,
            session_id: &req.session_id,
            origin_host: &req.origin_host,
        });
        prop_assert!(key.matches(&req));
        // Every truncation is refused, never a panic.
        for cut in 0..rec.len() {
            prop_assert!(decode_record(&rec[..cut], &mut back).is_err());
        }
    }

    #[test]
    fn corrupt_records_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut a = CcAnswer::default();
        let _ = decode_record(&bytes, &mut a);
        for r in records(&bytes) {
            let _ = r.map(|r| decode_record(r, &mut a));
        }
    }
}

#[test]
fn a_log_numbers_its_records_consecutively() {
    let mut e = ChargingConfig::from_toml_str(
        "[[account]]\nid = 1\nbalance = 100\nsubscribers = [\"e164:1\"]\n",
    )
    .unwrap()
    .build_engine()
    .unwrap();
    let mut out = Output::default();
    let mut a = CcAnswer::default();
    for n in 0..3 {
        let r = CcRequest {
            session_id: format!("s{n}"),
            request_type: RequestType::Event,
            ..CcRequest::default()
        };
        assert_eq!(
            e.handle(&r, Timestamp(0), &mut a, &mut out),
            Handled::Answered
        );
    }
    assert_eq!((out.answers.first_seq(), out.answers.count()), (1, 3));
    assert_eq!(records(out.answers.as_bytes()).count(), 3);
    let third = out.answers.get(3).unwrap();
    assert_eq!(RecordKey::parse(third).unwrap().session_id, "s2");
    assert!(out.answers.get(4).is_none());
    let mut archive = AnswerArchive::new();
    archive.append(&out.answers);
    archive.append(&out.answers);
    assert_eq!(archive.sections().count(), 1);
    assert_eq!(archive.read(2), out.answers.get(2));
    out.clear();
    assert!(out.answers.is_empty());
    assert_eq!(e.next_answer_seq(), 4);
}

#[test]
fn the_archive_reads_every_record_across_chunks_and_reuses_forgotten_ones() {
    let mut e = ChargingConfig::from_toml_str(
        "[[account]]\nid = 1\nbalance = 100\nsubscribers = [\"e164:1\"]\n",
    )
    .unwrap()
    .build_engine()
    .unwrap();
    let mut out = Output::default();
    let mut a = CcAnswer::default();
    let mut archive = AnswerArchive::new();
    // Long Session-Ids so that a few thousand records fill several chunks.
    let long = "x".repeat(500);
    let mut seq = 0u64;
    for round in 0..6u64 {
        for batch in 0..800u64 {
            for k in 0..3u64 {
                let r = CcRequest {
                    session_id: format!("{long};{round};{batch};{k}"),
                    request_type: RequestType::Event,
                    ..CcRequest::default()
                };
                e.handle(&r, Timestamp(0), &mut a, &mut out);
                seq += 1;
            }
            archive.append(&out.answers);
            out.clear();
        }
        // Every record of the round reads back as itself.
        for s in (seq - 2_400 + 1..=seq).step_by(97) {
            let rec = archive.read(s).expect("record kept");
            let key = RecordKey::parse(rec).unwrap();
            let batch = (s - (seq - 2_400) - 1) / 3;
            assert!(key.session_id.starts_with(&long));
            assert!(
                key.session_id.contains(&format!(";{round};{batch};")),
                "{}",
                &key.session_id[500..]
            );
        }
        // Forget all but the last round.
        archive.forget_below(seq - 2_400 + 1);
        assert_eq!(archive.sections().count(), 800);
        assert!(archive.read(seq - 2_400).is_none());
        assert!(archive.read(seq - 2_399).is_some());
    }
    let all: usize = archive.sections().map(|(_, b)| records(b).count()).sum();
    assert_eq!(all, 2_400);
}
