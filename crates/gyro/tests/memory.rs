//! Memory that matches the data, with a real `gyro serve` under `gyro
//! load`: between an early point (after a warm-up) and a late one (after a
//! few hundred thousand more requests) the server's resident memory grows
//! by no more than what the data it must hold takes: every answer given
//! is remembered for duplicate detection for its time to live (300 s, so
//! all of this run's answers), and every ended session keeps its routing
//! pin as long. And sessions abandoned by a client that vanished are
//! closed on their supervision time (Tcc) while the server is busy with
//! other clients, not starved by the load.

mod support;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::{free_port, scratch, serve};

/// Session supervision time (Tcc) of this test's charging configuration.
const TCC_SECS: u64 = 3;

/// Bytes one remembered answer may take: the duplicate index's documented
/// worst case (a 12-byte slot, two tables of 4-byte buckets at a load of
/// 3/8 and the old tables of a move in progress: 46 bytes).
const BYTES_PER_ANSWER: u64 = 48;

/// Bytes one ended session may take while its routing pin lingers: the
/// Session-Id directory's documented worst case (a 12-byte entry in a
/// hash table at a load of 7/16 and a 12-byte release: 42 bytes).
const BYTES_PER_SESSION: u64 = 48;

/// What does not scale with the data: allocator slack, a table about to
/// double, buffers sized by the peak batch.
const FIXED_BYTES: u64 = 4 << 20;

/// Kills the server when the test ends, failed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kb * 1024
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `gyro load` against `addr` (closed loop), with these options.
fn load(addr: SocketAddr, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gyro"));
    c.args(["load", "--quiet", "--threads", "1", "--target"])
        .arg(addr.to_string())
        .args(["--max-error-ratio", "0"])
        .args(args)
        .env("GYRO_LOG", "error");
    c
}

/// Runs a closed-loop load of `count` requests; returns the answers.
fn load_count(addr: SocketAddr, count: u64) -> u64 {
    let out = load(addr, &["--json", "--count", &count.to_string()])
        .output()
        .expect("run gyro load");
    assert!(
        out.status.success(),
        "gyro load failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("load report");
    report["answered"].as_u64().expect("answered")
}

fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The session-end CDRs written so far, by Session-Id: whether the
/// session's supervision time expired, and when it ended (ms).
fn session_ends(data: &Path) -> HashMap<String, (bool, u64)> {
    let mut ends = HashMap::new();
    let Ok(shards) = std::fs::read_dir(data.join("cdr")) else {
        return ends;
    };
    for shard in shards {
        for file in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            for cdr in json_lines(&file.unwrap().path()) {
                if cdr["record_type"] == "session-end" {
                    ends.insert(
                        cdr["session_id"].as_str().unwrap().to_string(),
                        (
                            cdr["closing_cause"] == "supervision-expired",
                            cdr["ended"].as_u64().unwrap(),
                        ),
                    );
                }
            }
        }
    }
    ends
}

#[test]
fn rss_grows_only_with_the_data_held_and_abandoned_sessions_end_on_time_under_load() {
    let dir = scratch("memory");
    let data = dir.join("data");
    let charging = dir.join("charging.toml");
    let demo = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/example-charging.toml"),
    )
    .unwrap();
    let tcc = format!("supervision_secs = {TCC_SECS} ");
    std::fs::write(
        &charging,
        demo.replacen("supervision_secs = 1200 ", &tcc, 1),
    )
    .unwrap();
    // The load here is closed loop and never more than the server can
    // take, but a machine busy with other work may pause the server for
    // longer than the default queue wait bound: this test is about
    // memory, so the bound is set where overload control does not answer
    // 3004 for a scheduling pause.
    let config = dir.join("gyro.toml");
    std::fs::write(&config, "[limits]\nmax_queue_wait_ms = 60000\n").unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let server = Killed(serve(
        addr,
        &data,
        &[
            "--charging",
            charging.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    ));
    let pid = server.0.id();

    // Warm-up: connections, buffers, the first table chunks.
    let warm = load_count(addr, 20_000);
    let early = rss_bytes(pid);

    // A client that vanishes with sessions open.
    let record = dir.join("abandoned.jsonl");
    let mut vanishing = load(addr, &["--duration", "30s", "--record"])
        .arg(&record)
        .stdout(Stdio::null())
        .spawn()
        .expect("start gyro load");
    std::thread::sleep(Duration::from_millis(1500));
    vanishing.kill().unwrap();
    vanishing.wait().unwrap();
    let vanished_at = now_ms();

    // Other clients keep the server busy past the supervision time.
    let mut answers = 0;
    let busy_from = now_ms();
    while now_ms() - busy_from < (TCC_SECS + 3) * 1000 || answers < 200_000 {
        answers += load_count(addr, 50_000);
    }
    let late = rss_bytes(pid);
    let ends = session_ends(&data);

    // Every session the vanished client had opened was ended: by its
    // CCR-T if that arrived before the client vanished (its answer may not
    // have), otherwise on its supervision time, while the others were
    // served.
    let told = json_lines(&record);
    let opened: HashSet<&str> = told
        .iter()
        .filter(|a| a["type"] == "CCR-I" && a["result_code"] == 2001)
        .map(|a| a["session_id"].as_str().unwrap())
        .collect();
    let ended: HashSet<&str> = told
        .iter()
        .filter(|a| a["type"] == "CCR-T")
        .map(|a| a["session_id"].as_str().unwrap())
        .collect();
    let mut abandoned = 0;
    for sid in opened.difference(&ended) {
        let &(expired, at) = ends
            .get(*sid)
            .unwrap_or_else(|| panic!("abandoned session {sid} was not closed under load"));
        if expired {
            abandoned += 1;
            assert!(
                at <= vanished_at + (TCC_SECS + 2) * 1000,
                "abandoned session {sid} closed {} ms after its client vanished (Tcc {TCC_SECS} s)",
                at.saturating_sub(vanished_at)
            );
        }
    }
    assert!(abandoned > 0, "the vanished client left no session open");

    // All answers are remembered (the time to live is longer than the
    // run); a data session is 5 requests.
    let recorded = told.len() as u64;
    let held_answers = answers + recorded;
    let sessions = held_answers / 5 + opened.len() as u64;
    let bound = held_answers * BYTES_PER_ANSWER + sessions * BYTES_PER_SESSION + FIXED_BYTES;
    let growth = late.saturating_sub(early);
    println!(
        "RSS {} KiB after {warm} requests, {} KiB after {} more ({} bytes a request; bound {} KiB); \
         {} abandoned sessions closed within Tcc + 2 s",
        early >> 10,
        late >> 10,
        held_answers,
        growth / held_answers,
        bound >> 10,
        abandoned
    );
    assert!(
        growth <= bound,
        "RSS grew {} KiB for {held_answers} answers and {sessions} sessions held (bound {} KiB)",
        growth >> 10,
        bound >> 10
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
