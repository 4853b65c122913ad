//! The `gyro load --scenario topup` flow end to end, over real sockets and
//! real HTTP: accounts with small balances created through the admin API,
//! `gyro load` draining them (its sessions stay open waiting for credit),
//! top-ups through the API while the load runs, the server's
//! Re-Auth-Requests answered and the sessions going on to their normal
//! end, while those of accounts never topped up wait to the end of the run
//! and close with their CCR-Terminate; then the books balance with nothing
//! reserved.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{free_port, scratch, serve};

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

/// A running `gyro serve` with its admin API, killed when dropped.
struct Server {
    child: Option<Child>,
    diameter: SocketAddr,
    admin: String,
    data: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Server {
    fn start(name: &str) -> Server {
        let dir = scratch(name);
        let port = free_port();
        let cfg = support::admin_config(&dir, port);
        let diameter = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let data = dir.join("data");
        let child = serve(diameter, &data, &["-c", &cfg.to_string_lossy()]);
        let server = Server {
            child: Some(child),
            diameter,
            admin: format!("http://127.0.0.1:{port}"),
            data,
        };
        let t = Instant::now();
        while !matches!(http(&server.url("/readyz"), "GET", None), Ok((200, _))) {
            assert!(t.elapsed() < Duration::from_secs(30), "never ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.admin)
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        http(&self.url(path), method, body).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    fn account(&self, msisdn: u64) -> Value {
        let (status, body) = self.call("GET", &format!("/v1/accounts/{msisdn}"), None);
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Stops the server with SIGTERM and waits for a clean exit.
    fn stop(&mut self) {
        let mut child = self.child.take().expect("running");
        let pid = child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        assert!(child.wait().unwrap().success(), "gyro serve exits cleanly");
    }
}

fn http(url: &str, method: &str, body: Option<Value>) -> Result<(u16, Value), ureq::Error> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut response = match method {
        "GET" => agent.get(url).call()?,
        _ => agent.post(url).send_json(body.unwrap_or(Value::Null))?,
    };
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string()?;
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok((status, value))
}

/// `gyro ledger --json` on a stopped server's data directory.
fn ledger(data: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["ledger", "--json", "--data-dir"])
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gyro ledger: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

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
    let mut server = Server::start("reauth-load");
    for i in 0..ACCOUNTS {
        let (status, body) = server.call(
            "POST",
            "/v1/accounts",
            Some(json!({ "msisdn": (FIRST_MSISDN + i).to_string(), "balance": SMALL_BALANCE })),
        );
        assert_eq!(status, 201, "{body}");
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
        let (status, body) = server.call(
            "POST",
            &format!("/v1/accounts/{msisdn}/top-ups"),
            Some(json!({ "amount": TOP_UP, "idempotency_key": format!("top-up-{msisdn}") })),
        );
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
    server.stop();
    let books = ledger(&server.data);
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
