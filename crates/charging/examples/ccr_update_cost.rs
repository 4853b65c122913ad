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

#[path = "../benches/common/config.rs"]
mod config;
use config::{plan_config, CONFIG};

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
