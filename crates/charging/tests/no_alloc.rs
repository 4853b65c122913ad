//! Steady-state heap allocations per request of a warm engine, counted by
//! a counting global allocator: at most one per CCR-Update and CCR-Event;
//! a whole session (CCR-I, U, T) at most two, all in the CCR-Initial (its
//! Session-Id, shared by the journaled effect, the open session and the
//! Session-Id index), none in its CCR-Updates and CCR-Terminate. The
//! session's rating context (its visited network) is held inline: a
//! session that carries one, or moves to another, allocates no more.

use gyro_charging::*;

#[path = "common/counting.rs"]
mod counting;

/// The counter is global: the tests take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

const CONFIG: &str = r#"
[[tariff]]
name = "data"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 100
per = 1048576
increment = 1024
default_quota = 10485760

[[tariff]]
name = "voice"
service_context = "32251@3gpp.org"
rating_group = 30
unit = "seconds"
price = 1
per = 60
default_quota = 600

[[tariff]]
name = "sms"
service_context = "32274@3gpp.org"
unit = "events"
price = 5
per = 1
default_quota = 1

[[account_range]]
first_id = 1
count = 100
e164_first = "46700000000"
balance = 1000000000000000
"#;

fn request(kind: RequestType, session: &str, number: u32) -> CcRequest {
    CcRequest {
        session_id: session.into(),
        origin_host: "pgw.example".into(),
        request_type: kind,
        request_number: number,
        service_context: "32251@3gpp.org".into(),
        subscription_ids: vec![SubscriptionId::e164("46700000042")],
        multiple_services: Some(true),
        mscc: [10, 30]
            .iter()
            .map(|&rg| Mscc {
                rating_group: Some(rg),
                requested: (kind != RequestType::Termination).then(ServiceUnits::default),
                used: (kind != RequestType::Initial).then(|| ServiceUnits {
                    total_octets: Some(1_000_000),
                    time: Some(30),
                    ..ServiceUnits::default()
                }),
                ..Mscc::default()
            })
            .collect(),
        ..CcRequest::default()
    }
}

struct Warm {
    engine: Engine,
    answer: CcAnswer,
    out: Output,
    now: Timestamp,
    e2e: u32,
}

impl Warm {
    fn new() -> Self {
        Warm {
            engine: ChargingConfig::from_toml_str(CONFIG)
                .unwrap()
                .build_engine()
                .unwrap(),
            answer: CcAnswer::default(),
            out: Output::default(),
            now: Timestamp::from_secs(1_767_312_000),
            e2e: 0,
        }
    }

    fn send(&mut self, r: &mut CcRequest) {
        self.e2e += 1;
        r.end_to_end = self.e2e;
        self.out.clear();
        let h = self
            .engine
            .handle(r, self.now, &mut self.answer, &mut self.out);
        assert_eq!(h, Handled::Answered);
        assert_eq!(self.answer.result_code, result_code::SUCCESS);
    }

    /// Allocations per call of `step` over `n` calls.
    fn per_request(&mut self, n: u64, mut step: impl FnMut(&mut Self)) -> f64 {
        let before = counting::allocations();
        for _ in 0..n {
            step(self);
        }
        (counting::allocations() - before) as f64 / n as f64
    }
}

#[test]
fn a_warm_engine_allocates_at_most_once_per_ccr_update() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut w = Warm::new();
    let mut r = request(RequestType::Initial, "pgw.example;1;1", 0);
    w.send(&mut r);
    r = request(RequestType::Update, "pgw.example;1;1", 0);
    // Warm up past the answers' time to live (one request a second), so
    // the duplicate index recycles its slots.
    // Every other update carries a visited network, a new one each time
    // (a handover: the session's rating context moves).
    let mut update = |w: &mut Warm| {
        r.request_number += 1;
        w.now = w.now.plus_secs(1);
        r.visited_plmn.clear();
        match r.request_number % 4 {
            1 => r.visited_plmn.push_str("26201"),
            3 => r.visited_plmn.push_str("20801"),
            _ => {}
        }
        w.send(&mut r);
    };
    w.per_request(1_000, &mut update);
    let per = w.per_request(20_000, &mut update);
    println!("CCR-Update: {per:.3} allocations per request");
    assert!(per <= 1.0, "{per} allocations per CCR-Update");
}

#[test]
fn a_whole_session_allocates_at_most_twice_all_in_its_ccr_initial() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut w = Warm::new();
    // The requests are built outside the counted sends; the engine's
    // share of each is counted by request type.
    let mut counts = [0u64; 3];
    let mut n = 0u32;
    let mut session = |w: &mut Warm, counts: &mut [u64; 3]| {
        n += 1;
        let sid = format!("pgw.example;1;{n}");
        let mut reqs = [
            request(RequestType::Initial, &sid, 0),
            request(RequestType::Update, &sid, 1),
            request(RequestType::Termination, &sid, 2),
        ];
        // A roaming session: its CCR-Initial and CCR-Update carry the
        // visited network (the session remembers it), its CCR-Terminate
        // does not.
        reqs[0].visited_plmn = "26201".into();
        reqs[1].visited_plmn = "26201".into();
        w.now = w.now.plus_secs(1);
        // Supervision timers of closed sessions fall due and are dropped,
        // as the runtime's periodic tick does.
        w.out.clear();
        w.engine.tick(w.now, &mut w.out);
        for (r, count) in reqs.iter_mut().zip(counts.iter_mut()) {
            let before = counting::allocations();
            w.send(r);
            *count += counting::allocations() - before;
        }
    };
    // Warm up past the supervision time (1200 s, one session a second), so
    // the timer heap, the maps and the duplicate index stop growing.
    let mut warmup = [0u64; 3];
    for _ in 0..2_000 {
        session(&mut w, &mut warmup);
    }
    let sessions = 5_000u64;
    for _ in 0..sessions {
        session(&mut w, &mut counts);
    }
    let [i, u, t] = counts.map(|c| c as f64 / sessions as f64);
    println!("CCR-Initial {i:.3}, CCR-Update {u:.3}, CCR-Terminate {t:.3} allocations per request");
    assert!(i + u + t <= 2.0, "{} allocations per session", i + u + t);
    assert_eq!(counts[1], 0, "CCR-Updates allocated");
    assert_eq!(counts[2], 0, "CCR-Terminates allocated");
}

#[test]
fn a_warm_engine_allocates_at_most_once_per_ccr_event() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut w = Warm::new();
    let mut ev = request(RequestType::Event, "sms;1", 0);
    ev.service_context = "32274@3gpp.org".into();
    ev.mscc.clear();
    ev.requested_action = Some(RequestedAction::DirectDebiting);
    ev.requested = Some(ServiceUnits {
        service_specific: Some(1),
        ..ServiceUnits::default()
    });
    let mut event = |w: &mut Warm| {
        w.now = w.now.plus_secs(1);
        ev.request_number += 1;
        w.send(&mut ev);
    };
    w.per_request(1_000, &mut event);
    let per_event = w.per_request(5_000, &mut event);
    println!("CCR-Event: {per_event:.3} allocations per request");
    assert!(per_event <= 1.0, "{per_event} allocations per CCR-Event");
}

#[test]
fn a_warm_answer_archive_allocates_nothing_per_section() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut w = Warm::new();
    let mut archive = AnswerArchive::new();
    let mut r = request(RequestType::Initial, "pgw.example;1;1", 0);
    w.send(&mut r);
    r = request(RequestType::Update, "pgw.example;1;1", 0);
    // Each update is its own section (one group commit each), as a server
    // without a journal keeps them; the oldest are forgotten as the
    // answers' horizon moves on.
    let mut kept = std::collections::VecDeque::new();
    let mut step = |w: &mut Warm| {
        r.request_number += 1;
        // One request a second, as the other tests: the duplicate index
        // keeps 300 answers (the more it keeps, the likelier a hash
        // collision makes a request a duplicate candidate).
        w.now = w.now.plus_secs(1);
        w.send(&mut r);
        archive.append(&w.out.answers);
        kept.push_back(w.out.answers.first_seq());
        if kept.len() > 20_000 {
            let oldest = kept.pop_front().unwrap();
            archive.forget_below(oldest + 1);
        }
    };
    w.per_request(50_000, &mut step);
    let with_archive = w.per_request(20_000, &mut step);
    println!("CCR-Update with its answer archived: {with_archive:.3} allocations per request");
    // The engine allocates nothing per CCR-Update; the archive copies
    // into reused chunks.
    assert!(
        with_archive < 0.01,
        "{with_archive} allocations per archived CCR-Update"
    );
}
