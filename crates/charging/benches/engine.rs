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

const CONFIG: &str = r#"
[engine]
node_id = "bench"
supervision_secs = 1200
dedup_ttl_secs = 300

[[tariff]]
name = "rg10"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 100
per = 104857600
increment = 1024
default_quota = 10485760
validity_time = 600

[[tariff]]
name = "rg20"
service_context = "32251@3gpp.org"
rating_group = 20
unit = "octets"
price = 200
per = 104857600
increment = 1024
default_quota = 10485760
validity_time = 600

[[tariff]]
name = "rg30"
service_context = "32251@3gpp.org"
rating_group = 30
unit = "seconds"
price = 1
per = 60
default_quota = 600
validity_time = 600

[[account_range]]
first_id = 1
count = 1000
e164_first = "46700000000"
balance = 1000000000000000
"#;

/// The same accounts on a price plan of 50 rates (by rating group, time
/// of day, day of week, roaming zone and destination) in a time zone,
/// with a table of 100,000 destination prefixes; the requests carry a
/// called party and a visited network, so every request looks both up.
fn plan_config() -> String {
    use std::fmt::Write as _;
    let mut t = String::from(CONFIG);
    // [[account_range]] is last in CONFIG: give it the plan.
    t.push_str("plan = \"big\"\n\n[destinations]\n");
    // 100 destinations of 1,000 prefixes each: 100,000 prefixes of 5 to 8
    // digits under country codes 1..99.
    for d in 0..100u32 {
        let _ = write!(t, "d{d} = [");
        for k in 0..1000u32 {
            let _ = write!(t, "\"{}{:0w$}\",", d + 1, k, w = 4 + (k % 4) as usize);
        }
        t.push_str("]\n");
    }
    t.push_str("\n[zones]\neu = [\"262\", \"208\", \"214\"]\nworld = [\"310\", \"440\"]\n");
    t.push_str("\n[plans.big]\ntime_zone = \"Europe/Stockholm\"\n");
    let mut rate = |name: String, extra: &str, seconds: bool| {
        let unit = if seconds {
            "unit = \"seconds\"\nprice = 1\nper = 60\ndefault_quota = 600\n"
        } else {
            "unit = \"octets\"\nprice = 100\nper = 104857600\nincrement = 1024\n\
             default_quota = 10485760\n"
        };
        let _ = write!(
            t,
            "\n[[plans.big.rate]]\nname = \"{name}\"\nservice_context = \"32251@3gpp.org\"\n\
             {unit}validity_time = 600\n{extra}"
        );
    };
    for rg in [10, 20] {
        for (what, extra) in [
            ("roam-eu", "zone = \"eu\"\n"),
            ("roam-world", "zone = \"world\"\n"),
            ("night", "hours = \"00:00-06:00\"\n"),
            ("weekend", "days = [\"sat\", \"sun\"]\n"),
            ("evening", "hours = \"18:00-23:00\"\n"),
            ("dest", "destination = \"d45\"\n"),
            (
                "data",
                "volume_quota_threshold = 1048576\nquota_holding_time = 300\n",
            ),
        ] {
            rate(
                format!("{what}-{rg}"),
                &format!("rating_group = {rg}\n{extra}"),
                false,
            );
        }
    }
    rate(
        "rg30-night".into(),
        "rating_group = 30\nhours = \"01:00-05:00\"\n",
        true,
    );
    rate("rg30".into(), "rating_group = 30\n", true);
    for rg in 100..134 {
        rate(
            format!("other-{rg}"),
            &format!("rating_group = {rg}\n"),
            false,
        );
    }
    t
}

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
