//! ChargingDataRef: the identifier of a Charging Data resource (TS 32.291
//! clause 6.1.3.1), made by gyro at Create and sent back in the Location
//! header; the NF names it in every Update and Release.
//!
//! It is `nchf-<account>-<unique>`: the account id routes an Update or a
//! Release to the shard that holds the session (a shard is a function of
//! the account id alone, so this holds across restarts); `<unique>` (the
//! creation time in milliseconds, a counter and 32 random bits, in hex)
//! makes it unique and hard to guess. It is also the session's Session-Id
//! in the engine, so it is the `session_id` of the session's CDRs: a CDR
//! whose `session_id` starts with `nchf-` was charged over Nchf (a
//! Diameter Session-Id always holds a `;`, RFC 6733 section 8.8, and this
//! one never does).

use std::sync::atomic::{AtomicU64, Ordering};

use gyro_charging::AccountId;

/// The prefix of every ChargingDataRef.
pub const PREFIX: &str = "nchf-";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new ChargingDataRef for a session of `account`, created at `now_ms`.
pub fn new_reference(account: AccountId, now_ms: u64) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff;
    format!(
        "{PREFIX}{}-{now_ms:x}{n:08x}{:08x}",
        account.0,
        fastrand::u32(..)
    )
}

/// The account a ChargingDataRef was made for, if it is one gyro made.
pub fn account_of(reference: &str) -> Option<AccountId> {
    let rest = reference.strip_prefix(PREFIX)?;
    let (account, unique) = rest.split_once('-')?;
    if unique.is_empty() || unique.len() > 40 || !unique.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    account.parse().ok().map(AccountId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_names_its_account_and_is_unique() {
        let a = new_reference(AccountId(42), 1_700_000_000_000);
        let b = new_reference(AccountId(42), 1_700_000_000_000);
        assert_ne!(a, b);
        assert!(a.starts_with("nchf-42-"));
        assert!(!a.contains(';'));
        assert_eq!(account_of(&a), Some(AccountId(42)));
        for bad in [
            "",
            "nchf-",
            "nchf-42",
            "nchf-42-",
            "nchf-x-1",
            "gy-42-1",
            "nchf-42-zz",
            "nchf-42-1/2",
        ] {
            assert_eq!(account_of(bad), None, "{bad}");
        }
    }
}
