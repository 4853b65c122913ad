//! Key names and Redis Cluster slots.
//!
//! Everything one account's step touches hashes to the account's slot: the
//! account's own keys carry the hash tag `{acct:<id>}`, and the per-slot
//! keys (the CDR stream, its sequence counter, the expiry index) carry a
//! tag chosen so that it hashes to that same slot ([`slot_tag`]).

use gyro_charging::{AccountId, RatingKey, SubscriptionType};
use std::sync::OnceLock;

/// Number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// CRC16/XMODEM, the checksum Redis Cluster hashes keys with.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash slot of `key`: of its hash tag (what lies between the first
/// `{` and the next `}`, when not empty), else of the whole key.
pub fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS
}

/// A short tag (`s<n>`) whose hash slot is `slot`: the per-slot keys are
/// named `<ns>:{<tag>}:...` so that they live in the slot of the accounts
/// they serve. The table is built once (a few milliseconds) and is the
/// same in every process.
pub fn slot_tag(slot: u16) -> &'static str {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![String::new(); usize::from(SLOTS)];
        let mut missing = usize::from(SLOTS);
        let mut n: u64 = 0;
        while missing > 0 {
            let tag = format!("s{n}");
            let s = usize::from(crc16(tag.as_bytes()) % SLOTS);
            if tags[s].is_empty() {
                tags[s] = tag;
                missing -= 1;
            }
            n += 1;
        }
        tags
    });
    &tags[usize::from(slot % SLOTS)]
}

/// The key names of one namespace (several gyro deployments may share a
/// cluster under different namespaces).
#[derive(Clone, Debug)]
pub struct Keys {
    ns: String,
}

impl Keys {
    /// Keys under `namespace` (not empty, without `{` or `}`, which would
    /// change the hash tag).
    pub fn new(namespace: &str) -> Option<Keys> {
        if namespace.is_empty() || namespace.contains(['{', '}']) {
            return None;
        }
        Some(Keys {
            ns: namespace.to_string(),
        })
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// `<ns>:{acct:<id>}`: the account hash.
    pub fn account(&self, account: AccountId) -> String {
        format!("{}:{{acct:{}}}", self.ns, account.0)
    }

    /// `<ns>:{acct:<id>}:res`: the account's reservations.
    pub fn reservations(&self, account: AccountId) -> String {
        format!("{}:{{acct:{}}}:res", self.ns, account.0)
    }

    /// `<ns>:{acct:<id>}:deleted`: the tombstone of a deleted account (when
    /// it was deleted, Unix milliseconds), so that it is not created again
    /// from a node's configuration.
    pub fn tombstone(&self, account: AccountId) -> String {
        format!("{}:{{acct:{}}}:deleted", self.ns, account.0)
    }

    /// `<ns>:{acct:<id>}:req:<request>`: the remembered answer of a request.
    pub fn answer(&self, account: AccountId, request: &str) -> String {
        format!("{}:{{acct:{}}}:req:{request}", self.ns, account.0)
    }

    /// `<ns>:{sess:<session-id>}`: a session's record (JSON of
    /// [`super::SessionRecord`]), in the slot of its Session-Id, so that
    /// any node finds it from the Session-Id alone.
    pub fn session(&self, session: &str) -> String {
        format!("{}:{{sess:{session}}}", self.ns)
    }

    /// `<ns>:{sub:<kind>:<data>}`: the claim of a subscriber identity by
    /// an account created through the operator API (`kind` as
    /// [`SubscriptionType::name`] spells it; an E.164 number without its
    /// leading '+', as the directory compares them). Each identity has a
    /// slot of its own.
    pub fn subscriber(&self, kind: SubscriptionType, data: &str) -> String {
        let data = match kind {
            SubscriptionType::E164 => data.strip_prefix('+').unwrap_or(data),
            _ => data,
        };
        format!("{}:{{sub:{}:{data}}}", self.ns, kind.name())
    }

    /// `<ns>:{ids}:account`: the last account id given to an account
    /// created through the operator API (kept above every configured id).
    pub fn account_counter(&self) -> String {
        format!("{}:{{ids}}:account", self.ns)
    }

    /// The hash slot of an account (and of all its keys).
    pub fn account_slot(&self, account: AccountId) -> u16 {
        slot(self.account(account).as_bytes())
    }

    /// `<ns>:{<tag>}:exp`: the slot's sessions by reservation expiry.
    pub fn expiry(&self, slot: u16) -> String {
        format!("{}:{{{}}}:exp", self.ns, slot_tag(slot))
    }

    /// `<ns>:{<tag>}:cdr`: the slot's CDR stream.
    pub fn cdr_stream(&self, slot: u16) -> String {
        format!("{}:{{{}}}:cdr", self.ns, slot_tag(slot))
    }

    /// `<ns>:{<tag>}:seq`: the last CDR sequence number of the slot.
    pub fn cdr_sequence(&self, slot: u16) -> String {
        format!("{}:{{{}}}:seq", self.ns, slot_tag(slot))
    }

    /// `<ns>:{<tag>}:exporter`: the node exporting the slot's CDR stream
    /// (a lease).
    pub fn exporter(&self, slot: u16) -> String {
        format!("{}:{{{}}}:exporter", self.ns, slot_tag(slot))
    }

    /// `<ns>:{<tag>}:exported`: how far the slot's CDR stream is exported.
    pub fn exported(&self, slot: u16) -> String {
        format!("{}:{{{}}}:exported", self.ns, slot_tag(slot))
    }

    /// `<ns>:{<tag>}:exporting`: the range of the file being exported
    /// (`"<last seq> <last entry id>"`), pinned before the file is written
    /// so that a node taking the stream over writes the same file.
    pub fn exporting(&self, slot: u16) -> String {
        format!("{}:{{{}}}:exporting", self.ns, slot_tag(slot))
    }

    /// The six keys of a money step on `account`, in the order the ledger
    /// functions take them.
    pub fn step_keys(&self, account: AccountId, request: &str) -> [String; 6] {
        let slot = self.account_slot(account);
        [
            self.account(account),
            self.reservations(account),
            self.answer(account, request),
            self.expiry(slot),
            self.cdr_stream(slot),
            self.cdr_sequence(slot),
        ]
    }
}

/// The field of a reservation in the reservations hash:
/// `<session-id>|<rating-group>:<service-id>` (absent parts empty).
pub fn reservation_field(session: &str, key: RatingKey) -> String {
    use std::fmt::Write;
    let mut f = String::with_capacity(session.len() + 24);
    f.push_str(session);
    f.push('|');
    if let Some(rg) = key.rating_group {
        let _ = write!(f, "{rg}");
    }
    f.push(':');
    if let Some(sid) = key.service_id {
        let _ = write!(f, "{sid}");
    }
    f
}

/// The rating key of a reservation field's tail (`<rg>:<sid>`).
pub fn parse_rating_key(s: &str) -> Option<RatingKey> {
    let (rg, sid) = s.split_once(':')?;
    let num = |v: &str| -> Option<Option<u32>> {
        if v.is_empty() {
            Some(None)
        } else {
            v.parse().ok().map(Some)
        }
    };
    Some(RatingKey {
        rating_group: num(rg)?,
        service_id: num(sid)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // Values from the Redis Cluster specification and redis-cli
        // CLUSTER KEYSLOT.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
        assert_eq!(slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(slot(b"foo{{bar}}zap"), crc16(b"{bar") % SLOTS);
    }

    #[test]
    fn every_slot_has_a_tag_that_hashes_to_it() {
        for s in 0..SLOTS {
            assert_eq!(slot(format!("{{{}}}", slot_tag(s)).as_bytes()), s);
        }
    }

    #[test]
    fn an_accounts_step_keys_share_its_slot() {
        let keys = Keys::new("gyro").unwrap();
        for id in [0u64, 1, 42, 1 << 40] {
            let account = AccountId(id);
            let s = keys.account_slot(account);
            for k in keys.step_keys(account, "sess;1;0") {
                assert_eq!(slot(k.as_bytes()), s, "{k}");
            }
        }
        assert!(Keys::new("a{b").is_none());
        assert!(Keys::new("").is_none());
    }

    #[test]
    fn reservation_fields_round_trip_their_rating_key() {
        for key in [
            RatingKey::default(),
            RatingKey {
                rating_group: Some(10),
                service_id: None,
            },
            RatingKey {
                rating_group: Some(1),
                service_id: Some(7),
            },
        ] {
            let f = reservation_field("a|b;1", key);
            let tail = f.rsplit_once('|').unwrap().1;
            assert_eq!(parse_rating_key(tail), Some(key));
        }
    }
}
