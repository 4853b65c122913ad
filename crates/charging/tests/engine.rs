//! Behaviour of the engine: result codes, quota, bundles, rounding,
//! Final-Unit-Indication, events, duplicates, supervision, replay.

mod common;

use common::*;
use gyro_charging::result_code as rc;
use gyro_charging::*;

fn run(e: &mut TestEngine, r: &CcRequest, now: Timestamp) -> (CcAnswer, Output) {
    let mut out = Output::default();
    let a = e.handle_request(r, now, &mut out);
    check_invariants(e);
    (a, out)
}

#[test]
fn initial_with_two_rating_groups_reserves_default_quota_for_each() {
    let mut e = engine();
    let (a, out) = run(
        &mut e,
        &initial("s1", "111", vec![want(10), want(20)]),
        at(0),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(a.mscc.len(), 2);
    assert_eq!(a.mscc[0].rating_group, Some(10));
    assert_eq!(a.mscc[0].result_code, rc::SUCCESS);
    assert_eq!(a.mscc[0].granted, Some(octets(1_000_000)));
    assert_eq!(a.mscc[0].validity_time, Some(600));
    assert_eq!(a.mscc[1].granted, Some(octets(1_000_000)));
    assert_eq!(a.mscc[1].validity_time, Some(300));
    assert!(a.mscc.iter().all(|m| m.final_unit.is_none()));
    let acc = e.account(AccountId(1)).unwrap();
    assert_eq!((acc.balance, acc.reserved, acc.debited), (9970, 30, 0));
    assert!(out.cdrs.is_empty());
    assert_eq!(e.session_account("s1"), Some(AccountId(1)));
}

#[test]
fn update_debits_usage_releases_the_rest_and_reserves_again() {
    let mut e = engine();
    run(
        &mut e,
        &initial("s1", "111", vec![want(10), want(20)]),
        at(0),
    );
    let (a, out) = run(
        &mut e,
        &update("s1", 1, vec![report(10, 400_000, true)]),
        at(10),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(a.mscc[0].granted, Some(octets(1_000_000)));
    let acc = e.account(AccountId(1)).unwrap();
    assert_eq!((acc.balance, acc.reserved, acc.debited), (9966, 30, 4));
    assert_eq!(out.cdrs.len(), 1);
    let c = &out.cdrs.as_slice()[0];
    assert_eq!(c.record_type, RecordType::Usage);
    assert_eq!(
        (c.rating_group, c.total_octets, c.amount),
        (Some(10), 400_000, 4)
    );
    assert_eq!(c.balance_after, 9996);
    assert_eq!((c.started, c.ended), (at(0), at(10)));
    assert_eq!(c.subscriber, "e164:111");
    assert_eq!(c.node_id, "test-node");
}

#[test]
fn terminate_debits_final_usage_releases_everything_and_writes_the_final_record() {
    let mut e = engine();
    run(
        &mut e,
        &initial("s1", "111", vec![want(10), want(20)]),
        at(0),
    );
    run(
        &mut e,
        &update("s1", 1, vec![report(10, 400_000, true)]),
        at(10),
    );
    // 1.5 MB used against a 1 MB grant: accepted and debited.
    let (a, out) = run(
        &mut e,
        &terminate("s1", 2, vec![report(10, 1_500_000, false)]),
        at(20),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
    let acc = e.account(AccountId(1)).unwrap();
    assert_eq!((acc.balance, acc.reserved, acc.debited), (9981, 0, 19));
    assert_eq!(e.session_count(), 0);
    let cdrs = out.cdrs.as_slice();
    assert_eq!(cdrs.len(), 2);
    assert_eq!(cdrs[0].amount, 15);
    assert_eq!(cdrs[1].record_type, RecordType::SessionEnd);
    assert_eq!(cdrs[1].closing_cause, Some(ClosingCause::Terminated));
    assert_eq!(cdrs[1].termination_cause, Some(1));
    assert_eq!(cdrs[1].amount, 0);
    assert_eq!(cdrs[1].started, at(0));
    assert!(cdrs[0].sequence < cdrs[1].sequence);
}

#[test]
fn input_plus_output_octets_count_when_total_is_absent() {
    let mut e = engine();
    run(&mut e, &initial("s1", "111", vec![want(10)]), at(0));
    let m = mscc(10, None, Some(io_octets(300_000, 200_000)));
    let (_, out) = run(&mut e, &update("s1", 1, vec![m]), at(1));
    let c = &out.cdrs.as_slice()[0];
    assert_eq!(
        (c.input_octets, c.output_octets, c.total_octets),
        (300_000, 200_000, 500_000)
    );
    assert_eq!((c.rated_units, c.amount), (500_000, 5));
    // No RSU: nothing new granted, reservation released.
    assert_eq!(e.account(AccountId(1)).unwrap().reserved, 0);
}

#[test]
fn usage_is_rounded_up_to_the_charging_increment() {
    let mut e = engine();
    run(&mut e, &initial("s1", "111", vec![want(10)]), at(0));
    let (_, out) = run(&mut e, &update("s1", 1, vec![report(10, 1, false)]), at(1));
    // 1 octet -> 1000 octets -> 0.01 cent -> rounded up to 1 cent.
    assert_eq!(out.cdrs.as_slice()[0].amount, 1);
}

#[test]
fn single_service_time_session_without_mscc() {
    let mut e = engine();
    let mut r = req(
        "v1",
        RequestType::Initial,
        0,
        "111",
        "32260@3gpp.org",
        vec![],
    );
    r.multiple_services = None;
    let (a, _) = run(&mut e, &r, at(0));
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(a.granted, Some(secs(300)));
    assert_eq!(a.validity_time, Some(900));
    assert!(a.mscc.is_empty());
    assert_eq!(e.account(AccountId(1)).unwrap().reserved, 150);
    let mut u = req(
        "v1",
        RequestType::Update,
        1,
        "111",
        "32260@3gpp.org",
        vec![],
    );
    u.used = Some(secs(61));
    u.requested = Some(ServiceUnits::default());
    let (a, out) = run(&mut e, &u, at(61));
    assert_eq!(a.granted, Some(secs(300)));
    // 61 s rounded to 120 s at 30 cents a minute.
    assert_eq!(out.cdrs.as_slice()[0].amount, 60);
    assert_eq!(out.cdrs.as_slice()[0].time, 61);
}

#[test]
fn bundles_are_used_before_money() {
    let mut e = engine();
    let (a, _) = run(&mut e, &initial("b1", "444", vec![want(10)]), at(0));
    assert_eq!(a.mscc[0].granted, Some(octets(1_000_000)));
    let acc = e.account(AccountId(4)).unwrap();
    assert_eq!((acc.balance, acc.reserved), (1000, 0));
    assert_eq!(acc.bundles[0].reserved, 1_000_000);
    // Use it all and ask again: 0.5 MB of bundle left, the rest with money.
    let (a, out) = run(
        &mut e,
        &update("b1", 1, vec![report(10, 1_000_000, true)]),
        at(5),
    );
    assert_eq!(a.mscc[0].granted, Some(octets(1_000_000)));
    assert_eq!(out.cdrs.as_slice()[0].amount, 0);
    assert_eq!(out.cdrs.as_slice()[0].bundle_units, 1_000_000);
    let acc = e.account(AccountId(4)).unwrap();
    assert_eq!((acc.balance, acc.reserved), (995, 5));
    assert_eq!(
        (acc.bundles[0].remaining, acc.bundles[0].reserved),
        (0, 500_000)
    );
    let (_, out) = run(
        &mut e,
        &terminate("b1", 2, vec![report(10, 800_000, false)]),
        at(9),
    );
    let c = &out.cdrs.as_slice()[0];
    assert_eq!((c.bundle_units, c.amount), (500_000, 3));
    let acc = e.account(AccountId(4)).unwrap();
    assert_eq!((acc.balance, acc.reserved, acc.debited), (997, 0, 3));
    assert_eq!(acc.bundles[0].consumed, 1_500_000);
}

#[test]
fn expired_bundles_are_not_used() {
    let mut e = engine();
    let mut cfg = ChargingConfig::from_toml_str(CONFIG).unwrap();
    cfg.accounts[3].bundles[0].valid_until = Some(at(0).as_secs());
    e = {
        let _ = e;
        cfg.build_engine().unwrap().into()
    };
    run(&mut e, &initial("b1", "444", vec![want(10)]), at(0));
    let acc = e.account(AccountId(4)).unwrap();
    assert_eq!(
        (acc.balance, acc.reserved, acc.bundles[0].reserved),
        (990, 10, 0)
    );
}

#[test]
fn partial_grant_carries_final_unit_indication_terminate() {
    let mut e = engine();
    let (a, _) = run(
        &mut e,
        &initial("p1", "555", vec![mscc(10, Some(octets(2_000_000)), None)]),
        at(0),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(a.mscc[0].granted, Some(octets(1_500_000)));
    let fui = a.mscc[0].final_unit.as_ref().unwrap();
    assert_eq!(fui.action, FinalUnitAction::Terminate);
    assert_eq!(balance(&e, 5), 0);
}

#[test]
fn partial_grant_carries_final_unit_indication_redirect() {
    let mut e = engine();
    let (a, _) = run(
        &mut e,
        &initial("p1", "555", vec![want(10), want(20)]),
        at(0),
    );
    assert!(a.mscc[0].final_unit.is_none());
    assert_eq!(a.mscc[1].granted, Some(octets(250_000)));
    let fui = a.mscc[1].final_unit.as_ref().unwrap();
    assert_eq!(fui.action, FinalUnitAction::Redirect);
    let r = fui.redirect.as_ref().unwrap();
    assert_eq!(r.address_type, RedirectAddressType::Url);
    assert_eq!(r.address, "http://top-up.example/");
}

#[test]
fn partial_grant_carries_final_unit_indication_restrict_access() {
    let mut e = engine();
    let (a, _) = run(
        &mut e,
        &initial("p1", "555", vec![mscc(30, Some(octets(3_000_000)), None)]),
        at(0),
    );
    assert_eq!(a.mscc[0].granted, Some(octets(1_500_000)));
    let fui = a.mscc[0].final_unit.as_ref().unwrap();
    assert_eq!(fui.action, FinalUnitAction::RestrictAccess);
    assert_eq!(
        fui.restriction_filter_rules,
        vec!["permit out ip from any to 10.1.1.1"]
    );
    assert_eq!(fui.filter_ids, vec!["walled-garden"]);
}

#[test]
fn nothing_left_is_credit_limit_reached_and_no_session_stays_open() {
    let mut e = engine();
    let (a, out) = run(&mut e, &initial("z1", "222", vec![want(10)]), at(0));
    assert_eq!(a.result_code, rc::CREDIT_LIMIT_REACHED);
    assert_eq!(a.mscc[0].result_code, rc::CREDIT_LIMIT_REACHED);
    assert_eq!(a.mscc[0].granted, None);
    assert_eq!(e.session_count(), 0);
    assert!(out.cdrs.is_empty());
    let (a, _) = run(&mut e, &update("z1", 1, vec![want(10)]), at(1));
    assert_eq!(a.result_code, rc::UNKNOWN_SESSION_ID);
}

#[test]
fn an_exhausted_rating_group_in_an_update_does_not_end_the_session() {
    let mut e = engine();
    run(&mut e, &initial("p1", "555", vec![want(10)]), at(0));
    // 10 reserved, 5 left; use 1 MB (10) and ask for more twice.
    let (a, _) = run(
        &mut e,
        &update("p1", 1, vec![report(10, 1_000_000, true)]),
        at(1),
    );
    assert_eq!(a.mscc[0].granted, Some(octets(500_000)));
    assert!(a.mscc[0].final_unit.is_some());
    let (a, _) = run(
        &mut e,
        &update("p1", 2, vec![report(10, 500_000, true)]),
        at(2),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(a.mscc[0].result_code, rc::CREDIT_LIMIT_REACHED);
    assert_eq!(e.session_count(), 1);
    assert_eq!(balance(&e, 5), 0);
}

#[test]
fn single_service_update_that_runs_dry_closes_the_session() {
    let mut e = engine();
    let mut r = req(
        "v1",
        RequestType::Initial,
        0,
        "555",
        "32260@3gpp.org",
        vec![],
    );
    r.multiple_services = None;
    let (a, _) = run(&mut e, &r, at(0));
    // 15 cents buy 30 seconds (one 60-second increment costs 30): nothing.
    assert_eq!(a.result_code, rc::CREDIT_LIMIT_REACHED);
    let mut e = engine();
    e.top_up(AccountId(5), 30, &mut Output::default()).unwrap();
    let (a, _) = run(&mut e, &r, at(0));
    assert_eq!(a.granted, Some(secs(60)));
    assert!(a.final_unit.is_some());
    let mut u = req(
        "v1",
        RequestType::Update,
        1,
        "555",
        "32260@3gpp.org",
        vec![],
    );
    u.used = Some(secs(60));
    u.requested = Some(ServiceUnits::default());
    let (a, out) = run(&mut e, &u, at(60));
    assert_eq!(a.result_code, rc::CREDIT_LIMIT_REACHED);
    assert_eq!(e.session_count(), 0);
    let end = out.cdrs.as_slice().last().unwrap();
    assert_eq!(end.closing_cause, Some(ClosingCause::Rejected));
    assert_eq!(end.result_code, rc::CREDIT_LIMIT_REACHED);
}

#[test]
fn unknown_subscriber_is_user_unknown() {
    let mut e = engine();
    let (a, _) = run(&mut e, &initial("u1", "999", vec![want(10)]), at(0));
    assert_eq!(a.result_code, rc::USER_UNKNOWN);
    assert_eq!(a.failed_avp, Some(FailedAvp::SubscriptionId));
    let (a, _) = run(
        &mut e,
        &event("u2", "999", RequestedAction::DirectDebiting, 1),
        at(0),
    );
    assert_eq!(a.result_code, rc::USER_UNKNOWN);
}

#[test]
fn any_known_subscription_id_finds_the_account() {
    let mut e = engine();
    let mut r = initial("i1", "999", vec![want(10)]);
    r.subscription_ids.push(SubscriptionId::new(
        SubscriptionType::Imsi,
        "240010000000001",
    ));
    let (a, _) = run(&mut e, &r, at(0));
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(e.session_account("i1"), Some(AccountId(1)));
    assert_eq!(
        e.resolve_subscriber(&SubscriptionId::e164("+111")),
        Some(AccountId(1))
    );
}

#[test]
fn unrateable_service_is_rating_failed() {
    let mut e = engine();
    let mut r = initial("r1", "111", vec![want(10)]);
    r.service_context = "32299@3gpp.org".into();
    let (a, _) = run(&mut e, &r, at(0));
    assert_eq!(a.result_code, rc::RATING_FAILED);
    assert_eq!(a.failed_avp, Some(FailedAvp::ServiceContextId));
    let (a, _) = run(&mut e, &initial("r2", "111", vec![want(99)]), at(0));
    assert_eq!(a.result_code, rc::RATING_FAILED);
    assert_eq!(a.failed_avp, Some(FailedAvp::RatingGroup(99)));
    assert_eq!(e.session_count(), 0);
    let (a, _) = run(
        &mut e,
        &initial("r3", "111", vec![want(10), want(99)]),
        at(0),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(a.mscc[1].result_code, rc::RATING_FAILED);
    // A prefixed context matches by suffix.
    let mut r = initial("r4", "111", vec![want(10)]);
    r.service_context = "12.32251@3gpp.org".into();
    assert_eq!(run(&mut e, &r, at(0)).0.result_code, rc::SUCCESS);
}

#[test]
fn blocked_account_is_service_denied() {
    let mut e = engine();
    let (a, _) = run(&mut e, &initial("d1", "333", vec![want(10)]), at(0));
    assert_eq!(a.result_code, rc::END_USER_SERVICE_DENIED);
    let (a, _) = run(
        &mut e,
        &event("d2", "333", RequestedAction::DirectDebiting, 1),
        at(0),
    );
    assert_eq!(a.result_code, rc::END_USER_SERVICE_DENIED);
    let (a, _) = run(
        &mut e,
        &event("d3", "333", RequestedAction::RefundAccount, 1),
        at(0),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
}

#[test]
fn blocking_an_account_mid_session_debits_usage_and_ends_the_session() {
    let mut e = engine();
    run(&mut e, &initial("d1", "111", vec![want(10)]), at(0));
    let mut out = Output::default();
    e.set_status(AccountId(1), AccountStatus::Blocked, &mut out)
        .unwrap();
    let (a, out) = run(
        &mut e,
        &update("d1", 1, vec![report(10, 500_000, true)]),
        at(1),
    );
    assert_eq!(a.result_code, rc::END_USER_SERVICE_DENIED);
    assert_eq!(e.session_count(), 0);
    assert_eq!(out.cdrs.as_slice()[0].amount, 5);
    let acc = e.account(AccountId(1)).unwrap();
    assert_eq!((acc.balance, acc.reserved, acc.debited), (9995, 0, 5));
}

#[test]
fn zero_rated_service_not_applicable_or_free() {
    let mut e = engine();
    let (a, _) = run(&mut e, &initial("n1", "111", vec![want(40)]), at(0));
    assert_eq!(a.result_code, rc::CREDIT_CONTROL_NOT_APPLICABLE);
    assert_eq!(e.session_count(), 0);
    let (a, _) = run(
        &mut e,
        &initial("n2", "111", vec![want(10), want(40), want(50)]),
        at(0),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(a.mscc[1].result_code, rc::CREDIT_CONTROL_NOT_APPLICABLE);
    assert_eq!(a.mscc[2].result_code, rc::SUCCESS);
    assert_eq!(a.mscc[2].granted, Some(octets(5_000_000)));
    assert_eq!(e.account(AccountId(1)).unwrap().reserved, 10);
    let (_, out) = run(
        &mut e,
        &update("n2", 1, vec![report(50, 9_000_000, true)]),
        at(1),
    );
    assert_eq!(out.cdrs.as_slice()[0].amount, 0);
    assert_eq!(out.cdrs.as_slice()[0].total_octets, 9_000_000);
}

#[test]
fn update_or_terminate_for_an_unknown_session_is_unknown_session_id() {
    let mut e = engine();
    assert_eq!(
        run(&mut e, &update("nope", 1, vec![want(10)]), at(0))
            .0
            .result_code,
        rc::UNKNOWN_SESSION_ID
    );
    assert_eq!(
        run(&mut e, &terminate("nope", 1, vec![]), at(0))
            .0
            .result_code,
        rc::UNKNOWN_SESSION_ID
    );
}

#[test]
fn terminate_after_terminate() {
    let mut e = engine();
    run(&mut e, &initial("t1", "111", vec![want(10)]), at(0));
    let t = terminate("t1", 1, vec![report(10, 100_000, false)]);
    let (first, _) = run(&mut e, &t, at(1));
    assert_eq!(first.result_code, rc::SUCCESS);
    // The same request again: the same answer, nothing charged.
    let mut again = t.clone();
    again.retransmit = true;
    let (dup, out) = run(&mut e, &again, at(2));
    assert!(dup.duplicate);
    assert_eq!(dup.result_code, rc::SUCCESS);
    assert!(out.effects.is_empty() && out.cdrs.is_empty());
    // A new Terminate for the closed session.
    let (a, _) = run(&mut e, &terminate("t1", 2, vec![]), at(3));
    assert_eq!(a.result_code, rc::UNKNOWN_SESSION_ID);
}

#[test]
fn initial_for_an_open_session_is_unable_to_comply() {
    let mut e = engine();
    run(&mut e, &initial("o1", "111", vec![want(10)]), at(0));
    let before = e.snapshot();
    let mut r = initial("o1", "111", vec![want(10)]);
    r.request_number = 7;
    let (a, out) = run(&mut e, &r, at(1));
    assert_eq!(a.result_code, rc::UNABLE_TO_COMPLY);
    // Only the answer is journaled (for duplicate detection).
    assert!(out.effects.is_empty());
    assert_eq!(out.answers.count(), 1);
    let mut journaled = CcAnswer::default();
    assert!(e.resolve_duplicate(&r, out.answers.as_bytes(), &mut journaled));
    assert_eq!(
        CcAnswer {
            duplicate: false,
            ..journaled
        },
        a
    );
    assert_eq!(e.snapshot().ledger, before.ledger);
}

#[test]
fn duplicates_get_the_same_answer_and_change_nothing() {
    let mut e = engine();
    run(&mut e, &initial("x1", "111", vec![want(10)]), at(0));
    let u = update("x1", 1, vec![report(10, 300_000, true)]);
    let (first, _) = run(&mut e, &u, at(1));
    let before = e.snapshot();
    // Same Session-Id and CC-Request-Number, new End-to-End id, T flag.
    let mut r = u.clone();
    r.end_to_end += 1000;
    r.retransmit = true;
    let (a, out) = run(&mut e, &r, at(2));
    assert!(a.duplicate);
    assert_eq!(
        CcAnswer {
            duplicate: false,
            ..a
        },
        first
    );
    assert!(out.effects.is_empty() && out.cdrs.is_empty());
    assert_eq!(e.snapshot(), before);
    // Same Origin-Host and End-to-End id (and Session-Id), no T flag.
    let mut r = u.clone();
    r.request_number = 9;
    let (a, out) = run(&mut e, &r, at(3));
    assert!(a.duplicate);
    assert!(out.effects.is_empty());
    // An End-to-End id reused under another Session-Id is not a duplicate.
    let mut r = initial("x2", "111", vec![want(10)]);
    r.end_to_end = u.end_to_end;
    let (a, _) = run(&mut e, &r, at(4));
    assert!(!a.duplicate);
    assert_eq!(e.session_count(), 2);
}

#[test]
fn remembered_answers_expire() {
    let mut e = engine();
    let r = event("ev", "111", RequestedAction::DirectDebiting, 1);
    run(&mut e, &r, at(0));
    assert_eq!(e.remembered_answers(), 1);
    assert!(run(&mut e, &r, at(299)).0.duplicate);
    e.tick(at(300), &mut Output::default());
    assert_eq!(e.remembered_answers(), 0);
    // Past the window a repeat is a new request.
    assert!(!run(&mut e, &r, at(301)).0.duplicate);
    assert_eq!(balance(&e, 1), 9990);
}

#[test]
fn out_of_order_updates_are_answered_normally() {
    let mut e = engine();
    run(
        &mut e,
        &initial("oo", "111", vec![want(10), want(20)]),
        at(0),
    );
    let (a2, _) = run(
        &mut e,
        &update("oo", 2, vec![report(20, 100_000, true)]),
        at(1),
    );
    let (a1, _) = run(
        &mut e,
        &update("oo", 1, vec![report(10, 100_000, true)]),
        at(1),
    );
    assert_eq!((a2.result_code, a1.result_code), (rc::SUCCESS, rc::SUCCESS));
    assert!(!a1.duplicate);
    let acc = e.account(AccountId(1)).unwrap();
    assert_eq!(acc.debited, 3);
}

#[test]
fn usage_for_a_rating_group_never_granted_is_charged() {
    let mut e = engine();
    run(&mut e, &initial("ng", "111", vec![want(10)]), at(0));
    let (a, out) = run(
        &mut e,
        &update("ng", 1, vec![report(20, 1_000_000, false)]),
        at(1),
    );
    assert_eq!(a.mscc[0].result_code, rc::SUCCESS);
    assert_eq!(out.cdrs.as_slice()[0].amount, 20);
    assert_eq!(e.account(AccountId(1)).unwrap().debited, 20);
}

#[test]
fn overuse_never_passes_the_credit_limit() {
    let mut e = engine();
    let (a, _) = run(
        &mut e,
        &initial("cl", "666", vec![mscc(10, Some(octets(3_000_000)), None)]),
        at(0),
    );
    // 5 + 20 credit = 25 cents = 2.5 MB.
    assert_eq!(a.mscc[0].granted, Some(octets(2_500_000)));
    assert_eq!(balance(&e, 6), -20);
    let (_, out) = run(
        &mut e,
        &terminate("cl", 1, vec![report(10, 3_000_000, false)]),
        at(1),
    );
    let c = &out.cdrs.as_slice()[0];
    assert_eq!((c.amount, c.unbilled), (25, 5));
    let acc = e.account(AccountId(6)).unwrap();
    assert_eq!((acc.balance, acc.reserved, acc.debited), (-20, 0, 25));
}

#[test]
fn sessions_of_one_account_share_its_balance() {
    let mut e = engine();
    let (a, _) = run(&mut e, &initial("sa", "555", vec![want(10)]), at(0));
    assert_eq!(a.mscc[0].granted, Some(octets(1_000_000)));
    let (b, _) = run(&mut e, &initial("sb", "555", vec![want(10)]), at(0));
    assert_eq!(b.mscc[0].granted, Some(octets(500_000)));
    assert!(b.mscc[0].final_unit.is_some());
    let (c, _) = run(&mut e, &initial("sc", "555", vec![want(10)]), at(0));
    assert_eq!(c.result_code, rc::CREDIT_LIMIT_REACHED);
    // Session a ends having used half: the other half is free again.
    run(
        &mut e,
        &terminate("sa", 1, vec![report(10, 500_000, false)]),
        at(1),
    );
    let (c, _) = run(&mut e, &initial("sc2", "555", vec![want(10)]), at(2));
    assert_eq!(c.mscc[0].granted, Some(octets(500_000)));
}

#[test]
fn idle_sessions_are_closed_by_supervision() {
    let mut e = engine();
    run(&mut e, &initial("tc", "111", vec![want(10)]), at(0));
    run(&mut e, &initial("tc2", "111", vec![want(10)]), at(0));
    assert_eq!(e.poll_timeout(), Some(at(100)));
    run(
        &mut e,
        &update("tc2", 1, vec![report(10, 1000, true)]),
        at(90),
    );
    let mut out = Output::default();
    assert_eq!(e.tick(at(99), &mut out), 0);
    assert_eq!(e.tick(at(100), &mut out), 1);
    check_invariants(&e);
    assert_eq!(e.session_count(), 1);
    let c = &out.cdrs.as_slice()[0];
    assert_eq!(c.closing_cause, Some(ClosingCause::SupervisionExpired));
    assert_eq!(c.session_id, "tc");
    assert_eq!(e.account(AccountId(1)).unwrap().reserved, 10);
    let (a, _) = run(&mut e, &update("tc", 1, vec![want(10)]), at(101));
    assert_eq!(a.result_code, rc::UNKNOWN_SESSION_ID);
    // A late update expires the session even before tick runs.
    let (a, out) = run(&mut e, &update("tc2", 2, vec![want(10)]), at(190));
    assert_eq!(a.result_code, rc::UNKNOWN_SESSION_ID);
    assert_eq!(
        out.cdrs.as_slice()[0].closing_cause,
        Some(ClosingCause::SupervisionExpired)
    );
    assert_eq!(e.account(AccountId(1)).unwrap().reserved, 0);
    assert_eq!(e.tick(at(1000), &mut Output::default()), 0);
}

#[test]
fn event_direct_debiting_charges_at_once() {
    let mut e = engine();
    let (a, out) = run(
        &mut e,
        &event("e1", "111", RequestedAction::DirectDebiting, 2),
        at(0),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(a.granted, Some(events(2)));
    assert_eq!(
        a.cost,
        Some(CostInformation {
            value_digits: 10,
            exponent: -2,
            currency_code: 978
        })
    );
    assert_eq!(balance(&e, 1), 9990);
    assert_eq!(e.session_count(), 0);
    let c = &out.cdrs.as_slice()[0];
    assert_eq!(c.record_type, RecordType::Event);
    assert_eq!(c.requested_action, Some(RequestedAction::DirectDebiting));
    assert_eq!((c.amount, c.service_units), (10, 2));
    let (a, _) = run(
        &mut e,
        &event("e2", "222", RequestedAction::DirectDebiting, 1),
        at(0),
    );
    assert_eq!(a.result_code, rc::CREDIT_LIMIT_REACHED);
    assert_eq!(a.granted, None);
}

#[test]
fn event_refund_check_balance_and_price_enquiry() {
    let mut e = engine();
    run(
        &mut e,
        &event("e1", "111", RequestedAction::DirectDebiting, 1),
        at(0),
    );
    let (a, out) = run(
        &mut e,
        &event("e2", "111", RequestedAction::RefundAccount, 1),
        at(1),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(out.cdrs.as_slice()[0].amount, -5);
    let acc = e.account(AccountId(1)).unwrap();
    assert_eq!((acc.balance, acc.debited), (10000, 0));
    let (a, _) = run(
        &mut e,
        &event("e3", "111", RequestedAction::CheckBalance, 1),
        at(2),
    );
    assert_eq!(a.check_balance, Some(CheckBalanceResult::EnoughCredit));
    let (a, _) = run(
        &mut e,
        &event("e4", "222", RequestedAction::CheckBalance, 1),
        at(2),
    );
    assert_eq!(a.check_balance, Some(CheckBalanceResult::NoCredit));
    assert_eq!(a.result_code, rc::SUCCESS);
    let (a, out) = run(
        &mut e,
        &event("e5", "111", RequestedAction::PriceEnquiry, 3),
        at(3),
    );
    assert_eq!(a.cost.map(|c| c.value_digits), Some(15));
    assert_eq!(out.cdrs.as_slice()[0].amount, 0);
    assert_eq!(balance(&e, 1), 10000);
}

#[test]
fn event_without_requested_action_is_missing_avp() {
    let mut e = engine();
    let mut r = event("e1", "111", RequestedAction::DirectDebiting, 1);
    r.requested_action = None;
    let (a, _) = run(&mut e, &r, at(0));
    assert_eq!(a.result_code, rc::MISSING_AVP);
    assert_eq!(a.failed_avp, Some(FailedAvp::RequestedAction));
}

#[test]
fn event_in_mscc_form_answers_in_mscc() {
    let mut e = engine();
    let mut r = event("e1", "111", RequestedAction::DirectDebiting, 1);
    r.requested = None;
    r.mscc = vec![Mscc {
        service_id: Some(1),
        requested: Some(events(1)),
        ..Mscc::default()
    }];
    let (a, _) = run(&mut e, &r, at(0));
    assert_eq!(a.mscc[0].granted, Some(events(1)));
    assert_eq!(a.granted, None);
}

#[test]
fn strict_mode_rejects_mscc_without_msi_and_requested_action_in_sessions() {
    let mut cfg = ChargingConfig::from_toml_str(CONFIG).unwrap();
    cfg.engine.lenient = false;
    let mut e: TestEngine = cfg.build_engine().unwrap().into();
    let mut r = initial("st", "111", vec![want(10)]);
    r.multiple_services = Some(false);
    let (a, _) = run(&mut e, &r, at(0));
    assert_eq!(a.result_code, rc::AVP_NOT_ALLOWED);
    assert_eq!(a.failed_avp, Some(FailedAvp::MultipleServicesCreditControl));
    let mut r = initial("st2", "111", vec![want(10)]);
    r.requested_action = Some(RequestedAction::DirectDebiting);
    let (a, _) = run(&mut e, &r, at(0));
    assert_eq!(a.result_code, rc::AVP_NOT_ALLOWED);
    assert_eq!(e.session_count(), 0);
    // Lenient (the default) accepts both, as open5gs sends them.
    let mut e = engine();
    let mut r = initial("le", "111", vec![want(10)]);
    r.multiple_services = Some(false);
    r.requested_action = Some(RequestedAction::DirectDebiting);
    assert_eq!(run(&mut e, &r, at(0)).0.result_code, rc::SUCCESS);
}

#[test]
fn replaying_effects_onto_the_initial_state_rebuilds_the_final_state() {
    let mut e = engine();
    let start = e.snapshot();
    let mut journal = Vec::new();
    let mut out = Output::default();
    let steps: Vec<(CcRequest, u64)> = vec![
        (initial("a", "111", vec![want(10), want(20)]), 0),
        (initial("b", "444", vec![want(10)]), 0),
        (
            update(
                "a",
                1,
                vec![report(10, 700_000, true), report(20, 1, false)],
            ),
            5,
        ),
        (update("b", 1, vec![report(10, 2_000_000, true)]), 6),
        (event("c", "111", RequestedAction::DirectDebiting, 3), 7),
        (event("d", "111", RequestedAction::RefundAccount, 1), 8),
        (terminate("a", 2, vec![report(10, 10, false)]), 9),
        (
            initial("e", "666", vec![mscc(10, Some(octets(9_000_000)), None)]),
            10,
        ),
    ];
    for (r, t) in &steps {
        e.handle_request(r, at(*t), &mut out);
        journal.append(&mut out.effects);
    }
    e.top_up(AccountId(2), 500, &mut out).unwrap();
    e.tick(at(500), &mut out);
    journal.append(&mut out.effects);
    let catalog = e.catalog().clone();
    let mut replayed = Engine::restore(catalog.clone(), e.options().clone(), start);
    for eff in &journal {
        replayed.apply(eff).unwrap();
    }
    assert_eq!(replayed.snapshot().ledger, e.snapshot().ledger);
    // And a snapshot survives JSON.
    let json = serde_json::to_string(&e.snapshot()).unwrap();
    let back: Snapshot = serde_json::from_str(&json).unwrap();
    let restored = Engine::restore(catalog, e.options().clone(), back);
    assert_eq!(restored.snapshot(), e.snapshot());
    // Effects are serialisable for a journal.
    let line = serde_json::to_string(&journal[0]).unwrap();
    assert_eq!(serde_json::from_str::<Effect>(&line).unwrap(), journal[0]);
}

#[test]
fn effects_that_do_not_fit_the_state_are_refused() {
    let mut e = engine();
    let bad = Effect::Released {
        account: AccountId(1),
        session: SessionKey(42),
        key: RatingKey::default(),
    };
    assert!(e.apply(&bad).is_err());
    let bad = Effect::Charged {
        account: AccountId(77),
        session: None,
        key: RatingKey::default(),
        from_reserved: 0,
        from_balance: 1,
    };
    assert!(e.apply(&bad).is_err());
    check_invariants(&e);
}

#[test]
fn cdrs_serialise_to_json_lines_and_csv() {
    let mut e = engine();
    let (_, out) = run(
        &mut e,
        &event("e1", "111", RequestedAction::DirectDebiting, 1),
        at(0),
    );
    let mut buf = Vec::new();
    for c in &out.cdrs {
        c.write_json_line(&mut buf).unwrap();
    }
    let text = String::from_utf8(buf).unwrap();
    assert!(text.ends_with('\n'));
    let back: Cdr = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(&back, &out.cdrs.as_slice()[0]);
    let mut csv = String::new();
    out.cdrs.as_slice()[0].write_csv(&mut csv);
    assert_eq!(
        csv.split(',').count(),
        gyro_charging::cdr::CSV_HEADER.split(',').count()
    );
    assert!(csv.contains(",event,e1,1,e164:111,32274@3gpp.org,"));
}

#[test]
fn top_up_rejects_non_positive_amounts_and_unknown_accounts() {
    let mut e = engine();
    let mut out = Output::default();
    assert_eq!(
        e.top_up(AccountId(1), 0, &mut out),
        Err(Error::InvalidAmount(0))
    );
    assert_eq!(
        e.top_up(AccountId(99), 5, &mut out),
        Err(Error::UnknownAccount(AccountId(99)))
    );
    assert_eq!(e.top_up(AccountId(1), 5, &mut out), Ok(10005));
    check_invariants(&e);
}

#[test]
fn duplicates_are_found_after_a_restart_from_a_snapshot_and_the_journaled_answers() {
    let mut e = engine();
    let r = initial("s1", "111", vec![want(10)]);
    let (first, _) = run(&mut e, &r, at(0));
    let snap = e.snapshot();
    assert_eq!(snap.next_answer_seq, 2);
    // Through JSON, as a store writes it.
    let json = serde_json::to_value(&snap).unwrap();
    let back: Snapshot = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back.next_answer_seq, snap.next_answer_seq);
    let mut restored = e.restart(back, at(1));
    assert_eq!(restored.remembered_answers(), 1);
    let mut again = r.clone();
    again.retransmit = true;
    let mut out = Output::default();
    let mut a = CcAnswer::default();
    let found = restored.handle(&again, at(1), &mut a, &mut out);
    assert_eq!(found, Handled::Duplicate(AnswerRef { seq: 1 }));
    assert!(out.effects.is_empty() && out.cdrs.is_empty() && out.answers.is_empty());
    let (dup, out) = run(&mut restored, &again, at(1));
    assert!(dup.duplicate);
    assert_eq!(
        CcAnswer {
            duplicate: false,
            ..dup
        },
        first
    );
    assert!(out.effects.is_empty() && out.cdrs.is_empty());
    // A snapshot written before answer records: numbering starts at 1.
    let mut old = json;
    old.as_object_mut().unwrap().remove("next_answer_seq");
    old.as_object_mut()
        .unwrap()
        .insert("answers".into(), serde_json::json!([]));
    let old: Snapshot = serde_json::from_value(old).unwrap();
    assert_eq!(old.next_answer_seq, 1);
    assert_eq!(old.ledger.accounts, snap.ledger.accounts);
}

#[test]
fn duplicates_are_found_after_replaying_the_journal() {
    let mut e = engine();
    let start = e.snapshot();
    let mut journal = Vec::new();
    let reqs = [
        initial("j1", "111", vec![want(10)]),
        update("j1", 1, vec![report(10, 1000, true)]),
        event("j2", "111", RequestedAction::DirectDebiting, 1),
        terminate("j1", 2, vec![report(10, 1000, false)]),
    ];
    let mut firsts = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let (a, mut out) = run(&mut e, r, at(i as u64));
        journal.append(&mut out.effects);
        firsts.push(a);
    }
    let mut replayed = Engine::restore(e.catalog().clone(), e.options().clone(), start);
    for eff in &journal {
        replayed.apply(eff).unwrap();
    }
    for (first, records) in e.archive.sections() {
        replayed.replay_answers(first, records, at(10)).unwrap();
    }
    assert_eq!(replayed.snapshot().ledger, e.snapshot().ledger);
    assert_eq!(replayed.next_answer_seq(), 5);
    assert_eq!(replayed.remembered_answers(), 4);
    let mut replayed = TestEngine {
        engine: replayed,
        archive: e.archive.clone(),
    };
    let before = replayed.snapshot();
    for (r, first) in reqs.iter().zip(&firsts) {
        let (a, out) = run(&mut replayed, r, at(10));
        assert!(a.duplicate);
        assert_eq!(
            &CcAnswer {
                duplicate: false,
                ..a
            },
            first
        );
        assert!(out.effects.is_empty() && out.cdrs.is_empty() && out.answers.is_empty());
    }
    assert_eq!(replayed.snapshot(), before);
}

#[test]
fn answers_expire_at_the_time_to_live_and_the_horizon_moves_past_them() {
    let mut e = engine();
    let r1 = event("h1", "111", RequestedAction::DirectDebiting, 1);
    let r2 = event("h2", "111", RequestedAction::DirectDebiting, 1);
    run(&mut e, &r1, at(0));
    run(&mut e, &r2, at(100));
    assert_eq!(e.answer_horizon(at(299)), 1);
    assert_eq!(e.answer_horizon(at(300)), 2);
    assert_eq!(e.answer_horizon(at(400)), 3);
    // Replayed at 300 s, the first answer is gone and the second is not.
    let mut restarted = e.restart(e.snapshot(), at(300));
    assert_eq!(restarted.remembered_answers(), 1);
    let mut out = Output::default();
    let mut a = CcAnswer::default();
    assert_eq!(
        restarted.handle(&r2, at(399), &mut a, &mut out),
        Handled::Duplicate(AnswerRef { seq: 2 })
    );
    assert_eq!(
        restarted.handle(&r1, at(300), &mut a, &mut out),
        Handled::Answered
    );
    assert_eq!(out.answers.first_seq(), 3);
    assert_eq!(
        restarted.handle(&r2, at(400), &mut a, &mut out),
        Handled::Answered
    );
    assert_eq!(out.answers.count(), 2);
}

#[test]
fn a_record_of_another_request_or_a_corrupt_one_is_refused() {
    let mut e = engine();
    let r1 = initial("m1", "111", vec![want(10)]);
    let r2 = initial("m2", "111", vec![want(10)]);
    let (_, out1) = run(&mut e, &r1, at(0));
    let (_, out2) = run(&mut e, &r2, at(0));
    let mut a = CcAnswer::default();
    assert!(e.resolve_duplicate(&r1, out1.answers.as_bytes(), &mut a));
    assert!(!e.resolve_duplicate(&r1, out2.answers.as_bytes(), &mut a));
    let rec = out1.answers.as_bytes();
    assert!(!e.resolve_duplicate(&r1, &rec[..rec.len() - 1], &mut a));
    assert!(!e.resolve_duplicate(&r1, &[], &mut a));
    // A caller handed the wrong record processes the request afresh.
    let mut out = Output::default();
    let dup = e.engine.handle_with(&r1, at(1), &mut a, &mut out, |_| {
        Some(out2.answers.as_bytes().to_vec())
    });
    assert!(!dup);
    assert_eq!(a.result_code, rc::UNABLE_TO_COMPLY);
}

#[test]
fn a_repeat_of_a_request_answered_before_its_session_opened_is_still_a_duplicate() {
    let mut e = engine();
    // A CCR-Update ahead of its CCR-Initial: unknown session, nothing moves.
    let mut early = update("late-open", 1, vec![report(10, 5_000, true)]);
    early.end_to_end = 7001;
    let (first, _) = run(&mut e, &early, at(0));
    assert_eq!(first.result_code, rc::UNKNOWN_SESSION_ID);
    let mut open = initial("late-open", "111", vec![want(10)]);
    open.end_to_end = 7002;
    assert_eq!(run(&mut e, &open, at(1)).0.result_code, rc::SUCCESS);
    // The early request again, now that the session is open: its answer.
    let mut again = early.clone();
    again.retransmit = true;
    let before = e.snapshot();
    let (dup, out) = run(&mut e, &again, at(2));
    assert!(dup.duplicate);
    assert_eq!(dup.result_code, rc::UNKNOWN_SESSION_ID);
    assert!(out.effects.is_empty() && out.cdrs.is_empty());
    assert_eq!(e.snapshot(), before);
}

#[test]
fn repeats_inside_an_open_session_are_found_by_number_and_by_end_to_end() {
    let mut e = engine();
    let mut open = initial("live", "111", vec![want(10)]);
    open.end_to_end = 1;
    run(&mut e, &open, at(0));
    let mut u1 = update("live", 1, vec![report(10, 1_000, true)]);
    u1.end_to_end = 2;
    let (a1, _) = run(&mut e, &u1, at(1));
    let mut u2 = update("live", 2, vec![report(10, 2_000, true)]);
    u2.end_to_end = 3;
    run(&mut e, &u2, at(2));
    let before = e.snapshot();
    // The same number: the remembered answer.
    let (dup, out) = run(&mut e, &u1, at(3));
    assert!(dup.duplicate && out.effects.is_empty());
    assert_eq!(dup.mscc, a1.mscc);
    // A number never used but an End-to-End id already answered (RFC 6733
    // section 6.3): the same request, the remembered answer.
    let mut reused = u1.clone();
    reused.request_number = 9;
    let (dup, out) = run(&mut e, &reused, at(3));
    assert!(dup.duplicate && out.effects.is_empty());
    assert_eq!(e.snapshot(), before);
    // A new number and a new End-to-End id: a new request.
    let mut u3 = update("live", 3, vec![report(10, 3_000, true)]);
    u3.end_to_end = 4;
    let (a3, out) = run(&mut e, &u3, at(4));
    assert!(!a3.duplicate && !out.effects.is_empty());
}

#[test]
fn a_session_id_opened_again_after_its_session_expired_still_finds_the_old_answers() {
    let mut e = engine();
    let mut open = initial("again", "111", vec![want(10)]);
    open.end_to_end = 10;
    run(&mut e, &open, at(0));
    let mut u1 = update("again", 7, vec![report(10, 1_000, true)]);
    u1.end_to_end = 11;
    let (a1, _) = run(&mut e, &u1, at(1));
    // Supervision (Tcc, 100 s) closes it.
    let mut out = Output::default();
    assert_eq!(e.tick(at(200), &mut out), 1);
    // The same Session-Id opened again under another number (lower than
    // the old update's, so only the index knows that one).
    let mut reopen = initial("again", "111", vec![want(10)]);
    reopen.request_number = 5;
    reopen.end_to_end = 12;
    assert_eq!(run(&mut e, &reopen, at(201)).0.result_code, rc::SUCCESS);
    let before = e.snapshot();
    let (dup, out) = run(&mut e, &u1, at(202));
    assert!(dup.duplicate && out.effects.is_empty());
    assert_eq!(dup.mscc, a1.mscc);
    assert_eq!(e.snapshot(), before);
}

#[test]
fn a_copy_that_only_replays_effects_keeps_timers_for_its_open_sessions_only() {
    // The store's compactor keeps such a copy for as long as the server
    // runs and never ticks it: every session opened used to leave a timer
    // in it for good.
    let mut e = engine();
    let mut copy = Engine::restore(e.catalog().clone(), e.options().clone(), e.snapshot());
    let mut out = Output::default();
    e.handle_request(&initial("kept", "111", vec![want(10)]), at(0), &mut out);
    // More than the 4,096 stale timers tolerated.
    for i in 0..5_000 {
        let sid = format!("short-{i}");
        let now = at(i / 1000);
        e.handle_request(&initial(&sid, "111", vec![want(10)]), now, &mut out);
        e.handle_request(
            &terminate(&sid, 1, vec![report(10, 1, false)]),
            now,
            &mut out,
        );
        for eff in &out.effects {
            copy.apply(eff).unwrap();
        }
        out.clear();
    }
    assert_eq!(copy.session_count(), 1);
    assert!(
        copy.supervision_timers() <= 2 + 4096,
        "{} timers held for 1 open session",
        copy.supervision_timers()
    );
    assert_eq!(copy.snapshot().ledger, e.snapshot().ledger);
}

#[test]
fn timers_of_ended_sessions_do_not_pile_up_until_their_supervision_time() {
    let mut e = engine();
    // 20,000 sessions open and end well within their supervision time
    // (100 s), while one stays open.
    run(&mut e, &initial("kept", "111", vec![want(10)]), at(0));
    let mut out = Output::default();
    for i in 0..20_000 {
        let sid = format!("short-{i}");
        let now = at(i / 1000);
        run(&mut e, &initial(&sid, "111", vec![want(10)]), now);
        run(&mut e, &terminate(&sid, 1, vec![report(10, 1, false)]), now);
        if i % 1000 == 999 {
            e.tick(now, &mut out);
        }
    }
    e.tick(at(30), &mut out);
    assert_eq!(e.session_count(), 1);
    assert!(
        e.supervision_timers() <= 2 + 4096,
        "{} timers held for 1 open session",
        e.supervision_timers()
    );
    // The open session is still supervised.
    assert_eq!(e.tick(at(99), &mut out), 0);
    assert_eq!(e.tick(at(100), &mut out), 1);
    assert_eq!(e.session_count(), 0);
    check_invariants(&e);
}

/// RFC 8506 section 5.6.2: once the final units of a REDIRECT are used,
/// the client reports them without asking for more, and the answer grants
/// nothing but carries the Validity-Time (how long the redirection stays
/// in force); a duplicate of the report gets the same answer.
#[test]
fn the_report_of_redirect_final_units_used_carries_validity_time() {
    let mut e = engine();
    let (a, _) = run(&mut e, &initial("f1", "555", vec![want(20)]), at(0));
    assert_eq!(a.mscc[0].granted, Some(octets(750_000)));
    assert_eq!(a.mscc[0].validity_time, Some(300));
    assert_eq!(
        a.mscc[0].final_unit.as_ref().map(|f| f.action),
        Some(FinalUnitAction::Redirect)
    );
    let u = update("f1", 1, vec![report(20, 750_000, false)]);
    let (a, _) = run(&mut e, &u, at(10));
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(a.mscc[0].result_code, rc::SUCCESS);
    assert_eq!(a.mscc[0].granted, None);
    assert_eq!(a.mscc[0].final_unit, None);
    assert_eq!(a.mscc[0].validity_time, Some(300));
    assert_eq!(e.session_count(), 1);
    let mut r = u.clone();
    r.end_to_end += 1000;
    r.retransmit = true;
    let (dup, out) = run(&mut e, &r, at(11));
    assert!(dup.duplicate && out.effects.is_empty());
    assert_eq!(
        CcAnswer {
            duplicate: false,
            ..dup
        },
        a
    );
    // Asking again after that, nothing reported: 4012, nothing more.
    let (a, _) = run(&mut e, &update("f1", 2, vec![report(20, 0, true)]), at(20));
    assert_eq!(a.mscc[0].result_code, rc::CREDIT_LIMIT_REACHED);
    assert_eq!(a.mscc[0].validity_time, None);
    // Final units reported with a request for more, nothing left: 4012,
    // and the redirection holds.
    let mut e = engine();
    run(&mut e, &initial("f2", "555", vec![want(20)]), at(0));
    let (a, _) = run(
        &mut e,
        &update("f2", 1, vec![report(20, 750_000, true)]),
        at(10),
    );
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!(a.mscc[0].result_code, rc::CREDIT_LIMIT_REACHED);
    assert_eq!(a.mscc[0].validity_time, Some(300));
    // Part of a grant reported without asking for more: not final units.
    let mut e = engine();
    run(&mut e, &initial("f3", "555", vec![want(20)]), at(0));
    let (a, _) = run(
        &mut e,
        &update("f3", 1, vec![report(20, 1_000, false)]),
        at(10),
    );
    assert_eq!(a.mscc[0].result_code, rc::SUCCESS);
    assert_eq!(a.mscc[0].validity_time, None);
}

/// The same for RESTRICT_ACCESS (section 5.6.3), in the single-service
/// form: the Validity-Time is at command level.
#[test]
fn the_report_of_restrict_access_final_units_used_carries_validity_time() {
    let config = CONFIG.replace(
        "validity_time = 900\n",
        "validity_time = 900\nfinal_unit = { action = \"restrict-access\", filter_ids = [\"walled-garden\"] }\n",
    );
    let mut e: TestEngine = ChargingConfig::from_toml_str(&config)
        .unwrap()
        .build_engine()
        .unwrap()
        .into();
    e.top_up(AccountId(5), 30, &mut Output::default()).unwrap();
    let mut r = req(
        "v1",
        RequestType::Initial,
        0,
        "555",
        "32260@3gpp.org",
        vec![],
    );
    r.multiple_services = None;
    let (a, _) = run(&mut e, &r, at(0));
    assert_eq!(a.granted, Some(secs(60)));
    assert_eq!(
        a.final_unit.as_ref().map(|f| f.action),
        Some(FinalUnitAction::RestrictAccess)
    );
    let mut u = req(
        "v1",
        RequestType::Update,
        1,
        "555",
        "32260@3gpp.org",
        vec![],
    );
    u.used = Some(secs(60));
    let (a, _) = run(&mut e, &u, at(60));
    assert_eq!(a.result_code, rc::SUCCESS);
    assert_eq!((a.granted, a.final_unit.as_ref()), (None, None));
    assert_eq!(a.validity_time, Some(900));
}

/// A report without a request for more carries no Validity-Time when the
/// final units end the service (TERMINATE), nor for a blocked account.
#[test]
fn a_report_without_grant_carries_no_validity_time_for_terminate_or_blocked() {
    let mut e = engine();
    run(&mut e, &initial("t1", "555", vec![want(10)]), at(0));
    let (a, _) = run(
        &mut e,
        &update("t1", 1, vec![report(10, 1_000, false)]),
        at(1),
    );
    assert_eq!(a.mscc[0].result_code, rc::SUCCESS);
    assert_eq!((a.mscc[0].granted, a.mscc[0].validity_time), (None, None));
    let mut e = engine();
    run(&mut e, &initial("b1", "111", vec![want(20)]), at(0));
    e.set_status(AccountId(1), AccountStatus::Blocked, &mut Output::default())
        .unwrap();
    let (a, _) = run(
        &mut e,
        &update("b1", 1, vec![report(20, 1_000, false)]),
        at(1),
    );
    assert_eq!(a.result_code, rc::END_USER_SERVICE_DENIED);
    assert!(a.mscc.iter().all(|m| m.validity_time.is_none()), "{a:?}");
}

/// The test engine with data of rating group 10 at 1 cent an octet in
/// 1024-octet increments, account 4's bundle `bundle` octets and its
/// balance 100,000 cents.
fn engine_1024(bundle: u64) -> TestEngine {
    let text = CONFIG
        .replacen(
            "price = 10\nper = 1000000\nincrement = 1000",
            "price = 1\nper = 1\nincrement = 1024",
            1,
        )
        .replacen("units = 1500000", &format!("units = {bundle}"), 1)
        .replacen("id = 4\nbalance = 1000", "id = 4\nbalance = 100000", 1);
    ChargingConfig::from_toml_str(&text)
        .unwrap()
        .build_engine()
        .unwrap()
        .into()
}

#[test]
fn bundle_units_pay_for_usage_rounded_up_to_the_increment() {
    let mut e = engine_1024(1_500_000);
    let (a, _) = run(&mut e, &initial("b1", "444", vec![want(10)]), at(0));
    // The grant is held in whole increments: 1,000,000 octets round up to
    // 977 increments of 1024.
    assert_eq!(a.mscc[0].granted, Some(octets(1_000_000)));
    let acc = e.account(AccountId(4)).unwrap();
    assert_eq!((acc.reserved, acc.bundles[0].reserved), (0, 1_000_448));
    // 1 octet is rated as 1024: the bundle pays 1024 units, no money.
    let (_, out) = run(
        &mut e,
        &terminate("b1", 1, vec![report(10, 1, false)]),
        at(5),
    );
    let c = &out.cdrs.as_slice()[0];
    assert_eq!(
        (c.total_octets, c.rated_units, c.bundle_units, c.amount),
        (1, 1024, 1024, 0)
    );
    let acc = e.account(AccountId(4)).unwrap();
    assert_eq!((acc.balance, acc.debited), (100_000, 0));
    assert_eq!(
        (acc.bundles[0].consumed, acc.bundles[0].remaining),
        (1024, 1_500_000 - 1024)
    );
}

#[test]
fn usage_is_rounded_once_then_bundles_then_money_for_the_rest() {
    // 2000 octets past any grant: rated 2048, the 1000-octet bundle pays
    // 1000, money the other 1048 (not 1048 rounded up again to 2048, nor
    // the 1000 octets left after the bundle rounded to 1024).
    let mut e = engine_1024(1000);
    run(&mut e, &initial("b1", "444", vec![want(20)]), at(0));
    let (_, out) = run(
        &mut e,
        &terminate("b1", 1, vec![report(10, 2000, false)]),
        at(5),
    );
    let c = &out.cdrs.as_slice()[0];
    assert_eq!(
        (c.rated_units, c.bundle_units, c.amount),
        (2048, 1000, 1048)
    );
    let acc = e.account(AccountId(4)).unwrap();
    assert_eq!(acc.bundles[0].consumed, 1000);
}

#[test]
fn bundle_units_are_held_in_whole_increments() {
    // 1500 bundle octets hold one increment of a 2048-octet grant; money
    // buys the other, and the bundle keeps 476 octets.
    let mut e = engine_1024(1500);
    let (a, _) = run(
        &mut e,
        &initial("b1", "444", vec![mscc(10, Some(octets(2048)), None)]),
        at(0),
    );
    assert_eq!(a.mscc[0].granted, Some(octets(2048)));
    let acc = e.account(AccountId(4)).unwrap();
    assert_eq!(
        (
            acc.reserved,
            acc.bundles[0].reserved,
            acc.bundles[0].remaining
        ),
        (1024, 1024, 476)
    );
    let (_, out) = run(
        &mut e,
        &terminate("b1", 1, vec![report(10, 2048, false)]),
        at(5),
    );
    let c = &out.cdrs.as_slice()[0];
    assert_eq!(
        (c.rated_units, c.bundle_units, c.amount),
        (2048, 1024, 1024)
    );
}
