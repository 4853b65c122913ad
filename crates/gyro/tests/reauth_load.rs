//! The `gyro load --scenario topup` flow end to end, over real sockets and
//! real HTTP: accounts with small balances created through the admin API,
//! `gyro load` draining them (its sessions stay open waiting for credit),
//! top-ups through the API while the load runs, the server's
//! Re-Auth-Requests answered and the sessions going on to their normal
//! end, while those of accounts never topped up wait to the end of the run
//! and close with their CCR-Terminate; then the books balance with nothing
//! reserved.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::scratch;
use support::server::{ledger, Server, SHORT_ANSWER_TIMEOUT};

/// Accounts, one per session place of the load (2 connections x 8).
const ACCOUNTS: u64 = 16;
const FIRST_MSISDN: u64 = 46_708_770_000;
/// A few minor units: less than a few requests' worth of quota (a grant
/// of about 1 MB costs about 1 on rating group 10 and 2 on 20).
const SMALL_BALANCE: i64 = 5;
const TOP_UP: i64 = 1_000_000;
/// Accounts topped up during the run: the first ones; the rest stay
/// drained.
const TOPPED_UP: u64 = 10;

fn per_type<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["per_type"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report}"))
}

#[test]
fn drained_sessions_wait_for_the_top_up_re_auth_and_go_on_or_end_with_the_run() {
    let server = Server::in_dir(&scratch("reauth-load"), SHORT_ANSWER_TIMEOUT, &[]);
    for i in 0..ACCOUNTS {
        server.create_account(FIRST_MSISDN + i, SMALL_BALANCE);
    }

    // One session place per account: 2 connections x window 8.
    let load = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["load", "--scenario", "topup", "--json", "--quiet"])
        .args(["--target", &server.diameter.to_string()])
        .args(["--connections", "2", "--window", "8", "--duration", "4s"])
        .args(["--subscriber-start", &FIRST_MSISDN.to_string()])
        .args(["--subscribers", &ACCOUNTS.to_string()])
        .args(["--updates", "4", "--max-error-ratio", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gyro load");

    // Wait until every account is drained: its session was granted the
    // last of it (final units) or nothing (4012), and waits.
    let t = Instant::now();
    loop {
        let drained = (0..ACCOUNTS)
            .filter(|i| server.account(FIRST_MSISDN + i)["balance"] == 0)
            .count() as u64;
        if drained == ACCOUNTS {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "only {drained} of {ACCOUNTS} accounts drained"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Top most accounts up: the server sends each one's waiting session
    // an RAR.
    for i in 0..TOPPED_UP {
        let msisdn = FIRST_MSISDN + i;
        let (status, _, body) = server.top_up(msisdn, TOP_UP, &format!("top-up-{msisdn}"));
        assert_eq!(status, 200, "{body}");
    }

    let out = load.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "gyro load --json ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(out.status.success(), "gyro load failed: {report}");
    assert_eq!(report["scenario"], "topup");
    assert_eq!(report["connections_opened"], 2, "{report}");
    for field in [
        "protocol_errors",
        "timeouts",
        "lost",
        "connection_errors",
        "unmatched_answers",
        "abort_requests",
        "unknown_session_requests",
        "server_requests",
    ] {
        assert_eq!(report[field], 0, "{field}: {report}");
    }

    // Every drained session waited; those of the topped-up accounts got
    // an RAR and went on, the others waited to the end of the run.
    let rars = report["re_auth_requests"].as_u64().unwrap();
    let s = &report["sessions"];
    let waited = s["waited_for_credit"].as_u64().unwrap();
    let continued = s["continued_after_re_auth"].as_u64().unwrap();
    let at_end = s["waiting_at_end"].as_u64().unwrap();
    assert_eq!(
        waited,
        continued + at_end,
        "each wait ends one way: {report}"
    );
    // After a top-up the money lasts the run: those sessions never wait
    // again, and nothing is refused for lack of credit.
    assert_eq!(rars, TOPPED_UP, "one RAR per topped-up account: {report}");
    assert_eq!(continued, TOPPED_UP, "{report}");
    assert_eq!(at_end, ACCOUNTS - TOPPED_UP, "{report}");
    assert_eq!(s["failed"], 0, "{report}");
    assert_eq!(s["started"], s["completed"], "{report}");
    for name in ["CCR-I", "CCR-U", "CCR-T"] {
        let t = per_type(&report, name);
        assert_eq!(t["errors"], 0, "{name}: {report}");
        assert_eq!(t["sent"], t["answered"], "{name}: {report}");
    }
    // 4012 on a service is how the server said the quota ran out.
    assert!(
        report["mscc_result_codes"]["4012"].as_u64().unwrap_or(0) > 0,
        "{report}"
    );

    // Nothing is left reserved, and the books balance with the top-ups.
    for i in 0..ACCOUNTS {
        let a = server.account(FIRST_MSISDN + i);
        assert_eq!(a["reserved"], 0, "{a}");
    }
    let data = server.data.clone();
    server.stop();
    let books = ledger(&data, &[]);
    assert_eq!(books["violations"], 0, "{books}");
    assert_eq!(books["reserved"], 0, "{books}");
    assert_eq!(books["open_sessions"], 0, "{books}");
    let mut topped = 0;
    for b in books["books"].as_array().unwrap() {
        if b["topped_up"] == TOP_UP {
            topped += 1;
            assert_eq!(b["initial_balance"], SMALL_BALANCE, "{b}");
        }
    }
    assert_eq!(topped, TOPPED_UP, "{books}");
}
