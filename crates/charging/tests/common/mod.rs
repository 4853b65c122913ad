//! Helpers shared by the charging tests.
#![allow(dead_code)]

use gyro_charging::*;

pub mod requests;
pub mod script;

#[allow(unused_imports)] // not every test binary uses each of them
pub use requests::{octets, secs, DATA, SMS};

pub const CONFIG: &str = r#"
[engine]
node_id = "test-node"
supervision_secs = 100
dedup_ttl_secs = 300
dedup_capacity = 10000
lenient = true

[currency]
code = 978
exponent = 2

# 10 cents per 1,000,000 octets, 1000-octet increment
[[tariff]]
name = "data-rg10"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 10
per = 1000000
increment = 1000
default_quota = 1000000
validity_time = 600
final_unit = { action = "terminate" }

[[tariff]]
name = "data-rg20"
service_context = "32251@3gpp.org"
rating_group = 20
unit = "octets"
price = 20
per = 1000000
increment = 1000
default_quota = 1000000
validity_time = 300
final_unit = { action = "redirect", redirect = { address_type = "url", address = "http://top-up.example/" } }

[[tariff]]
name = "data-rg30"
service_context = "32251@3gpp.org"
rating_group = 30
unit = "octets"
price = 10
per = 1000000
default_quota = 1000000
final_unit = { action = "restrict-access", restriction_filter_rules = ["permit out ip from any to 10.1.1.1"], filter_ids = ["walled-garden"] }

[[tariff]]
name = "zero-rated-na"
service_context = "32251@3gpp.org"
rating_group = 40
unit = "octets"
default_quota = 1000000
zero_rated = "not-applicable"

[[tariff]]
name = "zero-rated-free"
service_context = "32251@3gpp.org"
rating_group = 50
unit = "octets"
default_quota = 5000000
zero_rated = "free"

# voice: 30 cents a minute, per-second after rounding to 60 s
[[tariff]]
name = "voice"
service_context = "32260@3gpp.org"
unit = "seconds"
price = 30
per = 60
increment = 60
default_quota = 300
validity_time = 900

[[tariff]]
name = "sms"
service_context = "32274@3gpp.org"
unit = "events"
price = 5
per = 1
default_quota = 1

[[account]]
id = 1
balance = 10000
subscribers = ["e164:111", "imsi:240010000000001"]

[[account]]
id = 2
balance = 0
subscribers = ["e164:222"]

[[account]]
id = 3
balance = 10000
status = "blocked"
subscribers = ["e164:333"]

[[account]]
id = 4
balance = 1000
subscribers = ["e164:444"]
[[account.bundle]]
unit = "octets"
units = 1500000
rating_groups = [10]

[[account]]
id = 5
balance = 15
subscribers = ["e164:555"]

[[account]]
id = 6
balance = 5
credit_limit = 20
subscribers = ["e164:666"]
"#;

/// An engine with an in-memory journal of its answer records, standing in
/// for a store: duplicates are answered from the journaled records.
pub struct TestEngine {
    pub engine: Engine,
    pub archive: AnswerArchive,
}

impl std::ops::Deref for TestEngine {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

impl std::ops::DerefMut for TestEngine {
    fn deref_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }
}

impl From<Engine> for TestEngine {
    fn from(engine: Engine) -> Self {
        TestEngine {
            engine,
            archive: AnswerArchive::new(),
        }
    }
}

impl TestEngine {
    /// Handles a request as a server would: a duplicate gets the journaled
    /// answer; the answer records are journaled.
    pub fn handle_request(&mut self, r: &CcRequest, now: Timestamp, out: &mut Output) -> CcAnswer {
        let mut a = CcAnswer::default();
        let archive = &self.archive;
        self.engine
            .handle_with(r, now, &mut a, out, |seq| archive.read(seq));
        self.archive.append(&out.answers);
        a
    }

    /// The same engine rebuilt from `snapshot` and the journaled answers,
    /// at `now` (a restart).
    pub fn restart(&self, snapshot: Snapshot, now: Timestamp) -> TestEngine {
        let mut e = Engine::restore(self.catalog().clone(), self.options().clone(), snapshot);
        for (first, records) in self.archive.sections() {
            e.replay_answers(first, records, now)
                .expect("answers replay");
        }
        TestEngine {
            engine: e,
            archive: self.archive.clone(),
        }
    }
}

pub fn engine() -> TestEngine {
    ChargingConfig::from_toml_str(CONFIG)
        .expect("config")
        .build_engine()
        .expect("engine")
        .into()
}

pub fn io_octets(i: u64, o: u64) -> ServiceUnits {
    ServiceUnits {
        input_octets: Some(i),
        output_octets: Some(o),
        ..ServiceUnits::default()
    }
}

pub fn events(n: u64) -> ServiceUnits {
    ServiceUnits {
        service_specific: Some(n),
        ..ServiceUnits::default()
    }
}

pub fn mscc(rg: u32, rsu: Option<ServiceUnits>, usu: Option<ServiceUnits>) -> Mscc {
    Mscc {
        rating_group: Some(rg),
        service_id: None,
        requested: rsu,
        used: usu,
        reporting_reason: None,
        used_after: None,
    }
}

pub fn want(rg: u32) -> Mscc {
    mscc(rg, Some(ServiceUnits::default()), None)
}

pub fn report(rg: u32, used: u64, more: bool) -> Mscc {
    mscc(rg, more.then(ServiceUnits::default), Some(octets(used)))
}

static E2E: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

pub fn req(
    session: &str,
    kind: RequestType,
    number: u32,
    msisdn: &str,
    ctx: &str,
    mscc: Vec<Mscc>,
) -> CcRequest {
    CcRequest {
        session_id: session.into(),
        origin_host: "pgw.example".into(),
        end_to_end: E2E.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        retransmit: false,
        request_type: kind,
        request_number: number,
        service_context: ctx.into(),
        subscription_ids: vec![SubscriptionId::e164(msisdn)],
        multiple_services: (!mscc.is_empty()).then_some(true),
        requested_action: None,
        service_id: None,
        requested: None,
        used: None,
        mscc,
        termination_cause: None,
        ..CcRequest::default()
    }
}

pub fn initial(session: &str, msisdn: &str, mscc: Vec<Mscc>) -> CcRequest {
    req(session, RequestType::Initial, 0, msisdn, DATA, mscc)
}

pub fn update(session: &str, n: u32, mscc: Vec<Mscc>) -> CcRequest {
    req(session, RequestType::Update, n, "", DATA, mscc)
}

pub fn terminate(session: &str, n: u32, mscc: Vec<Mscc>) -> CcRequest {
    let mut r = req(session, RequestType::Termination, n, "", DATA, mscc);
    r.termination_cause = Some(1);
    r
}

pub fn event(session: &str, msisdn: &str, action: RequestedAction, units: u64) -> CcRequest {
    let mut r = req(session, RequestType::Event, 0, msisdn, SMS, vec![]);
    r.requested_action = Some(action);
    r.requested = Some(events(units));
    r
}

/// Conservation and credit limit for every account.
pub fn check_invariants(e: &Engine) {
    for a in e.accounts() {
        assert!(a.is_conserved(), "account {} not conserved: {a:?}", a.id);
        assert!(
            a.balance >= -a.credit_limit,
            "account {} past its credit limit: {a:?}",
            a.id
        );
        assert!(a.reserved >= 0);
        let held: i64 = e
            .ledger()
            .sessions
            .values()
            .filter(|s| s.account == a.id)
            .map(|s| s.reserved_money())
            .sum();
        assert_eq!(
            held, a.reserved,
            "reservations disagree with account {}",
            a.id
        );
    }
}

pub fn balance(e: &Engine, id: u64) -> i64 {
    e.account(AccountId(id)).expect("account").balance
}

pub fn at(secs: u64) -> Timestamp {
    Timestamp::from_secs(1_700_000_000 + secs)
}
