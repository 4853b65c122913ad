//! Golden tests: a fixed CCR-I/U/T session with MSCC and a CCR-Event, on
//! the demo configuration, produce exactly the recorded answers and CDRs.
//! Regenerate with `GYRO_BLESS=1 cargo test -p gyro-charging --test golden`
//! after an intended change, and review the diff.

use gyro_charging::*;

const EXAMPLE: &str = include_str!("../../../config/example-charging.toml");
mod common;
use common::script::script;

fn transcript() -> String {
    let mut e: common::TestEngine = ChargingConfig::from_toml_str(EXAMPLE)
        .unwrap()
        .build_engine()
        .unwrap()
        .into();
    let mut out = Output::default();
    let mut text = String::new();
    for (req, now) in script() {
        out.clear();
        let a = e.handle_request(&req, now, &mut out);
        text.push_str(&format!(
            "request {:?} {} {}\n",
            req.request_type, req.request_number, req.session_id
        ));
        text.push_str(&format!("answer {}\n", serde_json::to_string(&a).unwrap()));
        for c in &out.cdrs {
            text.push_str(&format!("cdr {}\n", serde_json::to_string(c).unwrap()));
        }
    }
    let a = e.account(AccountId(1001)).unwrap();
    text.push_str(&format!(
        "account balance={} reserved={} debited={}\n",
        a.balance, a.reserved, a.debited
    ));
    text
}

#[test]
fn session_and_event_produce_the_recorded_answers_and_cdrs() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/engine-transcript.txt"
    );
    let got = transcript();
    if std::env::var_os("GYRO_BLESS").is_some() {
        std::fs::write(path, &got).unwrap();
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        got, want,
        "transcript changed; rerun with GYRO_BLESS=1 and review"
    );
}

#[test]
fn recorded_numbers_are_the_expected_ones() {
    // Spelled out so the golden file is not the only witness.
    let text = transcript();
    // rg10: 10 MiB at 1.00/100 MiB = 10 cents reserved; rg20: 20 cents.
    // Usage: 5 MiB rg10 = 5; 1 MiB + 1 octet rg20 is rounded to 1025 kB =
    // 2.002 cents, rounded up to 3; 3 MiB rg10 = 3; one SMS = 50. Total 61.
    assert!(
        text.ends_with("account balance=9999939 reserved=0 debited=61\n"),
        "{text}"
    );
    assert_eq!(text.matches("\"duplicate\":true").count(), 1);
    assert_eq!(text.lines().filter(|l| l.starts_with("cdr ")).count(), 5);
}
