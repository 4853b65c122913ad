//! What the `gyro serve` on Redis Cluster tests share: nodes (their
//! configuration and charging file), `gyro load` runs, the exported CDR
//! files and the checks every such test ends with (the books add up once
//! Tcc has passed; every debit has exactly one exported CDR; no slot's
//! sequence has a gap).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gyro_charging::AccountId;
use gyro_store::redis::{Books, RedisLedger};
use serde_json::Value;

use crate::support::server::Server;
use crate::support::{free_port, try_serve};

/// Tcc: a silent session's reservations go after this long.
pub const TCC_SECS: u64 = 5;

/// The account of the failover session, and its subscriber.
pub const FAILOVER_ACCOUNT: u64 = 5000;
pub const FAILOVER_MSISDN: &str = "46709000001";

/// Demo-like tariffs, 200 load accounts and the failover account.
pub fn charging() -> String {
    charging_with_tcc(TCC_SECS)
}

/// [`charging`] with another Tcc.
pub fn charging_with_tcc(tcc_secs: u64) -> String {
    format!(
        r#"
[engine]
node_id = "unused-with-redis"
supervision_secs = {tcc_secs}
lenient = true

[currency]
code = 752
exponent = 2

[[tariff]]
name = "data-rg10"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 100
per = 104857600
increment = 1024
default_quota = 10485760
validity_time = 600

[[tariff]]
name = "data-rg20"
service_context = "32251@3gpp.org"
rating_group = 20
unit = "octets"
price = 200
per = 104857600
increment = 1024
default_quota = 10485760
validity_time = 600

[[account]]
id = {FAILOVER_ACCOUNT}
balance = 100000
subscribers = ["e164:{FAILOVER_MSISDN}"]

[[account_range]]
first_id = 1000
count = 200
e164_first = "46700000000"
balance = 10000000
"#
    )
}

/// A node: its directory, configuration, data and addresses.
pub struct Node {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub diameter: SocketAddr,
    pub admin_port: u16,
}

impl Node {
    pub fn new(root: &Path, name: &str, seeds: &[String], namespace: &str) -> Node {
        Node::with(root, name, seeds, namespace, "")
    }

    /// A node with more `[storage.redis]` settings (`extra`, TOML lines).
    pub fn with(root: &Path, name: &str, seeds: &[String], namespace: &str, extra: &str) -> Node {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let admin_port = free_port();
        let seeds: Vec<String> = seeds.iter().map(|n| format!("{n:?}")).collect();
        let config = dir.join("gyro.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\norigin_host = \"{name}.gyro.test\"\n\
                 [admin]\nlisten = \"127.0.0.1:{admin_port}\"\n\
                 [storage]\nbackend = \"redis-cluster\"\n\
                 [storage.redis]\nnodes = [{}]\nnamespace = \"{namespace}\"\n\
                 node_id = \"{name}\"\nexpire_interval_ms = 250\nexport_interval_ms = 250\n\
                 export_lease_ms = 3000\n{extra}\n",
                seeds.join(", ")
            ),
        )
        .unwrap();
        std::fs::write(dir.join("charging.toml"), charging()).unwrap();
        Node {
            diameter: SocketAddr::from(([127, 0, 0, 1], free_port())),
            config,
            admin_port,
            dir,
        }
    }

    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn start(&self) -> Server {
        self.start_within(1)
    }

    /// [`Node::start`], tried up to `attempts` times: with `replicas_ack =
    /// 1` a node refuses to start (it exits) when no replica acknowledges
    /// its accounts in time, which a fresh cluster's replicas on a busy
    /// machine may not.
    pub fn start_within(&self, attempts: u32) -> Server {
        let (config, charging) = (
            self.config.to_string_lossy().into_owned(),
            self.dir
                .join("charging.toml")
                .to_string_lossy()
                .into_owned(),
        );
        let args = ["-c", config.as_str(), "--charging", charging.as_str()];
        let mut tried = 1;
        let child = loop {
            match try_serve(self.diameter, &self.data(), &args) {
                Ok(child) => break child,
                Err(e) if tried < attempts => {
                    eprintln!("gyro serve did not start ({e}): again");
                    tried += 1;
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
                Err(e) => panic!("gyro serve did not start: {e}"),
            }
        };
        let server = Server::adopt(child, self.diameter, &self.data(), Some(self.admin_port));
        server.wait_ready();
        server
    }
}

/// An embedded `gyro serve` (its directory `root/embedded`, Origin-Host
/// `embedded.gyro.test`) on the charging configuration `charging`: what a
/// node on the Redis ledger is compared with.
pub fn embedded_node(root: &Path, charging: &str) -> Server {
    let dir = root.join("embedded");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("charging.toml");
    std::fs::write(&file, charging).unwrap();
    Server::in_dir(
        &dir,
        "[server]\norigin_host = \"embedded.gyro.test\"\n",
        &["--charging", file.to_str().unwrap()],
    )
}

/// `gyro load` on `target` for `secs` seconds over subscribers
/// 46700000000.. (the account range).
pub fn load(target: SocketAddr, secs: u64, origin: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["load", "--target"])
        .arg(target.to_string())
        .args(["-c", "2", "-w", "8", "--subscribers", "200", "--quiet"])
        .args(["--origin-host", origin, "--json"])
        .arg("-d")
        .arg(format!("{secs}s"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gyro load")
}

/// The answers `gyro load` reports, by Result-Code (its JSON report).
pub fn answered(child: Child) -> u64 {
    let out = child.wait_with_output().expect("gyro load");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v["answered"].as_u64().unwrap_or(0)
}

/// Every exported CDR in `dirs`: file name -> its records.
pub fn exported(dirs: &[PathBuf]) -> BTreeMap<String, Vec<Value>> {
    let mut files = BTreeMap::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".jsonl") {
                continue;
            }
            let text = std::fs::read_to_string(e.path()).unwrap();
            let records: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).expect("a whole JSON line"))
                .collect();
            if let Some(earlier) = files.insert(name.clone(), records.clone()) {
                // The same range written by two nodes (a lease taken over
                // before the acknowledgement): the same records.
                assert_eq!(earlier, records, "{name} differs between nodes");
            }
        }
    }
    files
}

/// Waits (at most `within`) until nothing is reserved in the namespace
/// (every session ended, or released after its Tcc deadline), then checks
/// that the books of every account add up; returns them.
pub fn books_once_tcc_passed(
    rt: &tokio::runtime::Runtime,
    ledger: &RedisLedger,
    within: Duration,
) -> Books {
    let t = Instant::now();
    let books = loop {
        let books = rt.block_on(ledger.books()).expect("books");
        if books.reserved == 0 {
            break books;
        }
        assert!(
            t.elapsed() < within,
            "reservations never expired: {books:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(books.is_balanced(), "{books:?}");
    books
}

/// What the exported CDRs say against the books.
pub struct CdrReport {
    /// The files (name -> records).
    pub files: BTreeMap<String, Vec<Value>>,
    /// Accounts whose CDRs do not add up to what they were debited.
    pub unmatched_accounts: Vec<String>,
    /// Slots whose sequence numbers do not run from 1 without a gap or a
    /// repeat.
    pub sequence_faults: Vec<String>,
}

/// Waits (at most `within`) until the CDRs exported into `dirs` add up,
/// for every account of `accounts`, to what the cluster says it was
/// debited, and reports what still does not then; and checks that each
/// slot's sequence numbers run from 1 without a gap or a repeat.
pub fn cdr_report(
    rt: &tokio::runtime::Runtime,
    ledger: &RedisLedger,
    dirs: &[PathBuf],
    accounts: &[u64],
    within: Duration,
) -> CdrReport {
    let debited: HashMap<u64, i64> = rt.block_on(async {
        let mut m = HashMap::new();
        for &id in accounts {
            let s = ledger.account(AccountId(id)).await.unwrap().unwrap();
            m.insert(id, s.debited);
        }
        m
    });
    let t = Instant::now();
    let (files, unmatched_accounts) = loop {
        let files = exported(dirs);
        let mut by_account: HashMap<u64, i64> = HashMap::new();
        for r in files.values().flatten() {
            *by_account
                .entry(r["account"].as_u64().unwrap())
                .or_default() += r["amount"].as_i64().unwrap();
        }
        let wrong: Vec<String> = debited
            .iter()
            .filter(|(id, d)| by_account.get(id).copied().unwrap_or(0) != **d)
            .map(|(id, d)| format!("account {id}: debited {d}, CDRs {:?}", by_account.get(id)))
            .collect();
        if wrong.is_empty() || t.elapsed() > within {
            break (files, wrong);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut by_slot: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (name, records) in &files {
        let slot: u64 = name[5..10].parse().expect("cdr-r<slot>-...");
        for r in records {
            by_slot
                .entry(slot)
                .or_default()
                .push(r["sequence"].as_u64().unwrap());
        }
    }
    let mut sequence_faults = Vec::new();
    for (slot, seqs) in &mut by_slot {
        seqs.sort_unstable();
        let expect: Vec<u64> = (1..=seqs.len() as u64).collect();
        if *seqs != expect {
            sequence_faults.push(format!("slot {slot}: {seqs:?}"));
        }
    }
    CdrReport {
        files,
        unmatched_accounts,
        sequence_faults,
    }
}

/// [`cdr_report`], asserting that every account's CDRs add up to its
/// debits and that no slot's sequence has a gap or a repeat; returns the
/// files.
pub fn cdrs_match_debits(
    rt: &tokio::runtime::Runtime,
    ledger: &RedisLedger,
    dirs: &[PathBuf],
    accounts: &[u64],
    within: Duration,
) -> BTreeMap<String, Vec<Value>> {
    let report = cdr_report(rt, ledger, dirs, accounts, within);
    assert!(
        report.unmatched_accounts.is_empty(),
        "CDRs never all exported: {:?}",
        report.unmatched_accounts
    );
    assert!(
        report.sequence_faults.is_empty(),
        "a gap or a CDR written twice: {:?}",
        report.sequence_faults
    );
    report.files
}

/// The usage CDRs of `session`'s request `number` among `files`.
pub fn usage_cdrs(files: &BTreeMap<String, Vec<Value>>, session: &str, number: u32) -> usize {
    files
        .values()
        .flatten()
        .filter(|r| {
            r["record_type"] == "usage"
                && r["session_id"] == session
                && r["request_number"] == number
        })
        .count()
}
