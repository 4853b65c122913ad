//! zstd-compressed CDR files from a real `gyro serve`: under `gyro load`,
//! killed with SIGKILL and started again, then stopped cleanly. Every
//! closed file is a valid zstd stream named `.jsonl.zst`, the ranges are
//! contiguous and gap-free per shard, `gyro cdr print` reads them, and
//! every debit the clients were told of has its CDR.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use gyro_store::names::CdrName;
use support::free_port;
use support::server::Server;

fn start(data: &Path, config: &Path) -> Server {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    Server::start_on(addr, data, &["--config", config.to_str().unwrap()])
}

/// `gyro load` for `secs` seconds against `server`, its answers recorded.
fn load(server: &Server, secs: u32, record: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_gyro"))
        .env("GYRO_LOG", "warn")
        .args(["load", "--quiet", "--threads", "1", "--connections", "4"])
        .args([
            "--scenario",
            "mix",
            "--timeout",
            "2s",
            "--max-error-ratio",
            "1",
        ])
        .arg("--duration")
        .arg(format!("{secs}s"))
        .arg("--target")
        .arg(server.diameter.to_string())
        .arg("--record")
        .arg(record)
        .stdout(Stdio::null())
        .spawn()
        .expect("start gyro load")
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect()
}

#[test]
fn compressed_cdr_files_survive_a_kill_and_hold_every_acknowledged_debit() {
    let dir = support::scratch("cdr-zstd");
    let data = dir.join("data");
    let config = dir.join("gyro.toml");
    std::fs::write(
        &config,
        "[storage]\ncdr_compression = \"zstd\"\ncdr_zstd_level = 3\ncdr_max_bytes = 16384\n",
    )
    .unwrap();

    let server = start(&data, &config);
    let first = dir.join("answers-0.jsonl");
    let mut l = load(&server, 3, &first);
    std::thread::sleep(Duration::from_millis(1800));
    server.kill();
    l.wait().unwrap();

    let server = start(&data, &config);
    let second = dir.join("answers-1.jsonl");
    let mut l = load(&server, 1, &second);
    assert!(l.wait().unwrap().success());
    server.stop();

    // Every file compressed; the open ones empty after the clean stop.
    let mut printed_by_file = 0;
    for shard in std::fs::read_dir(data.join("cdr")).unwrap() {
        let shard = shard.unwrap().path();
        let mut closed = BTreeMap::new();
        for f in std::fs::read_dir(&shard).unwrap() {
            let path = f.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            match CdrName::parse(&name) {
                Some(CdrName::Final { first, last, .. }) => {
                    assert!(name.ends_with(".jsonl.zst"), "{name}");
                    closed.insert(first, (last, path));
                }
                Some(CdrName::Part { .. }) => {
                    assert!(name.ends_with(".jsonl.zst.part"), "{name}");
                    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "{name}");
                }
                None => panic!("unexpected file {name}"),
            }
        }
        assert!(closed.len() >= 2, "{}: {closed:?}", shard.display());
        let mut next = 1;
        for (first, (last, path)) in &closed {
            assert_eq!(*first, next, "{}", path.display());
            let lines = zstd::stream::decode_all(&std::fs::read(path).unwrap()[..])
                .expect("a valid zstd stream");
            let lines = String::from_utf8(lines).unwrap();
            let seqs: Vec<u64> = json_lines(&lines)
                .iter()
                .map(|c| c["sequence"].as_u64().unwrap())
                .collect();
            assert_eq!(seqs, (*first..=*last).collect::<Vec<_>>());
            // `gyro cdr print FILE` prints the same records.
            let (code, out, err) = support::gyro(&["cdr", "print", path.to_str().unwrap()]);
            assert_eq!(code, 0, "{err}");
            assert_eq!(json_lines(&out), json_lines(&lines));
            printed_by_file += seqs.len();
            next = last + 1;
        }
    }

    // `gyro cdr print` over the data directory: every acknowledged debit.
    let (code, out, err) = support::gyro(&["cdr", "print", "--data-dir", data.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let cdrs = json_lines(&out);
    assert_eq!(cdrs.len(), printed_by_file);
    let keys: HashSet<(String, u64)> = cdrs
        .iter()
        .map(|c| {
            (
                c["session_id"].as_str().unwrap().to_string(),
                c["request_number"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut acknowledged = 0;
    for record in [&first, &second] {
        let text = std::fs::read_to_string(record).unwrap();
        for a in json_lines(&text) {
            if a["result_code"] != 2001 || a["type"] == "CCR-I" {
                continue;
            }
            acknowledged += 1;
            let key = (
                a["session_id"].as_str().unwrap().to_string(),
                a["number"].as_u64().unwrap(),
            );
            assert!(keys.contains(&key), "{key:?} answered 2001 without a CDR");
        }
    }
    assert!(acknowledged > 100, "too little load: {acknowledged}");
    let _ = std::fs::remove_dir_all(&dir);
}
