//! `gyro ledger repair`: make a data directory whose journal is damaged in
//! the middle open again, keeping a copy of what it changes and saying
//! exactly what was dropped (see [`gyro_store::repair`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use gyro_charging::Timestamp;
use gyro_store::repair::{self, Dropped, ShardDamage};

use crate::serve;

/// Options of `gyro ledger repair`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Only say what would be dropped; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Where to keep the damaged files (default: `repair-<UTC time>` in
    /// the data directory).
    #[arg(long, value_name = "DIR")]
    pub backup_dir: Option<PathBuf>,
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// One line about what a dropped range holds.
fn holds(d: &Dropped) -> String {
    let mut s = format!("{} frames", d.frames);
    if d.unreadable_frames > 0 {
        let _ = write!(s, " ({} unreadable", d.unreadable_frames);
        if d.unreadable_bytes > 0 {
            let _ = write!(s, ", {} bytes", d.unreadable_bytes);
        }
        s.push(')');
    }
    let _ = write!(s, ", {} effect records, {} CDR records", d.effects, d.cdrs);
    if let Some((lo, hi)) = d.cdr_range {
        let _ = write!(s, " (CDR sequence {lo}..={hi})");
    }
    let _ = write!(s, ", {} answer records", d.answers);
    s
}

/// The report of one shard.
fn describe(d: &ShardDamage, out: &mut String) {
    let _ = writeln!(out, "shard {}:", d.shard);
    for j in &d.journals {
        match &j.reason {
            Some(why) => {
                let _ = writeln!(
                    out,
                    "  {} is damaged at byte {}: {why}",
                    name(&j.path),
                    j.keep_len
                );
            }
            None => {
                let _ = writeln!(out, "  {} follows the damage", name(&j.path));
            }
        }
        if j.whole() {
            let _ = writeln!(
                out,
                "  dropped: all of {} (bytes 0..{}): {}",
                name(&j.path),
                j.file_len,
                holds(&j.dropped)
            );
        } else {
            let _ = writeln!(
                out,
                "  dropped: bytes {}..{} of {}: {}",
                j.keep_len,
                j.file_len,
                name(&j.path),
                holds(&j.dropped)
            );
        }
    }
    let all = d.dropped();
    let _ = writeln!(
        out,
        "  in all dropped: {}, {} bytes",
        holds(&all),
        all.bytes
    );
    let _ = writeln!(
        out,
        "  the journal now ends before CDR sequence {}",
        d.next_cdr
    );
    // The unreadable frames' CDRs cannot be counted, but the numbering
    // around them tells which they were.
    if all.unreadable_frames > 0 {
        match all.cdr_range {
            Some((lo, _)) if lo > d.next_cdr => {
                let _ = writeln!(
                    out,
                    "  the unreadable frames held CDR sequence {}..={} ({} CDR records, \
                     known from the numbering around them), dropped too",
                    d.next_cdr,
                    lo - 1,
                    lo - d.next_cdr
                );
            }
            Some(_) => {
                let _ = writeln!(out, "  the unreadable frames held no CDR record");
            }
            None => {
                let _ = writeln!(
                    out,
                    "  the unreadable frames held any CDR records from sequence {} on \
                     (how many cannot be read)",
                    d.next_cdr
                );
            }
        }
    }
    if let Some((p, keep, len, (lo, hi))) = &d.cdr.part {
        let _ = writeln!(
            out,
            "  open CDR file {}: records {lo}..={hi} (bytes {keep}..{len}) dropped with their frames",
            name(p)
        );
    }
    if let Some(last) = d.cdr.last_published() {
        let files: Vec<String> = d.cdr.published.iter().map(|(p, _, _)| name(p)).collect();
        let _ = writeln!(
            out,
            "  closed CDR files already hold CDR sequence {}..={last} ({}): a billing system may have them, the ledger no longer holds their charges; numbering continues at {}",
            d.next_cdr,
            files.join(", "),
            last + 1
        );
    }
}

/// Runs `gyro ledger repair`.
pub fn run(ledger: &super::Args, args: &Args) -> anyhow::Result<ExitCode> {
    let data_dir = &ledger.data_dir;
    let shards = super::shards(data_dir)?;
    // Only with no server running: it writes.
    let lock = gyro_store::DataDirLock::acquire(data_dir)
        .with_context(|| format!("refusing to repair {}", data_dir.display()))?;
    let mut damaged = Vec::new();
    let mut out = String::new();
    for &shard in &shards {
        let d = repair::inspect(data_dir, shard)
            .with_context(|| format!("inspecting the ledger of shard {shard}"))?;
        if d.torn_tail > 0 {
            let _ = writeln!(
                out,
                "shard {shard}: a torn last frame ({} bytes), which the server cuts at start",
                d.torn_tail
            );
        }
        if d.is_damaged() {
            describe(&d, &mut out);
            damaged.push(d);
        }
    }
    if damaged.is_empty() {
        print!("{out}");
        println!("nothing to repair: every journal is consistent");
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        print!("{out}");
        println!("dry run: nothing was changed");
        return Ok(ExitCode::SUCCESS);
    }
    let now = Timestamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis() as u64,
    );
    let backup = args.backup_dir.clone().unwrap_or_else(|| {
        data_dir.join(format!("repair-{}", gyro_store::names::utc_compact(now)))
    });
    anyhow::ensure!(
        !backup.exists() || std::fs::read_dir(&backup)?.next().is_none(),
        "the backup directory {} is not empty",
        backup.display()
    );
    let mut config = gyro_server::Config::default();
    config.server.charging = ledger.charging.clone();
    let (charging, _) = serve::load_charging(&config)?;
    for d in &damaged {
        repair::apply(data_dir, d, &backup)
            .with_context(|| format!("repairing shard {}", d.shard))?;
        if let Some(last) = d.cdr.last_published() {
            // Sequence numbers a billing system may have are not given
            // again: a snapshot of the repaired state numbers from after.
            let (engine, _) = gyro_ocs::recover_engine(&charging, data_dir, d.shard, shards.len())
                .with_context(|| format!("rebuilding shard {} after the cut", d.shard))?;
            let mut snapshot = engine.snapshot();
            snapshot.next_cdr_sequence = snapshot.next_cdr_sequence.max(last + 1);
            let path = repair::write_snapshot(data_dir, d, &snapshot)
                .with_context(|| format!("writing the snapshot of shard {}", d.shard))?;
            let _ = writeln!(out, "shard {}: wrote {}", d.shard, name(&path));
        }
    }
    drop(lock);
    print!("{out}");
    println!(
        "repaired; the damaged files are kept in {}",
        backup.display()
    );
    Ok(ExitCode::SUCCESS)
}
