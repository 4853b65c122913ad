//! Nothing acknowledged is ever lost: `gyro serve` runs as a real process
//! under `gyro load`, is killed with SIGKILL at random moments several
//! times and restarted each time; then the books are checked against what
//! the load generator was told.
//!
//! Set GYRO_CRASH_SEED to replay a run (the seed is printed).

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{free_port, serve};

fn gyro() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gyro"));
    c.env("GYRO_LOG", "warn");
    c
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn read_json_lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("torn or invalid line in {}: {e}: {l}", path.display()))
        })
        .collect()
}

#[test]
fn sigkill_loses_no_acknowledged_charging() {
    let seed = std::env::var("GYRO_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("GYRO_CRASH_SEED={seed}");
    let mut rng = seed;
    let dir = std::env::temp_dir().join(format!("gyro-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let rounds = 4;
    for round in 0..rounds {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut server = serve(addr, &data, &[]);
        let record = dir.join(format!("answers-{round}.jsonl"));
        let mut load = gyro()
            .args(["load", "--quiet", "--threads", "1", "--connections", "4"])
            .args(["--scenario", "mix", "--duration", "3s", "--timeout", "2s"])
            .args(["--max-error-ratio", "1", "--target"])
            .arg(addr.to_string())
            .arg("--record")
            .arg(&record)
            .stdout(Stdio::null())
            .spawn()
            .expect("start gyro load");
        let wait = 300 + xorshift(&mut rng) % 1500;
        std::thread::sleep(Duration::from_millis(wait));
        server.kill().expect("SIGKILL the server");
        server.wait().unwrap();
        let status = load.wait().unwrap();
        println!("round {round}: killed after {wait} ms; load exited with {status}");
    }
    // A last start recovers (and closes the CDR files on a clean stop).
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let server = serve(addr, &data, &[]);
    let pid = server.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let mut server = server;
    assert!(server.wait().unwrap().success());

    // The books: conservation for every account, reservations of the
    // killed sessions released once their supervision time has passed.
    let out = gyro()
        .args(["ledger", "--expire-sessions", "--json", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ledger check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ledger: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ledger["violations"], 0);
    assert_eq!(ledger["reserved"], 0, "expired sessions release everything");
    let debited: HashMap<u64, i64> = ledger["books"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["account"].as_u64().unwrap(),
                b["debited"].as_i64().unwrap(),
            )
        })
        .collect();

    // The CDRs: every line whole, sequence numbers 1..=n per shard without
    // gaps or repeats, amounts adding up to what each account was debited.
    let mut cdr_keys: HashSet<(String, u64)> = HashSet::new();
    let mut amounts: BTreeMap<u64, i64> = BTreeMap::new();
    let mut total_cdrs = 0;
    for shard in std::fs::read_dir(data.join("cdr")).unwrap() {
        let shard = shard.unwrap().path();
        let mut seqs = Vec::new();
        for file in std::fs::read_dir(&shard).unwrap() {
            for cdr in read_json_lines(&file.unwrap().path()) {
                seqs.push(cdr["sequence"].as_u64().unwrap());
                *amounts.entry(cdr["account"].as_u64().unwrap()).or_default() +=
                    cdr["amount"].as_i64().unwrap();
                cdr_keys.insert((
                    cdr["session_id"].as_str().unwrap().to_string(),
                    cdr["request_number"].as_u64().unwrap(),
                ));
            }
        }
        seqs.sort_unstable();
        let n = seqs.len() as u64;
        assert!(
            seqs.iter().copied().eq(1..=n),
            "{}: sequence numbers have gaps or repeats",
            shard.display()
        );
        total_cdrs += n;
    }
    for (account, amount) in &amounts {
        assert_eq!(
            debited.get(account).copied().unwrap_or(0),
            *amount,
            "account {account}: CDR amounts disagree with the money debited"
        );
    }

    // What the clients were told: every successful usage report, final
    // report and event has its CDR on disk.
    let mut acknowledged = 0;
    for round in 0..rounds {
        for a in read_json_lines(&dir.join(format!("answers-{round}.jsonl"))) {
            let ty = a["type"].as_str().unwrap();
            if a["result_code"] != 2001 || ty == "CCR-I" {
                continue;
            }
            acknowledged += 1;
            let key = (
                a["session_id"].as_str().unwrap().to_string(),
                a["number"].as_u64().unwrap(),
            );
            assert!(
                cdr_keys.contains(&key),
                "{ty} {key:?} was answered 2001 but has no CDR (seed {seed})"
            );
        }
    }
    println!("{acknowledged} acknowledged debits checked against {total_cdrs} CDRs");
    assert!(
        acknowledged > 100,
        "the load made too little progress to prove anything"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
