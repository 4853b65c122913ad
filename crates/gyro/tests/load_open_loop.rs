//! `gyro load --rate` against a real `gyro serve`: the open-loop
//! generator offers the rate it was asked for, keeps its schedule, counts
//! every request once and says what its own threads cost.

mod support;

use std::net::SocketAddr;
use std::process::{Child, Command};

use support::{free_port, scratch, serve};

/// A child process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn load(addr: SocketAddr, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["load", "--json", "--quiet", "--target"])
        .arg(addr.to_string())
        .args(args)
        .env("GYRO_LOG", "error")
        .output()
        .expect("run gyro load");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "gyro load failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("gyro load report ({e}): {text}"))
}

fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn open_loop_offers_the_rate_asked_and_the_counts_add_up() {
    let dir = scratch("load-open-loop");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let _server = Killed(serve(addr, &dir.join("data"), &[]));

    // 2,000 requests a second for 2 s over 10 connections on 2 load
    // threads, 8 sessions per connection.
    let r = load(
        addr,
        &[
            "--rate",
            "2000",
            "--duration",
            "2s",
            "--connections",
            "10",
            "--threads",
            "2",
            "--window",
            "8",
        ],
    );
    let report = serde_json::to_string_pretty(&r).unwrap();
    assert_eq!(n(&r["connections_opened"]), 10, "{report}");
    assert_eq!(f(&r["target_rate"]), 2000.0);
    let offered = f(&r["offered_rate"]);
    assert!(
        (1_800.0..=2_200.0).contains(&offered),
        "offered {offered}/s of 2000/s: {report}"
    );

    // Every request sent was answered, successfully, and counted once.
    let (sent, answered) = (n(&r["sent"]), n(&r["answered"]));
    assert_eq!(n(&r["errors"]), 0, "{report}");
    assert_eq!(sent, answered, "{report}");
    assert_eq!(n(&r["result_codes"]["2001"]), answered, "{report}");
    // About 4,000 scheduled; the sessions open at the end are ended by
    // the drain, counted apart.
    assert!((3_600..=4_400).contains(&sent), "{report}");
    let per_type = r["per_type"].as_array().unwrap();
    let of = |name: &str| {
        per_type
            .iter()
            .find(|t| t["name"] == name)
            .map_or(0, |t| n(&t["sent"]))
    };
    assert_eq!(of("CCR-I") + of("CCR-U") + of("CCR-T"), sent);
    // Data sessions of CCR-I, up to three CCR-U and CCR-T, all finished:
    // those the end of the run cut with their CCR-T in the drain.
    let drain = &r["drain"];
    let drained = n(&drain["sessions_finished"]);
    assert_eq!(of("CCR-I"), of("CCR-T") + drained, "{report}");
    assert!(of("CCR-U") <= 3 * of("CCR-I"), "{report}");
    assert!(of("CCR-U") >= 3 * of("CCR-T"), "{report}");
    assert_eq!(n(&drain["requests"]), drained, "{report}");
    assert_eq!(n(&drain["sessions_left_open"]), 0, "{report}");
    assert_eq!(n(&r["sessions"]["started"]), of("CCR-I"));
    assert_eq!(n(&r["sessions"]["completed"]), of("CCR-I"));

    // Every request's send lag was recorded, and latency counted for
    // every answer.
    assert_eq!(n(&r["send_lag_us"]["count"]), sent, "{report}");
    assert_eq!(n(&r["latency_us"]["count"]), answered);

    // The generator reports its two threads' CPU time.
    let g = &r["generator"];
    assert_eq!(n(&g["threads"]), 2, "{report}");
    assert!(f(&g["cpu_secs"]) > 0.0 && f(&g["cpu_us_per_request"]) > 0.0);
    let busy = f(&g["busiest_thread"]);
    assert!((0.0..=1.05).contains(&busy), "{report}");
    assert_eq!(g["load_bound"].as_bool(), Some(busy >= 0.9));
}
