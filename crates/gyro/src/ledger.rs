//! `gyro ledger`: read a server's data directory the way `gyro serve`
//! does at start (snapshot plus journal) and check the books: for every
//! account, initial balance + top-ups = balance + reserved + debited.
//! With `--config` naming a configuration whose ledger is a Redis Cluster
//! ([`redis`]), the same check over every account of the cluster.
//!
//! It only reads: nothing in the data directory is created, cut, renamed
//! or removed (a torn last frame is left out in memory), so it works on a
//! full or read-only disk and beside a running server, whose books it then
//! reads as a snapshot of a moving state (and says so). `gyro ledger
//! repair` ([`repair`]) is the one that writes, and only into a directory
//! no server holds.

mod redis;

pub(crate) use redis::options as redis_options;
mod repair;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use gyro_charging::{Output, Timestamp};
use serde::Serialize;

use crate::serve;

/// `--data-dir` when not given.
const DEFAULT_DATA_DIR: &str = "gyro-data";

/// Options of `gyro ledger`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Something else than checking the books.
    #[command(subcommand)]
    pub action: Option<Action>,
    /// The server's data directory: read only, and a running server may
    /// hold it, except for `repair`, which writes into it and refuses a
    /// directory a server holds.
    #[arg(long, global = true, default_value = DEFAULT_DATA_DIR, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Charging configuration the server runs with (default: the embedded
    /// demo); it seeds shards that have no snapshot yet.
    #[arg(long, global = true, value_name = "FILE")]
    pub charging: Option<PathBuf>,
    /// First close every session as its supervision timer (Tcc) would,
    /// releasing the reservations of sessions whose client is gone. Nothing
    /// is written back.
    #[arg(long)]
    pub expire_sessions: bool,
    /// Print every account as JSON.
    #[arg(long)]
    pub json: bool,
    /// The server's configuration file: with `[storage] backend =
    /// "redis-cluster"` the books of the whole cluster are checked (its
    /// `[storage.redis]` settings); otherwise its data directory and
    /// charging configuration are read (unless given here).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `gyro ledger` actions.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// Repair a journal damaged in the middle: keep a copy of the damaged
    /// files, cut the journal to its last consistent frame and report
    /// exactly what was dropped. Refuses a directory a server holds.
    Repair(repair::Args),
}

/// One account's books.
#[derive(Debug, Serialize)]
struct AccountBooks {
    shard: usize,
    account: u64,
    initial_balance: i64,
    topped_up: i64,
    balance: i64,
    reserved: i64,
    debited: i64,
}

/// The whole report.
#[derive(Debug, Serialize)]
struct Report {
    shards: usize,
    accounts: usize,
    open_sessions: usize,
    /// Sums over every account, wide enough never to wrap.
    balance: i128,
    reserved: i128,
    debited: i128,
    violations: usize,
    /// The pid of the running server holding the directory, when one does
    /// (the figures are then a snapshot of a moving state).
    #[serde(skip_serializing_if = "Option::is_none")]
    live_holder_pid: Option<u32>,
    /// Bytes of torn last frames left out (a server cuts them at start).
    torn_journal_bytes: u64,
    books: Vec<AccountBooks>,
}

/// The shard indexes of a data directory (`ledger/shard-<i>`), sorted.
pub fn shards(data_dir: &Path) -> anyhow::Result<Vec<usize>> {
    let ledger_root = data_dir.join("ledger");
    let mut shards: Vec<usize> = std::fs::read_dir(&ledger_root)
        .with_context(|| format!("reading {}", ledger_root.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("shard-")?.parse().ok())
        .collect();
    shards.sort_unstable();
    anyhow::ensure!(!shards.is_empty(), "no shard in {}", ledger_root.display());
    Ok(shards)
}

/// The line that says a running server holds `data_dir`, if one does.
pub fn live_note(data_dir: &Path) -> anyhow::Result<Option<(String, Option<u32>)>> {
    let holder = gyro_store::DataDirLock::holder(data_dir)
        .with_context(|| format!("checking whether a server holds {}", data_dir.display()))?;
    Ok(holder.map(|h| {
        (
            format!("live directory held by {h}: figures are a snapshot"),
            h.pid,
        )
    }))
}

/// Runs `gyro ledger`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(Action::Repair(r)) = &args.action {
        return repair::run(args, r);
    }
    let mut args = args.clone();
    if let Some(path) = &args.config {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let config = gyro_server::Config::from_toml_str(&text)
            .with_context(|| format!("in {}", path.display()))?;
        if config.storage.backend == gyro_server::config::StorageBackend::RedisCluster {
            return redis::run(&config.storage.redis, args.json);
        }
        if args.data_dir == Path::new(DEFAULT_DATA_DIR) {
            args.data_dir = config.server.data_dir.clone();
        }
        if args.charging.is_none() {
            args.charging = config.server.charging.clone();
        }
    }
    let args = &args;
    let shards = shards(&args.data_dir)?;
    let live = live_note(&args.data_dir)?;
    let mut config = gyro_server::Config::default();
    config.server.charging = args.charging.clone();
    let (charging, _) = serve::load_charging(&config)?;
    let count = shards.len();
    let now = Timestamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis() as u64,
    );
    let mut report = Report {
        shards: count,
        accounts: 0,
        open_sessions: 0,
        balance: 0,
        reserved: 0,
        debited: 0,
        violations: 0,
        live_holder_pid: live.as_ref().and_then(|l| l.1),
        torn_journal_bytes: 0,
        books: Vec::new(),
    };
    for &shard in &shards {
        let (mut engine, found) = gyro_ocs::recover_engine(&charging, &args.data_dir, shard, count)
            .with_context(|| match live {
                Some(_) => format!("reading the ledger of shard {shard}"),
                None => format!(
                    "reading the ledger of shard {shard} (a journal damaged in the middle: see `gyro ledger repair`)"
                ),
            })?;
        report.torn_journal_bytes += found.torn_journal_bytes;
        if args.expire_sessions {
            let later = Timestamp(now.0 + (charging.engine.supervision_secs + 1) * 1000);
            engine.tick(later, &mut Output::default());
        }
        report.open_sessions += engine.session_count();
        for a in engine.accounts() {
            report.accounts += 1;
            report.balance += i128::from(a.balance);
            report.reserved += i128::from(a.reserved);
            report.debited += i128::from(a.debited);
            let wide = i128::from;
            if wide(a.initial_balance) + wide(a.topped_up)
                != wide(a.balance) + wide(a.reserved) + wide(a.debited)
            {
                report.violations += 1;
                eprintln!(
                    "account {}: initial {} + top-ups {} != balance {} + reserved {} + debited {}",
                    a.id.0, a.initial_balance, a.topped_up, a.balance, a.reserved, a.debited
                );
            }
            report.books.push(AccountBooks {
                shard,
                account: a.id.0,
                initial_balance: a.initial_balance,
                topped_up: a.topped_up,
                balance: a.balance,
                reserved: a.reserved,
                debited: a.debited,
            });
        }
    }
    report.books.sort_by_key(|b| b.account);
    if args.json {
        if let Some((note, _)) = &live {
            eprintln!("gyro ledger: {note}");
        }
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if let Some((note, _)) = &live {
            println!("{note}");
        }
        if report.torn_journal_bytes > 0 {
            println!(
                "a torn last frame ({} bytes) was left out; the server cuts it at start",
                report.torn_journal_bytes
            );
        }
        println!(
            "{} shards, {} accounts, {} open sessions: balance {}, reserved {}, debited {} (minor units)",
            report.shards,
            report.accounts,
            report.open_sessions,
            report.balance,
            report.reserved,
            report.debited
        );
        println!(
            "initial + top-ups = balance + reserved + debited: {}",
            if report.violations == 0 {
                "holds for every account".to_string()
            } else {
                format!("VIOLATED for {} accounts", report.violations)
            }
        );
    }
    Ok(if report.violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
