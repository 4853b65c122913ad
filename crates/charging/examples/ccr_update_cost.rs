//! Instructions per CCR-Update (three rating groups, usage and new
//! quota), counted by valgrind, which a shared machine does not disturb
//! the way it disturbs timings:
//!
//! ```sh
//! cargo build --profile bench -p gyro-charging --example ccr_update_cost
//! valgrind --tool=callgrind --toggle-collect='*measured*' --callgrind-out-file=/dev/null \
//!     target/release/examples/ccr_update_cost 20000 [plan]
//! ```
//!
//! Collected instructions ("Collected :" in valgrind's summary) divided by
//! 20000 is the cost of one request. `plan`: the 50-rate plan with 100,000
//! destination prefixes of the engine benchmark, the requests carrying a
//! called party and a visited network. The request is built through its
//! serde form, so the same file also measures builds from before plans.

use gyro_charging::*;
use std::hint::black_box;

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

/// The `n` CCR-Updates valgrind counts.
#[inline(never)]
fn measured(engine: &mut Engine, request: &mut CcRequest, now: &mut Timestamp, n: u64) {
    steps(engine, request, now, n);
}

/// Runs `n` CCR-Updates, one second apart.
#[inline(never)]
fn steps(engine: &mut Engine, request: &mut CcRequest, now: &mut Timestamp, n: u64) {
    let mut answer = CcAnswer::default();
    let mut out = Output::default();
    for _ in 0..n {
        request.request_number += 1;
        request.end_to_end += 1;
        *now = now.plus_secs(1);
        out.clear();
        engine.handle(request, *now, &mut answer, &mut out);
        black_box(&answer);
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let plan = args.next().as_deref() == Some("plan");
    let config = if plan {
        plan_config()
    } else {
        CONFIG.to_string()
    };
    let mut engine = ChargingConfig::from_toml_str(&config)
        .unwrap()
        .build_engine()
        .unwrap();
    let mut now = Timestamp::from_secs(1_767_312_000);
    let mut request = CcRequest {
        session_id: "pgw.example;1767312000;42".into(),
        origin_host: "pgw.example".into(),
        end_to_end: 1,
        request_type: RequestType::Initial,
        service_context: "12.32251@3gpp.org".into(),
        subscription_ids: vec![SubscriptionId::e164("46700000042")],
        multiple_services: Some(true),
        mscc: [10u32, 20, 30]
            .iter()
            .map(|&rg| Mscc {
                rating_group: Some(rg),
                requested: Some(ServiceUnits::default()),
                ..Mscc::default()
            })
            .collect(),
        ..CcRequest::default()
    };
    if plan {
        let mut v = serde_json::to_value(&request).unwrap();
        v["called_party"] = "+4600123456".into();
        v["visited_plmn"] = "24001".into();
        request = serde_json::from_value(v).unwrap();
    }
    let mut out = Output::default();
    let mut a = CcAnswer::default();
    engine.handle(&request, now, &mut a, &mut out);
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
    // Warm: past the answers' time to live, so their slots are reused.
    steps(&mut engine, &mut request, &mut now, 1_000);
    measured(&mut engine, &mut request, &mut now, n);
    println!("{n} CCR-Updates");
}
