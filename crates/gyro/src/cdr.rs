//! `gyro cdr`: list, print, follow and convert the charging data records
//! a server writes under `<data-dir>/cdr/shard-<i>/` (plain or
//! zstd-compressed files alike).
//!
//! It only reads: nothing in the data directory is written, and a line
//! still being written is left out, so it works on a full or read-only
//! disk and beside a running server (it then says on standard error that
//! what it prints is a snapshot).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use gyro_store::cdr_tool::{self, Format};

/// Options of `gyro cdr`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
    /// The server's data directory.
    #[arg(long, global = true, default_value = "gyro-data", value_name = "DIR")]
    pub data_dir: PathBuf,
}

/// `gyro cdr` actions.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// List the CDR files with their record counts and sequence ranges.
    /// Closed files (`*.jsonl`, `*.jsonl.zst`) may be picked up; `*.part`
    /// files are being written. Compressed files are read as they are.
    List,
    /// Print every record of a file, or of all files, as JSON Lines.
    Print {
        /// A CDR file (default: every file under the data directory).
        file: Option<PathBuf>,
    },
    /// Print the last records of each shard; with -f keep printing new ones.
    Tail {
        /// Records per shard to start with.
        #[arg(short = 'n', long, default_value_t = 10)]
        lines: usize,
        /// Follow: print records as they are written (Ctrl-C stops).
        #[arg(short = 'f', long)]
        follow: bool,
        /// Print CSV instead of JSON.
        #[arg(long)]
        csv: bool,
    },
    /// Convert a file, or all files, to CSV (with a header line).
    Csv {
        /// A CDR file (default: every file under the data directory).
        file: Option<PathBuf>,
    },
}

/// Runs `gyro cdr`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let cdr_dir = args.data_dir.join("cdr");
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let dir_or = |file: &Option<PathBuf>| file.clone().unwrap_or_else(|| cdr_dir.clone());
    let ctx = || format!("reading CDRs under {}", cdr_dir.display());
    let following = matches!(args.action, Action::Tail { follow: true, .. });
    if !following {
        if let Some((note, _)) = crate::ledger::live_note(&args.data_dir)? {
            eprintln!("gyro cdr: {note}");
        }
    }
    match &args.action {
        Action::List => {
            let files = list(&cdr_dir).with_context(ctx)?;
            cdr_tool::write_list(&files, &mut out)?;
        }
        Action::Print { file } => {
            cdr_tool::print(&dir_or(file), Format::Json, &mut out).with_context(ctx)?;
        }
        Action::Csv { file } => {
            cdr_tool::to_csv(&dir_or(file), &mut out).with_context(ctx)?;
        }
        Action::Tail { lines, follow, csv } => {
            let format = if *csv { Format::Csv } else { Format::Json };
            if *follow {
                cdr_tool::follow(
                    &cdr_dir,
                    *lines,
                    format,
                    Duration::from_millis(200),
                    &mut out,
                    || false,
                )
                .with_context(ctx)?;
            } else {
                cdr_tool::tail(&cdr_dir, *lines, format, &mut out).with_context(ctx)?;
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// [`cdr_tool::list`], listing again when a running server closed (renamed)
/// a file between the listing and its reading.
fn list(dir: &std::path::Path) -> gyro_store::Result<Vec<cdr_tool::CdrFileInfo>> {
    let mut attempt = 1;
    loop {
        match cdr_tool::list(dir) {
            Err(gyro_store::Error::Io { source, .. })
                if attempt < 10
                    && source.kind() == std::io::ErrorKind::NotFound
                    && dir.is_dir() =>
            {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            r => return r,
        }
    }
}
