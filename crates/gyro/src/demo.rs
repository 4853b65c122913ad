//! `gyro demo`: the server on its embedded default, the load generator
//! against it for a few seconds, and a summary a newcomer can read.

use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anyhow::Context;
use gyro_load::{parse_duration, LoadArgs, Scenario};

use crate::serve;

/// Options of `gyro demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// How long the load runs.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Load generator connections.
    #[arg(long, default_value_t = 4)]
    pub connections: u32,
    /// What the load generator sends: data, sms or mix.
    #[arg(long, value_enum, default_value = "mix")]
    pub scenario: Scenario,
    /// The server's options (`gyro serve --help`).
    #[command(flatten)]
    pub serve: serve::Args,
}

/// Runs the demo.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let config = serve::load_config(&args.serve)?;
    let running = serve::start(config.clone()).context("starting the server")?;
    let target = running.handle.local_addrs()[0];
    println!(
        "gyro demo: server on {target} ({} workers), load for {:?} ({} connections, {:?})\n",
        config.worker_count(),
        args.duration,
        args.connections,
        args.scenario
    );
    let mut load = LoadArgs::for_target(target.to_string(), args.duration);
    load.connections = args.connections;
    load.scenario = args.scenario;
    load.threads = 1;
    let report = gyro_load::run(load);
    let per_worker = running.handle.worker_stats();
    running.handle.shutdown();
    running.handle.join();
    let report = report?;
    report.print_human();
    println!();
    println!("server:");
    for (i, w) in per_worker.iter().enumerate() {
        println!(
            "  worker {i}: {} requests ({} handed over from another worker)",
            w.requests, w.from_other_workers
        );
    }
    let cdrs: u64 = running.totals.iter().map(|t| t.cdrs.load(Relaxed)).sum();
    let amount: i64 = running.totals.iter().map(|t| t.amount.load(Relaxed)).sum();
    let errors: u64 = running
        .totals
        .iter()
        .map(|t| t.failed_commits.load(Relaxed))
        .sum();
    println!(
        "  balances moved: {}.{:02} (minor units: {amount}) debited from the demo accounts",
        amount / 100,
        (amount % 100).abs()
    );
    match &running.cdr_dir {
        Some(d) => println!(
            "  CDRs written: {cdrs} under {}/shard-<i>/ (`gyro cdr list --data-dir {}`)",
            d.display(),
            config.server.data_dir.display()
        ),
        None => println!("  CDRs: {cdrs} (not written to disk)"),
    }
    let commits: u64 = running.totals.iter().map(|t| t.commits.load(Relaxed)).sum();
    let syncs: u64 = running.totals.iter().map(|t| t.syncs.load(Relaxed)).sum();
    let records: u64 = running.totals.iter().map(|t| t.records.load(Relaxed)).sum();
    if commits > 0 {
        println!(
            "  durability: {} group commits, {syncs} fsyncs, {:.1} records per commit",
            commits,
            records as f64 / commits as f64
        );
    }
    if errors > 0 {
        println!("  commits that failed (answered 3004): {errors}");
    }
    if running.cdr_dir.is_some() {
        let dir = &config.server.data_dir;
        println!(
            "  data directory {} now holds {:.1} MB (ledger and CDR files, kept across \
             runs; remove it to start over)",
            dir.display(),
            bytes_under(dir) as f64 / 1e6
        );
    }
    println!(
        "\nNext: `gyro serve` runs the server alone; `gyro load --help` shows the load options."
    );
    Ok(gyro_load::exit_code(&report, 0.01))
}

/// Bytes in the regular files under `dir` (0 for what cannot be read).
fn bytes_under(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}
