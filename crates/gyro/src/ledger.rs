//! `gyro ledger`: open a stopped server's data directory the way `gyro
//! serve` does at start (snapshot plus journal) and check the books: for
//! every account, initial balance + top-ups = balance + reserved + debited.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use gyro_charging::{Output, Timestamp};
use serde::Serialize;

use crate::serve;

/// Options of `gyro ledger`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The server's data directory (the server must be stopped).
    #[arg(long, default_value = "gyro-data", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Charging configuration the server runs with (default: the embedded
    /// demo); it seeds shards that have no snapshot yet.
    #[arg(long, value_name = "FILE")]
    pub charging: Option<PathBuf>,
    /// First close every session as its supervision timer (Tcc) would,
    /// releasing the reservations of sessions whose client is gone. Nothing
    /// is written back.
    #[arg(long)]
    pub expire_sessions: bool,
    /// Print every account as JSON.
    #[arg(long)]
    pub json: bool,
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
    balance: i64,
    reserved: i64,
    debited: i64,
    violations: usize,
    books: Vec<AccountBooks>,
}

/// Runs `gyro ledger`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let ledger_root = args.data_dir.join("ledger");
    let mut shards: Vec<usize> = std::fs::read_dir(&ledger_root)
        .with_context(|| format!("reading {}", ledger_root.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("shard-")?.parse().ok())
        .collect();
    shards.sort_unstable();
    anyhow::ensure!(!shards.is_empty(), "no shard in {}", ledger_root.display());
    // A running server owns the directory; its books are read once it stops.
    let _lock = gyro_store::DataDirLock::acquire(&args.data_dir)?;
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
        books: Vec::new(),
    };
    for &shard in &shards {
        let mut engine = gyro_ocs::recover_engine(&charging, &args.data_dir, shard, count, now)
            .with_context(|| format!("opening the ledger of shard {shard}"))?;
        if args.expire_sessions {
            let later = Timestamp(now.0 + (charging.engine.supervision_secs + 1) * 1000);
            engine.tick(later, &mut Output::default());
        }
        report.open_sessions += engine.session_count();
        for a in engine.accounts() {
            report.accounts += 1;
            report.balance += a.balance;
            report.reserved += a.reserved;
            report.debited += a.debited;
            if a.initial_balance + a.topped_up != a.balance + a.reserved + a.debited {
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
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
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
