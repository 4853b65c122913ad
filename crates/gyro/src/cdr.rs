//! `gyro cdr`: list, print, follow and convert the charging data records
//! a server writes under `<data-dir>/cdr/shard-<i>/` (plain or
//! zstd-compressed files alike).
//!
//! It only reads: nothing in the data directory is written, and a line
//! still being written is left out, so it works on a full or read-only
//! disk and beside a running server (it then says on standard error that
//! what it prints is a snapshot). JSON Lines and CSV files are read
//! alike.
//!
//! `list`, `print` and `csv` check every closed file against the sequence
//! numbers its name carries: one that does not hold exactly those records,
//! or ends in a partial line or an incomplete zstd frame (truncated), is
//! named on standard error with the expected and found ranges; its whole
//! records are still listed and printed, and the exit status is 1. Exit
//! status 2: what was asked could not be done (a line that is not a CDR,
//! a file that cannot be read).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use gyro_store::cdr_tool::{self, Format};

/// Options of `gyro cdr`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
CDR files are read in either format (`.jsonl`, `.csv`), plain or \
zstd-compressed (`.zst`).

list, print and csv check each closed file against the first and last \
sequence numbers in its name: a file that does not hold exactly those \
records, or that ends in a partial line or an incomplete zstd frame \
(truncated), is named on standard error with the expected and found \
ranges (`list` shows it as DAMAGED); its whole records are still printed. \
The open `.part` file may end in a line still being written. tail reads \
the newest records only and does not check.

Exit status: 0 all good; 1 damaged closed files were found; 2 an error \
(a line that is not a CDR, a file that cannot be read).")]
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
    /// Closed files (`*.jsonl`, `*.csv`, `*.jsonl.zst`, `*.csv.zst`) may be
    /// picked up; `*.part` files are being written. Compressed files are
    /// read as they are.
    List,
    /// Print every record of a file, or of all files, as JSON Lines
    /// (whatever the files' format).
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
    let damaged = match &args.action {
        Action::List => {
            let files = list(&cdr_dir).with_context(ctx)?;
            cdr_tool::write_list(&files, &mut out)?;
            files.into_iter().filter_map(|f| f.damage).collect()
        }
        Action::Print { file } => {
            cdr_tool::print(&dir_or(file), Format::Json, &mut out)
                .with_context(ctx)?
                .damaged
        }
        Action::Csv { file } => {
            cdr_tool::to_csv(&dir_or(file), &mut out)
                .with_context(ctx)?
                .damaged
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
            Vec::new()
        }
    };
    out.flush()?;
    for d in &damaged {
        eprintln!("gyro cdr: {d}");
    }
    Ok(if damaged.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
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
