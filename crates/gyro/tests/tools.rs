//! The tools on real data directories written by a real `gyro serve`:
//! `gyro ledger` and `gyro cdr` read a directory a running server holds
//! (saying the figures are a snapshot) and a read-only one without writing
//! anything; `gyro ledger repair` cuts a journal damaged in the middle,
//! keeps the damaged file and says what was dropped; the tools end
//! quietly when their reader closes the pipe; and the server refuses a CCR
//! naming one rating group many times with an answer within the limit.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use gyro_charging::{CcRequest, Mscc, RequestType, ServiceUnits, SubscriptionId};
use gyro_ocs::gy::{MAX_ANSWER_LEN, MAX_MSCC};
use support::common::{result_code, Client};
use support::gateway::encode;
use support::server::Server;
use support::{json, scratch};

/// Runs gyro with `args` and `--data-dir data`: (exit code, stdout,
/// stderr).
fn gyro(args: &[&str], data: &Path) -> (i32, String, String) {
    support::gyro(&[args, &["--data-dir", data.to_str().unwrap()]].concat())
}

/// A data session's CCR on rating group 10 (Initial asks, Terminate
/// reports `used` octets).
fn ccr(i: u32, kind: RequestType, number: u32, mscc: Vec<Mscc>) -> Vec<u8> {
    let req = CcRequest {
        session_id: format!("pgw.tools.test;1;{i}"),
        origin_host: "client.test".into(),
        end_to_end: (i << 4) | number,
        request_type: kind,
        request_number: number,
        service_context: "32251@3gpp.org".into(),
        subscription_ids: vec![SubscriptionId::e164(format!("46700000{:03}", i % 1000))],
        multiple_services: Some(true),
        mscc,
        ..CcRequest::default()
    };
    encode(&req, (i << 4) | number, "test")
}

fn rg10(kind: RequestType) -> Vec<Mscc> {
    vec![Mscc {
        rating_group: Some(10),
        requested: (kind != RequestType::Termination).then(ServiceUnits::default),
        used: (kind != RequestType::Initial).then(|| ServiceUnits {
            total_octets: Some(1_000_000),
            ..ServiceUnits::default()
        }),
        ..Mscc::default()
    }]
}

/// Sends the requests in one write and returns their answers.
fn exchange(c: &mut Client, requests: &[Vec<u8>]) -> Vec<Vec<u8>> {
    c.send(&requests.concat());
    requests
        .iter()
        .map(|_| c.recv().expect("an answer"))
        .collect()
}

/// Opens and closes `sessions` data sessions from `from`, in `rounds`
/// separate exchanges each (one group commit, one journal frame per
/// shard, each).
fn charge(addr: SocketAddr, from: u32, sessions: u32, rounds: u32) {
    let mut c = Client::open(addr);
    let per = sessions / rounds;
    for r in 0..rounds {
        let ids = from + r * per..from + (r + 1) * per;
        for kind in [RequestType::Initial, RequestType::Termination] {
            let number = u32::from(kind == RequestType::Termination);
            let reqs: Vec<_> = ids
                .clone()
                .map(|i| ccr(i, kind, number, rg10(kind)))
                .collect();
            for a in exchange(&mut c, &reqs) {
                assert_eq!(result_code(&a), Some(2001));
            }
        }
    }
}

/// A data directory in the scratch directory `name`, written by a server
/// that charged `sessions` sessions in `rounds` exchanges and stopped
/// cleanly.
fn charged(name: &str, sessions: u32, rounds: u32) -> PathBuf {
    let data = scratch(name);
    let server = Server::start(&data, &[]);
    charge(server.diameter, 0, sessions, rounds);
    server.stop();
    data
}

/// Every file and directory under `dir` with its size and modification
/// time.
fn listing(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            out.insert(e.path(), (m.len(), m.modified().unwrap()));
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

#[test]
fn ledger_and_cdr_read_a_live_directory_without_writing_into_it() {
    let data = scratch("tools-live");
    let server = Server::start(&data, &[]);
    charge(server.diameter, 0, 40, 2);
    let lock = std::fs::read_to_string(data.join("gyro.lock")).unwrap();
    assert_eq!(
        lock,
        format!("pid {}\n", server.pid()),
        "the lock names its holder"
    );

    // The server's CDR writer appends the last lines after the answers
    // left: wait until the server itself has stopped writing.
    let mut before = listing(&data);
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let now = listing(&data);
        if now == before {
            break;
        }
        before = now;
    }
    let (code, out, err) = gyro(&["ledger"], &data);
    assert_eq!(code, 0, "{out}{err}");
    let note = format!(
        "live directory held by pid {}: figures are a snapshot",
        server.pid()
    );
    assert!(out.contains(&note), "{out}");
    assert!(out.contains("holds for every account"), "{out}");
    let (code, out, err) = gyro(&["ledger", "--json"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&note), "{err}");
    let books = json(&out);
    assert_eq!(books["live_holder_pid"], server.pid());
    assert_eq!(books["violations"], 0);
    assert!(
        books["debited"].as_i64().unwrap() > 0,
        "the charges are seen"
    );
    let (code, out, err) = gyro(&["cdr", "list"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&note), "{err}");
    assert!(out.contains("open"), "{out}");
    assert_eq!(listing(&data), before, "the tools wrote into the directory");

    // Repair writes: it refuses a directory a server holds.
    let (code, out, err) = gyro(&["ledger", "repair"], &data);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("in use by another gyro process"), "{err}");
    assert!(err.contains(&format!("pid {}", server.pid())), "{err}");
    assert_eq!(listing(&data), before, "a refused repair wrote");
    server.stop();
}

#[test]
fn ledger_and_cdr_work_on_a_read_only_copy() {
    let data = charged("tools-ro", 40, 2);
    let (code, books, err) = gyro(&["ledger", "--json"], &data);
    assert_eq!(code, 0, "{err}");

    // A copy with every write permission taken away (the state of a full
    // disk: nothing may be created or written).
    let copy = scratch("tools-ro-copy").join("data");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(&data)
        .arg(&copy)
        .status()
        .unwrap()
        .success());
    assert!(Command::new("chmod")
        .args(["-R", "a-w"])
        .arg(&copy)
        .status()
        .unwrap()
        .success());
    let before = listing(&copy);
    let (code, out, err) = gyro(&["ledger", "--json"], &copy);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out), json(&books), "the same books from the copy");
    assert!(!err.contains("live directory"), "{err}");
    let (code, out, err) = gyro(&["ledger"], &copy);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("holds for every account"), "{out}");
    let (code, out, err) = gyro(&["cdr", "list"], &copy);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("closed"), "{out}");
    assert_eq!(
        listing(&copy),
        before,
        "the tools wrote into a read-only copy"
    );
    let _ = Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(&copy)
        .status();
}

/// The frames of a journal: (offset of the frame, its length with header).
fn frames(journal: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 8;
    while pos + 8 <= journal.len() {
        let len = u32::from_le_bytes(journal[pos..pos + 4].try_into().unwrap()) as usize;
        out.push((pos, 8 + len));
        pos += 8 + len;
    }
    out
}

/// CDR sequence numbers of one shard, as `gyro cdr print` reads them.
fn sequences(data: &Path, shard: usize) -> Vec<u64> {
    let dir = data.join("cdr").join(format!("shard-{shard}"));
    let out = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["cdr", "print"])
        .arg(&dir)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| json(l)["sequence"].as_u64().unwrap())
        .collect()
}

#[test]
fn ledger_repair_cuts_a_journal_damaged_in_the_middle_and_says_what_went() {
    let data = charged("tools-repair", 80, 8);
    let published = sequences(&data, 0);
    assert!(!published.is_empty());

    // Flip bytes in a middle frame of shard 0's journal.
    let shard = data.join("ledger").join("shard-0");
    let journal = std::fs::read_dir(&shard)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .expect("a journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    let all = frames(&bytes);
    assert!(all.len() >= 6, "{} frames", all.len());
    // A middle frame that holds CDRs (CCR-Initial commits hold none), and
    // what it holds, read before the damage: its CDR count and first
    // sequence number (payload header bytes 5..9 and 9..17).
    let field = |at: usize, from: usize, n: usize| {
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(&bytes[at + 8 + from..at + 8 + from + n]);
        u64::from_le_bytes(v)
    };
    let k = (all.len() / 2..all.len())
        .find(|&k| field(all[k].0, 5, 4) > 0)
        .expect("a middle frame with CDRs");
    let (at, _) = all[k];
    let (lost_cdrs, lost_first) = (field(at, 5, 4), field(at, 9, 8));
    for b in &mut bytes[at + 20..at + 24] {
        *b ^= 0x5a;
    }
    std::fs::write(&journal, &bytes).unwrap();
    let dropped_frames = all.len() - k;

    let (code, _, err) = gyro(&["ledger"], &data);
    assert_ne!(code, 0, "a damaged journal is refused");
    assert!(err.contains("gyro ledger repair"), "{err}");

    let (code, out, err) = gyro(&["ledger", "repair", "--dry-run"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing was changed"), "{out}");
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        bytes,
        "a dry run changed it"
    );

    let (code, out, err) = gyro(&["ledger", "repair"], &data);
    assert_eq!(code, 0, "{out}{err}");
    let name = journal.file_name().unwrap().to_str().unwrap();
    assert!(
        out.contains(&format!(
            "{name} is damaged at byte {at}: checksum mismatch"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "dropped: bytes {at}..{} of {name}: {dropped_frames} frames (1 unreadable)",
            bytes.len()
        )),
        "{out}"
    );
    assert!(out.contains("CDR sequence"), "{out}");
    // The unreadable frame's CDRs are named from the numbering.
    assert!(
        out.contains(&format!(
            "the unreadable frames held CDR sequence {lost_first}..={} ({lost_cdrs} CDR records",
            lost_first + lost_cdrs - 1
        )),
        "{out}"
    );
    assert!(out.contains("numbering continues at"), "{out}");
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        &bytes[..at],
        "cut to the last consistent frame"
    );
    // The damaged file is kept.
    let backup = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("repair-")
        })
        .expect("a backup directory");
    assert!(out.contains(&backup.display().to_string()), "{out}");
    let kept = backup.join("ledger").join("shard-0").join(name);
    assert_eq!(
        std::fs::read(kept).unwrap(),
        bytes,
        "the damaged journal is kept"
    );

    let (code, out, err) = gyro(&["ledger"], &data);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("holds for every account"), "{out}");
    let (code, out, _) = gyro(&["ledger", "repair"], &data);
    assert_eq!(code, 0);
    assert!(out.contains("nothing to repair"), "{out}");

    // The server starts again, charges, and gives no published CDR
    // sequence number a second time.
    let server = Server::start(&data, &[]);
    charge(server.diameter, 200, 20, 1);
    server.stop();
    let after = sequences(&data, 0);
    let unique: HashSet<_> = after.iter().collect();
    assert_eq!(
        unique.len(),
        after.len(),
        "a CDR sequence number given twice"
    );
    assert!(after.len() > published.len(), "new CDRs were written");
    assert!(after.starts_with(&published), "published CDRs stay");
}

/// Runs gyro with its standard output read for one line and then closed;
/// it must end without a panic (status 0, or killed by SIGPIPE).
fn closed_pipe(args: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!first.is_empty(), "gyro {args:?} printed nothing: {stderr}");
    assert!(!stderr.contains("panicked"), "gyro {args:?}: {stderr}");
    assert!(
        out.status.success() || out.status.signal() == Some(13),
        "gyro {args:?}: {:?} {stderr}",
        out.status
    );
}

#[test]
fn the_tools_end_quietly_when_the_reader_closes_the_pipe() {
    let data = charged("tools-pipe", 200, 2);
    let dir = data.to_str().unwrap();
    closed_pipe(&["ledger", "--json", "--data-dir", dir]);
    closed_pipe(&["ledger", "--data-dir", dir]);
    closed_pipe(&["cdr", "print", "--data-dir", dir]);
    closed_pipe(&["cdr", "csv", "--data-dir", dir]);
    // Many messages to decode, in a hex file.
    let hex = hex::encode(ccr(1, RequestType::Initial, 0, rg10(RequestType::Initial)));
    let file = data.join("many.hex");
    std::fs::write(&file, vec![hex.as_str(); 500].join("")).unwrap();
    closed_pipe(&["decode", file.to_str().unwrap()]);
}

#[test]
fn one_rating_group_many_times_gets_5009_within_the_size_limit() {
    let data = scratch("tools-mscc");
    let server = Server::start(&data, &[]);
    let mut c = Client::open(server.diameter);
    let copies = |n: usize| {
        vec![
            Mscc {
                rating_group: Some(10),
                requested: Some(ServiceUnits::default()),
                ..Mscc::default()
            };
            n
        ]
    };
    let big = ccr(1, RequestType::Initial, 0, copies(1400));
    assert!(big.len() < 65_536, "the request itself is taken");
    let a = exchange(&mut c, &[big]).remove(0);
    assert_eq!(result_code(&a), Some(5009));
    assert!(a.len() <= MAX_ANSWER_LEN, "{} bytes", a.len());

    // The largest list taken: distinct quotas, every one answered.
    let quotas = |n: usize| {
        (0..n as u32)
            .map(|i| Mscc {
                rating_group: Some(if i % 2 == 0 { 10 } else { 20 }),
                service_id: Some(i),
                requested: Some(ServiceUnits::default()),
                ..Mscc::default()
            })
            .collect::<Vec<_>>()
    };
    let a = exchange(&mut c, &[ccr(2, RequestType::Initial, 0, quotas(MAX_MSCC))]).remove(0);
    assert_eq!(result_code(&a), Some(2001));
    assert!(a.len() <= MAX_ANSWER_LEN, "{} bytes", a.len());
    let a = exchange(
        &mut c,
        &[ccr(3, RequestType::Initial, 0, quotas(MAX_MSCC + 1))],
    )
    .remove(0);
    assert_eq!(result_code(&a), Some(5009));
    // The connection still serves.
    let a = exchange(
        &mut c,
        &[ccr(4, RequestType::Initial, 0, rg10(RequestType::Initial))],
    );
    assert_eq!(result_code(&a[0]), Some(2001));
    server.stop();
}
