//! The binary records of the journal: one per [`Effect`] and one per
//! [`Cdr`].
//!
//! Integers are LEB128 varints (`u32`, `u64`, timestamps in milliseconds),
//! signed amounts are zigzag varints, strings are a varint byte length and
//! UTF-8 bytes, an `Option` is a byte `0` (none) or `1` followed by the
//! value, a `bool` is a byte `0` or `1`, and a unit enum is one byte (the
//! codes below). Every record starts with one tag byte naming its kind.
//!
//! | tag | effect | fields, in order |
//! |---|---|---|
//! | 1 | `SessionOpened` | session, session_id, account, subscriber kind (byte), subscriber data, service_context, multiple_services, at, supervision_until |
//! | 2 | `SessionTouched` | session, request_number, at, supervision_until |
//! | 3 | `SessionClosed` | session |
//! | 4 | `Reserved` | account, session, key, unit, money, units, at |
//! | 5 | `BundleReserved` | account, session, key, unit, bundle, units, at |
//! | 6 | `Charged` | account, session?, key, from_reserved, from_balance |
//! | 7 | `BundleCharged` | account, session?, key, bundle, from_reserved, from_remaining |
//! | 8 | `Released` | account, session, key |
//! | 9 | `ToppedUp` | account, amount |
//! | 10 | `Refunded` | account, amount |
//! | 11 | `StatusChanged` | account, status (0 active, 1 blocked) |
//! | 12 | `AccountCreated` | account, subscriber count, (subscriber kind (byte), subscriber data) each, balance, credit_limit, status, bundle count, bundles |
//! | 13 | `AccountDeleted` | account |
//! | 14 | `CreditLimitChanged` | account, credit_limit |
//! | 15 | `ToppedUpWithKey` | account, amount, key |
//! | 16 | `PlanChanged` | account, plan? (string), currency? (code, exponent byte) |
//! | 17 | `SessionContextChanged` | session, called? (digits, a string), visited? (digits, a string) |
//! | 18 | `SessionOpened` over another interface than Gy | the fields of tag 1, then the interface (1 nchf) |
//!
//! A bundle is id, unit, rating group count, rating groups, service id
//! count, service ids, valid_from, valid_until, initial, remaining,
//! reserved, consumed.
//!
//! A rating key is `rating_group?` `service_id?`. Units: 0 octets,
//! 1 seconds, 2 events. A CDR record is tag 64 followed by every field of
//! [`Cdr`] in declaration order (record type: 0 usage, 1 session end,
//! 2 event; closing cause: 0 terminated, 1 supervision expired, 2 rejected;
//! requested action: its Diameter code). A CDR with a plan, rate,
//! destination, zone or tariff-change side is tag 65: the same fields, then
//! plan, rate, destination and zone (strings, empty when absent) and the
//! tariff-change side (0 none, 1 before, 2 after). A CDR charged over
//! another interface than Gy is tag 66: the fields of tag 65, then the
//! interface (one byte: 0 gy, 1 nchf). A CDR record after another one in
//! the same section may be tag 67 ([`TAG_CDR_SHARED`]): the interface byte
//! right after the tag, then the fields of tag 65, except that each of its
//! eight strings (node id, Session-Id, subscriber, service context, plan,
//! rate, destination, zone) is a varint `0` when it equals that string of
//! the record before it in the section, or its byte length plus one and
//! its bytes (the CDRs of one request share their session's strings, so
//! the second and later ones of a request are about half as long). Tag 67
//! came with journal records that share strings; sections are only ever
//! read from their first record on, and a section's first record is never
//! tag 67. Gy's records keep tags 1, 64 and 65
//! byte for byte; records of those tags read as charged over Gy. Tags 16
//! and 65 came with price plans, tag 17 with the sessions' rating context,
//! tags 18 and 66 with the interface; journals written before them read
//! unchanged.
//!
//! Decoding never panics: anything malformed is a [`DecodeError`] that
//! names what was wrong and where.

use std::sync::Arc;

use gyro_charging::accounts::{SharedSubscriptionId, SubscriptionId, SubscriptionType};
use gyro_charging::{
    AccountId, AccountStatus, Bundle, Cdr, CdrView, ClosingCause, Currency, Digits, Effect,
    Interface, RatingContext, RatingKey, RecordType, RequestedAction, SessionKey,
    TariffChangeUsage, Timestamp, UnitKind,
};

/// Tag byte of a CDR record.
pub const TAG_CDR: u8 = 64;
/// Tag byte of a CDR record with the plan and rate that priced it.
pub const TAG_CDR_RATED: u8 = 65;
/// Tag byte of a CDR record charged over another interface than Gy: the
/// fields of [`TAG_CDR_RATED`], then the interface.
pub const TAG_CDR_INTERFACE: u8 = 66;
/// Tag byte of a CDR record that refers to the strings of the CDR record
/// before it in its section instead of repeating them (see the module
/// documentation).
pub const TAG_CDR_SHARED: u8 = 67;
/// Tag byte of a `SessionOpened` record for a session opened over another
/// interface than Gy: the fields of tag 1, then the interface.
const TAG_SESSION_OPENED_INTERFACE: u8 = 18;

fn interface_code(i: Interface) -> u8 {
    match i {
        Interface::Gy => 0,
        Interface::Nchf => 1,
    }
}

/// Why bytes do not decode as a record. `at` is the offset in the buffer
/// being decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The buffer ends inside a value.
    #[error("record ends early at byte {at}")]
    UnexpectedEnd {
        /// Offset where more bytes were needed.
        at: usize,
    },
    /// A varint is longer than its type allows.
    #[error("varint too long at byte {at}")]
    VarintOverflow {
        /// Offset of the varint.
        at: usize,
    },
    /// A tag or enum byte has no meaning.
    #[error("unknown {what} {value} at byte {at}")]
    UnknownTag {
        /// What the byte encodes.
        what: &'static str,
        /// The byte.
        value: u64,
        /// Its offset.
        at: usize,
    },
    /// A string is not UTF-8.
    #[error("string is not UTF-8 at byte {at}")]
    InvalidUtf8 {
        /// Offset of the string.
        at: usize,
    },
    /// A value does not fit its field.
    #[error("{what} out of range at byte {at}")]
    OutOfRange {
        /// The field.
        what: &'static str,
        /// Its offset.
        at: usize,
    },
    /// A section holds a different number of records or bytes than its
    /// header says.
    #[error("{what}: header says {expected}, found {found}")]
    CountMismatch {
        /// The section.
        what: &'static str,
        /// What the header says.
        expected: u64,
        /// What was found.
        found: u64,
    },
}

/// Appends `v` as a LEB128 varint.
#[inline]
pub(crate) fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_u64(out, ((v << 1) ^ (v >> 63)) as u64);
}

#[inline]
fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

#[inline]
fn put_opt_u32(out: &mut Vec<u8>, v: Option<u32>) {
    match v {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            put_u64(out, v.into());
        }
    }
}

#[inline]
fn put_key(out: &mut Vec<u8>, k: &RatingKey) {
    put_opt_u32(out, k.rating_group);
    put_opt_u32(out, k.service_id);
}

fn unit_code(u: UnitKind) -> u8 {
    match u {
        UnitKind::Octets => 0,
        UnitKind::Seconds => 1,
        UnitKind::Events => 2,
    }
}

fn subscription_code(k: SubscriptionType) -> u8 {
    match k {
        SubscriptionType::E164 => 0,
        SubscriptionType::Imsi => 1,
        SubscriptionType::SipUri => 2,
        SubscriptionType::Nai => 3,
        SubscriptionType::Private => 4,
    }
}

/// Appends the binary record of `e` to `out`.
pub fn encode_effect(out: &mut Vec<u8>, e: &Effect) {
    match e {
        Effect::SessionOpened {
            session,
            session_id,
            account,
            subscriber,
            service_context,
            multiple_services,
            at,
            supervision_until,
            interface,
        } => {
            out.push(if interface.is_gy() {
                1
            } else {
                TAG_SESSION_OPENED_INTERFACE
            });
            put_u64(out, session.0);
            put_str(out, session_id);
            put_u64(out, account.0);
            out.push(subscription_code(subscriber.kind));
            put_str(out, &subscriber.data);
            put_str(out, service_context);
            out.push(u8::from(*multiple_services));
            put_u64(out, at.0);
            put_u64(out, supervision_until.0);
            if !interface.is_gy() {
                out.push(interface_code(*interface));
            }
        }
        Effect::SessionContextChanged { session, context } => {
            out.push(17);
            put_u64(out, session.0);
            for d in [context.called, context.visited] {
                match d {
                    None => out.push(0),
                    Some(d) => {
                        out.push(1);
                        put_str(out, d.as_str());
                    }
                }
            }
        }
        Effect::SessionTouched {
            session,
            request_number,
            at,
            supervision_until,
        } => {
            out.push(2);
            put_u64(out, session.0);
            put_u64(out, (*request_number).into());
            put_u64(out, at.0);
            put_u64(out, supervision_until.0);
        }
        Effect::SessionClosed { session } => {
            out.push(3);
            put_u64(out, session.0);
        }
        Effect::Reserved {
            account,
            session,
            key,
            unit,
            money,
            units,
            at,
        } => {
            out.push(4);
            put_u64(out, account.0);
            put_u64(out, session.0);
            put_key(out, key);
            out.push(unit_code(*unit));
            put_i64(out, *money);
            put_u64(out, *units);
            put_u64(out, at.0);
        }
        Effect::BundleReserved {
            account,
            session,
            key,
            unit,
            bundle,
            units,
            at,
        } => {
            out.push(5);
            put_u64(out, account.0);
            put_u64(out, session.0);
            put_key(out, key);
            out.push(unit_code(*unit));
            put_u64(out, (*bundle).into());
            put_u64(out, *units);
            put_u64(out, at.0);
        }
        Effect::Charged {
            account,
            session,
            key,
            from_reserved,
            from_balance,
        } => {
            out.push(6);
            put_u64(out, account.0);
            put_opt_session(out, *session);
            put_key(out, key);
            put_i64(out, *from_reserved);
            put_i64(out, *from_balance);
        }
        Effect::BundleCharged {
            account,
            session,
            key,
            bundle,
            from_reserved,
            from_remaining,
        } => {
            out.push(7);
            put_u64(out, account.0);
            put_opt_session(out, *session);
            put_key(out, key);
            put_u64(out, (*bundle).into());
            put_u64(out, *from_reserved);
            put_u64(out, *from_remaining);
        }
        Effect::Released {
            account,
            session,
            key,
        } => {
            out.push(8);
            put_u64(out, account.0);
            put_u64(out, session.0);
            put_key(out, key);
        }
        Effect::ToppedUp { account, amount } => {
            out.push(9);
            put_u64(out, account.0);
            put_i64(out, *amount);
        }
        Effect::Refunded { account, amount } => {
            out.push(10);
            put_u64(out, account.0);
            put_i64(out, *amount);
        }
        Effect::StatusChanged { account, status } => {
            out.push(11);
            put_u64(out, account.0);
            out.push(status_code(*status));
        }
        Effect::AccountCreated {
            account,
            subscribers,
            balance,
            credit_limit,
            status,
            bundles,
        } => {
            out.push(12);
            put_u64(out, account.0);
            put_u64(out, subscribers.len() as u64);
            for s in subscribers {
                out.push(subscription_code(s.kind));
                put_str(out, &s.data);
            }
            put_i64(out, *balance);
            put_i64(out, *credit_limit);
            out.push(status_code(*status));
            put_u64(out, bundles.len() as u64);
            for b in bundles {
                put_bundle(out, b);
            }
        }
        Effect::AccountDeleted { account } => {
            out.push(13);
            put_u64(out, account.0);
        }
        Effect::CreditLimitChanged {
            account,
            credit_limit,
        } => {
            out.push(14);
            put_u64(out, account.0);
            put_i64(out, *credit_limit);
        }
        Effect::ToppedUpWithKey {
            account,
            amount,
            key,
        } => {
            out.push(15);
            put_u64(out, account.0);
            put_i64(out, *amount);
            put_str(out, key);
        }
        Effect::PlanChanged {
            account,
            plan,
            currency,
        } => {
            out.push(16);
            put_u64(out, account.0);
            match plan {
                None => out.push(0),
                Some(p) => {
                    out.push(1);
                    put_str(out, p);
                }
            }
            match currency {
                None => out.push(0),
                Some(c) => {
                    out.push(1);
                    put_u64(out, c.code.into());
                    out.push(c.exponent);
                }
            }
        }
    }
}

fn status_code(s: AccountStatus) -> u8 {
    match s {
        AccountStatus::Active => 0,
        AccountStatus::Blocked => 1,
    }
}

fn put_bundle(out: &mut Vec<u8>, b: &Bundle) {
    put_u64(out, b.id.into());
    out.push(unit_code(b.unit));
    for list in [&b.rating_groups, &b.service_ids] {
        put_u64(out, list.len() as u64);
        for v in list {
            put_u64(out, (*v).into());
        }
    }
    for v in [
        b.valid_from.0,
        b.valid_until.0,
        b.initial,
        b.remaining,
        b.reserved,
        b.consumed,
    ] {
        put_u64(out, v);
    }
}

/// A string of a CDR record: as it is in a record that stands alone
/// (`before` is `None`); in a [`TAG_CDR_SHARED`] record `0` when the
/// record before has the same (`before`), else its length plus one and
/// its bytes.
#[inline(always)]
fn put_text(out: &mut Vec<u8>, s: &str, before: Option<&str>) {
    match before {
        None => put_str(out, s),
        Some(b) if b == s => out.push(0),
        Some(_) => {
            put_u64(out, s.len() as u64 + 1);
            out.extend_from_slice(s.as_bytes());
        }
    }
}

fn put_opt_session(out: &mut Vec<u8>, s: Option<SessionKey>) {
    match s {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            put_u64(out, s.0);
        }
    }
}

/// Appends the binary record of `c` to `out` (one that stands alone: tag
/// 64, 65 or 66).
pub fn encode_cdr(out: &mut Vec<u8>, c: &Cdr) {
    encode_cdr_after(out, c, None)
}

/// Appends the binary record of `c` to `out`, which follows the record of
/// `prev` in its section: then it is a [`TAG_CDR_SHARED`] record naming
/// the strings it shares with `prev` instead of repeating them. With no
/// `prev` (the first record of a section), as [`encode_cdr`].
pub fn encode_cdr_after(out: &mut Vec<u8>, c: &Cdr, prev: Option<&Cdr>) {
    // Destructured so that a new field fails to compile here.
    let Cdr {
        sequence,
        node_id,
        record_type,
        session_id,
        account,
        subscriber,
        service_context,
        interface,
        rating_group,
        service_id,
        request_number,
        requested_action,
        unit,
        time,
        input_octets,
        output_octets,
        total_octets,
        service_units,
        rated_units,
        bundle_units,
        amount,
        unbilled,
        balance_after,
        started,
        ended,
        result_code,
        closing_cause,
        termination_cause,
        reporting_reason,
        plan,
        rate,
        destination,
        zone,
        tariff_change,
    } = c;
    // Gy's records without rating labels keep the first layout (tag 64),
    // Gy's with labels the second (65); other interfaces' add theirs (66).
    let labelled = !plan.is_empty()
        || !rate.is_empty()
        || !destination.is_empty()
        || !zone.is_empty()
        || tariff_change.is_some()
        || !interface.is_gy();
    let shared = prev.is_some();
    if shared {
        out.push(TAG_CDR_SHARED);
        out.push(interface_code(*interface));
    } else {
        out.push(if !interface.is_gy() {
            TAG_CDR_INTERFACE
        } else if labelled {
            TAG_CDR_RATED
        } else {
            TAG_CDR
        });
    }
    let labelled = labelled || shared;
    put_u64(out, *sequence);
    put_text(out, node_id, prev.map(|p| p.node_id.as_str()));
    out.push(match record_type {
        RecordType::Usage => 0,
        RecordType::SessionEnd => 1,
        RecordType::Event => 2,
    });
    put_text(out, session_id, prev.map(|p| p.session_id.as_str()));
    put_u64(out, account.0);
    put_text(out, subscriber, prev.map(|p| p.subscriber.as_str()));
    put_text(
        out,
        service_context,
        prev.map(|p| p.service_context.as_str()),
    );
    put_opt_u32(out, *rating_group);
    put_opt_u32(out, *service_id);
    put_u64(out, (*request_number).into());
    put_opt_u32(out, requested_action.map(|a| a.code()));
    match unit {
        None => out.push(0),
        Some(u) => {
            out.push(1);
            out.push(unit_code(*u));
        }
    }
    for v in [
        *time,
        *input_octets,
        *output_octets,
        *total_octets,
        *service_units,
        *rated_units,
        *bundle_units,
    ] {
        put_u64(out, v);
    }
    put_i64(out, *amount);
    put_i64(out, *unbilled);
    put_i64(out, *balance_after);
    put_u64(out, started.0);
    put_u64(out, ended.0);
    put_u64(out, (*result_code).into());
    match closing_cause {
        None => out.push(0),
        Some(c) => {
            out.push(1);
            out.push(match c {
                ClosingCause::Terminated => 0,
                ClosingCause::SupervisionExpired => 1,
                ClosingCause::Rejected => 2,
            });
        }
    }
    put_opt_u32(out, *termination_cause);
    put_opt_u32(out, *reporting_reason);
    if labelled {
        put_text(out, plan, prev.map(|p| p.plan.as_str()));
        put_text(out, rate, prev.map(|p| p.rate.as_str()));
        put_text(out, destination, prev.map(|p| p.destination.as_str()));
        put_text(out, zone, prev.map(|p| p.zone.as_str()));
        out.push(match tariff_change {
            None => 0,
            Some(TariffChangeUsage::Before) => 1,
            Some(TariffChangeUsage::After) => 2,
        });
    }
    if !interface.is_gy() && !shared {
        out.push(interface_code(*interface));
    }
}

/// `b`, a string read at offset `at`, as text.
fn text(b: &[u8], at: usize) -> Result<&str, DecodeError> {
    if b.is_ascii() {
        // SAFETY: ASCII bytes are valid UTF-8. Nearly every string of a
        // journal (Session-Ids, identities, names) is ASCII, and the
        // word-at-a-time ASCII test costs a fraction of the general
        // validation on such short strings (the CDR writer decodes about
        // fifteen per CCR-Update).
        return Ok(unsafe { std::str::from_utf8_unchecked(b) });
    }
    std::str::from_utf8(b).map_err(|_| DecodeError::InvalidUtf8 { at })
}

/// The cache tag of service contexts (subscriber identities use their
/// Subscription-Id-Type's code, 0 to 4).
const CONTEXT: u8 = 255;
/// Slots of a [`StringCache`].
const CACHE_SLOTS: usize = 4096;
/// A [`StringCache`] slot: the string's tag and the string.
type CacheSlot = Option<(u8, Arc<str>)>;

/// Strings that many effects repeat (service contexts, subscriber
/// identities), kept so that decoding them again shares one allocation: a
/// decoder that follows the journal (the compactor) then allocates only
/// each session's own Session-Id. A fixed table indexed by the string's
/// hash, a newer string replacing an older one in its slot: bounded
/// whatever the number of subscribers.
pub(crate) struct StringCache {
    slots: Box<[CacheSlot]>,
    hasher: foldhash::fast::FixedState,
}

impl Default for StringCache {
    fn default() -> Self {
        StringCache {
            slots: vec![None; CACHE_SLOTS].into_boxed_slice(),
            hasher: foldhash::fast::FixedState::default(),
        }
    }
}

impl StringCache {
    /// `s` (kind `tag`) as a shared string: the cached one if it holds the
    /// same text, else a new one, cached.
    fn share(&mut self, tag: u8, s: &str) -> Arc<str> {
        use std::hash::BuildHasher;
        let i = self.hasher.hash_one((tag, s)) as usize % CACHE_SLOTS;
        match &mut self.slots[i] {
            Some((t, a)) if *t == tag && **a == *s => a.clone(),
            slot => {
                let a: Arc<str> = s.into();
                *slot = Some((tag, a.clone()));
                a
            }
        }
    }
}

/// Reads records from a buffer.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    /// Offset of the next byte.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or(DecodeError::UnexpectedEnd { at: self.pos })?;
        self.pos += 1;
        Ok(b)
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let at = self.pos;
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::VarintOverflow { at });
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::VarintOverflow { at })
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let at = self.pos;
        u32::try_from(self.u64()?).map_err(|_| DecodeError::OutOfRange { what, at })
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        let v = self.u64()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn bool(&mut self) -> Result<bool, DecodeError> {
        let at = self.pos;
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(DecodeError::UnknownTag {
                what: "bool",
                value: b.into(),
                at,
            }),
        }
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u64()?;
        self.take(n)
    }

    /// The next `n` bytes.
    fn take(&mut self, n: u64) -> Result<&'a [u8], DecodeError> {
        let at = self.pos;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| at.checked_add(n))
            .filter(|&e| e <= self.buf.len())
            .ok_or(DecodeError::UnexpectedEnd { at })?;
        self.pos = end;
        Ok(&self.buf[at..end])
    }

    fn str(&mut self) -> Result<&'a str, DecodeError> {
        let at = self.pos;
        let b = self.bytes()?;
        text(b, at)
    }

    fn opt_u32(&mut self, what: &'static str) -> Result<Option<u32>, DecodeError> {
        Ok(if self.bool()? {
            Some(self.u32(what)?)
        } else {
            None
        })
    }

    fn opt_digits(&mut self) -> Result<Option<Digits>, DecodeError> {
        if !self.bool()? {
            return Ok(None);
        }
        let at = self.pos;
        let s = self.str()?;
        Digits::new(s.as_bytes())
            .map(Some)
            .ok_or(DecodeError::OutOfRange {
                what: "rating context digits",
                at,
            })
    }

    fn key(&mut self) -> Result<RatingKey, DecodeError> {
        Ok(RatingKey {
            rating_group: self.opt_u32("rating group")?,
            service_id: self.opt_u32("service id")?,
        })
    }

    fn unit(&mut self) -> Result<UnitKind, DecodeError> {
        let at = self.pos;
        match self.byte()? {
            0 => Ok(UnitKind::Octets),
            1 => Ok(UnitKind::Seconds),
            2 => Ok(UnitKind::Events),
            b => Err(DecodeError::UnknownTag {
                what: "unit",
                value: b.into(),
                at,
            }),
        }
    }

    fn ts(&mut self) -> Result<Timestamp, DecodeError> {
        Ok(Timestamp(self.u64()?))
    }

    fn session(&mut self) -> Result<SessionKey, DecodeError> {
        Ok(SessionKey(self.u64()?))
    }

    fn account(&mut self) -> Result<AccountId, DecodeError> {
        Ok(AccountId(self.u64()?))
    }

    fn opt_session(&mut self) -> Result<Option<SessionKey>, DecodeError> {
        Ok(if self.bool()? {
            Some(self.session()?)
        } else {
            None
        })
    }

    fn status(&mut self) -> Result<AccountStatus, DecodeError> {
        let at = self.pos;
        match self.byte()? {
            0 => Ok(AccountStatus::Active),
            1 => Ok(AccountStatus::Blocked),
            b => Err(DecodeError::UnknownTag {
                what: "account status",
                value: b.into(),
                at,
            }),
        }
    }

    fn subscription_type(&mut self) -> Result<SubscriptionType, DecodeError> {
        let at = self.pos;
        let b = self.byte()?;
        SubscriptionType::from_code(b.into()).ok_or(DecodeError::UnknownTag {
            what: "subscription type",
            value: b.into(),
            at,
        })
    }

    /// A count of items that take at least `min_bytes` each: never more
    /// than the bytes left could hold, so a corrupt count cannot make a
    /// huge allocation.
    fn count(&mut self, what: &'static str, min_bytes: usize) -> Result<usize, DecodeError> {
        let at = self.pos;
        let n = self.u64()?;
        let left = (self.buf.len() - self.pos) / min_bytes.max(1);
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= left)
            .ok_or(DecodeError::OutOfRange { what, at })
    }

    fn u32_list(&mut self, what: &'static str) -> Result<Vec<u32>, DecodeError> {
        let n = self.count(what, 1)?;
        (0..n).map(|_| self.u32(what)).collect()
    }

    fn bundle(&mut self) -> Result<Bundle, DecodeError> {
        Ok(Bundle {
            id: self.u32("bundle")?,
            unit: self.unit()?,
            rating_groups: self.u32_list("rating group")?,
            service_ids: self.u32_list("service id")?,
            valid_from: self.ts()?,
            valid_until: self.ts()?,
            initial: self.u64()?,
            remaining: self.u64()?,
            reserved: self.u64()?,
            consumed: self.u64()?,
        })
    }

    /// Decodes the next effect record.
    pub fn effect(&mut self) -> Result<Effect, DecodeError> {
        self.effect_sharing(None)
    }

    /// A string, shared through `cache` (under `tag`) when there is one.
    fn cached_str(
        &mut self,
        cache: Option<&mut StringCache>,
        tag: u8,
    ) -> Result<Arc<str>, DecodeError> {
        let s = self.str()?;
        Ok(match cache {
            Some(c) => c.share(tag, s),
            None => s.into(),
        })
    }

    /// [`Decoder::effect`]; with a `cache`, repeated strings (service
    /// contexts, subscriber identities) are taken from it instead of
    /// allocated again.
    pub(crate) fn effect_sharing(
        &mut self,
        mut cache: Option<&mut StringCache>,
    ) -> Result<Effect, DecodeError> {
        let at = self.pos;
        let tag = self.byte()?;
        Ok(match tag {
            1 | TAG_SESSION_OPENED_INTERFACE => Effect::SessionOpened {
                session: self.session()?,
                session_id: self.str()?.into(),
                account: self.account()?,
                subscriber: {
                    let at = self.pos;
                    let kind = match self.byte()? {
                        0 => SubscriptionType::E164,
                        1 => SubscriptionType::Imsi,
                        2 => SubscriptionType::SipUri,
                        3 => SubscriptionType::Nai,
                        4 => SubscriptionType::Private,
                        b => {
                            return Err(DecodeError::UnknownTag {
                                what: "subscription type",
                                value: b.into(),
                                at,
                            })
                        }
                    };
                    SharedSubscriptionId {
                        kind,
                        data: self.cached_str(cache.as_deref_mut(), kind as u8)?,
                    }
                },
                service_context: self.cached_str(cache, CONTEXT)?,
                multiple_services: self.bool()?,
                at: self.ts()?,
                supervision_until: self.ts()?,
                interface: if tag == 1 {
                    Interface::Gy
                } else {
                    self.interface()?
                },
            },
            2 => Effect::SessionTouched {
                session: self.session()?,
                request_number: self.u32("request number")?,
                at: self.ts()?,
                supervision_until: self.ts()?,
            },
            3 => Effect::SessionClosed {
                session: self.session()?,
            },
            4 => Effect::Reserved {
                account: self.account()?,
                session: self.session()?,
                key: self.key()?,
                unit: self.unit()?,
                money: self.i64()?,
                units: self.u64()?,
                at: self.ts()?,
            },
            5 => Effect::BundleReserved {
                account: self.account()?,
                session: self.session()?,
                key: self.key()?,
                unit: self.unit()?,
                bundle: self.u32("bundle")?,
                units: self.u64()?,
                at: self.ts()?,
            },
            6 => Effect::Charged {
                account: self.account()?,
                session: self.opt_session()?,
                key: self.key()?,
                from_reserved: self.i64()?,
                from_balance: self.i64()?,
            },
            7 => Effect::BundleCharged {
                account: self.account()?,
                session: self.opt_session()?,
                key: self.key()?,
                bundle: self.u32("bundle")?,
                from_reserved: self.u64()?,
                from_remaining: self.u64()?,
            },
            8 => Effect::Released {
                account: self.account()?,
                session: self.session()?,
                key: self.key()?,
            },
            9 => Effect::ToppedUp {
                account: self.account()?,
                amount: self.i64()?,
            },
            10 => Effect::Refunded {
                account: self.account()?,
                amount: self.i64()?,
            },
            11 => Effect::StatusChanged {
                account: self.account()?,
                status: self.status()?,
            },
            12 => {
                let account = self.account()?;
                let n = self.count("subscriber count", 2)?;
                let mut subscribers = Vec::with_capacity(n);
                for _ in 0..n {
                    let kind = self.subscription_type()?;
                    subscribers.push(SubscriptionId::new(kind, self.str()?));
                }
                let (balance, credit_limit, status) = (self.i64()?, self.i64()?, self.status()?);
                let n = self.count("bundle count", 10)?;
                let mut bundles = Vec::with_capacity(n);
                for _ in 0..n {
                    bundles.push(self.bundle()?);
                }
                Effect::AccountCreated {
                    account,
                    subscribers,
                    balance,
                    credit_limit,
                    status,
                    bundles,
                }
            }
            13 => Effect::AccountDeleted {
                account: self.account()?,
            },
            14 => Effect::CreditLimitChanged {
                account: self.account()?,
                credit_limit: self.i64()?,
            },
            15 => Effect::ToppedUpWithKey {
                account: self.account()?,
                amount: self.i64()?,
                key: self.str()?.into(),
            },
            16 => Effect::PlanChanged {
                account: self.account()?,
                plan: if self.bool()? {
                    Some(self.str()?.into())
                } else {
                    None
                },
                currency: if self.bool()? {
                    Some(Currency {
                        code: self.u32("currency code")?,
                        exponent: self.byte()?,
                    })
                } else {
                    None
                },
            },
            17 => Effect::SessionContextChanged {
                session: self.session()?,
                context: RatingContext {
                    called: self.opt_digits()?,
                    visited: self.opt_digits()?,
                },
            },
            t => {
                return Err(DecodeError::UnknownTag {
                    what: "effect tag",
                    value: t.into(),
                    at,
                })
            }
        })
    }

    /// Decodes the next CDR record into `c`, reusing its strings.
    pub fn cdr_into(&mut self, c: &mut Cdr) -> Result<(), DecodeError> {
        let v = self.cdr_view()?;
        c.set_from(&v);
        Ok(())
    }

    /// Decodes the next CDR record, borrowing its text from the buffer (a
    /// record that stands alone: a [`TAG_CDR_SHARED`] record is an error
    /// here; see [`Decoder::cdr_view_after`]).
    pub fn cdr_view(&mut self) -> Result<CdrView<'a>, DecodeError> {
        self.cdr_view_after(None)
    }

    /// A string of a [`TAG_CDR_SHARED`] record: `prev`'s when the record
    /// says it is the same.
    fn shared_str(&mut self, prev: Option<&'a str>) -> Result<&'a str, DecodeError> {
        let Some(prev) = prev else {
            return self.str();
        };
        let at = self.pos;
        match self.u64()? {
            0 => Ok(prev),
            n => {
                let b = self.take(n - 1)?;
                text(b, at)
            }
        }
    }

    /// Decodes the next CDR record, which follows the record of `prev` in
    /// its section (`None`: the first of its section), borrowing its text
    /// from the buffer or from `prev`.
    pub fn cdr_view_after(
        &mut self,
        prev: Option<&CdrView<'a>>,
    ) -> Result<CdrView<'a>, DecodeError> {
        let mut c = CdrView::default();
        let at = self.pos;
        let tag = self.byte()?;
        if tag != TAG_CDR
            && tag != TAG_CDR_RATED
            && tag != TAG_CDR_INTERFACE
            && tag != TAG_CDR_SHARED
        {
            return Err(DecodeError::UnknownTag {
                what: "CDR tag",
                value: tag.into(),
                at,
            });
        }
        let prev = match (tag == TAG_CDR_SHARED, prev) {
            (false, _) => None,
            (true, Some(p)) => Some(p),
            (true, None) => {
                return Err(DecodeError::OutOfRange {
                    what: "CDR record sharing the strings of a record before it (it is the first)",
                    at,
                })
            }
        };
        if prev.is_some() {
            c.interface = self.interface()?;
        }
        c.sequence = self.u64()?;
        c.node_id = self.shared_str(prev.map(|p| p.node_id))?;
        let at = self.pos;
        c.record_type = match self.byte()? {
            0 => RecordType::Usage,
            1 => RecordType::SessionEnd,
            2 => RecordType::Event,
            b => {
                return Err(DecodeError::UnknownTag {
                    what: "record type",
                    value: b.into(),
                    at,
                })
            }
        };
        c.session_id = self.shared_str(prev.map(|p| p.session_id))?;
        c.account = self.account()?;
        c.subscriber = self.shared_str(prev.map(|p| p.subscriber))?;
        c.service_context = self.shared_str(prev.map(|p| p.service_context))?;
        c.rating_group = self.opt_u32("rating group")?;
        c.service_id = self.opt_u32("service id")?;
        c.request_number = self.u32("request number")?;
        let at = self.pos;
        c.requested_action = match self.opt_u32("requested action")? {
            None => None,
            Some(code) => Some(RequestedAction::from_code(code).ok_or(
                DecodeError::UnknownTag {
                    what: "requested action",
                    value: code.into(),
                    at,
                },
            )?),
        };
        c.unit = if self.bool()? {
            Some(self.unit()?)
        } else {
            None
        };
        c.time = self.u64()?;
        c.input_octets = self.u64()?;
        c.output_octets = self.u64()?;
        c.total_octets = self.u64()?;
        c.service_units = self.u64()?;
        c.rated_units = self.u64()?;
        c.bundle_units = self.u64()?;
        c.amount = self.i64()?;
        c.unbilled = self.i64()?;
        c.balance_after = self.i64()?;
        c.started = self.ts()?;
        c.ended = self.ts()?;
        c.result_code = self.u32("result code")?;
        c.closing_cause = if self.bool()? {
            let at = self.pos;
            Some(match self.byte()? {
                0 => ClosingCause::Terminated,
                1 => ClosingCause::SupervisionExpired,
                2 => ClosingCause::Rejected,
                b => {
                    return Err(DecodeError::UnknownTag {
                        what: "closing cause",
                        value: b.into(),
                        at,
                    })
                }
            })
        } else {
            None
        };
        c.termination_cause = self.opt_u32("termination cause")?;
        c.reporting_reason = self.opt_u32("reporting reason")?;
        if tag != TAG_CDR {
            c.plan = self.shared_str(prev.map(|p| p.plan))?;
            c.rate = self.shared_str(prev.map(|p| p.rate))?;
            c.destination = self.shared_str(prev.map(|p| p.destination))?;
            c.zone = self.shared_str(prev.map(|p| p.zone))?;
            let at = self.pos;
            c.tariff_change = match self.byte()? {
                0 => None,
                1 => Some(TariffChangeUsage::Before),
                2 => Some(TariffChangeUsage::After),
                b => {
                    return Err(DecodeError::UnknownTag {
                        what: "tariff change usage",
                        value: b.into(),
                        at,
                    })
                }
            };
        }
        if tag == TAG_CDR_INTERFACE {
            c.interface = self.interface()?;
        } else if tag != TAG_CDR_SHARED {
            c.interface = Interface::Gy;
        }
        Ok(c)
    }

    fn interface(&mut self) -> Result<Interface, DecodeError> {
        let at = self.pos;
        match self.byte()? {
            0 => Ok(Interface::Gy),
            1 => Ok(Interface::Nchf),
            b => Err(DecodeError::UnknownTag {
                what: "interface",
                value: b.into(),
                at,
            }),
        }
    }

    /// Decodes the next CDR record.
    pub fn cdr(&mut self) -> Result<Cdr, DecodeError> {
        let mut c = Cdr::default();
        self.cdr_into(&mut c)?;
        Ok(c)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> impl Strategy<Value = RatingKey> {
        (any::<Option<u32>>(), any::<Option<u32>>()).prop_map(|(r, s)| RatingKey {
            rating_group: r,
            service_id: s,
        })
    }

    fn unit() -> impl Strategy<Value = UnitKind> {
        prop_oneof![
            Just(UnitKind::Octets),
            Just(UnitKind::Seconds),
            Just(UnitKind::Events)
        ]
    }

    fn interface() -> impl Strategy<Value = Interface> {
        prop_oneof![Just(Interface::Gy), Just(Interface::Nchf)]
    }

    fn ts() -> impl Strategy<Value = Timestamp> {
        any::<u64>().prop_map(Timestamp)
    }

    fn effect() -> impl Strategy<Value = Effect> {
        let sub = (0u32..5, ".{0,20}").prop_map(|(k, d)| {
            SharedSubscriptionId::new(SubscriptionType::from_code(k).unwrap_or_default(), d)
        });
        prop_oneof![
            (
                any::<u64>(),
                ".{0,40}",
                any::<u64>(),
                sub,
                ".{0,20}",
                any::<bool>(),
                ts(),
                ts(),
                interface(),
            )
                .prop_map(|(s, id, a, sub, ctx, m, at, until, interface)| {
                    Effect::SessionOpened {
                        session: SessionKey(s),
                        session_id: id.into(),
                        account: AccountId(a),
                        subscriber: sub,
                        service_context: ctx.into(),
                        multiple_services: m,
                        at,
                        supervision_until: until,
                        interface,
                    }
                }),
            (any::<u64>(), any::<u32>(), ts(), ts()).prop_map(|(s, n, at, u)| {
                Effect::SessionTouched {
                    session: SessionKey(s),
                    request_number: n,
                    at,
                    supervision_until: u,
                }
            }),
            any::<u64>().prop_map(|s| Effect::SessionClosed {
                session: SessionKey(s)
            }),
            (
                any::<u64>(),
                proptest::option::of("[0-9]{0,16}"),
                proptest::option::of("[0-9]{0,16}")
            )
                .prop_map(|(s, called, visited)| Effect::SessionContextChanged {
                    session: SessionKey(s),
                    context: RatingContext {
                        called: called.map(|d| Digits::new(d.as_bytes()).expect("digits")),
                        visited: visited.map(|d| Digits::new(d.as_bytes()).expect("digits")),
                    },
                }),
            (
                any::<u64>(),
                any::<u64>(),
                key(),
                unit(),
                any::<i64>(),
                any::<u64>(),
                ts()
            )
                .prop_map(|(a, s, key, unit, money, units, at)| Effect::Reserved {
                    account: AccountId(a),
                    session: SessionKey(s),
                    key,
                    unit,
                    money,
                    units,
                    at
                }),
            (
                any::<u64>(),
                any::<u64>(),
                key(),
                unit(),
                any::<u32>(),
                any::<u64>(),
                ts()
            )
                .prop_map(|(a, s, key, unit, bundle, units, at)| {
                    Effect::BundleReserved {
                        account: AccountId(a),
                        session: SessionKey(s),
                        key,
                        unit,
                        bundle,
                        units,
                        at,
                    }
                }),
            (
                any::<u64>(),
                any::<Option<u64>>(),
                key(),
                any::<i64>(),
                any::<i64>()
            )
                .prop_map(|(a, s, key, r, b)| Effect::Charged {
                    account: AccountId(a),
                    session: s.map(SessionKey),
                    key,
                    from_reserved: r,
                    from_balance: b
                }),
            (
                any::<u64>(),
                any::<Option<u64>>(),
                key(),
                any::<u32>(),
                any::<u64>(),
                any::<u64>()
            )
                .prop_map(|(a, s, key, bundle, r, rem)| Effect::BundleCharged {
                    account: AccountId(a),
                    session: s.map(SessionKey),
                    key,
                    bundle,
                    from_reserved: r,
                    from_remaining: rem
                }),
            (any::<u64>(), any::<u64>(), key()).prop_map(|(a, s, key)| Effect::Released {
                account: AccountId(a),
                session: SessionKey(s),
                key
            }),
            (any::<u64>(), any::<i64>()).prop_map(|(a, amount)| Effect::ToppedUp {
                account: AccountId(a),
                amount
            }),
            (any::<u64>(), any::<i64>()).prop_map(|(a, amount)| Effect::Refunded {
                account: AccountId(a),
                amount
            }),
            (any::<u64>(), any::<bool>()).prop_map(|(a, b)| Effect::StatusChanged {
                account: AccountId(a),
                status: status(b)
            }),
            (
                any::<u64>(),
                proptest::collection::vec((0u32..5, ".{0,20}"), 0..4),
                any::<(i64, i64, bool)>(),
                proptest::collection::vec(bundle(), 0..3)
            )
                .prop_map(|(a, subs, (balance, limit, b), bundles)| {
                    Effect::AccountCreated {
                        account: AccountId(a),
                        subscribers: subs
                            .into_iter()
                            .map(|(k, d)| {
                                SubscriptionId::new(
                                    SubscriptionType::from_code(k).unwrap_or_default(),
                                    d,
                                )
                            })
                            .collect(),
                        balance,
                        credit_limit: limit,
                        status: status(b),
                        bundles,
                    }
                }),
            any::<u64>().prop_map(|a| Effect::AccountDeleted {
                account: AccountId(a)
            }),
            (any::<u64>(), any::<i64>()).prop_map(|(a, l)| Effect::CreditLimitChanged {
                account: AccountId(a),
                credit_limit: l
            }),
            (any::<u64>(), any::<i64>(), ".{0,40}").prop_map(|(a, amount, key)| {
                Effect::ToppedUpWithKey {
                    account: AccountId(a),
                    amount,
                    key: key.into(),
                }
            }),
            (
                any::<u64>(),
                proptest::option::of(".{0,20}"),
                any::<Option<(u32, u8)>>()
            )
                .prop_map(|(a, plan, currency)| Effect::PlanChanged {
                    account: AccountId(a),
                    plan: plan.map(Into::into),
                    currency: currency.map(|(code, exponent)| Currency { code, exponent }),
                }),
        ]
    }

    fn status(blocked: bool) -> AccountStatus {
        if blocked {
            AccountStatus::Blocked
        } else {
            AccountStatus::Active
        }
    }

    fn bundle() -> impl Strategy<Value = Bundle> {
        (
            any::<u32>(),
            unit(),
            proptest::collection::vec(any::<u32>(), 0..3),
            proptest::collection::vec(any::<u32>(), 0..3),
            ts(),
            ts(),
            any::<[u64; 4]>(),
        )
            .prop_map(
                |(id, unit, rating_groups, service_ids, from, until, n)| Bundle {
                    id,
                    unit,
                    rating_groups,
                    service_ids,
                    valid_from: from,
                    valid_until: until,
                    initial: n[0],
                    remaining: n[1],
                    reserved: n[2],
                    consumed: n[3],
                },
            )
    }

    /// Any CDR, its text any Unicode.
    pub(crate) fn cdr() -> impl Strategy<Value = Cdr> {
        let strings = (".{0,12}", ".{0,40}", ".{0,20}", ".{0,20}");
        let opts = (
            any::<Option<u32>>(),
            any::<Option<u32>>(),
            proptest::option::of(0u32..4),
            proptest::option::of(unit()),
            proptest::option::of(0u8..3),
            any::<Option<u32>>(),
            any::<Option<u32>>(),
        );
        let nums = (
            any::<[u64; 7]>(),
            any::<[i64; 3]>(),
            any::<(u64, u64, u64, u32, u32)>(),
            0u8..3,
        );
        let label = || proptest::prop_oneof![Just(String::new()), ".{1,16}"];
        let rating = (label(), label(), label(), label(), 0u8..3, interface());
        (strings, opts, nums, rating).prop_map(|(s, o, n, r)| Cdr {
            sequence: n.2 .0,
            node_id: s.0,
            record_type: [RecordType::Usage, RecordType::SessionEnd, RecordType::Event]
                [n.3 as usize],
            session_id: s.1,
            account: AccountId(n.2 .1),
            subscriber: s.2,
            service_context: s.3,
            interface: r.5,
            rating_group: o.0,
            service_id: o.1,
            request_number: n.2 .3,
            requested_action: o.2.and_then(RequestedAction::from_code),
            unit: o.3,
            time: n.0[0],
            input_octets: n.0[1],
            output_octets: n.0[2],
            total_octets: n.0[3],
            service_units: n.0[4],
            rated_units: n.0[5],
            bundle_units: n.0[6],
            amount: n.1[0],
            unbilled: n.1[1],
            balance_after: n.1[2],
            started: Timestamp(n.2 .2),
            ended: Timestamp(n.2 .0 ^ n.2 .2),
            result_code: n.2 .4,
            closing_cause: o.4.map(|c| {
                [
                    ClosingCause::Terminated,
                    ClosingCause::SupervisionExpired,
                    ClosingCause::Rejected,
                ][c as usize]
            }),
            termination_cause: o.5,
            reporting_reason: o.6,
            plan: r.0,
            rate: r.1,
            destination: r.2,
            zone: r.3,
            tariff_change: [
                None,
                Some(TariffChangeUsage::Before),
                Some(TariffChangeUsage::After),
            ][r.4 as usize],
        })
    }

    /// Any CDR whose text JSON writes as it is (printable ASCII without
    /// quote or backslash), now and then with one other character.
    pub(crate) fn plain_cdr() -> impl Strategy<Value = Cdr> {
        (cdr(), any::<bool>()).prop_map(|(c, keep_one)| {
            let mut kept = !keep_one;
            let mut plain = |s: &String| -> String {
                s.chars()
                    .filter(|&ch| {
                        let ok = (' '..='~').contains(&ch) && ch != '"' && ch != '\\';
                        ok || !std::mem::replace(&mut kept, true)
                    })
                    .collect()
            };
            let mut p = c.map_text(&mut plain);
            p.sequence = c.sequence;
            p
        })
    }

    #[test]
    fn a_string_cache_shares_repeated_contexts_and_subscribers() {
        let opened = |key: u64, sid: &str| Effect::SessionOpened {
            session: SessionKey(key),
            session_id: sid.into(),
            account: AccountId(7),
            subscriber: SharedSubscriptionId::new(SubscriptionType::E164, "491700000001"),
            service_context: "32251@3gpp.org".into(),
            multiple_services: true,
            at: Timestamp(1),
            supervision_until: Timestamp(2),
            interface: Interface::Gy,
        };
        let mut buf = Vec::new();
        encode_effect(&mut buf, &opened(1, "a;1"));
        encode_effect(&mut buf, &opened(2, "a;2"));
        let mut cache = StringCache::default();
        let mut d = Decoder::new(&buf);
        let (first, second) = (
            d.effect_sharing(Some(&mut cache)).unwrap(),
            d.effect_sharing(Some(&mut cache)).unwrap(),
        );
        let (
            Effect::SessionOpened {
                session_id: s1,
                subscriber: sub1,
                service_context: c1,
                ..
            },
            Effect::SessionOpened {
                session_id: s2,
                subscriber: sub2,
                service_context: c2,
                ..
            },
        ) = (&first, &second)
        else {
            panic!("two openings");
        };
        assert!(Arc::ptr_eq(c1, c2), "one service context");
        assert!(Arc::ptr_eq(&sub1.data, &sub2.data), "one subscriber");
        assert!(!Arc::ptr_eq(s1, s2));
        assert_eq!(first, opened(1, "a;1"));
        assert_eq!(second, opened(2, "a;2"));
    }

    proptest! {
        #[test]
        fn every_effect_kind_round_trips(effects in proptest::collection::vec(effect(), 1..20)) {
            let mut buf = Vec::new();
            for e in &effects {
                encode_effect(&mut buf, e);
            }
            let mut d = Decoder::new(&buf);
            for e in &effects {
                prop_assert_eq!(&d.effect().unwrap(), e);
            }
            prop_assert!(d.is_empty());
            // And through a string cache, twice over (the second time
            // every repeated string comes from the cache).
            let mut cache = StringCache::default();
            for _ in 0..2 {
                let mut d = Decoder::new(&buf);
                for e in &effects {
                    prop_assert_eq!(&d.effect_sharing(Some(&mut cache)).unwrap(), e);
                }
                prop_assert!(d.is_empty());
            }
        }

        #[test]
        fn every_cdr_round_trips(cdrs in proptest::collection::vec(cdr(), 1..8)) {
            let mut buf = Vec::new();
            for c in &cdrs {
                encode_cdr(&mut buf, c);
            }
            let mut d = Decoder::new(&buf);
            let mut back = Cdr::default();
            for c in &cdrs {
                d.cdr_into(&mut back).unwrap();
                prop_assert_eq!(&back, c);
            }
            prop_assert!(d.is_empty());
        }

        #[test]
        fn truncated_records_are_errors_not_panics(e in effect(), c in cdr()) {
            let mut buf = Vec::new();
            encode_effect(&mut buf, &e);
            for n in 0..buf.len() {
                prop_assert!(Decoder::new(&buf[..n]).effect().is_err());
            }
            buf.clear();
            encode_cdr(&mut buf, &c);
            for n in 0..buf.len() {
                prop_assert!(Decoder::new(&buf[..n]).cdr().is_err());
            }
        }
    }

    #[test]
    fn unknown_tags_name_the_offset() {
        assert_eq!(
            Decoder::new(&[200]).effect(),
            Err(DecodeError::UnknownTag {
                what: "effect tag",
                value: 200,
                at: 0
            })
        );
        assert_eq!(
            Decoder::new(&[3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).effect(),
            Err(DecodeError::VarintOverflow { at: 1 })
        );
    }

    #[test]
    fn a_session_context_is_digits_or_a_decode_error() {
        let e = Effect::SessionContextChanged {
            session: SessionKey(7),
            context: RatingContext {
                called: Digits::new(b"46900123456"),
                visited: None,
            },
        };
        let mut out = Vec::new();
        encode_effect(&mut out, &e);
        assert_eq!(out[..4], [17, 7, 1, 11]);
        assert_eq!(Decoder::new(&out).effect(), Ok(e));
        // Not digits: refused where the string starts.
        let bad = [17, 7, 1, 3, b'4', b'x', b'6', 0];
        assert_eq!(
            Decoder::new(&bad).effect(),
            Err(DecodeError::OutOfRange {
                what: "rating context digits",
                at: 3
            })
        );
    }

    /// A plain Gy CDR (no rating labels) and its tag-64 bytes.
    fn gy_cdr() -> (Cdr, Vec<u8>) {
        let c = Cdr {
            sequence: 9,
            node_id: "n".into(),
            session_id: "s;1".into(),
            account: AccountId(3),
            subscriber: "e164:4670".into(),
            service_context: "32251@3gpp.org".into(),
            rating_group: Some(10),
            amount: 5,
            ..Cdr::default()
        };
        let mut bytes = Vec::new();
        encode_cdr(&mut bytes, &c);
        (c, bytes)
    }

    #[test]
    fn gy_records_keep_their_tags_and_nchf_records_say_nchf() {
        let (gy, bytes) = gy_cdr();
        assert_eq!(bytes[0], TAG_CDR, "Gy's unlabelled CDR keeps tag 64");
        let back = Decoder::new(&bytes).cdr().unwrap();
        assert_eq!(back.interface, Interface::Gy);
        assert_eq!(back, gy);
        let mut rated = gy.clone();
        rated.plan = "smart".into();
        let mut b = Vec::new();
        encode_cdr(&mut b, &rated);
        assert_eq!(b[0], TAG_CDR_RATED, "Gy's labelled CDR keeps tag 65");
        assert_eq!(Decoder::new(&b).cdr().unwrap(), rated);

        // Over Nchf: tag 66, tag 65's fields, then one byte for the
        // interface.
        let mut nchf = gy.clone();
        nchf.interface = Interface::Nchf;
        let mut b = Vec::new();
        encode_cdr(&mut b, &nchf);
        assert_eq!(b[0], TAG_CDR_INTERFACE);
        assert_eq!(&b[1..bytes.len()], &bytes[1..]);
        // Four empty labels, no tariff change, nchf.
        assert_eq!(&b[bytes.len()..], &[0, 0, 0, 0, 0, 1]);
        let mut reused = rated.clone();
        Decoder::new(&b).cdr_into(&mut reused).unwrap();
        assert_eq!(reused, nchf, "labels cleared, interface read");
        // A Gy record decoded into a slot that held an Nchf one says gy.
        Decoder::new(&bytes).cdr_into(&mut reused).unwrap();
        assert_eq!(reused.interface, Interface::Gy);

        // An interface byte gyro never wrote is an error at its offset.
        let at = b.len() - 1;
        b[at] = 7;
        assert_eq!(
            Decoder::new(&b).cdr(),
            Err(DecodeError::UnknownTag {
                what: "interface",
                value: 7,
                at
            })
        );
    }

    #[test]
    fn a_record_after_another_shares_its_strings_and_reads_back_the_same() {
        let (gy, alone) = gy_cdr();
        let mut second = gy.clone();
        second.sequence += 1;
        second.rating_group = Some(20);
        second.rate = "data-rg20".into();
        second.interface = Interface::Nchf;
        let mut section = alone.clone();
        encode_cdr_after(&mut section, &second, Some(&gy));
        let shared = &section[alone.len()..];
        assert_eq!(shared[..2], [TAG_CDR_SHARED, 1], "tag, then the interface");
        let mut by_itself = Vec::new();
        encode_cdr(&mut by_itself, &second);
        // Node id, Session-Id, subscriber, service context, plan,
        // destination and zone: one byte each instead of the string.
        let saved =
            gy.node_id.len() + gy.session_id.len() + gy.subscriber.len() + gy.service_context.len();
        assert_eq!(shared.len() + saved, by_itself.len());
        let mut d = Decoder::new(&section);
        let first = d.cdr_view_after(None).unwrap();
        let next = d.cdr_view_after(Some(&first)).unwrap();
        assert!(d.is_empty());
        let mut back = Cdr::default();
        back.set_from(&next);
        assert_eq!(back, second);
        // A section never starts with one: without the record before, it
        // is an error at its offset, never a guess.
        assert_eq!(
            Decoder::new(shared).cdr_view().map(|_| ()),
            Err(DecodeError::OutOfRange {
                what: "CDR record sharing the strings of a record before it (it is the first)",
                at: 0
            })
        );
        // A changed string is written out.
        let mut third = second.clone();
        third.sequence += 1;
        third.session_id = "other;1".into();
        let mut b = Vec::new();
        encode_cdr_after(&mut b, &third, Some(&second));
        let back = Decoder::new(&b)
            .cdr_view_after(Some(&second.view()))
            .map(|v| {
                let mut c = Cdr::default();
                c.set_from(&v);
                c
            });
        assert_eq!(back, Ok(third));
    }

    proptest! {
        #[test]
        fn sections_of_shared_records_read_back_record_for_record(
            cdrs in proptest::collection::vec(cdr(), 1..6),
            copy in any::<u8>(),
        ) {
            let mut cdrs = cdrs;
            for i in 1..cdrs.len() {
                let p = cdrs[i - 1].clone();
                if copy & 1 != 0 { cdrs[i].session_id = p.session_id; }
                if copy & 2 != 0 { cdrs[i].node_id = p.node_id; }
                if copy & 4 != 0 { cdrs[i].plan = p.plan; }
                if copy & 8 != 0 { cdrs[i].subscriber = p.subscriber; }
            }
            let mut section = Vec::new();
            for (i, c) in cdrs.iter().enumerate() {
                encode_cdr_after(&mut section, c, i.checked_sub(1).map(|j| &cdrs[j]));
            }
            let mut d = Decoder::new(&section);
            let mut prev = None;
            for c in &cdrs {
                let v = d.cdr_view_after(prev.as_ref()).unwrap();
                let mut back = Cdr::default();
                back.set_from(&v);
                prop_assert_eq!(&back, c);
                prev = Some(v);
            }
            prop_assert!(d.is_empty());
        }
    }

    #[test]
    fn a_session_opened_over_nchf_is_tag_18_and_over_gy_tag_1_unchanged() {
        let open = |interface| Effect::SessionOpened {
            session: SessionKey(4),
            session_id: "nchf-1-00ab".into(),
            account: AccountId(2),
            subscriber: SharedSubscriptionId::new(SubscriptionType::E164, "4670"),
            service_context: "32251@3gpp.org".into(),
            multiple_services: true,
            at: Timestamp(1000),
            supervision_until: Timestamp(2000),
            interface,
        };
        let mut gy = Vec::new();
        encode_effect(&mut gy, &open(Interface::Gy));
        assert_eq!(gy[0], 1);
        let mut nchf = Vec::new();
        encode_effect(&mut nchf, &open(Interface::Nchf));
        assert_eq!(nchf[0], 18);
        assert_eq!(&nchf[1..gy.len()], &gy[1..]);
        assert_eq!(nchf[gy.len()..], [1]);
        for (bytes, i) in [(&gy, Interface::Gy), (&nchf, Interface::Nchf)] {
            assert_eq!(Decoder::new(bytes).effect(), Ok(open(i)));
        }
    }
}
