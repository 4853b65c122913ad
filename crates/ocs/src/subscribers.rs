//! [`Subscribers`]: which account, hence which shard, a subscriber
//! identity belongs to, shared by every event loop (to route CCRs) and by
//! the operator API (to route account operations).
//!
//! The accounts recovered at start are held in a plain read-only
//! directory, the fast path of every CCR. Accounts created or deleted
//! while the server runs go to a concurrent overlay consulted first once
//! it holds anything; its changes are serialised by one lock that only
//! account operations take.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use gyro_charging::{AccountId, SubscriberDirectory, SubscriptionId, SubscriptionType};

type Overlay = papaya::HashMap<Box<str>, Option<AccountId>, rustc_hash::FxBuildHasher>;

/// Subscriber identities to accounts, for routing.
pub struct Subscribers {
    fixed: SubscriberDirectory,
    /// Identity -> account (`None`: deleted), per Subscription-Id-Type.
    overlay: [Overlay; 5],
    overlay_used: AtomicBool,
    changes: Mutex<()>,
    next_id: AtomicU64,
}

/// E.164 numbers are compared without a leading '+' (as the engine's
/// directory does).
fn normalise(kind: SubscriptionType, data: &str) -> &str {
    match kind {
        SubscriptionType::E164 => data.strip_prefix('+').unwrap_or(data),
        _ => data,
    }
}

impl Subscribers {
    /// The identities of `fixed`; new accounts get ids from `next_id` on.
    pub(crate) fn new(fixed: SubscriberDirectory, next_id: u64) -> Self {
        Subscribers {
            fixed,
            overlay: std::array::from_fn(|_| Overlay::default()),
            overlay_used: AtomicBool::new(false),
            changes: Mutex::new(()),
            next_id: AtomicU64::new(next_id.max(1)),
        }
    }

    /// The account of an identity.
    #[inline]
    pub fn lookup(&self, kind: SubscriptionType, data: &str) -> Option<AccountId> {
        let data = normalise(kind, data);
        if self.overlay_used.load(Ordering::Acquire) {
            if let Some(a) = self.overlay[kind as usize].pin().get(data) {
                return *a;
            }
        }
        self.fixed.lookup(kind, data)
    }

    /// The account of an identity given as digits: an E.164 number
    /// (MSISDN, with or without '+') first, else an IMSI.
    pub fn lookup_digits(&self, subscriber: &str) -> Option<AccountId> {
        self.lookup(SubscriptionType::E164, subscriber)
            .or_else(|| self.lookup(SubscriptionType::Imsi, subscriber))
    }

    /// A fresh account id.
    pub fn next_account_id(&self) -> AccountId {
        AccountId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Makes sure ids from [`Subscribers::next_account_id`] stay above
    /// `id` (an id chosen by the caller).
    pub fn note_account_id(&self, id: AccountId) {
        self.next_id
            .fetch_max(id.0.saturating_add(1), Ordering::Relaxed);
    }

    /// Maps every identity in `ids` to `account`, or none of them: the
    /// first identity already taken is returned instead.
    pub fn claim(&self, ids: &[SubscriptionId], account: AccountId) -> Result<(), SubscriptionId> {
        let _serial = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(taken) = ids.iter().find(|s| self.lookup(s.kind, &s.data).is_some()) {
            return Err(taken.clone());
        }
        self.set(ids, Some(account));
        Ok(())
    }

    /// Unmaps identities (a deleted account's, or a claim whose account
    /// could not be created).
    pub fn release(&self, ids: &[SubscriptionId]) {
        let _serial = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        self.set(ids, None);
    }

    fn set(&self, ids: &[SubscriptionId], account: Option<AccountId>) {
        self.overlay_used.store(true, Ordering::Release);
        for s in ids {
            let key: Box<str> = normalise(s.kind, &s.data).into();
            self.overlay[s.kind as usize].pin().insert(key, account);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_all_or_nothing_and_released_identities_are_free() {
        let mut fixed = SubscriberDirectory::new();
        fixed
            .insert(&SubscriptionId::e164("461"), AccountId(1))
            .unwrap();
        let s = Subscribers::new(fixed, 2);
        assert_eq!(s.lookup_digits("+461"), Some(AccountId(1)));
        let id = s.next_account_id();
        assert_eq!(id, AccountId(2));
        let imsi = SubscriptionId::new(SubscriptionType::Imsi, "2400");
        let both = [imsi.clone(), SubscriptionId::e164("461")];
        assert_eq!(s.claim(&both, id), Err(SubscriptionId::e164("461")));
        assert_eq!(s.lookup(SubscriptionType::Imsi, "2400"), None);
        s.claim(std::slice::from_ref(&imsi), id).unwrap();
        assert_eq!(s.lookup_digits("2400"), Some(id));
        s.release(&[SubscriptionId::e164("461")]);
        assert_eq!(s.lookup_digits("461"), None);
        s.claim(&[SubscriptionId::e164("+461")], AccountId(3))
            .unwrap();
        assert_eq!(s.lookup_digits("461"), Some(AccountId(3)));
    }
}
