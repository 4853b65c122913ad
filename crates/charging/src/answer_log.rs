//! Answer records: the compact binary form in which every answer the engine
//! gives is journaled, so that a repeated request can get the same answer
//! again (duplicate detection, [`crate::dedup`]) without the engine keeping
//! whole answers in memory.
//!
//! [`crate::Engine::handle`] appends one record per fresh answer to
//! [`crate::Output::answers`], an [`AnswerLog`]. Records are numbered with
//! consecutive answer sequence numbers (`seq`): the log's first record has
//! [`AnswerLog::first_seq`], the next one `first_seq + 1`, and so on. The
//! store journals [`AnswerLog::as_bytes`] with `first_seq` and
//! [`AnswerLog::count`] and can later return one record by `seq`.
//!
//! # Record layout, version 1
//!
//! The layout is versioned by the journal that carries it (a journal format
//! version names the answer record version it holds). All integers are
//! little-endian; `var` is an unsigned LEB128 varint (7 bits a byte, least
//! significant group first, at most 10 bytes), `zvar` a zigzag-encoded
//! signed varint, `str` a `var` byte length followed by that many UTF-8
//! bytes.
//!
//! ```text
//! record      = len:u32 body            len = byte length of body
//! body        = at:var                  answer time, ms since the Unix epoch
//!               request_number:var      CC-Request-Number (also the answer's)
//!               end_to_end:var          End-to-End Identifier
//!               session_id:str          Session-Id
//!               origin_host:str         Origin-Host
//!               answer
//! answer      = result_code:var
//!               request_type:u8         CC-Request-Type (1..=4)
//!               flags:u8                bit 0 granted, 1 validity_time,
//!                                       2 final_unit, 3 cost,
//!                                       4 check_balance, 5 failed_avp
//!               [units]                 granted
//!               [validity_time:var]
//!               [fui]                   final_unit
//!               [value:zvar exponent:zvar currency_code:var]   cost
//!               [check_balance:u8]      0 ENOUGH_CREDIT, 1 NO_CREDIT
//!               [failed_avp]
//!               mscc_count:var  mscc*
//! mscc        = flags:u8                bit 0 rating_group, 1 service_id,
//!                                       2 granted, 3 validity_time,
//!                                       4 final_unit, 5 unit, 6 quota
//!               result_code:var
//!               [rating_group:var] [service_id:var] [units]
//!               [validity_time:var] [fui] [unit:u8]
//!               [quota]
//! quota       = mask:u8                 bit 0 Volume-Quota-Threshold,
//!                                       1 Time-Quota-Threshold,
//!                                       2 Quota-Holding-Time
//!               value:var for each bit set, in bit order
//! units       = mask:u8                 bit 0 time, 1 total, 2 input,
//!                                       3 output, 4 service_specific,
//!                                       5 Tariff-Time-Change (ms since
//!                                       the Unix epoch)
//!               value:var for each bit set, in bit order
//! fui         = action:u8               0 TERMINATE, 1 REDIRECT,
//!                                       2 RESTRICT_ACCESS
//!               has_redirect:u8 [address_type:u8 address:str]
//!               rule_count:var rule:str*  filter_count:var filter:str*
//! failed_avp  = tag:u8                  0 Service-Context-Id,
//!                                       1 Subscription-Id,
//!                                       2 Requested-Action,
//!                                       3 Multiple-Services-Credit-Control,
//!                                       4 Rating-Group value:var,
//!                                       5 Service-Identifier value:var
//! unit        = 0 octets, 1 seconds, 2 events
//! ```
//!
//! MSCC flag bit 6 and units bit 5 came with price plans; records without
//! them read as before, so the record version stays 1.
//!
//! The `duplicate` flag of an answer is not stored (a record is an
//! original). A usage answer with three rating groups takes about 100
//! bytes.

use crate::answer::{CcAnswer, CheckBalanceResult, CostInformation, FailedAvp, MsccAnswer};
use crate::error::{Error, Result};
use crate::request::{CcRequest, RequestType};
use crate::tariff::{FinalUnitAction, FinalUnitIndication, RedirectAddressType, RedirectServer};
use crate::types::{ServiceUnits, Timestamp, UnitKind};
use std::collections::VecDeque;

/// A batch of answer records with consecutive sequence numbers, in one
/// reusable byte buffer. See the module documentation for the layout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnswerLog {
    buf: Vec<u8>,
    count: u32,
    first_seq: u64,
}

impl AnswerLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// The records, back to back.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Number of records.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether the log holds no record.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Sequence number of the first record (meaningless while empty).
    pub fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// Forgets all records, keeping the buffer's memory.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.count = 0;
        self.first_seq = 0;
    }

    /// The record with sequence number `seq`, if this log holds it.
    pub fn get(&self, seq: u64) -> Option<&[u8]> {
        let i = seq.checked_sub(self.first_seq)?;
        if self.count == 0 || i >= u64::from(self.count) {
            return None;
        }
        records(&self.buf).nth(i as usize)?.ok()
    }

    /// Appends the record of `answer` to `req`, given at `at`, numbered
    /// `seq` (which must follow the last record's).
    pub(crate) fn push(&mut self, seq: u64, req: &CcRequest, answer: &CcAnswer, at: Timestamp) {
        debug_assert!(self.count == 0 || seq == self.first_seq + u64::from(self.count));
        if self.count == 0 {
            self.first_seq = seq;
        }
        encode_record(&mut self.buf, req, answer, at);
        self.count += 1;
    }
}

/// Iterates the records of a section of back-to-back records (as
/// [`AnswerLog::as_bytes`] holds them), each with its length prefix. A
/// truncated record ends the iteration with an error.
pub fn records(bytes: &[u8]) -> impl Iterator<Item = Result<&[u8]>> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(len) = rest.get(..4) else {
            rest = &[];
            return Some(Err(Error::AnswerRecord("truncated length")));
        };
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let Some(rec) = rest.get(..4 + len) else {
            rest = &[];
            return Some(Err(Error::AnswerRecord("truncated record")));
        };
        rest = &rest[4 + len..];
        Some(Ok(rec))
    })
}

/// The identifying part of a record, read without touching the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordKey<'a> {
    /// When the answer was given.
    pub at: Timestamp,
    /// CC-Request-Number of the request.
    pub request_number: u32,
    /// End-to-End Identifier of the request.
    pub end_to_end: u32,
    /// Session-Id of the request.
    pub session_id: &'a str,
    /// Origin-Host of the request.
    pub origin_host: &'a str,
}

impl<'a> RecordKey<'a> {
    /// Reads the key of one record (with its length prefix); also returns
    /// a reader positioned at the answer.
    fn read(record: &'a [u8]) -> Result<(Self, Reader<'a>)> {
        let mut r = Reader::new(record);
        let len = r.u32_le()? as usize;
        if len != r.rest() {
            return Err(Error::AnswerRecord("length does not match"));
        }
        let key = RecordKey {
            at: Timestamp(r.var()?),
            request_number: r.var_u32()?,
            end_to_end: r.var_u32()?,
            session_id: r.str()?,
            origin_host: r.str()?,
        };
        Ok((key, r))
    }

    /// Reads the key of one record (with its length prefix).
    pub fn parse(record: &'a [u8]) -> Result<Self> {
        Self::read(record).map(|(k, _)| k)
    }

    /// Whether a request with these identifiers repeats the one this
    /// record answered ([`crate::dedup`]'s rules).
    pub fn matches(&self, req: &CcRequest) -> bool {
        self.session_id == req.session_id
            && (self.request_number == req.request_number
                || (self.end_to_end == req.end_to_end
                    && self.origin_host.eq_ignore_ascii_case(&req.origin_host)))
    }
}

/// Decodes one record (with its length prefix) into its key and `answer`
/// (whose buffers are reused; `duplicate` is set false).
pub fn decode_record<'a>(record: &'a [u8], answer: &mut CcAnswer) -> Result<RecordKey<'a>> {
    let (key, mut r) = RecordKey::read(record)?;
    decode_answer(&mut r, key.request_number, answer)?;
    if r.rest() != 0 {
        return Err(Error::AnswerRecord("trailing bytes"));
    }
    Ok(key)
}

/// Encodes one record (with its length prefix) onto `out`.
pub fn encode_record(out: &mut Vec<u8>, req: &CcRequest, answer: &CcAnswer, at: Timestamp) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    put_var(out, at.as_millis());
    put_var(out, u64::from(req.request_number));
    put_var(out, u64::from(req.end_to_end));
    put_str(out, &req.session_id);
    put_str(out, &req.origin_host);
    encode_answer(out, answer);
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

fn put_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_zvar(out: &mut Vec<u8>, v: i64) {
    put_var(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_var(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn put_units(out: &mut Vec<u8>, u: &ServiceUnits) {
    let vals = [
        u.time.map(u64::from),
        u.total_octets,
        u.input_octets,
        u.output_octets,
        u.service_specific,
        u.tariff_time_change.map(|t| t.0),
    ];
    let mask = vals
        .iter()
        .enumerate()
        .fold(0u8, |m, (i, v)| m | (u8::from(v.is_some()) << i));
    out.push(mask);
    for v in vals.into_iter().flatten() {
        put_var(out, v);
    }
}

fn put_fui(out: &mut Vec<u8>, f: &FinalUnitIndication) {
    out.push(f.action as u8);
    match &f.redirect {
        Some(r) => {
            out.push(1);
            out.push(r.address_type as u8);
            put_str(out, &r.address);
        }
        None => out.push(0),
    }
    put_var(out, f.restriction_filter_rules.len() as u64);
    for s in &f.restriction_filter_rules {
        put_str(out, s);
    }
    put_var(out, f.filter_ids.len() as u64);
    for s in &f.filter_ids {
        put_str(out, s);
    }
}

fn unit_code(u: UnitKind) -> u8 {
    match u {
        UnitKind::Octets => 0,
        UnitKind::Seconds => 1,
        UnitKind::Events => 2,
    }
}

fn encode_answer(out: &mut Vec<u8>, a: &CcAnswer) {
    put_var(out, u64::from(a.result_code));
    out.push(a.request_type.code() as u8);
    let flags = u8::from(a.granted.is_some())
        | u8::from(a.validity_time.is_some()) << 1
        | u8::from(a.final_unit.is_some()) << 2
        | u8::from(a.cost.is_some()) << 3
        | u8::from(a.check_balance.is_some()) << 4
        | u8::from(a.failed_avp.is_some()) << 5;
    out.push(flags);
    if let Some(g) = &a.granted {
        put_units(out, g);
    }
    if let Some(v) = a.validity_time {
        put_var(out, u64::from(v));
    }
    if let Some(f) = &a.final_unit {
        put_fui(out, f);
    }
    if let Some(c) = &a.cost {
        put_zvar(out, c.value_digits);
        put_zvar(out, i64::from(c.exponent));
        put_var(out, u64::from(c.currency_code));
    }
    if let Some(c) = a.check_balance {
        out.push(c as u8);
    }
    if let Some(f) = a.failed_avp {
        match f {
            FailedAvp::ServiceContextId => out.push(0),
            FailedAvp::SubscriptionId => out.push(1),
            FailedAvp::RequestedAction => out.push(2),
            FailedAvp::MultipleServicesCreditControl => out.push(3),
            FailedAvp::RatingGroup(v) => {
                out.push(4);
                put_var(out, u64::from(v));
            }
            FailedAvp::ServiceIdentifier(v) => {
                out.push(5);
                put_var(out, u64::from(v));
            }
        }
    }
    put_var(out, a.mscc.len() as u64);
    for m in &a.mscc {
        let flags = u8::from(m.rating_group.is_some())
            | u8::from(m.service_id.is_some()) << 1
            | u8::from(m.granted.is_some()) << 2
            | u8::from(m.validity_time.is_some()) << 3
            | u8::from(m.final_unit.is_some()) << 4
            | u8::from(m.unit.is_some()) << 5;
        let quota = [
            m.volume_quota_threshold,
            m.time_quota_threshold,
            m.quota_holding_time,
        ];
        let more = quota
            .iter()
            .enumerate()
            .fold(0u8, |f, (i, v)| f | (u8::from(v.is_some()) << i));
        out.push(flags | u8::from(more != 0) << 6);
        put_var(out, u64::from(m.result_code));
        if let Some(v) = m.rating_group {
            put_var(out, u64::from(v));
        }
        if let Some(v) = m.service_id {
            put_var(out, u64::from(v));
        }
        if let Some(g) = &m.granted {
            put_units(out, g);
        }
        if let Some(v) = m.validity_time {
            put_var(out, u64::from(v));
        }
        if let Some(f) = &m.final_unit {
            put_fui(out, f);
        }
        if let Some(u) = m.unit {
            out.push(unit_code(u));
        }
        if more != 0 {
            out.push(more);
            for v in quota.into_iter().flatten() {
                put_var(out, u64::from(v));
            }
        }
    }
}

/// A bounds-checked reader over one record.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Self {
        Reader { b }
    }
    fn rest(&self) -> usize {
        self.b.len()
    }
    fn u8(&mut self) -> Result<u8> {
        let (&v, rest) = self
            .b
            .split_first()
            .ok_or(Error::AnswerRecord("truncated"))?;
        self.b = rest;
        Ok(v)
    }
    fn u32_le(&mut self) -> Result<u32> {
        let v = self.b.get(..4).ok_or(Error::AnswerRecord("truncated"))?;
        let v = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
        self.b = &self.b[4..];
        Ok(v)
    }
    fn var(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                if shift == 63 && b > 1 {
                    break;
                }
                return Ok(v);
            }
        }
        Err(Error::AnswerRecord("varint too long"))
    }
    fn var_u32(&mut self) -> Result<u32> {
        u32::try_from(self.var()?).map_err(|_| Error::AnswerRecord("value out of range"))
    }
    fn zvar(&mut self) -> Result<i64> {
        let v = self.var()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }
    fn str(&mut self) -> Result<&'a str> {
        let len = usize::try_from(self.var()?).map_err(|_| Error::AnswerRecord("too long"))?;
        let s = self.b.get(..len).ok_or(Error::AnswerRecord("truncated"))?;
        self.b = &self.b[len..];
        std::str::from_utf8(s).map_err(|_| Error::AnswerRecord("invalid UTF-8"))
    }
    fn count(&mut self) -> Result<usize> {
        let n = self.var()?;
        // Every item takes at least one byte: a count past the rest is
        // corrupt, and must not make the decoder reserve memory for it.
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.rest())
            .ok_or(Error::AnswerRecord("count out of range"))
    }
    fn units(&mut self) -> Result<ServiceUnits> {
        let mask = self.u8()?;
        if mask & !0x3f != 0 {
            return Err(Error::AnswerRecord("unknown unit counter"));
        }
        let mut u = ServiceUnits::default();
        if mask & 1 != 0 {
            u.time = Some(self.var_u32()?);
        }
        if mask & 2 != 0 {
            u.total_octets = Some(self.var()?);
        }
        if mask & 4 != 0 {
            u.input_octets = Some(self.var()?);
        }
        if mask & 8 != 0 {
            u.output_octets = Some(self.var()?);
        }
        if mask & 16 != 0 {
            u.service_specific = Some(self.var()?);
        }
        if mask & 32 != 0 {
            u.tariff_time_change = Some(Timestamp(self.var()?));
        }
        Ok(u)
    }
    fn strings(&mut self, out: &mut Vec<String>) -> Result<()> {
        let n = self.count()?;
        out.truncate(n);
        for i in 0..n {
            let s = self.str()?;
            match out.get_mut(i) {
                Some(o) => {
                    o.clear();
                    o.push_str(s);
                }
                None => out.push(s.to_owned()),
            }
        }
        Ok(())
    }
    /// Reads a Final-Unit-Indication into `slot`, reusing its buffers.
    fn fui(&mut self, slot: &mut Option<FinalUnitIndication>) -> Result<()> {
        let f = slot.get_or_insert_with(FinalUnitIndication::default);
        f.action = match self.u8()? {
            0 => FinalUnitAction::Terminate,
            1 => FinalUnitAction::Redirect,
            2 => FinalUnitAction::RestrictAccess,
            _ => return Err(Error::AnswerRecord("unknown final unit action")),
        };
        match self.u8()? {
            0 => f.redirect = None,
            1 => {
                let address_type = match self.u8()? {
                    0 => RedirectAddressType::Ipv4,
                    1 => RedirectAddressType::Ipv6,
                    2 => RedirectAddressType::Url,
                    3 => RedirectAddressType::SipUri,
                    _ => return Err(Error::AnswerRecord("unknown redirect address type")),
                };
                let address = self.str()?;
                let r = f.redirect.get_or_insert_with(|| RedirectServer {
                    address_type,
                    address: String::new(),
                });
                r.address_type = address_type;
                r.address.clear();
                r.address.push_str(address);
            }
            _ => return Err(Error::AnswerRecord("invalid redirect flag")),
        }
        self.strings(&mut f.restriction_filter_rules)?;
        self.strings(&mut f.filter_ids)
    }
    fn unit(&mut self) -> Result<UnitKind> {
        Ok(match self.u8()? {
            0 => UnitKind::Octets,
            1 => UnitKind::Seconds,
            2 => UnitKind::Events,
            _ => return Err(Error::AnswerRecord("unknown unit")),
        })
    }
}

fn decode_answer(r: &mut Reader<'_>, request_number: u32, a: &mut CcAnswer) -> Result<()> {
    a.result_code = r.var_u32()?;
    a.request_type = RequestType::from_code(u32::from(r.u8()?))
        .ok_or(Error::AnswerRecord("unknown request type"))?;
    a.request_number = request_number;
    let flags = r.u8()?;
    if flags & !0x3f != 0 {
        return Err(Error::AnswerRecord("unknown answer flag"));
    }
    a.granted = if flags & 1 != 0 {
        Some(r.units()?)
    } else {
        None
    };
    a.validity_time = if flags & 2 != 0 {
        Some(r.var_u32()?)
    } else {
        None
    };
    if flags & 4 != 0 {
        r.fui(&mut a.final_unit)?;
    } else {
        a.final_unit = None;
    }
    a.cost = if flags & 8 != 0 {
        Some(CostInformation {
            value_digits: r.zvar()?,
            exponent: i32::try_from(r.zvar()?)
                .map_err(|_| Error::AnswerRecord("exponent out of range"))?,
            currency_code: r.var_u32()?,
        })
    } else {
        None
    };
    a.check_balance = if flags & 16 != 0 {
        Some(match r.u8()? {
            0 => CheckBalanceResult::EnoughCredit,
            1 => CheckBalanceResult::NoCredit,
            _ => return Err(Error::AnswerRecord("unknown check balance result")),
        })
    } else {
        None
    };
    a.failed_avp = if flags & 32 != 0 {
        Some(match r.u8()? {
            0 => FailedAvp::ServiceContextId,
            1 => FailedAvp::SubscriptionId,
            2 => FailedAvp::RequestedAction,
            3 => FailedAvp::MultipleServicesCreditControl,
            4 => FailedAvp::RatingGroup(r.var_u32()?),
            5 => FailedAvp::ServiceIdentifier(r.var_u32()?),
            _ => return Err(Error::AnswerRecord("unknown failed AVP")),
        })
    } else {
        None
    };
    let n = r.count()?;
    a.mscc.truncate(n);
    for i in 0..n {
        if i == a.mscc.len() {
            a.mscc.push(MsccAnswer::default());
        }
        let m = &mut a.mscc[i];
        let flags = r.u8()?;
        if flags & !0x7f != 0 {
            return Err(Error::AnswerRecord("unknown MSCC flag"));
        }
        m.result_code = r.var_u32()?;
        m.rating_group = if flags & 1 != 0 {
            Some(r.var_u32()?)
        } else {
            None
        };
        m.service_id = if flags & 2 != 0 {
            Some(r.var_u32()?)
        } else {
            None
        };
        m.granted = if flags & 4 != 0 {
            Some(r.units()?)
        } else {
            None
        };
        m.validity_time = if flags & 8 != 0 {
            Some(r.var_u32()?)
        } else {
            None
        };
        if flags & 16 != 0 {
            r.fui(&mut m.final_unit)?;
        } else {
            m.final_unit = None;
        }
        m.unit = if flags & 32 != 0 {
            Some(r.unit()?)
        } else {
            None
        };
        let more = if flags & 64 != 0 { r.u8()? } else { 0 };
        if more & !0x07 != 0 {
            return Err(Error::AnswerRecord("unknown MSCC quota flag"));
        }
        m.volume_quota_threshold = if more & 1 != 0 {
            Some(r.var_u32()?)
        } else {
            None
        };
        m.time_quota_threshold = if more & 2 != 0 {
            Some(r.var_u32()?)
        } else {
            None
        };
        m.quota_holding_time = if more & 4 != 0 {
            Some(r.var_u32()?)
        } else {
            None
        };
    }
    a.duplicate = false;
    Ok(())
}

/// An in-memory archive of answer records by sequence number, standing in
/// for a store's journal (durability `none`, tests and tools): it keeps
/// every section it is given until [`AnswerArchive::forget_below`] drops
/// the old ones.
///
/// Sections are copied into 1 MiB chunks, and a chunk whose sections are
/// all forgotten is kept for reuse: a warm archive allocates nothing per
/// section.
#[derive(Clone, Debug, Default)]
pub struct AnswerArchive {
    sections: VecDeque<Section>,
    /// Chunk `first_chunk + i` is `chunks[i]`.
    chunks: VecDeque<Vec<u8>>,
    first_chunk: u64,
    spare: Option<Vec<u8>>,
    next: u64,
}

/// Where a section's records are.
#[derive(Clone, Copy, Debug)]
struct Section {
    first: u64,
    count: u32,
    chunk: u64,
    start: usize,
    len: usize,
}

/// Bytes per chunk (a larger section gets a chunk of its own size).
const ARCHIVE_CHUNK: usize = 1 << 20;

impl AnswerArchive {
    /// An empty archive.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps a copy of `log`'s records (those it does not hold yet: a log
    /// appended again after more records were added is not doubled).
    pub fn append(&mut self, log: &AnswerLog) {
        let end = log.first_seq() + u64::from(log.count());
        if log.is_empty() || end <= self.next {
            return;
        }
        let skip = self.next.saturating_sub(log.first_seq());
        let mut bytes = log.as_bytes();
        for rec in records(bytes).take(skip as usize).flatten() {
            bytes = &bytes[rec.len()..];
        }
        let first = log.first_seq() + skip;
        let fits = self
            .chunks
            .back()
            .is_some_and(|c| c.capacity() - c.len() >= bytes.len());
        if !fits {
            let size = ARCHIVE_CHUNK.max(bytes.len());
            let chunk = match self.spare.take() {
                Some(mut c) if c.capacity() >= size => {
                    c.clear();
                    c
                }
                _ => Vec::with_capacity(size),
            };
            if self.chunks.is_empty() {
                self.first_chunk = self.sections.back().map_or(0, |s| s.chunk + 1);
            }
            self.chunks.push_back(chunk);
        }
        let chunk_no = self.first_chunk + self.chunks.len() as u64 - 1;
        let chunk = self.chunks.back_mut().expect("a chunk was just ensured");
        let start = chunk.len();
        chunk.extend_from_slice(bytes);
        self.sections.push_back(Section {
            first,
            count: (end - first) as u32,
            chunk: chunk_no,
            start,
            len: bytes.len(),
        });
        self.next = end;
    }

    fn bytes(&self, s: &Section) -> &[u8] {
        let chunk = &self.chunks[(s.chunk - self.first_chunk) as usize];
        &chunk[s.start..s.start + s.len]
    }

    /// The record numbered `seq`.
    pub fn read(&self, seq: u64) -> Option<&[u8]> {
        let i = self
            .sections
            .partition_point(|s| s.first + u64::from(s.count) <= seq);
        let s = self.sections.get(i)?;
        let skip = seq.checked_sub(s.first)?;
        records(self.bytes(s)).nth(skip as usize)?.ok()
    }

    /// The sections kept, oldest first: `(first_seq, records)`.
    pub fn sections(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.sections.iter().map(|s| (s.first, self.bytes(s)))
    }

    /// Drops the sections whose records are all below `horizon`
    /// ([`crate::Engine::answer_horizon`]).
    pub fn forget_below(&mut self, horizon: u64) {
        while let Some(s) = self.sections.front() {
            if s.first + u64::from(s.count) > horizon {
                break;
            }
            self.sections.pop_front();
        }
        // Chunks before the oldest section kept are free; the newest chunk
        // stays while sections may still go into it.
        let keep_from = self
            .sections
            .front()
            .map_or(self.first_chunk + self.chunks.len() as u64, |s| s.chunk);
        while self.first_chunk < keep_from && !self.chunks.is_empty() {
            if self.chunks.len() == 1 && self.sections.is_empty() {
                break;
            }
            let c = self.chunks.pop_front().expect("not empty");
            self.first_chunk += 1;
            if self
                .spare
                .as_ref()
                .is_none_or(|s| s.capacity() < c.capacity())
            {
                self.spare = Some(c);
            }
        }
    }
}
