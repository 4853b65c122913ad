//! A CCR-Update with three rating groups through the engine (no Diameter
//! decoding): usage reported and new quota requested for each group.
//!
//! `cargo bench -p gyro-charging --bench engine` prints criterion's time per
//! request and, first, the heap allocations per request counted by a
//! counting global allocator.

use criterion::{criterion_group, criterion_main, Criterion};
use gyro_charging::*;
use std::hint::black_box;

#[path = "../tests/common/counting.rs"]
mod counting;

#[path = "common/config.rs"]
mod config;
use config::{plan_config, CONFIG};

struct Bench {
    engine: Engine,
    request: CcRequest,
    answer: CcAnswer,
    out: Output,
    now: Timestamp,
}

impl Bench {
    fn new() -> Self {
        Self::with(CONFIG)
    }

    /// On the 50-rate plan with 100,000 prefixes, the request carrying a
    /// called party and a visited network.
    fn plan() -> Self {
        let mut b = Self::with(&plan_config());
        let plan = b.engine.catalog().plan_named(Some("big")).unwrap();
        assert_eq!(plan.rates.len(), 50);
        assert_eq!(b.engine.catalog().destination_prefixes(), 100_000);
        b.request.called_party = "+4600123456".into();
        b.request.visited_plmn = "24001".into();
        b
    }

    fn with(config: &str) -> Self {
        let mut engine = ChargingConfig::from_toml_str(config)
            .unwrap()
            .build_engine()
            .unwrap();
        let now = Timestamp::from_secs(1_767_312_000);
        let groups = [10u32, 20, 30];
        let mut request = CcRequest {
            session_id: "pgw.example;1767312000;42".into(),
            origin_host: "pgw.example".into(),
            end_to_end: 1,
            request_type: RequestType::Initial,
            request_number: 0,
            service_context: "12.32251@3gpp.org".into(),
            subscription_ids: vec![SubscriptionId::e164("46700000042")],
            multiple_services: Some(true),
            mscc: groups
                .iter()
                .map(|&rg| Mscc {
                    rating_group: Some(rg),
                    requested: Some(ServiceUnits::default()),
                    ..Mscc::default()
                })
                .collect(),
            ..CcRequest::default()
        };
        let mut out = Output::default();
        let mut a = CcAnswer::default();
        assert_eq!(
            engine.handle(&request, now, &mut a, &mut out),
            Handled::Answered
        );
        assert_eq!(a.result_code, 2001);
        request.request_type = RequestType::Update;
        for m in &mut request.mscc {
            m.used = Some(if m.rating_group == Some(30) {
                ServiceUnits {
                    time: Some(45),
                    ..ServiceUnits::default()
                }
            } else {
                ServiceUnits {
                    input_octets: Some(1_000_000),
                    output_octets: Some(4_000_000),
                    ..ServiceUnits::default()
                }
            });
        }
        Bench {
            engine,
            request,
            answer: CcAnswer::default(),
            out,
            now,
        }
    }

    /// One CCR-Update: new number and End-to-End id, one second later.
    fn step(&mut self) {
        self.request.request_number += 1;
        self.request.end_to_end += 1;
        self.now = self.now.plus_secs(1);
        self.out.clear();
        let handled = self
            .engine
            .handle(&self.request, self.now, &mut self.answer, &mut self.out);
        debug_assert_eq!(handled, Handled::Answered);
        debug_assert_eq!(self.answer.result_code, 2001);
        black_box(&self.answer);
    }
}

fn count_allocations() {
    let mut b = Bench::new();
    // Warm up past the answer cache's time to live so it recycles slots.
    for _ in 0..1_000 {
        b.step();
    }
    assert_eq!(b.answer.mscc.len(), 3);
    assert_eq!(b.out.cdrs.len(), 3);
    let n = 100_000u64;
    let before = counting::allocations();
    for _ in 0..n {
        b.step();
    }
    let allocs = counting::allocations() - before;
    println!(
        "ccr_update_3_rating_groups: {:.3} allocations/op ({allocs} in {n} requests)",
        allocs as f64 / n as f64
    );
}

/// Whole sessions (CCR-I, CCR-U, CCR-T with three rating groups), each
/// under a new Session-Id written into a reused request.
struct Sessions {
    b: Bench,
    n: u64,
}

impl Sessions {
    fn new() -> Self {
        Sessions {
            b: Bench::new(),
            n: 0,
        }
    }

    fn session(&mut self) {
        use std::fmt::Write as _;
        self.n += 1;
        let b = &mut self.b;
        b.request.session_id.clear();
        let _ = write!(b.request.session_id, "pgw.example;1767312000;s{}", self.n);
        b.now = b.now.plus_secs(1);
        for (t, num) in [
            (RequestType::Initial, 0),
            (RequestType::Update, 1),
            (RequestType::Termination, 2),
        ] {
            b.request.request_type = t;
            b.request.request_number = num;
            b.request.end_to_end += 1;
            b.out.clear();
            let handled = b
                .engine
                .handle(&b.request, b.now, &mut b.answer, &mut b.out);
            debug_assert_eq!(handled, Handled::Answered);
            debug_assert_eq!(b.answer.result_code, 2001);
            black_box(&b.answer);
        }
    }
}

fn count_session_allocations() {
    let mut s = Sessions::new();
    for _ in 0..1_000 {
        s.session();
    }
    let n = 20_000u64;
    let before = counting::allocations();
    for _ in 0..n {
        s.session();
    }
    let allocs = counting::allocations() - before;
    println!(
        "session_i_u_t_3_rating_groups: {:.3} allocations/session ({allocs} in {n} sessions)",
        allocs as f64 / n as f64
    );
}

fn bench(c: &mut Criterion) {
    count_allocations();
    count_session_allocations();
    let mut b = Bench::new();
    c.bench_function("ccr_update_3_rating_groups", |bencher| {
        bencher.iter(|| b.step())
    });
    let mut s = Sessions::new();
    c.bench_function("session_i_u_t_3_rating_groups", |bencher| {
        bencher.iter(|| s.session())
    });
    let mut p = Bench::plan();
    for _ in 0..1_000 {
        p.step();
    }
    assert_eq!(p.answer.result_code, 2001);
    // The called number is in destination d45 (prefixes 46...).
    assert_eq!(p.out.cdrs.as_slice()[0].rate, "dest-10");
    c.bench_function(
        "ccr_update_3_rating_groups_plan_50_rates_100k_prefixes",
        |bencher| bencher.iter(|| p.step()),
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
