//! Checks of a parsed [`ChargingConfig`] that look across its entries:
//! engine bounds, every subscriber, every bundle, and no account id or
//! subscriber identity defined twice (by `[[account]]` or
//! `[[account_range]]` entries alike).
//!
//! It runs when the file is read ([`ChargingConfig::from_toml_str`]), so a
//! bad file is refused before anything (a shard directory, a snapshot) is
//! built from it. Ranges are checked as intervals, never expanded, so a
//! range of millions of accounts costs no more than one of ten.

use std::collections::HashMap;

use crate::accounts::{check_number, normalise, SubscriptionId, SubscriptionType};
use crate::config::{nth_number, strip, BundleConfig, ChargingConfig};
use crate::error::{Error, Result};

/// The shortest `engine.dedup_ttl_secs`: a client retransmits for up to
/// Tx (RFC 8506) plus its Diameter failover, well under 4 minutes.
pub const MIN_DEDUP_TTL_SECS: u64 = 240;

/// The longest `engine.dedup_ttl_secs`: a day.
pub const MAX_DEDUP_TTL_SECS: u64 = 86_400;

fn err<T>(m: String) -> Result<T> {
    Err(Error::Config(m))
}

/// How an entry is named in errors: `[[account]] #2 (id = 7)`.
fn account_name(i: usize, id: u64) -> String {
    format!("[[account]] #{} (id = {id})", i + 1)
}

/// `[[account_range]] #1 (first_id = 1000, count = 1000)`.
fn range_name(i: usize, first_id: u64, count: u64) -> String {
    format!(
        "[[account_range]] #{} (first_id = {first_id}, count = {count})",
        i + 1
    )
}

/// Numbers `start..end` of `width` digits that a range gives out.
struct NumberSpan {
    kind: SubscriptionType,
    width: usize,
    start: u128,
    end: u128,
    owner: usize,
}

/// Checks everything [`ChargingConfig::from_toml_str`] does not get from
/// the TOML parser or the catalog.
pub(crate) fn validate(cfg: &ChargingConfig) -> Result<()> {
    let ttl = cfg.engine.dedup_ttl_secs;
    if !(MIN_DEDUP_TTL_SECS..=MAX_DEDUP_TTL_SECS).contains(&ttl) {
        return err(format!(
            "[engine] dedup_ttl_secs = {ttl}: must be {MIN_DEDUP_TTL_SECS} to \
             {MAX_DEDUP_TTL_SECS} (answers must outlive a client's retransmissions)"
        ));
    }
    // Entry names, [[account]] entries first, then [[account_range]].
    let mut names: Vec<String> = Vec::new();
    // Account ids as half-open intervals with their entry.
    let mut ids: Vec<(u128, u128, usize)> = Vec::new();
    // Subscribers listed one by one: (kind, normalised data) -> entry.
    let mut listed: HashMap<(SubscriptionType, String), usize> = HashMap::new();
    for (i, a) in cfg.accounts.iter().enumerate() {
        let name = account_name(i, a.id);
        check_bundles(&a.bundles, &name)?;
        let owner = names.len();
        for s in &a.subscribers {
            let id = SubscriptionId::parse(s)
                .map_err(|e| Error::Config(format!("{name}: subscribers: {}", strip(e))))?;
            check_number(id.kind, &id.data).map_err(|e| {
                Error::Config(format!("{name}: subscribers: subscriber {s:?}: {e}"))
            })?;
            let key = (id.kind, normalise(id.kind, &id.data).to_string());
            if let Some(&other) = listed.get(&key) {
                if other != owner {
                    return err(format!(
                        "subscriber {s:?} is given to two accounts: {} and {name}",
                        names[other]
                    ));
                }
            }
            listed.insert(key, owner);
        }
        ids.push((u128::from(a.id), u128::from(a.id) + 1, owner));
        names.push(name);
    }
    let mut spans: Vec<NumberSpan> = Vec::new();
    for (i, r) in cfg.account_ranges.iter().enumerate() {
        let name = range_name(i, r.first_id, r.count);
        check_bundles(&r.bundles, &name)?;
        let owner = names.len();
        let end = u128::from(r.first_id) + u128::from(r.count);
        if end > u128::from(u64::MAX) + 1 {
            return err(format!(
                "{name}: the ids overflow (the last is above 2^64 - 1)"
            ));
        }
        for (key, first, kind) in [
            ("e164_first", &r.e164_first, SubscriptionType::E164),
            ("imsi_first", &r.imsi_first, SubscriptionType::Imsi),
        ] {
            let Some(first) = first else { continue };
            check_number(kind, first)
                .map_err(|e| Error::Config(format!("{name}: {key} = {first:?}: {e}")))?;
            if r.count > 0 {
                nth_number(first, r.count - 1)
                    .map_err(|e| Error::Config(format!("{name}: {key}: {}", strip(e))))?;
            }
            let digits = normalise(kind, first);
            // At most 15 digits: parses.
            let start: u128 = digits.parse().unwrap_or(0);
            spans.push(NumberSpan {
                kind,
                width: digits.len(),
                start,
                end: start + u128::from(r.count),
                owner,
            });
        }
        if r.count > 0 {
            ids.push((u128::from(r.first_id), end, owner));
        }
        names.push(name);
    }
    // Account ids: sorted by start, each interval must begin at or after
    // the furthest end seen so far.
    ids.sort_unstable();
    let mut furthest: Option<(u128, usize)> = None;
    for &(start, end, owner) in &ids {
        if let Some((reach, other)) = furthest {
            if start < reach {
                return err(format!(
                    "account {start} is defined twice: by {} and by {}",
                    names[other], names[owner]
                ));
            }
        }
        if furthest.is_none_or(|(reach, _)| end > reach) {
            furthest = Some((end, owner));
        }
    }
    // Numbers given out by two ranges.
    for (n, a) in spans.iter().enumerate() {
        for b in &spans[n + 1..] {
            if a.kind == b.kind && a.width == b.width && a.start < b.end && b.start < a.end {
                let first = a.start.max(b.start);
                return err(format!(
                    "subscriber {}:{first:0width$} is given to two accounts: by {} and by {}",
                    a.kind.name(),
                    names[a.owner],
                    names[b.owner],
                    width = a.width
                ));
            }
        }
    }
    // Numbers listed one by one that a range also gives out.
    for ((kind, data), &owner) in &listed {
        let Ok(value) = data.parse::<u128>() else {
            continue;
        };
        if let Some(span) = spans
            .iter()
            .find(|s| s.kind == *kind && s.width == data.len() && (s.start..s.end).contains(&value))
        {
            return err(format!(
                "subscriber {}:{data} is given to two accounts: {} and {}",
                kind.name(),
                names[owner],
                names[span.owner]
            ));
        }
    }
    Ok(())
}

/// Bundle ids are unique and each validity window is non-empty.
fn check_bundles(bundles: &[BundleConfig], owner: &str) -> Result<()> {
    for (i, b) in bundles.iter().enumerate() {
        let id = b.id.unwrap_or(i as u32 + 1);
        if let (Some(from), Some(until)) = (b.valid_from, b.valid_until) {
            if until <= from {
                return err(format!(
                    "{owner}: bundle {id}: valid_until = {until} is not after valid_from = {from}"
                ));
            }
        }
        let same = |(j, o): (usize, &BundleConfig)| o.id.unwrap_or(j as u32 + 1) == id;
        if bundles[..i].iter().enumerate().any(same) {
            return err(format!("{owner}: bundle id {id} used twice"));
        }
    }
    Ok(())
}
