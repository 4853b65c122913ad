//! `gyro load` against a real `gyro serve` leaves no session open: when
//! `--duration` ends the run (open loop and closed loop) or Ctrl-C stops
//! it, every session the server holds is ended with a CCR-Terminate in
//! the drain, counted apart from the measured requests, and afterwards
//! the server's `/metrics` and `gyro ledger` show no open session and no
//! credit reserved.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::prometheus::sum;
use support::server::{ledger, Server};
use support::{scratch, settled};

/// Runs `gyro load --json --quiet` against `server` with `args`, sending
/// SIGINT after `interrupt` when given; returns the exit code and the
/// report.
fn load(server: &Server, args: &[&str], interrupt: Option<Duration>) -> (i32, serde_json::Value) {
    let child = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["load", "--json", "--quiet", "--target"])
        .arg(server.diameter.to_string())
        .args(args)
        .env("GYRO_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gyro load");
    if let Some(after) = interrupt {
        std::thread::sleep(after);
        let pid = child.id().to_string();
        assert!(Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success());
    }
    let out = child.wait_with_output().expect("run gyro load");
    let text = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "gyro load report ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn sent(r: &serde_json::Value, name: &str) -> u64 {
    r["per_type"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .map_or(0, |t| n(&t["sent"]))
}

/// The report says every session was ended, the drain's among them, and
/// the server agrees: no open session, nothing reserved, on `/metrics`
/// while it runs and in its ledger once stopped.
fn nothing_left_open(server: Server, code: i32, r: &serde_json::Value) {
    let report = serde_json::to_string_pretty(r).unwrap();
    assert_eq!(code, 0, "{report}");
    assert_eq!(n(&r["errors"]), 0, "{report}");
    let drain = &r["drain"];
    assert_eq!(n(&drain["sessions_left_open"]), 0, "{report}");
    assert!(drain["left_open_reason"].is_null(), "{report}");
    assert!(n(&drain["sessions_finished"]) > 0, "{report}");
    assert_eq!(n(&drain["answered"]), n(&drain["requests"]), "{report}");
    // Every session started was completed; those the run's end cut were
    // ended by the drain's CCR-T, which the measured figures leave out.
    let started = n(&r["sessions"]["started"]);
    assert_eq!(n(&r["sessions"]["completed"]), started, "{report}");
    assert_eq!(sent(r, "CCR-I"), started, "{report}");
    assert_eq!(
        sent(r, "CCR-T") + n(&drain["sessions_finished"]),
        started,
        "{report}"
    );
    assert_eq!(n(&r["latency_us"]["count"]), n(&r["answered"]), "{report}");

    let (open, reserved) = settled(|| {
        let m = server.metrics();
        (
            sum(&m, "gyro_open_sessions"),
            sum(&m, "gyro_money_reserved_minor_units"),
        )
    });
    assert_eq!((open, reserved), (0.0, 0.0), "{report}");
    let data = server.data.clone();
    server.stop();
    let books = ledger(&data, &[]);
    assert_eq!(books["reserved"], 0, "{books}");
}

#[test]
fn open_loop_run_ends_every_session_it_started() {
    let dir = scratch("load-drain-open");
    let server = Server::in_dir(&dir, "", &[]);
    // 100 requests a second for 2 s: 200 slots over 512 session places,
    // so every session is still open when the run ends.
    let (code, r) = load(&server, &["--rate", "100", "--duration", "2s"], None);
    nothing_left_open(server, code, &r);
}

#[test]
fn closed_loop_run_ends_every_session_it_started() {
    let dir = scratch("load-drain-closed");
    let server = Server::in_dir(&dir, "", &[]);
    let (code, r) = load(
        &server,
        &["--duration", "1s", "--connections", "2", "--window", "16"],
        None,
    );
    nothing_left_open(server, code, &r);
}

#[test]
fn ctrl_c_stops_the_run_and_ends_every_session_it_started() {
    let dir = scratch("load-drain-sigint");
    let server = Server::in_dir(&dir, "", &[]);
    let (code, r) = load(
        &server,
        &["--rate", "200", "--duration", "60s"],
        Some(Duration::from_millis(1500)),
    );
    let report = serde_json::to_string_pretty(&r).unwrap();
    assert!(r["elapsed_secs"].as_f64().unwrap() < 30.0, "{report}");
    nothing_left_open(server, code, &r);
}

#[test]
fn the_stopped_line_counts_the_requests_answered_while_the_server_drained() {
    // A server stopped with SIGTERM in the middle of a run answers what
    // it has read before it ends: its last log line counts those too.
    let dir = scratch("stop-totals");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], support::free_port()));
    let mut server = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["serve", "--workers", "2", "--listen"])
        .arg(addr.to_string())
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("GYRO_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gyro serve");
    let t = std::time::Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(t.elapsed() < Duration::from_secs(30), "never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    let load = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args([
            "load", "--json", "--quiet", "-c", "2", "-d", "20s", "--target",
        ])
        .arg(addr.to_string())
        .env("GYRO_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gyro load");
    std::thread::sleep(Duration::from_millis(1500));
    let pid = server.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let mut log = String::new();
    std::io::Read::read_to_string(server.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert!(server.wait().unwrap().success(), "{log}");
    let out = load.wait_with_output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let answered = report["answered"].as_u64().unwrap();
    assert!(answered > 0, "{report}");
    let stopped = log
        .lines()
        .filter(|l| l.contains(" stopped"))
        .find_map(|l| l.split("requests=").nth(1))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no stopped line in {log}"));
    assert_eq!(stopped, answered, "{log}");
}
