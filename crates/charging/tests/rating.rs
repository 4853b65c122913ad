//! Price plans through the engine: plans per account, time of day with
//! Tariff-Time-Change, destinations (voice by seconds with a first
//! interval, SMS per event), roaming zones, thresholds and Quota-Holding-
//! Time, grants the balance can pay, currencies.

mod common;

use common::requests::{mscc, octets, request, secs, DATA, SMS, VOICE};
use common::{check_invariants, TestEngine};
use gyro_charging::*;
use proptest::prelude::*;

const CONFIG: &str = r#"
[engine]
node_id = "rating-test"
supervision_secs = 7200

[currency]
code = 752
exponent = 2

[destinations]
premium = ["46900", "46939"]
sweden = ["46"]
abroad = ["1", "44", "49"]

[zones]
eu = ["262", "208", "20801"]
americas = ["310", "311"]

[plans.smart]
currency = "SEK"
time_zone = "Europe/Stockholm"

[[plans.smart.rate]]
name = "data-night"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
hours = "00:00-06:00"
price = 50
per = 1000000
default_quota = 10000000
validity_time = 3600
volume_quota_threshold = 1000000
quota_holding_time = 300

[[plans.smart.rate]]
name = "data-day"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 100
per = 1000000
default_quota = 10000000
validity_time = 3600
volume_quota_threshold = 1000000
quota_holding_time = 300

[[plans.smart.rate]]
name = "data-roaming-eu"
service_context = "32251@3gpp.org"
zone = "eu"
unit = "octets"
price = 500
per = 1000000
default_quota = 5000000

[[plans.smart.rate]]
name = "voice-premium"
service_context = "32260@3gpp.org"
destination = "premium"
unit = "seconds"
price = 300
per = 60
first_interval = 60
default_quota = 300
time_quota_threshold = 30

[[plans.smart.rate]]
name = "voice-evening"
service_context = "32260@3gpp.org"
destination = "sweden"
hours = "18:00-24:00"
unit = "seconds"
price = 30
per = 60
first_interval = 60
default_quota = 300

[[plans.smart.rate]]
name = "voice-national"
service_context = "32260@3gpp.org"
destination = "sweden"
unit = "seconds"
price = 60
per = 60
first_interval = 60
default_quota = 300

[[plans.smart.rate]]
name = "voice-other"
service_context = "32260@3gpp.org"
unit = "seconds"
price = 120
per = 60
increment = 60
default_quota = 300

[[plans.smart.rate]]
name = "sms-premium"
service_context = "32274@3gpp.org"
destination = "premium"
unit = "events"
price = 500
default_quota = 1

[[plans.smart.rate]]
name = "sms"
service_context = "32274@3gpp.org"
unit = "events"
price = 50
default_quota = 1

[plans.budget]

[[plans.budget.rate]]
name = "data-budget"
service_context = "32251@3gpp.org"
unit = "octets"
price = 10
per = 1000000
default_quota = 10000000

[plans.travel-eur]
currency = "EUR"

[[plans.travel-eur.rate]]
name = "data-eur"
service_context = "32251@3gpp.org"
unit = "octets"
price = 1
per = 1000000
default_quota = 1000000

[[account]]
id = 1
balance = 100000
plan = "smart"
subscribers = ["e164:4670001"]

[[account]]
id = 2
balance = 100000
subscribers = ["e164:4670002"]

[[account]]
id = 3
balance = 100000
plan = "travel-eur"
currency = "EUR"
subscribers = ["e164:4670003"]

[[account]]
id = 4
balance = 120
plan = "smart"
subscribers = ["e164:4670004"]
"#;

/// The engine of [`CONFIG`].
fn bare_engine() -> Engine {
    ChargingConfig::from_toml_str(CONFIG)
        .expect("config")
        .build_engine()
        .expect("engine")
}

fn engine() -> TestEngine {
    bare_engine().into()
}

/// An instant given in UTC, `2026-01-15T04:30:00Z` (a Thursday; Stockholm
/// is UTC+1 then).
fn utc(s: &str) -> Timestamp {
    let t: jiff::Timestamp = s.parse().expect("time");
    Timestamp(t.as_millisecond() as u64)
}

fn run(e: &mut TestEngine, r: &CcRequest, now: Timestamp) -> (CcAnswer, Vec<Cdr>) {
    run_journaled(e, r, now, &mut Vec::new())
}

/// A CDR's rate, zone and amount.
fn by_zone(c: &Cdr) -> (&str, &str, i64) {
    (c.rate.as_str(), c.zone.as_str(), c.amount)
}

/// A CDR's rate, destination and amount.
fn by_destination(c: &Cdr) -> (&str, &str, i64) {
    (c.rate.as_str(), c.destination.as_str(), c.amount)
}

fn debited(e: &Engine, id: u64) -> i64 {
    e.account(AccountId(id)).unwrap().debited
}

#[test]
fn a_night_grant_crossing_the_morning_change_carries_the_change_and_each_side_is_priced_at_its_rate(
) {
    let mut e = engine();
    // 05:30 in Stockholm: night price (0.50 a MB) until 06:00 (05:00 UTC).
    let mut r = request("night", RequestType::Initial, 0, "4670001", DATA);
    r.mscc = vec![mscc(Some(10), true, None)];
    let (a, _) = run(&mut e, &r, utc("2026-01-15T04:30:00Z"));
    assert_eq!(a.result_code, 2001);
    let m = &a.mscc[0];
    let gsu = m.granted.unwrap();
    assert_eq!(gsu.total_octets, Some(10_000_000));
    assert_eq!(gsu.tariff_time_change, Some(utc("2026-01-15T05:00:00Z")));
    assert_eq!(m.volume_quota_threshold, Some(1_000_000));
    assert_eq!(m.quota_holding_time, Some(300));
    assert_eq!(m.time_quota_threshold, None);
    assert!(m.final_unit.is_none());
    // Held at the dearer (day) price: 10 MB at 1.00.
    assert_eq!(e.account(AccountId(1)).unwrap().reserved, 1000);

    // 06:20: 6 MB used, 2 MB of them after the change.
    let mut u = request("night", RequestType::Update, 1, "", DATA);
    let mut m = mscc(Some(10), true, Some(octets(6_000_000)));
    m.used_after = Some(octets(2_000_000));
    u.mscc = vec![m];
    let (a, cdrs) = run(&mut e, &u, utc("2026-01-15T05:20:00Z"));
    assert_eq!(a.result_code, 2001);
    assert_eq!(cdrs.len(), 2);
    let (before, after) = (&cdrs[0], &cdrs[1]);
    assert_eq!(
        (before.rate.as_str(), before.rated_units, before.amount),
        ("data-night", 4_000_000, 200)
    );
    assert_eq!(before.tariff_change, Some(TariffChangeUsage::Before));
    assert_eq!(before.total_octets, 4_000_000);
    assert_eq!(before.ended, utc("2026-01-15T05:00:00Z"));
    assert_eq!(
        (after.rate.as_str(), after.rated_units, after.amount),
        ("data-day", 2_000_000, 200)
    );
    assert_eq!(after.tariff_change, Some(TariffChangeUsage::After));
    assert_eq!(after.started, utc("2026-01-15T05:00:00Z"));
    assert_eq!(before.plan, "smart");
    assert_eq!(debited(&e, 1), 400);
    // The new grant is all day price, with no change before it expires.
    let gsu = a.mscc[0].granted.unwrap();
    assert_eq!(gsu.tariff_time_change, None);
    assert_eq!(e.account(AccountId(1)).unwrap().reserved, 1000);
}

#[test]
fn usage_reported_without_a_split_is_priced_at_the_rate_of_its_grant() {
    let mut e = engine();
    let mut r = request("nosplit", RequestType::Initial, 0, "4670001", DATA);
    r.mscc = vec![mscc(Some(10), true, None)];
    run(&mut e, &r, utc("2026-01-15T04:30:00Z"));
    let mut t = request("nosplit", RequestType::Termination, 1, "", DATA);
    t.mscc = vec![mscc(Some(10), false, Some(octets(3_000_000)))];
    let (_, cdrs) = run(&mut e, &t, utc("2026-01-15T05:10:00Z"));
    assert_eq!(cdrs[0].rate, "data-night");
    assert_eq!(cdrs[0].amount, 150);
    assert_eq!(cdrs[0].tariff_change, None);
}

#[test]
fn thresholds_and_holding_time_are_sent_exactly_when_configured() {
    let mut e = engine();
    // Roaming data: a rate with none of them.
    let mut r = request("roam", RequestType::Initial, 0, "4670001", DATA);
    r.visited_plmn = "26201".into();
    r.mscc = vec![mscc(Some(10), true, None)];
    let (a, _) = run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
    let m = &a.mscc[0];
    assert_eq!(
        (
            m.volume_quota_threshold,
            m.time_quota_threshold,
            m.quota_holding_time
        ),
        (None, None, None)
    );
    // Premium voice: only the time threshold.
    let mut v = request("call", RequestType::Initial, 0, "4670001", VOICE);
    v.called_party = "tel:+46900123456".into();
    v.mscc = vec![mscc(None, true, None)];
    let (a, _) = run(&mut e, &v, utc("2026-01-15T12:00:00Z"));
    let m = &a.mscc[0];
    assert_eq!(m.granted.unwrap().time, Some(300));
    assert_eq!(
        (
            m.volume_quota_threshold,
            m.time_quota_threshold,
            m.quota_holding_time
        ),
        (None, Some(30), None)
    );
}

#[test]
fn a_roaming_session_is_rated_by_the_zone_of_the_visited_network() {
    let mut e = engine();
    let mut r = request("roam", RequestType::Initial, 0, "4670001", DATA);
    r.visited_plmn = "26201".into();
    r.mscc = vec![mscc(Some(10), true, None)];
    let (a, _) = run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
    assert_eq!(a.mscc[0].granted.unwrap().total_octets, Some(5_000_000));
    let mut t = request("roam", RequestType::Termination, 1, "", DATA);
    t.visited_plmn = "26201".into();
    t.mscc = vec![mscc(Some(10), false, Some(octets(1_000_000)))];
    let (_, cdrs) = run(&mut e, &t, utc("2026-01-15T12:05:00Z"));
    assert_eq!(by_zone(&cdrs[0]), ("data-roaming-eu", "eu", 500));
    // At home (no zone) the day rate applies.
    let mut h = request("home", RequestType::Event, 0, "4670001", DATA);
    h.requested_action = Some(RequestedAction::PriceEnquiry);
    h.visited_plmn = "24001".into();
    let mut m = mscc(Some(10), false, None);
    m.requested = Some(octets(1_000_000));
    h.mscc = vec![m];
    let (a, cdrs) = run(&mut e, &h, utc("2026-01-15T12:00:00Z"));
    assert_eq!(a.cost.unwrap().value_digits, 100);
    assert_eq!(cdrs[0].rate, "data-day");
}

#[test]
fn a_premium_call_pays_its_first_minute_once_then_by_the_second() {
    let mut e = engine();
    let mut r = request("call", RequestType::Initial, 0, "4670001", VOICE);
    r.called_party = "sip:+46900123456@ims.example;user=phone".into();
    r.mscc = vec![mscc(None, true, None)];
    let (a, _) = run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
    assert_eq!(a.mscc[0].granted.unwrap().time, Some(300));
    assert_eq!(a.mscc[0].granted.unwrap().tariff_time_change, None);
    // 5 seconds: the first minute, 3.00.
    let mut u = request("call", RequestType::Update, 1, "", VOICE);
    u.called_party = r.called_party.clone();
    u.mscc = vec![mscc(None, true, Some(secs(5)))];
    let (_, cdrs) = run(&mut e, &u, utc("2026-01-15T12:00:05Z"));
    assert_eq!(by_destination(&cdrs[0]), ("voice-premium", "premium", 300));
    // 30 more seconds: by the second, 1.50.
    let mut t = request("call", RequestType::Termination, 2, "", VOICE);
    t.called_party = r.called_party.clone();
    t.mscc = vec![mscc(None, false, Some(secs(30)))];
    let (_, cdrs) = run(&mut e, &t, utc("2026-01-15T12:00:35Z"));
    assert_eq!(cdrs[0].amount, 150);
    assert_eq!(debited(&e, 1), 450);
}

#[test]
fn a_call_whose_requests_come_within_one_millisecond_pays_its_first_minute_once() {
    // A gateway (or a fast test client) can send the CCR-Update in the
    // millisecond its CCR-Initial was answered: the grant the update
    // makes is not the session's opening one, however close in time.
    let mut e = engine();
    let at = utc("2026-01-15T12:00:00Z");
    let mut r = request("call", RequestType::Initial, 0, "4670001", VOICE);
    r.called_party = "sip:+46900123456@ims.example;user=phone".into();
    r.mscc = vec![mscc(None, true, None)];
    let mut journal = Vec::new();
    run_journaled(&mut e, &r, at, &mut journal);
    let mut u = request("call", RequestType::Update, 1, "", VOICE);
    u.called_party = r.called_party.clone();
    u.mscc = vec![mscc(None, true, Some(secs(5)))];
    let (_, cdrs) = run_journaled(&mut e, &u, at, &mut journal);
    assert_eq!(cdrs[0].amount, 300, "the first minute");
    let mut t = request("call", RequestType::Termination, 2, "", VOICE);
    t.called_party = r.called_party.clone();
    t.mscc = vec![mscc(None, false, Some(secs(30)))];
    let (_, cdrs) = run_journaled(&mut e, &t, at, &mut journal);
    assert_eq!(cdrs[0].amount, 150, "30 more seconds, by the second");
    assert_eq!(debited(&e, 1), 450);
    // A replay of the journal marks the same reservations as opening.
    let mut replayed = bare_engine();
    for effect in &journal {
        replayed.apply(effect).unwrap();
    }
    assert_eq!(replayed.snapshot().ledger, e.snapshot().ledger);
}

#[test]
fn the_longest_destination_prefix_picks_the_voice_rate() {
    let mut e = engine();
    for (n, called, rate) in [
        (0, "+46900111", "voice-premium"),
        (1, "+4691011", "voice-national"),
        (2, "+46701234567", "voice-national"),
        (3, "+4930123456", "voice-other"),
        (4, "anonymous", "voice-other"),
    ] {
        let mut r = request("q", RequestType::Event, n, "4670001", VOICE);
        r.requested_action = Some(RequestedAction::PriceEnquiry);
        r.called_party = called.into();
        r.requested = Some(secs(60));
        r.mscc.clear();
        let (_, cdrs) = run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
        assert_eq!(cdrs[0].rate, rate, "{called}");
    }
}

#[test]
fn a_call_across_the_evening_change_is_split_by_gyro_at_the_change() {
    let mut e = engine();
    // 17:59 in Stockholm: national rate, evening rate from 18:00.
    let mut r = request("eve", RequestType::Initial, 0, "4670001", VOICE);
    r.called_party = "+46701234567".into();
    r.mscc = vec![mscc(None, true, None)];
    let (a, _) = run(&mut e, &r, utc("2026-01-15T16:59:00Z"));
    // No Tariff-Time-Change for time (RFC 8506 section 8.20).
    assert_eq!(a.mscc[0].granted.unwrap().tariff_time_change, None);
    let mut t = request("eve", RequestType::Termination, 1, "", VOICE);
    t.called_party = r.called_party.clone();
    t.mscc = vec![mscc(None, false, Some(secs(120)))];
    let (_, cdrs) = run(&mut e, &t, utc("2026-01-15T17:01:00Z"));
    let usage: Vec<&Cdr> = cdrs
        .iter()
        .filter(|c| c.record_type == RecordType::Usage)
        .collect();
    assert_eq!(usage.len(), 2);
    assert_eq!(
        (usage[0].rate.as_str(), usage[0].time, usage[0].amount),
        ("voice-national", 60, 60)
    );
    assert_eq!(
        (usage[1].rate.as_str(), usage[1].time, usage[1].amount),
        ("voice-evening", 60, 30)
    );
    assert_eq!(debited(&e, 1), 90);
}

#[test]
fn a_long_grant_ends_at_the_second_price_change_so_a_report_spans_one_change_at_most() {
    let mut e = engine();
    // 17:00 in Stockholm, 20 hours asked for: evening from 18:00, national
    // again from 24:00, so the grant ends at midnight (7 hours).
    let mut r = request("long", RequestType::Initial, 0, "4670001", VOICE);
    r.called_party = "+46701234567".into();
    let mut m = mscc(None, true, None);
    m.requested = Some(secs(20 * 3600));
    r.mscc = vec![m];
    let (a, _) = run(&mut e, &r, utc("2026-01-15T16:00:00Z"));
    assert_eq!(a.result_code, 2001);
    assert_eq!(a.mscc[0].granted.unwrap().time, Some(7 * 3600));
    assert_eq!(a.mscc[0].validity_time, Some(7 * 3600));
    // A grant that stays within one change is not cut.
    let mut r = request("short", RequestType::Initial, 0, "4670001", VOICE);
    r.called_party = "+46701234567".into();
    let mut m = mscc(None, true, None);
    m.requested = Some(secs(2 * 3600));
    r.mscc = vec![m];
    let (a, _) = run(&mut e, &r, utc("2026-01-15T16:30:00Z"));
    assert_eq!(a.mscc[0].granted.unwrap().time, Some(2 * 3600));
    assert_eq!(a.mscc[0].validity_time, None);
}

#[test]
fn an_sms_is_priced_per_event_by_its_recipients_destination() {
    let mut e = engine();
    for (n, to, price) in [(0, "46939555", 500), (1, "46701234567", 50)] {
        let mut r = request("sms", RequestType::Event, n, "4670001", SMS);
        r.requested_action = Some(RequestedAction::DirectDebiting);
        r.called_party = to.into();
        r.requested = Some(ServiceUnits {
            service_specific: Some(1),
            ..ServiceUnits::default()
        });
        r.mscc.clear();
        let (a, cdrs) = run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
        assert_eq!(a.result_code, 2001);
        assert_eq!(a.cost.unwrap().value_digits, price);
        assert_eq!(cdrs[0].amount, price);
    }
}

#[test]
fn a_grant_never_exceeds_what_the_balance_pays_at_the_dearer_price() {
    let mut e = engine();
    // 1.20 left, 05:30 at night: 1.2 MB at the day price, final units.
    let mut r = request("low", RequestType::Initial, 0, "4670004", DATA);
    r.mscc = vec![mscc(Some(10), true, None)];
    let (a, _) = run(&mut e, &r, utc("2026-01-15T04:30:00Z"));
    let m = &a.mscc[0];
    assert_eq!(m.granted.unwrap().total_octets, Some(1_200_000));
    assert_eq!(
        m.final_unit.as_ref().map(|f| f.action),
        Some(FinalUnitAction::Terminate)
    );
    let acc = e.account(AccountId(4)).unwrap();
    assert_eq!((acc.reserved, acc.balance), (120, 0));
}

#[test]
fn plans_follow_the_account_and_change_through_the_engine() {
    let mut e = engine();
    // No plan and no default plan: nothing rates it.
    let mut r = request("none", RequestType::Initial, 0, "4670002", DATA);
    r.mscc = vec![mscc(Some(10), true, None)];
    let (a, _) = run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
    assert_eq!(a.result_code, 5031);
    // The EUR account on its EUR plan.
    let mut r = request("eur", RequestType::Event, 0, "4670003", DATA);
    r.requested_action = Some(RequestedAction::PriceEnquiry);
    r.requested = Some(octets(5_000_000));
    r.mscc.clear();
    let (a, _) = run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
    let cost = a.cost.unwrap();
    assert_eq!((cost.value_digits, cost.currency_code), (5, 978));
    // Moving it to a SEK plan is refused, naming both currencies.
    let mut out = Output::default();
    let err = e
        .set_plan(AccountId(3), Some("smart"), &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("SEK (752") && err.contains("EUR (978"),
        "{err}"
    );
    assert!(matches!(
        e.set_plan(AccountId(1), Some("gold"), &mut out),
        Err(Error::InvalidPlan(_))
    ));
    assert!(out.effects.is_empty());
    // Account 1 moves to the budget plan: its next usage is priced by it.
    e.set_plan(AccountId(1), Some("budget"), &mut out).unwrap();
    assert_eq!(
        e.account(AccountId(1)).unwrap().plan.as_deref(),
        Some("budget")
    );
    let mut r = request("budget", RequestType::Event, 0, "4670001", DATA);
    r.requested_action = Some(RequestedAction::DirectDebiting);
    r.requested = Some(octets(10_000_000));
    r.mscc.clear();
    let (a, cdrs) = run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
    assert_eq!(a.cost.unwrap().value_digits, 100);
    assert_eq!(
        (cdrs[0].plan.as_str(), cdrs[0].rate.as_str()),
        ("budget", "data-budget")
    );
    // The plan change replays from its effect.
    let mut fresh = bare_engine();
    for ef in &out.effects {
        fresh.apply(ef).unwrap();
    }
    assert_eq!(
        fresh.account(AccountId(1)).unwrap().plan.as_deref(),
        Some("budget")
    );
}

#[test]
fn a_plan_in_another_currency_is_refused_at_configuration_time_naming_both() {
    let bad = CONFIG.replace(
        "plan = \"travel-eur\"\ncurrency = \"EUR\"",
        "plan = \"travel-eur\"",
    );
    let err = ChargingConfig::from_toml_str(&bad).unwrap_err().to_string();
    assert!(
        err.contains("account 3")
            && err.contains("travel-eur")
            && err.contains("EUR (978")
            && err.contains("SEK (752"),
        "{err}"
    );
    let unknown = CONFIG.replace("plan = \"travel-eur\"", "plan = \"gold\"");
    let err = ChargingConfig::from_toml_str(&unknown)
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"gold\""), "{err}");
    // The [[tariff]] list and [plans.default] are one plan: both is an error.
    let twice = format!(
        "{CONFIG}\n[plans.default]\n[[tariff]]\nname='x'\nservice_context='a'\nunit='octets'\ndefault_quota=1\n"
    );
    assert!(ChargingConfig::from_toml_str(&twice).is_err());
}

#[test]
fn accounts_created_with_a_plan_journal_it_and_refuse_a_mismatch() {
    let mut e = engine();
    let mut out = Output::default();
    let new = |id, plan: &str, currency| NewAccount {
        id: AccountId(id),
        subscribers: vec![SubscriptionId::e164(format!("467999{id}"))],
        balance: 1000,
        plan: Some(plan.into()),
        currency,
        ..NewAccount::default()
    };
    e.create_account(new(10, "travel-eur", Currency::from_alpha("EUR")), &mut out)
        .unwrap();
    assert_eq!(out.effects.len(), 2);
    let err = e
        .create_account(new(11, "travel-eur", None), &mut out)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidPlan(_)));
    assert!(e.account(AccountId(11)).is_none());
    let mut fresh = bare_engine();
    for ef in &out.effects {
        fresh.apply(ef).unwrap();
    }
    assert_eq!(fresh.account(AccountId(10)), e.account(AccountId(10)));
}

/// Like [`run`], journaling the effects.
fn run_journaled(
    e: &mut TestEngine,
    r: &CcRequest,
    now: Timestamp,
    journal: &mut Vec<Effect>,
) -> (CcAnswer, Vec<Cdr>) {
    let mut out = Output::default();
    let a = e.handle_request(r, now, &mut out);
    check_invariants(e);
    journal.extend(out.effects.iter().cloned());
    (a, out.cdrs.iter().cloned().collect())
}

/// The rating context of the open session `sid`.
fn context_of(e: &Engine, sid: &str) -> RatingContext {
    e.ledger()
        .sessions
        .values()
        .find(|s| &*s.session_id == sid)
        .expect("open session")
        .context
}

#[test]
fn a_premium_call_whose_updates_carry_no_called_party_stays_at_the_premium_rate() {
    let mut e = engine();
    let mut r = request("prem", RequestType::Initial, 0, "4670001", VOICE);
    r.called_party = "tel:+46900123456".into();
    r.mscc = vec![mscc(None, true, None)];
    let (a, _) = run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
    assert_eq!(a.result_code, 2001);
    // CCR-Update and CCR-Terminate without IMS-Information.
    let mut u = request("prem", RequestType::Update, 1, "", VOICE);
    u.mscc = vec![mscc(None, true, Some(secs(5)))];
    let (a, cdrs) = run(&mut e, &u, utc("2026-01-15T12:00:05Z"));
    assert_eq!(a.result_code, 2001);
    assert_eq!(by_destination(&cdrs[0]), ("voice-premium", "premium", 300));
    // The new grant is premium too: its time threshold is sent.
    assert_eq!(a.mscc[0].time_quota_threshold, Some(30));
    let mut t = request("prem", RequestType::Termination, 2, "", VOICE);
    t.mscc = vec![mscc(None, false, Some(secs(30)))];
    let (_, cdrs) = run(&mut e, &t, utc("2026-01-15T12:00:35Z"));
    assert_eq!(by_destination(&cdrs[0]), ("voice-premium", "premium", 150));
    assert_eq!(debited(&e, 1), 450);
}

#[test]
fn a_roaming_session_whose_updates_carry_no_location_stays_at_the_roaming_price() {
    let mut e = engine();
    let mut r = request("roamu", RequestType::Initial, 0, "4670001", DATA);
    r.visited_plmn = "26201".into();
    r.mscc = vec![mscc(Some(10), true, None)];
    run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
    let mut u = request("roamu", RequestType::Update, 1, "", DATA);
    u.mscc = vec![mscc(Some(10), true, Some(octets(1_000_000)))];
    let (a, cdrs) = run(&mut e, &u, utc("2026-01-15T12:05:00Z"));
    assert_eq!(by_zone(&cdrs[0]), ("data-roaming-eu", "eu", 500));
    // Granted at the roaming rate's quota, and held at its price.
    assert_eq!(a.mscc[0].granted.unwrap().total_octets, Some(5_000_000));
    assert_eq!(e.account(AccountId(1)).unwrap().reserved, 2500);
    let mut t = request("roamu", RequestType::Termination, 2, "", DATA);
    t.mscc = vec![mscc(Some(10), false, Some(octets(2_000_000)))];
    let (_, cdrs) = run(&mut e, &t, utc("2026-01-15T12:10:00Z"));
    assert_eq!(by_zone(&cdrs[0]), ("data-roaming-eu", "eu", 1000));
    assert_eq!(debited(&e, 1), 1500);
}

#[test]
fn a_handover_prices_the_usage_before_it_at_the_old_zone_and_new_grants_at_the_new_one() {
    let mut e = engine();
    let mut journal = Vec::new();
    // Opened at home (a network in no zone): the day rate.
    let mut r = request("hand", RequestType::Initial, 0, "4670001", DATA);
    r.visited_plmn = "24001".into();
    r.mscc = vec![mscc(Some(10), true, None)];
    let (a, _) = run_journaled(&mut e, &r, utc("2026-01-15T12:00:00Z"), &mut journal);
    assert_eq!(a.mscc[0].granted.unwrap().total_octets, Some(10_000_000));
    // Into Germany: the 2 MB reported were used at home (granted there);
    // the new grant is at the EU roaming price.
    let mut u = request("hand", RequestType::Update, 1, "", DATA);
    u.visited_plmn = "26201".into();
    let mut m = mscc(Some(10), true, Some(octets(2_000_000)));
    m.reporting_reason = Some(6); // RATING_CONDITION_CHANGE
    u.mscc = vec![m];
    let (a, cdrs) = run_journaled(&mut e, &u, utc("2026-01-15T12:05:00Z"), &mut journal);
    assert_eq!(by_zone(&cdrs[0]), ("data-day", "", 200));
    assert_eq!(a.mscc[0].granted.unwrap().total_octets, Some(5_000_000));
    assert_eq!(e.account(AccountId(1)).unwrap().reserved, 2500);
    assert_eq!(
        context_of(&e, "hand")
            .visited
            .map(|d| d.as_str().to_string()),
        Some("26201".to_string())
    );
    // Roaming on, no location sent: the EU price.
    let mut u2 = request("hand", RequestType::Update, 2, "", DATA);
    u2.mscc = vec![mscc(Some(10), true, Some(octets(1_000_000)))];
    let (_, cdrs) = run_journaled(&mut e, &u2, utc("2026-01-15T12:10:00Z"), &mut journal);
    assert_eq!(by_zone(&cdrs[0]), ("data-roaming-eu", "eu", 500));
    // Back home: the last roaming usage at the EU price, then the day
    // rate's grant.
    let mut u3 = request("hand", RequestType::Update, 3, "", DATA);
    u3.visited_plmn = "24001".into();
    u3.mscc = vec![mscc(Some(10), true, Some(octets(1_000_000)))];
    let (a, cdrs) = run_journaled(&mut e, &u3, utc("2026-01-15T12:15:00Z"), &mut journal);
    assert_eq!(by_zone(&cdrs[0]), ("data-roaming-eu", "eu", 500));
    assert_eq!(a.mscc[0].granted.unwrap().total_octets, Some(10_000_000));
    assert_eq!(e.account(AccountId(1)).unwrap().reserved, 1000);
    // The moves replay from the journal.
    let mut fresh = bare_engine();
    for ef in &journal {
        fresh.apply(ef).unwrap();
    }
    assert_eq!(fresh.ledger(), e.ledger());
}

#[test]
fn a_restart_from_a_snapshot_or_the_journal_keeps_the_sessions_rating_context() {
    let mut e = engine();
    let mut journal = Vec::new();
    let t0 = utc("2026-01-15T12:00:00Z");
    let mut r = request("ctxroam", RequestType::Initial, 0, "4670001", DATA);
    r.visited_plmn = "20801".into();
    r.mscc = vec![mscc(Some(10), true, None)];
    run_journaled(&mut e, &r, t0, &mut journal);
    let mut v = request("ctxcall", RequestType::Initial, 0, "4670001", VOICE);
    v.called_party = "sip:+46939000111@ims.example;user=phone".into();
    v.mscc = vec![mscc(None, true, None)];
    run_journaled(&mut e, &v, t0, &mut journal);
    assert!(journal
        .iter()
        .any(|ef| matches!(ef, Effect::SessionContextChanged { .. })));

    // From a snapshot, through its serialised form.
    let text = serde_json::to_string(&e.snapshot()).unwrap();
    let from_snapshot = e.restart(serde_json::from_str(&text).unwrap(), t0);
    // From the journal.
    let mut from_journal = engine();
    for ef in &journal {
        from_journal.apply(ef).unwrap();
    }
    for mut restarted in [from_snapshot, from_journal] {
        assert_eq!(restarted.ledger(), e.ledger());
        assert_eq!(
            context_of(&restarted, "ctxcall")
                .called
                .map(|d| d.as_str().to_string()),
            Some("46939000111".to_string())
        );
        let mut u = request("ctxroam", RequestType::Update, 1, "", DATA);
        u.mscc = vec![mscc(Some(10), true, Some(octets(1_000_000)))];
        let (_, cdrs) = run(&mut restarted, &u, utc("2026-01-15T12:05:00Z"));
        assert_eq!(by_zone(&cdrs[0]), ("data-roaming-eu", "eu", 500));
        let mut t = request("ctxcall", RequestType::Termination, 1, "", VOICE);
        t.mscc = vec![mscc(None, false, Some(secs(10)))];
        let (_, cdrs) = run(&mut restarted, &t, utc("2026-01-15T12:00:10Z"));
        assert_eq!(by_destination(&cdrs[0]), ("voice-premium", "premium", 300));
    }
}

#[test]
fn a_snapshot_written_before_sessions_had_a_rating_context_still_reads() {
    let mut e = engine();
    let mut r = request("old", RequestType::Initial, 0, "4670001", DATA);
    r.visited_plmn = "26201".into();
    r.mscc = vec![mscc(Some(10), true, None)];
    run(&mut e, &r, utc("2026-01-15T12:00:00Z"));
    let mut v = serde_json::to_value(e.snapshot()).unwrap();
    let text = v.to_string();
    assert!(text.contains("\"context\""), "{text}");
    // The snapshot as written before: no `context` in its sessions.
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("context");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    let old: Snapshot = serde_json::from_value(v).unwrap();
    let restarted = e.restart(old, utc("2026-01-15T12:00:00Z"));
    assert!(context_of(&restarted, "old").is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Money is conserved across a Tariff-Time-Change: however the usage
    /// splits around it and whatever the balance, every debited unit of
    /// money is in exactly one CDR, each side is priced at its own rate
    /// when the account can pay, and the books balance.
    #[test]
    fn money_is_conserved_across_a_tariff_time_change(
        balance in 0i64..3000,
        start_min in 0u64..29,
        report_min in 31u64..59,
        used in 0u64..20_000_000,
        after_share in 0u64..=100,
        more in any::<bool>(),
    ) {
        let text = CONFIG.replace("id = 4\nbalance = 120", &format!("id = 4\nbalance = {balance}"));
        let mut e: TestEngine = ChargingConfig::from_toml_str(&text).unwrap().build_engine().unwrap().into();
        let t0 = utc("2026-01-15T04:30:00Z");
        let mut r = request("p", RequestType::Initial, 0, "4670004", DATA);
        r.mscc = vec![mscc(Some(10), true, None)];
        let (a, _) = run(&mut e, &r, t0.plus_secs(start_min * 60));
        let granted = a.mscc[0].granted.and_then(|g| g.total_octets).unwrap_or(0);
        // What was granted the balance pays at the dearer price.
        prop_assert!(granted.div_ceil(10_000) <= balance as u64);
        if balance == 0 {
            // Nothing to pay with: the CCR-Initial is refused, no session
            // opens and there is no usage to split.
            prop_assert_eq!(a.result_code, 4012);
            prop_assert_eq!(e.account(AccountId(4)).unwrap().debited, 0);
            return Ok(());
        }
        let after = used * after_share / 100;
        let mut u = request("p", if more { RequestType::Update } else { RequestType::Termination }, 1, "", DATA);
        let mut m = mscc(Some(10), more, Some(octets(used)));
        m.used_after = Some(octets(after));
        u.mscc = vec![m];
        let (_, cdrs) = run(&mut e, &u, t0.plus_secs(report_min * 60));
        let acc = e.account(AccountId(4)).unwrap();
        let charged: i64 = cdrs.iter().map(|c| c.amount).sum();
        prop_assert_eq!(charged, acc.debited);
        prop_assert!(acc.is_conserved());
        let usage: Vec<&Cdr> = cdrs.iter().filter(|c| c.record_type == RecordType::Usage).collect();
        prop_assert_eq!(usage.len(), 2);
        prop_assert_eq!(usage[0].rated_units + usage[1].rated_units, used);
        let cost = |units: u64, price: u64| (units * price).div_ceil(1_000_000) as i64;
        let want = cost(used - after, 50) + cost(after, 100);
        // Everything is charged when the balance covers it; else what it
        // covers, the rest unbilled.
        let unbilled: i64 = usage.iter().map(|c| c.unbilled).sum();
        prop_assert_eq!(charged + unbilled, want);
        if want <= balance {
            prop_assert_eq!(usage[0].amount, cost(used - after, 50));
            prop_assert_eq!(usage[1].amount, cost(after, 100));
        }
    }
}

#[test]
fn a_quote_prices_what_the_engine_charges_and_names_the_rates() {
    let e = engine();
    let q = QuoteRequest {
        service_context: VOICE.into(),
        called_party: "+46701234567".into(),
        units: 120,
        at: utc("2026-01-15T16:59:00Z"),
        first: true,
        ..QuoteRequest::default()
    };
    let quote = e.quote(AccountId(1), &q).unwrap();
    assert_eq!(quote.plan, "smart");
    assert_eq!(quote.destination.as_deref(), Some("sweden"));
    let parts: Vec<(&str, u64, i64)> = quote
        .parts
        .iter()
        .map(|p| (p.rate.as_str(), p.units, p.price))
        .collect();
    // The same as the call across the evening change above.
    assert_eq!(
        parts,
        [("voice-national", 60, 60), ("voice-evening", 60, 30)]
    );
    assert_eq!((quote.price, quote.amount()), (90, "0.90".to_string()));
    assert_eq!(
        quote.next_change,
        Some((utc("2026-01-15T17:00:00Z"), "voice-evening".to_string()))
    );
    // A premium number: 5 seconds cost the first minute.
    let premium = QuoteRequest {
        called_party: "+46900111".into(),
        units: 5,
        ..q.clone()
    };
    let quote = e.quote(AccountId(1), &premium).unwrap();
    assert_eq!(
        (
            quote.parts[0].rate.as_str(),
            quote.parts[0].charged_units,
            quote.price
        ),
        ("voice-premium", 60, 300)
    );
    // Unknown service, unknown plan.
    let none = QuoteRequest {
        service_context: "nope".into(),
        ..q.clone()
    };
    assert!(matches!(
        e.quote(AccountId(1), &none),
        Err(Error::Unrated(_))
    ));
    assert!(matches!(
        e.catalog().quote(Some("gold"), &q),
        Err(Error::InvalidPlan(_))
    ));
}

#[test]
fn the_example_offer_sheet_prices_as_it_says() {
    let cfg = ChargingConfig::from_toml_str(include_str!("../../../config/example-plans.toml"))
        .expect("example plans parse");
    let e = cfg.build_engine().unwrap();
    assert_eq!(e.accounts().count(), 1003);
    let c = e.catalog();
    let price = |plan: &str, ctx: &str, called: &str, visited: &str, units: u64, at: &str| {
        let q = QuoteRequest {
            service_context: ctx.into(),
            called_party: called.into(),
            visited_plmn: visited.into(),
            units,
            at: utc(at),
            first: true,
            ..QuoteRequest::default()
        };
        let quote = c.quote(Some(plan), &q).unwrap();
        (quote.parts[0].rate.clone(), quote.price)
    };
    // 90 s to a premium number: two whole minutes at 14.90.
    assert_eq!(
        price(
            "smart-50",
            VOICE,
            "+46900123456",
            "",
            90,
            "2026-01-15T12:00:00Z"
        ),
        ("voice-premium".into(), 2980)
    );
    // 100 MB at night (05:30 in Stockholm), by day, on a Saturday.
    let mb100 = 104_857_600;
    for (at, rate, p) in [
        ("2026-01-15T04:30:00Z", "data-night", 50),
        ("2026-01-15T12:00:00Z", "data", 100),
        ("2026-01-17T12:00:00Z", "data-weekend", 75),
    ] {
        assert_eq!(price("smart-50", DATA, "", "", mb100, at), (rate.into(), p));
    }
    // Roaming in Germany, an SMS abroad, the flat plan.
    assert_eq!(
        price("smart-50", DATA, "", "26202", mb100, "2026-01-15T04:30:00Z").0,
        "data-roaming-eu"
    );
    assert_eq!(
        price(
            "smart-50",
            SMS,
            "+4915112345678",
            "",
            1,
            "2026-01-15T12:00:00Z"
        ),
        ("sms-abroad".into(), 150)
    );
    assert_eq!(
        price(
            "flex",
            VOICE,
            "+46701234567",
            "",
            61,
            "2026-01-15T12:00:00Z"
        ),
        ("flex-voice".into(), 101)
    );
}
