//! `gyro load --protocol nchf` against a real `gyro serve`, with more
//! sessions per connection (`--window`) than the server lets a connection
//! have streams open (SETTINGS_MAX_CONCURRENT_STREAMS, 128 by default),
//! twice in a row: both runs send from their first moment and every
//! session completes. And a run that sends nothing fails, over Nchf and
//! over Diameter.

#[path = "support/nchf.rs"]
mod nchf;
mod support;

use std::process::Command;

use nchf::Server;
use serde_json::Value;

const CONNECTIONS: u64 = 8;
/// Above the server's max_concurrent_streams (128).
const WINDOW: u64 = 256;

/// `gyro load` with `args`: (exit status success, JSON report, stderr).
fn load(args: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["load", "--quiet", "--json"])
        .args(args)
        .output()
        .expect("run gyro load");
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), report, stderr)
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

#[test]
fn nchf_loads_with_a_window_above_max_concurrent_streams_run_back_to_back() {
    let dir = support::scratch("nchf-load");
    let server = Server::start(&dir, "max_concurrent_streams = 128\n", None);
    let target = server.nchf.to_string();
    let (connections, window) = (CONNECTIONS.to_string(), WINDOW.to_string());
    for run in 1..=2 {
        let (ok, r, stderr) = load(&[
            "--protocol",
            "nchf",
            "--target",
            &target,
            "--connections",
            &connections,
            "--window",
            &window,
            "--duration",
            "2s",
            "--updates",
            "1",
            "--subscribers",
            "1000",
        ]);
        assert!(ok, "run {run}: {r} {stderr}");
        assert!(n(&r["sent"]) > 0, "run {run} sent nothing: {r}");
        assert_eq!(r["answered"], r["sent"], "run {run}: {r}");
        assert_eq!(r["errors"], 0, "run {run}: {r}");
        assert_eq!(r["connections_opened"], CONNECTIONS, "run {run}: {r}");
        // Every session place started a session: the places begin with
        // the run, not after a setup that outlasts it.
        let s = &r["sessions"];
        assert!(
            n(&s["started"]) >= CONNECTIONS * WINDOW,
            "run {run}: not every place started a session: {r}"
        );
        assert_eq!(s["started"], s["completed"], "run {run}: {r}");
        assert_eq!(s["failed"], 0, "run {run}: {r}");
        // Requests went out in the first second.
        assert!(
            n(&r["series"]["sent"][0]) > 0,
            "run {run}: nothing sent in the first second: {r}"
        );
    }
    // Every session was released: nothing stays open on the server.
    let (status, list) = server.admin("GET", "/v1/sessions", None);
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(0), "{list}");

    // A run that sends nothing fails (over before it starts:
    // --duration 0s), over Nchf and Diameter.
    let diameter = server.diameter.to_string();
    for (protocol, target) in [("nchf", &target), ("diameter", &diameter)] {
        let (ok, r, stderr) = load(&[
            "--protocol",
            protocol,
            "--target",
            target,
            "--connections",
            "1",
            "--duration",
            "0s",
        ]);
        assert!(!ok, "{protocol}: a run that sent nothing succeeded: {r}");
        assert_eq!(r["sent"], 0, "{protocol}: {r}");
        assert_eq!(r["error_ratio"], 1.0, "{protocol}: {r}");
        assert!(
            stderr.contains("no request was sent"),
            "{protocol}: {stderr}"
        );
    }
}
