//! Breaks the bytes of journal files down by what they hold: frame
//! headers, each kind of effect record, CDR records and answer records,
//! in total and per answer record (one answer record per request).
//!
//! `cargo run --release -p gyro-store --example journal_bytes -- DATA_DIR/ledger/shard-0/journal-*.log`

use gyro_store::journal::{self, FRAME_HEADER, MAGIC, PAYLOAD_HEADER};
use gyro_store::record::Decoder;
use std::collections::BTreeMap;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut kinds: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut add = |k: &str, n: u64, bytes: u64| {
        let e = kinds.entry(k.to_string()).or_default();
        e.0 += n;
        e.1 += bytes;
    };
    let (mut total, mut frames, mut answers) = (0u64, 0u64, 0u64);
    // `JOURNAL_DUMP=N` prints the first N effects.
    let mut dump: usize = std::env::var("JOURNAL_DUMP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for path in std::env::args().skip(1) {
        let data = std::fs::read(&path)?;
        total += data.len() as u64;
        add("file magic", 1, MAGIC.len() as u64);
        for f in journal::decode_journal(&data)? {
            frames += 1;
            answers += u64::from(f.answers);
            add("frame headers", 1, (FRAME_HEADER + PAYLOAD_HEADER) as u64);
            let start = f.offset as usize + PAYLOAD_HEADER;
            let effects = &data[start..start + f.effects_len as usize];
            let mut d = Decoder::new(effects);
            while !d.is_empty() {
                let at = d.position();
                let e = d.effect()?;
                if dump > 0 {
                    dump -= 1;
                    println!("{e:?}");
                }
                let name = format!("effect {}", effect_name(&e));
                add(&name, 1, (d.position() - at) as u64);
            }
            let c0 = start + f.effects_len as usize;
            let cdrs = &data[c0..c0 + f.cdrs_len as usize];
            let mut d = Decoder::new(cdrs);
            let mut prev = None;
            while !d.is_empty() {
                let at = d.position();
                let tag = cdrs[at];
                prev = Some(d.cdr_view_after(prev.as_ref())?);
                add(&format!("cdr tag {tag}"), 1, (d.position() - at) as u64);
            }
            add("answer records", f.answers.into(), f.answers_len.into());
        }
    }
    let per = |b: u64| b as f64 / answers.max(1) as f64;
    println!("{total} bytes, {frames} frames, {answers} answer records (requests)");
    println!(
        "{:<28} {:>10} {:>14} {:>12}",
        "part", "records", "bytes", "B/request"
    );
    for (k, (n, b)) in &kinds {
        println!("{k:<28} {n:>10} {b:>14} {:>12.1}", per(*b));
    }
    println!(
        "{:<28} {:>10} {:>14} {:>12.1}",
        "total",
        "",
        total,
        per(total)
    );
    Ok(())
}

fn effect_name(e: &gyro_charging::Effect) -> String {
    let s = format!("{e:?}");
    s.split([' ', '{', '(']).next().unwrap_or("?").to_string()
}
