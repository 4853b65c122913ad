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

/// CDR sequence numbers of one shard, as `gyro cdr print` reads them.
fn printed_sequences(data: &Path, shard: usize) -> Vec<u64> {
    let dir = data.join("cdr").join(format!("shard-{shard}"));
    let (code, out, err) = support::gyro(&[
        "cdr",
        "print",
        dir.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    json_lines(&out)
        .iter()
        .map(|c| c["sequence"].as_u64().unwrap())
        .collect()
}

#[test]
fn ledger_repair_leaves_a_compressed_open_file_to_the_next_start() {
    let dir = support::scratch("cdr-zstd-repair");
    let data = dir.join("data");
    let config = dir.join("gyro.toml");
    std::fs::write(&config, "[storage]\ncdr_compression = \"zstd\"\n").unwrap();
    let server = start(&data, &config);
    let mut l = load(&server, 2, &dir.join("answers.jsonl"));
    l.wait().unwrap();
    // Idle for a while: the open files get their frames.
    std::thread::sleep(Duration::from_millis(2500));
    server.kill();
    let part = std::fs::read_dir(data.join("cdr").join("shard-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".jsonl.zst.part"))
        .expect("an open compressed file");
    let before = printed_sequences(&data, 0);
    assert!(before.len() > 100, "{}", before.len());
    let part_bytes = std::fs::read(&part).unwrap();

    // Damage a frame in the middle of shard 0's journal (frames: length,
    // checksum, payload; zero bytes after the last one end them).
    let journal = std::fs::read_dir(data.join("ledger").join("shard-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .expect("a journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    let mut frames = Vec::new();
    let mut pos = 8;
    while pos + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        frames.push(pos);
        pos += 8 + len;
    }
    assert!(frames.len() >= 6, "{} frames", frames.len());
    let at = frames[frames.len() / 2];
    for b in &mut bytes[at + 20..at + 24] {
        *b ^= 0x5a;
    }
    std::fs::write(&journal, &bytes).unwrap();
    let (code, out, err) =
        support::gyro(&["ledger", "repair", "--data-dir", data.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("dropped:"), "{out}");
    // The open file holds CDRs the repaired journal no longer does.
    let dropped_from: u64 = out
        .split("(CDR sequence ")
        .nth(1)
        .and_then(|r| r.split("..").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(before.len() as u64 >= dropped_from, "{out}");
    assert_eq!(
        std::fs::read(&part).unwrap(),
        part_bytes,
        "left to the next start"
    );

    // The next start cuts the open file to the repaired journal and
    // numbers from there: no gap, no number twice.
    let server = start(&data, &config);
    let mut l = load(&server, 1, &dir.join("answers-2.jsonl"));
    assert!(l.wait().unwrap().success());
    server.stop();
    let after = printed_sequences(&data, 0);
    assert_eq!(after, (1..=after.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        after[..dropped_from as usize - 1],
        before[..dropped_from as usize - 1]
    );
    let (code, out, err) = support::gyro(&["ledger", "--data-dir", data.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("holds for every account"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
