//! Nothing acknowledged is ever lost, nothing is charged twice: `gyro
//! serve` runs as a real process under `gyro load`, is killed with SIGKILL
//! at random moments several times and restarted each time. After each
//! restart a sample of the requests acknowledged before is retransmitted
//! (T flag) over fresh connections: each gets its remembered answer, byte
//! for byte but for the Hop-by-Hop Identifier, and no CDR is written for
//! it (after the last start the whole books are compared too). At the end
//! the books are checked against what the load generator was told.
//!
//! The snapshot rounds write zstd-compressed CDR files, the others plain
//! ones.
//!
//! Besides plain kills, one round kills the server during overload (an
//! open-loop load far beyond what it can answer, with tight queue bounds,
//! so that it answers DIAMETER_TOO_BUSY): a request answered 3004 must not
//! have been charged. Two rounds kill it while it writes a ledger snapshot
//! (the snapshot threshold lowered so that snapshots follow each other).
//! After every kill the books balance.
//!
//! Top-ups run over the admin API beside the load in every round: each
//! one acknowledged (HTTP 200) is in the books after the kill, none is
//! counted twice, and one sent again with its idempotency key after the
//! last start adds nothing.
//!
//! Set GYRO_CRASH_SEED to replay a run (the seed is printed).

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use gyro_diameter::codes::avp;
use gyro_diameter::header::flags;
use gyro_diameter::Message;
use support::common::{self, Client};
use support::free_port;
use support::server::Server;

/// Acknowledged requests retransmitted after each restart, at most.
const RETRANSMISSIONS: usize = 200;

fn gyro() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gyro"));
    c.env("GYRO_LOG", "warn");
    c
}

/// How a round drives the server before killing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Round {
    /// A closed-loop load, killed at a random moment.
    Plain,
    /// An open-loop load far beyond capacity, with tight queue bounds so
    /// that some requests are answered 3004; killed at a random moment.
    Overload,
    /// Snapshots every few hundred records; killed while one is written.
    Snapshot,
}

impl Round {
    /// The configuration file text of the server for this round.
    fn config(self) -> &'static str {
        match self {
            Round::Plain => "",
            Round::Overload => "[limits]\nmax_queued_per_worker = 8\nmax_queue_wait_ms = 5\n",
            // Compressed CDR files: each change of the setting closes the
            // open file of the other kind a kill left behind.
            Round::Snapshot => {
                "[storage]\nsnapshot_every_records = 300\ncdr_compression = \"zstd\"\n"
            }
        }
    }

    /// `gyro load` options of this round.
    fn load_args(self) -> &'static [&'static str] {
        match self {
            Round::Plain | Round::Snapshot => &["--connections", "4"],
            Round::Overload => &["--connections", "8", "--window", "1024", "--rate", "200000"],
        }
    }
}

/// Starts the server with the configuration of `round`, its admin API on
/// `admin` when given.
fn start(addr: SocketAddr, data: &Path, round: Round, admin: Option<u16>) -> Server {
    let config = data.with_extension("toml");
    let mut text = round.config().to_string();
    if let Some(port) = admin {
        text.push_str(&format!("[admin]\nlisten = \"127.0.0.1:{port}\"\n"));
    }
    std::fs::write(&config, text).unwrap();
    let config = config.to_str().unwrap().to_string();
    Server::start_on(addr, data, &["--config", &config])
}

/// Runs `gyro ledger --json` on a stopped server's data directory.
fn ledger(data: &Path, expire_sessions: bool) -> serde_json::Value {
    let args: &[&str] = if expire_sessions {
        &["--expire-sessions"]
    } else {
        &[]
    };
    let mut books = support::server::ledger(data, args);
    // How much torn tail the files hold is not the books: a read-only
    // ledger leaves the tail a crash tore, the next server start cuts it.
    books
        .as_object_mut()
        .expect("the ledger answers an object")
        .remove("torn_journal_bytes");
    books
}

/// CDR lines written so far, in every file of every shard.
fn cdr_lines(data: &Path) -> usize {
    let Ok(shards) = std::fs::read_dir(data.join("cdr")) else {
        return 0;
    };
    shards
        .flat_map(|shard| std::fs::read_dir(shard.unwrap().path()).unwrap())
        .map(|f| cdr_text(&f.unwrap().path()).lines().count())
        .sum()
}

/// The lines of a CDR file: a compressed one's complete frames.
fn cdr_text(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    if path.to_string_lossy().contains(".zst") {
        let scan = gyro_store::cdr_zstd::scan(&bytes);
        String::from_utf8(scan.content).unwrap()
    } else {
        String::from_utf8(bytes).unwrap()
    }
}

/// A request acknowledged by the server, as `gyro load --record-messages`
/// wrote it down.
struct Acknowledged {
    request: Vec<u8>,
    answer: Vec<u8>,
}

impl Acknowledged {
    /// Decodes a line of a `--record` file.
    fn from_record(line: &serde_json::Value) -> Acknowledged {
        let bytes = |field: &str| {
            hex::decode(line[field].as_str().expect("request and answer recorded")).expect("hex")
        };
        Acknowledged {
            request: bytes("request"),
            answer: bytes("answer"),
        }
    }
}

/// Retransmits `sample` with the T flag, new Hop-by-Hop Identifiers and
/// over fresh connections (one per Origin-Host, as a client that lost its
/// link would), and checks that each answer is the remembered one: the
/// first answer byte for byte but for the Hop-by-Hop Identifier.
fn retransmit(addr: SocketAddr, sample: &[Acknowledged], seed: u64) {
    let mut by_host: BTreeMap<String, Vec<&Acknowledged>> = BTreeMap::new();
    for a in sample {
        let host = Message::parse(&a.request)
            .expect("recorded request parses")
            .find(avp::ORIGIN_HOST)
            .and_then(|h| h.utf8().ok().map(str::to_string))
            .expect("Origin-Host");
        by_host.entry(host).or_default().push(a);
    }
    for (host, acks) in by_host {
        let mut c = Client::connect(addr);
        let cea = c.cer(&host, &[4]);
        assert_eq!(common::result_code(&cea), Some(2001), "CER of {host}");
        let mut batch = Vec::new();
        for (i, a) in acks.iter().enumerate() {
            let mut req = a.request.clone();
            req[4] |= flags::RETRANSMIT;
            req[12..16].copy_from_slice(&(0x7e00_0000 + i as u32).to_be_bytes());
            batch.extend_from_slice(&req);
        }
        c.send(&batch);
        for _ in 0..acks.len() {
            let again = c.recv().expect("an answer to a retransmission");
            let i = u32::from_be_bytes(again[12..16].try_into().unwrap()).wrapping_sub(0x7e00_0000);
            let first = &acks
                .get(i as usize)
                .expect("an answer to a request sent")
                .answer;
            let same = again.len() == first.len()
                && again[..12] == first[..12]
                && again[16..] == first[16..];
            assert!(
                same,
                "a retransmission was not answered with the remembered answer \
                 (seed {seed}):\nfirst: {}\nagain: {}",
                hex::encode(first),
                hex::encode(&again)
            );
        }
    }
}

/// Retransmits a sample of `answered` (at most [`RETRANSMISSIONS`]) to the
/// server just started on `addr` and checks that no CDR was written for
/// them; returns how many were sent.
fn retransmit_sample(
    addr: SocketAddr,
    data: &Path,
    answered: &[serde_json::Value],
    rng: &mut fastrand::Rng,
    seed: u64,
) -> usize {
    // Counted after the start: recovery may complete what a crash cut.
    let cdrs = support::settled(|| cdr_lines(data));
    let mut order: Vec<usize> = (0..answered.len()).collect();
    let n = order.len().min(RETRANSMISSIONS);
    for i in 0..n {
        let j = rng.usize(i..order.len());
        order.swap(i, j);
    }
    let sample: Vec<Acknowledged> = order[..n]
        .iter()
        .map(|&i| Acknowledged::from_record(&answered[i]))
        .collect();
    retransmit(addr, &sample, seed);
    // A retransmission charged again would show here, once the CDR writer
    // has written what was committed.
    assert_eq!(
        support::settled(|| cdr_lines(data)),
        cdrs,
        "retransmissions wrote CDRs (seed {seed})"
    );
    n
}

fn read_json_lines(path: &Path) -> Vec<serde_json::Value> {
    let text = cdr_text(path);
    text.lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("torn or invalid line in {}: {e}: {l}", path.display()))
        })
        .collect()
}

/// The temporary files of snapshots being written in `data`.
fn snapshot_writes(data: &Path) -> HashSet<std::path::PathBuf> {
    std::fs::read_dir(data.join("ledger"))
        .into_iter()
        .flatten()
        .flat_map(|shard| {
            std::fs::read_dir(shard.unwrap().path())
                .into_iter()
                .flatten()
        })
        .map(|f| f.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tmp"))
        .collect()
}

/// Waits until a shard of `data` is writing a ledger snapshot (a
/// temporary file not among `stale` exists), at least `min_ms` and at
/// most 5 s; says when it returned.
fn kill_during_snapshot(data: &Path, stale: &HashSet<std::path::PathBuf>, min_ms: u64) -> String {
    std::thread::sleep(Duration::from_millis(min_ms));
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if snapshot_writes(data).difference(stale).next().is_some() {
            let ms = min_ms + t.elapsed().as_millis() as u64;
            return format!("after {ms} ms, while a snapshot was written");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    format!("after {} ms, no snapshot write seen", min_ms + 5000)
}

/// A top-up over the admin API: its idempotency key and amount.
#[derive(Clone, Debug)]
struct TopUp {
    subscriber: String,
    key: String,
    amount: i64,
}

/// Sends `t` to the admin API on `port`: `Some(true)` when it was applied
/// now, `Some(false)` when its key had been applied already, `None` when
/// no success came (the server was killed, or refused it).
fn top_up(port: u16, t: &TopUp) -> Option<bool> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let url = format!(
        "http://127.0.0.1:{port}/v1/accounts/{}/top-ups",
        t.subscriber
    );
    let body = serde_json::json!({"amount": t.amount, "idempotency_key": t.key});
    let mut r = agent.post(&url).send_json(&body).ok()?;
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().ok()?;
    // Anything but success (a 503 while the shard reloads, say) is not an
    // acknowledgement.
    if status != 200 && status != 201 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(v["replayed"] != serde_json::json!(true))
}

/// Tops up demo accounts until `stop`, every few milliseconds: returns the
/// top-ups acknowledged and those sent without an answer.
fn top_ups_until(
    port: u16,
    round: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    seed: u64,
) -> (Vec<TopUp>, Vec<TopUp>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let (mut acked, mut lost) = (Vec::new(), Vec::new());
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let t = TopUp {
            subscriber: format!("4670000{:04}", rng.u32(..1000)),
            key: format!("crash-{round}-{n}"),
            amount: rng.i64(1..=100),
        };
        n += 1;
        match top_up(port, &t) {
            Some(_) => acked.push(t),
            None => {
                lost.push(t);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (acked, lost)
}

/// A free port for the admin API, not the Diameter one.
fn other_port(addr: SocketAddr) -> u16 {
    loop {
        let p = free_port();
        if p != addr.port() {
            return p;
        }
    }
}

/// Money topped up, all accounts together, as the books say.
fn topped_up(books: &serde_json::Value) -> i64 {
    books["books"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["topped_up"].as_i64().unwrap_or(0))
        .sum()
}

#[test]
fn sigkill_loses_no_acknowledged_charging() {
    let seed = support::crash_seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    // The samples have their own generator: the kill times of a seed stay
    // what they were.
    let mut pick = fastrand::Rng::with_seed(seed.rotate_left(32));
    let dir = std::env::temp_dir().join(format!("gyro-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let rounds = [
        Round::Plain,
        Round::Overload,
        Round::Plain,
        Round::Snapshot,
        Round::Plain,
        Round::Snapshot,
    ];
    // Every answer 2001 the clients were told, in every round.
    let mut answered: Vec<serde_json::Value> = Vec::new();
    // Every request answered DIAMETER_TOO_BUSY: never charged.
    let mut refused: Vec<(String, u64)> = Vec::new();
    let mut retransmitted = 0;
    // Top-ups acknowledged, and sent without an answer, in every round.
    let (mut acked, mut unanswered): (Vec<TopUp>, Vec<TopUp>) = (Vec::new(), Vec::new());
    for (i, round) in rounds.into_iter().enumerate() {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let admin = other_port(addr);
        // Left by an earlier kill, if recovery keeps them.
        let stale = snapshot_writes(&data);
        let server = start(addr, &data, round, Some(admin));
        // (Under the overload round's tight bounds a burst of
        // retransmissions may be refused with 3004: the next start checks.)
        if round != Round::Overload {
            retransmitted += retransmit_sample(addr, &data, &answered, &mut pick, seed);
        }
        let record = dir.join(format!("answers-{i}.jsonl"));
        let mut load = gyro()
            .args(["load", "--quiet", "--threads", "1"])
            .args(round.load_args())
            .args(["--scenario", "mix", "--duration", "3s", "--timeout", "2s"])
            .args(["--max-error-ratio", "1", "--target"])
            .arg(addr.to_string())
            .arg("--record")
            .arg(&record)
            .arg("--record-messages")
            .stdout(Stdio::null())
            .spawn()
            .expect("start gyro load");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let top_ups = {
            let stop = stop.clone();
            let seed = seed ^ i as u64;
            std::thread::spawn(move || top_ups_until(admin, i, stop, seed))
        };
        let wait = 300 + rng.u64(..1500);
        let how = match round {
            Round::Snapshot => kill_during_snapshot(&data, &stale, wait),
            Round::Plain | Round::Overload => {
                std::thread::sleep(Duration::from_millis(wait));
                format!("after {wait} ms")
            }
        };
        let pid = server.pid();
        server.kill();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (a, l) = top_ups.join().expect("top-up thread");
        acked.extend(a);
        unanswered.extend(l);
        let status = load.wait().unwrap();
        println!("round {i} ({round:?}, pid {pid}): killed {how}; load exited with {status}");
        let told = read_json_lines(&record);
        let busy = told.iter().filter(|a| a["result_code"] == 3004).count();
        if round == Round::Overload {
            assert!(
                busy > 0,
                "the overload round got no DIAMETER_TOO_BUSY (seed {seed})"
            );
        }
        refused.extend(told.iter().filter(|a| a["result_code"] == 3004).map(|a| {
            (
                a["session_id"].as_str().unwrap().to_string(),
                a["number"].as_u64().unwrap(),
            )
        }));
        answered.extend(told.into_iter().filter(|a| a["result_code"] == 2001));
        // The books balance after every kill, and hold every top-up
        // acknowledged (and at most those sent).
        let books = ledger(&data, false);
        assert_eq!(
            books["violations"], 0,
            "books after round {i} ({round:?}, seed {seed}): {books}"
        );
        let sum = |ts: &[TopUp]| ts.iter().map(|t| t.amount).sum::<i64>();
        let total = topped_up(&books);
        assert!(
            total >= sum(&acked) && total <= sum(&acked) + sum(&unanswered),
            "after round {i}: {total} topped up, {} acknowledged, {} unanswered (seed {seed})",
            sum(&acked),
            sum(&unanswered)
        );
    }
    assert!(!acked.is_empty(), "no top-up was acknowledged");
    // A last start answers retransmissions too, recovers (and closes the
    // CDR files on a clean stop); the books it leaves are the books it
    // found.
    let books = ledger(&data, false);
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let admin = other_port(addr);
    let server = start(addr, &data, Round::Plain, Some(admin));
    retransmitted += retransmit_sample(addr, &data, &answered, &mut pick, seed);
    // Every acknowledged top-up sent again: its key was remembered across
    // the kills, nothing is added.
    for t in &acked {
        assert_eq!(
            top_up(admin, t),
            Some(false),
            "top-up {t:?} applied twice (seed {seed})"
        );
    }
    server.stop();
    assert_eq!(
        ledger(&data, false),
        books,
        "retransmissions moved the books (seed {seed})"
    );
    println!("{retransmitted} retransmissions answered with the remembered answer");

    // The books: conservation for every account, reservations of the
    // killed sessions released once their supervision time has passed.
    let ledger = ledger(&data, true);
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
    let mut compressed = 0;
    for shard in std::fs::read_dir(data.join("cdr")).unwrap() {
        let shard = shard.unwrap().path();
        let mut seqs = Vec::new();
        for file in std::fs::read_dir(&shard).unwrap() {
            let file = file.unwrap().path();
            compressed += usize::from(file.to_string_lossy().ends_with(".jsonl.zst"));
            for cdr in read_json_lines(&file) {
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
    assert!(
        compressed > 0,
        "the snapshot rounds closed no compressed file"
    );
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
    for a in &answered {
        let ty = a["type"].as_str().unwrap();
        if ty == "CCR-I" {
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
    println!("{acknowledged} acknowledged debits checked against {total_cdrs} CDRs");
    // What the clients were refused: nothing charged for it.
    for key in &refused {
        assert!(
            !cdr_keys.contains(key),
            "{key:?} was answered 3004 but charged (seed {seed})"
        );
    }
    println!("{} requests answered 3004, none charged", refused.len());
    assert!(
        acknowledged > 100,
        "the load made too little progress to prove anything"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
