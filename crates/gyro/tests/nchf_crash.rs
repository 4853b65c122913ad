//! Gy and Nchf on the same accounts, through SIGKILL: `gyro serve` runs
//! as a real process with Diameter and Nchf listeners; `gyro load` drives
//! Gy sessions while SMF-like clients drive Nchf sessions (create, updates
//! with usage on two rating groups, release) over real HTTP/2 connections,
//! and the server is killed with SIGKILL at a random moment, three times,
//! then restarted.
//!
//! After every kill the books balance (`gyro ledger`: initial + top-ups =
//! balance + reserved + debited for every account). After every restart
//! the Nchf sessions the kill cut are released (their sessions were
//! recovered from the journal, found by their ChargingDataRef), and a
//! sample of the Nchf updates acknowledged before is retransmitted: each
//! gets its first answer and writes no CDR. At the end every acknowledged
//! charge, Gy or Nchf, has its CDR, each CDR names the interface of its
//! session, CDR amounts equal the money debited and nothing is reserved
//! once the sessions the kills left behind have expired.
//!
//! Set GYRO_CRASH_SEED to replay a run (the seed is printed).

#[path = "support/nchf.rs"]
mod nchf;
mod support;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use gyro_nchf::client::{Answer, Client};
use nchf::{smf_request, validate, Server};
use serde_json::{json, Value};

const API: &str = "/nchf-convergedcharging/v3/chargingdata";

/// Nchf clients (concurrent sessions) per round.
const SMFS: u64 = 6;
/// Updates per Nchf session before its release.
const UPDATES: u32 = 3;
/// Acknowledged Nchf updates retransmitted after each restart, at most.
const RETRANSMISSIONS: usize = 40;

/// An Nchf request the server acknowledged with usage in it: its CDRs
/// must exist.
#[derive(Clone, Debug)]
struct Acked {
    reference: String,
    seq: u32,
    /// The update's request and answer (none for a release).
    update: Option<(Value, Value)>,
}

/// A session one SMF left when the server was killed under it.
#[derive(Clone, Debug)]
struct Cut {
    reference: String,
    msisdn: String,
    /// The number of the request that got no answer.
    seq: u32,
    /// Whether that request was the release (it may have been charged).
    releasing: bool,
}

/// What one SMF did in a round.
#[derive(Default, Debug)]
struct SmfLog {
    acked: Vec<Acked>,
    cut: Option<Cut>,
    sessions: usize,
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn post(c: &Client, path: &str, body: &Value) -> Option<Answer> {
    let bytes = Bytes::from(serde_json::to_vec(body).unwrap());
    match tokio::time::timeout(Duration::from_secs(10), c.post(path, bytes)).await {
        Ok(Ok(a)) => Some(a),
        _ => None,
    }
}

fn without_time(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("invocationTimeStamp");
    v
}

/// One SMF: sessions one after another on random demo accounts until the
/// server stops answering.
async fn smf(c: Client, seed: u64) -> SmfLog {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut log = SmfLog::default();
    loop {
        // The accounts gyro load's Gy sessions use too.
        let msisdn = format!("46700000{:03}", rng.u32(..1000));
        let Some(a) = post(
            &c,
            API,
            &smf_request(&msisdn, 0, &[(10, 0, true), (20, 0, true)]),
        )
        .await
        else {
            return log;
        };
        if a.status != 201 {
            // An account spent by the load, or a shard busy: no session.
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        validate("ChargingDataResponse", &a.json());
        let reference = a.reference().expect("a ChargingDataRef").to_string();
        log.sessions += 1;
        for seq in 1..=UPDATES + 1 {
            let releasing = seq == UPDATES + 1;
            let used = [
                (10, 300_000 + u64::from(seq) * 1000, !releasing),
                (20, 150_000, !releasing),
            ];
            let body = smf_request(&msisdn, seq, &used);
            let path = format!(
                "{API}/{reference}/{}",
                if releasing { "release" } else { "update" }
            );
            let Some(a) = post(&c, &path, &body).await else {
                log.cut = Some(Cut {
                    reference,
                    msisdn,
                    seq,
                    releasing,
                });
                return log;
            };
            match a.status {
                200 if !releasing => {
                    let answer = a.json();
                    validate("ChargingDataResponse", &answer);
                    log.acked.push(Acked {
                        reference: reference.clone(),
                        seq,
                        update: Some((body, answer)),
                    });
                }
                204 if releasing => log.acked.push(Acked {
                    reference: reference.clone(),
                    seq,
                    update: None,
                }),
                // 503: nothing charged; the next request goes on.
                503 => {}
                s => panic!("{path} seq {seq}: {s} {}", String::from_utf8_lossy(&a.body)),
            }
        }
    }
}

/// CDR lines written so far.
fn cdr_lines(data: &Path) -> usize {
    cdrs(data).len()
}

fn cdrs(data: &Path) -> Vec<Value> {
    let Ok(shards) = std::fs::read_dir(data.join("cdr")) else {
        return Vec::new();
    };
    shards.flat_map(|s| cdrs_in(&s.unwrap().path())).collect()
}

fn ledger(data: &Path, expire: bool) -> Value {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gyro"));
    c.args(["ledger", "--json", "--data-dir"]).arg(data);
    if expire {
        c.arg("--expire-sessions");
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// After a restart: releases the sessions the kill cut (found again by
/// their ChargingDataRef) and retransmits a sample of the acknowledged
/// updates, which must get their first answers and write no CDR.
fn after_restart(
    server: &Server,
    cut: &mut Vec<Cut>,
    acked: &[Acked],
    pick: &mut fastrand::Rng,
    seed: u64,
) -> Vec<Acked> {
    let mut released = Vec::new();
    let data = server.data.clone();
    rt().block_on(async {
        let c = Client::connect(server.nchf).await.unwrap();
        for s in cut.drain(..) {
            // The next number: the one the kill cut may have been charged.
            let body = smf_request(&s.msisdn, s.seq + 1, &[(10, 4096, false)]);
            let a = post(&c, &format!("{API}/{}/release", s.reference), &body)
                .await
                .expect("an answer after the restart");
            match a.status {
                204 => released.push(Acked {
                    reference: s.reference,
                    seq: s.seq + 1,
                    update: None,
                }),
                // Only a release the kill cut may have closed it already.
                404 if s.releasing => {}
                st => panic!(
                    "release of {} after the restart: {st} {} (seed {seed})",
                    s.reference,
                    String::from_utf8_lossy(&a.body)
                ),
            }
        }
        let updates: Vec<&Acked> = acked.iter().filter(|a| a.update.is_some()).collect();
        // The releases' CDRs included: they follow their answers.
        let lines = support::settled(|| cdr_lines(&data));
        let mut sent = 0;
        for _ in 0..updates.len().min(RETRANSMISSIONS) {
            let a = updates[pick.usize(..updates.len())];
            let (request, first) = a.update.as_ref().unwrap();
            let mut again = request.clone();
            again["retransmissionIndicator"] = json!(true);
            let path = format!("{API}/{}/update", a.reference);
            let answer = post(&c, &path, &again).await.expect("an answer");
            assert_eq!(
                answer.status,
                200,
                "retransmitted {path} seq {}: {} (seed {seed})",
                a.seq,
                String::from_utf8_lossy(&answer.body)
            );
            assert_eq!(
                without_time(answer.json()),
                without_time(first.clone()),
                "a retransmitted update got another answer (seed {seed})"
            );
            sent += 1;
        }
        assert_eq!(
            support::settled(|| cdr_lines(&data)),
            lines,
            "retransmitted updates wrote CDRs (seed {seed})"
        );
        println!("{sent} Nchf updates retransmitted, answered as before");
    });
    released
}

/// `gyro load` (Gy) against `server` for `secs`, recording its answers.
fn gy_load(server: &Server, record: &Path, secs: u32) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_gyro"))
        .env("GYRO_LOG", "warn")
        .args(["load", "--quiet", "--threads", "1", "--connections", "2"])
        .args(["--duration", &format!("{secs}s"), "--timeout", "2s"])
        .args(["--max-error-ratio", "1", "--target"])
        .arg(server.diameter.to_string())
        .arg("--record")
        .arg(record)
        .stdout(Stdio::null())
        .spawn()
        .expect("start gyro load")
}

fn sigkill(server: &mut Server) {
    server.child.kill().expect("SIGKILL the server");
    server.child.wait().unwrap();
}

#[test]
fn gy_and_nchf_sessions_survive_sigkill_with_the_books_balanced() {
    let seed = support::crash_seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut pick = fastrand::Rng::with_seed(seed.rotate_left(32));
    let dir = support::scratch("nchf-crash");
    let mut acked: Vec<Acked> = Vec::new();
    let mut cut: Vec<Cut> = Vec::new();
    let mut gy_answered: Vec<Value> = Vec::new();
    let mut records: Vec<PathBuf> = Vec::new();
    let mut data = PathBuf::new();
    for round in 0..3 {
        let mut server = Server::start(&dir, "", None);
        data = server.data.clone();
        acked.extend(after_restart(&server, &mut cut, &acked, &mut pick, seed));
        let record = dir.join(format!("gy-{round}.jsonl"));
        let load = gy_load(&server, &record, 2);
        records.push(record);
        let nchf = server.nchf;
        let smfs = std::thread::spawn(move || {
            rt().block_on(async {
                let mut tasks = Vec::new();
                for i in 0..SMFS {
                    let c = Client::connect(nchf).await.unwrap();
                    tasks.push(tokio::spawn(smf(c, seed ^ (round << 8 | i))));
                }
                let mut logs = Vec::new();
                for t in tasks {
                    logs.push(t.await.expect("an SMF task"));
                }
                logs
            })
        });
        let wait = 400 + rng.u64(..1000);
        std::thread::sleep(Duration::from_millis(wait));
        sigkill(&mut server);
        let logs = smfs.join().expect("the SMFs");
        let mut load = load;
        let status = load.wait().unwrap();
        let sessions: usize = logs.iter().map(|l| l.sessions).sum();
        let before = acked.len();
        for l in logs {
            acked.extend(l.acked);
            cut.extend(l.cut);
        }
        println!(
            "round {round}: killed after {wait} ms; {sessions} Nchf sessions, {} acknowledged \
             Nchf charges, {} cut; gy load exited with {status}",
            acked.len() - before,
            cut.len()
        );
        // The books balance after every kill.
        let books = ledger(&data, false);
        assert_eq!(
            books["violations"], 0,
            "books after round {round} (seed {seed}): {books}"
        );
    }
    // A last start: the sessions the last kill cut are released, the
    // retransmissions answered from memory; a clean stop closes the files.
    let mut server = Server::start(&dir, "", None);
    acked.extend(after_restart(&server, &mut cut, &acked, &mut pick, seed));
    server.stop();
    for r in &records {
        if let Ok(text) = std::fs::read_to_string(r) {
            gy_answered.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .filter(|a| a["result_code"] == 2001),
            );
        }
    }

    // The books: conservation for every account, nothing reserved once
    // the sessions the kills left behind have expired.
    let books = ledger(&data, true);
    assert_eq!(books["violations"], 0, "{books}");
    assert_eq!(books["reserved"], 0, "{books}");
    let mut debited: BTreeMap<u64, i64> = BTreeMap::new();
    for b in books["books"].as_array().unwrap() {
        debited.insert(
            b["account"].as_u64().unwrap(),
            b["debited"].as_i64().unwrap(),
        );
    }

    // The CDRs: sequence numbers 1..=n per shard, amounts adding up to
    // the money debited, each naming its session's interface.
    let mut keys: HashSet<(String, u64, String)> = HashSet::new();
    let mut amounts: BTreeMap<u64, i64> = BTreeMap::new();
    let mut by_shard: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for shard in std::fs::read_dir(data.join("cdr")).unwrap() {
        let shard = shard.unwrap().path();
        let name = shard.file_name().unwrap().to_string_lossy().into_owned();
        for c in cdrs_in(&shard) {
            by_shard
                .entry(name.clone())
                .or_default()
                .push(c["sequence"].as_u64().unwrap());
            *amounts.entry(c["account"].as_u64().unwrap()).or_default() +=
                c["amount"].as_i64().unwrap();
            let session = c["session_id"].as_str().unwrap().to_string();
            let interface = c["interface"].as_str().unwrap().to_string();
            assert_eq!(
                interface,
                if session.starts_with("nchf-") {
                    "nchf"
                } else {
                    "gy"
                },
                "{c}"
            );
            keys.insert((session, c["request_number"].as_u64().unwrap(), interface));
        }
    }
    for (shard, mut seqs) in by_shard {
        seqs.sort_unstable();
        let n = seqs.len() as u64;
        assert!(
            seqs.iter().copied().eq(1..=n),
            "{shard}: sequence numbers have gaps or repeats (seed {seed})"
        );
    }
    for (account, amount) in &amounts {
        assert_eq!(
            debited.get(account).copied().unwrap_or(0),
            *amount,
            "account {account}: CDR amounts disagree with the money debited (seed {seed})"
        );
    }

    // Every acknowledged charge has its CDR: Gy's usage reports and
    // events, Nchf's updates and releases.
    let mut gy_checked = 0;
    for a in &gy_answered {
        if a["type"] == "CCR-I" {
            continue;
        }
        let key = (
            a["session_id"].as_str().unwrap().to_string(),
            a["number"].as_u64().unwrap(),
            "gy".to_string(),
        );
        assert!(
            keys.contains(&key),
            "Gy {key:?} was answered 2001 but has no CDR (seed {seed})"
        );
        gy_checked += 1;
    }
    for a in &acked {
        let key = (a.reference.clone(), u64::from(a.seq), "nchf".to_string());
        assert!(
            keys.contains(&key),
            "Nchf {key:?} was acknowledged but has no CDR (seed {seed})"
        );
    }
    println!(
        "{gy_checked} acknowledged Gy debits and {} Nchf charges checked against {} CDRs",
        acked.len(),
        keys.len()
    );
    assert!(gy_checked > 50, "the Gy load made too little progress");
    assert!(
        acked.len() > 20,
        "the Nchf sessions made too little progress"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CDRs of one shard's files.
fn cdrs_in(shard: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for f in std::fs::read_dir(shard).unwrap() {
        let path = f.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for l in text.lines() {
            out.push(serde_json::from_str(l).unwrap_or_else(|e| {
                panic!("torn or invalid line in {}: {e}: {l}", path.display())
            }));
        }
    }
    out
}
