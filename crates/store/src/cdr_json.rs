//! CDR file lines in JSON Lines written straight from journal CDR records
//! (the CDR writer's hot path): each field is read from the binary record
//! (layout in [`crate::record`]) and written as its JSON member at once,
//! with no decoded record in between.
//!
//! The bytes are exactly those of [`gyro_charging::CdrOf::write_json_line`]
//! for the decoded record (a property test holds them equal). Records this
//! path does not take are left to that one by returning `None`: a record
//! charged over another interface than Gy (tag 66, whose interface comes
//! last in the record but early in the line), a string that needs JSON
//! escaping or is not ASCII, and anything malformed (the decoder then
//! reports what is wrong). A record that shares strings with the one
//! before it (tag 67) takes them from the [`Strings`] of that record.

use crate::record::{DecodeError, TAG_CDR, TAG_CDR_RATED, TAG_CDR_SHARED};
use gyro_charging::{CdrView, ClosingCause, RecordType, TariffChangeUsage};

/// `,"name":`: a member's separator and key, spelled out at compile time.
macro_rules! key {
    ($name:literal) => {
        concat!(",\"", $name, "\":").as_bytes()
    };
}

/// The binary record being read.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// A LEB128 varint, refused exactly where the record decoder refuses
    /// it (more than 64 bits).
    #[inline(always)]
    fn u64(&mut self) -> Option<u64> {
        let b = self.byte()?;
        if b < 0x80 {
            return Some(b.into());
        }
        // By value, so that the cursor stays in registers.
        let (v, pos) = u64_long(self.buf, self.pos, b)?;
        self.pos = pos;
        Some(v)
    }

    #[inline(always)]
    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.u64()?).ok()
    }

    #[inline(always)]
    fn i64(&mut self) -> Option<i64> {
        let v = self.u64()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// `None`: malformed; `Some(None)`: absent.
    #[inline(always)]
    fn opt_u32(&mut self) -> Option<Option<u32>> {
        match self.byte()? {
            0 => Some(None),
            1 => Some(Some(self.u32()?)),
            _ => None,
        }
    }

    /// A string of a tag 67 record: `prev` when the record says it is the
    /// same (a varint 0), else its length plus one and its bytes.
    #[inline(always)]
    fn shared(&mut self, prev: &'a [u8]) -> Option<&'a [u8]> {
        match self.u64()? {
            0 => Some(prev),
            n => self.take(n - 1),
        }
    }

    #[inline(always)]
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u64()?;
        self.take(n)
    }

    /// The next `n` bytes.
    #[inline(always)]
    fn take(&mut self, n: u64) -> Option<&'a [u8]> {
        let n = usize::try_from(n).ok()?;
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len())?;
        let b = &self.buf[self.pos..end];
        self.pos = end;
        Some(b)
    }
}

/// The rest of a varint whose first byte was `first`, read from
/// `buf[pos..]`: its value and the position after it.
#[inline(never)]
fn u64_long(buf: &[u8], mut pos: usize, first: u8) -> Option<(u64, usize)> {
    let mut v = u64::from(first & 0x7f);
    if let Some(rest) = buf.get(pos..pos + 9) {
        // Nine more bytes at hand (nearly always): the same steps over a
        // fixed array, unrolled, with no bounds check per byte.
        let rest: &[u8; 9] = rest.try_into().ok()?;
        for (k, &b) in rest.iter().enumerate() {
            if k == 8 {
                return (b <= 1).then_some((v | u64::from(b) << 63, pos + 9));
            }
            v |= u64::from(b & 0x7f) << (7 * (k + 1));
            if b & 0x80 == 0 {
                return Some((v, pos + k + 1));
            }
        }
        return None;
    }
    let mut shift = 7;
    loop {
        let b = *buf.get(pos)?;
        pos += 1;
        if shift == 63 {
            // The tenth byte holds the top bit only, and ends it.
            return (b <= 1).then_some((v | u64::from(b) << 63, pos));
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some((v, pos));
        }
        shift += 7;
    }
}

/// Whether every byte is printable ASCII that JSON writes as it is: no
/// control character, quote, backslash or byte above 0x7f. Eight bytes at
/// a time (the "has a byte less than n" and "has a zero byte" word
/// tricks: exact for whether any byte matches); the last word overlaps the
/// one before, and a string shorter than a word is checked byte by byte.
#[inline(always)]
fn plain(s: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let special = |x: u64| {
        let below_space = x.wrapping_sub(ONES * 0x20) & !x;
        let q = x ^ (ONES * u64::from(b'"'));
        let quote = q.wrapping_sub(ONES) & !q;
        let b = x ^ (ONES * u64::from(b'\\'));
        let backslash = b.wrapping_sub(ONES) & !b;
        (x | below_space | quote | backslash) & HIGH != 0
    };
    let word = |w: &[u8]| {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        u64::from_ne_bytes(a)
    };
    if s.len() < 8 {
        return s
            .iter()
            .all(|&b| (0x20..0x80).contains(&b) && b != b'"' && b != b'\\');
    }
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        if special(word(c)) {
            return false;
        }
    }
    chunks.remainder().is_empty() || !special(word(&s[s.len() - 8..]))
}

const DIGITS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Powers of ten, for counting digits.
const POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// Decimal digits of `v`.
#[inline(always)]
fn digits(v: u64) -> usize {
    // `v | 1` has as many digits (0 has one), then log2 * log10(2) and
    // one correction.
    let v = v | 1;
    let t = (((64 - v.leading_zeros()) * 1233) >> 12) as usize;
    t + usize::from(v >= POW10[t])
}

/// Bytes of the longest line written here; a longer one (very
/// long strings) is left to the decoder.
const LINE_MAX: usize = 2048;

/// The room one line is written in before it is copied to the output
/// whole (kept by the caller from line to line).
pub(crate) struct Line {
    buf: Box<[u8; LINE_MAX]>,
}

impl Line {
    /// Room for one line.
    pub(crate) fn new() -> Line {
        Line {
            buf: Box::new([0; LINE_MAX]),
        }
    }
}

/// Writes one line into a [`Line`]'s room. A local of `line` (all its
/// methods inline), so that its position stays in a register. Every write
/// checks its room and fails with `None` instead of panicking.
struct W<'a> {
    buf: &'a mut [u8; LINE_MAX],
    pos: usize,
}

impl W<'_> {
    #[inline(always)]
    fn put(&mut self, s: &[u8]) -> Option<()> {
        let end = self.pos + s.len();
        self.buf.get_mut(self.pos..end)?.copy_from_slice(s);
        self.pos = end;
        Some(())
    }

    #[inline(always)]
    fn u64(&mut self, mut v: u64) -> Option<()> {
        let n = digits(v);
        let end = self.pos + n;
        let d = self.buf.get_mut(self.pos..end)?;
        let mut i = n;
        // Four digits a turn, then two.
        while v >= 10_000 {
            let r = (v % 10_000) as usize;
            v /= 10_000;
            let (hi, lo) = (r / 100 * 2, r % 100 * 2);
            i -= 4;
            d[i..i + 2].copy_from_slice(&DIGITS[hi..hi + 2]);
            d[i + 2..i + 4].copy_from_slice(&DIGITS[lo..lo + 2]);
        }
        if v >= 100 {
            let k = (v % 100) as usize * 2;
            v /= 100;
            i -= 2;
            d[i..i + 2].copy_from_slice(&DIGITS[k..k + 2]);
        }
        if v >= 10 {
            let k = v as usize * 2;
            d[0] = DIGITS[k];
            d[1] = DIGITS[k + 1];
        } else {
            d[0] = b'0' + v as u8;
        }
        self.pos = end;
        Some(())
    }

    #[inline(always)]
    fn i64(&mut self, v: i64) -> Option<()> {
        if v < 0 {
            self.put(b"-")?;
        }
        self.u64(v.unsigned_abs())
    }

    #[inline(always)]
    fn member_u64(&mut self, key: &[u8], v: u64) -> Option<()> {
        self.put(key)?;
        self.u64(v)
    }

    #[inline(always)]
    fn member_i64(&mut self, key: &[u8], v: i64) -> Option<()> {
        self.put(key)?;
        self.i64(v)
    }

    #[inline(always)]
    fn member_word(&mut self, key: &[u8], v: &str) -> Option<()> {
        self.put(key)?;
        self.put(b"\"")?;
        self.put(v.as_bytes())?;
        self.put(b"\"")
    }

    /// A string member; `None` when the string is not plain (see
    /// [`plain`]) or does not fit.
    #[inline(always)]
    fn member_str(&mut self, key: &[u8], s: &[u8]) -> Option<()> {
        if !plain(s) {
            return None;
        }
        self.put(key)?;
        self.put(b"\"")?;
        self.put(s)?;
        self.put(b"\"")
    }
}

/// The eight strings of a CDR record (node id, Session-Id, subscriber,
/// service context, plan, rate, destination, zone), which the next record
/// of its section may share (tag 67).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Strings<'a> {
    /// Whether a record was read before (a section's first has none).
    pub have: bool,
    /// The strings, in the order above.
    pub text: [&'a [u8]; 8],
}

impl<'a> Strings<'a> {
    /// The strings of a decoded record.
    pub(crate) fn of(c: &CdrView<'a>) -> Strings<'a> {
        Strings {
            have: true,
            text: [
                c.node_id,
                c.session_id,
                c.subscriber,
                c.service_context,
                c.plan,
                c.rate,
                c.destination,
                c.zone,
            ]
            .map(str::as_bytes),
        }
    }

    /// The record they are of as the decoder takes the record before a
    /// shared one (its strings alone); `None` before a section's first
    /// record.
    pub(crate) fn view(&self) -> Result<Option<CdrView<'a>>, DecodeError> {
        if !self.have {
            return Ok(None);
        }
        let text =
            |s: &'a [u8]| std::str::from_utf8(s).map_err(|_| DecodeError::InvalidUtf8 { at: 0 });
        let [node_id, session_id, subscriber, service_context, plan, rate, destination, zone] =
            self.text;
        Ok(Some(CdrView {
            node_id: text(node_id)?,
            session_id: text(session_id)?,
            subscriber: text(subscriber)?,
            service_context: text(service_context)?,
            plan: text(plan)?,
            rate: text(rate)?,
            destination: text(destination)?,
            zone: text(zone)?,
            ..CdrView::default()
        }))
    }
}

/// Appends the JSON line of the CDR record at the start of `rec` to `out`
/// and returns its sequence number and the record's length (`l`: the
/// room to write it in; `prev`: the strings of the record before it in
/// its section, replaced by this record's), or returns `None` with `out`
/// and `prev` unchanged when the record is one this path leaves to the
/// decoder (see the module documentation).
pub(crate) fn json_line<'a>(
    rec: &'a [u8],
    l: &mut Line,
    out: &mut Vec<u8>,
    prev: &mut Strings<'a>,
) -> Option<(u64, usize)> {
    line(rec, &mut l.buf, out, prev)
}

fn line<'a>(
    rec: &'a [u8],
    buf: &mut [u8; LINE_MAX],
    out: &mut Vec<u8>,
    prev: &mut Strings<'a>,
) -> Option<(u64, usize)> {
    let mut c = Cursor { buf: rec, pos: 0 };
    let mut l = W { buf, pos: 0 };
    let tag = c.byte()?;
    let shared = tag == TAG_CDR_SHARED;
    if tag != TAG_CDR && tag != TAG_CDR_RATED && !(shared && prev.have) {
        return None;
    }
    // Tags 64 and 65 are Gy's; tag 67 names its interface first.
    let interface = match shared {
        false => "gy",
        true => match c.byte()? {
            0 => "gy",
            1 => "nchf",
            _ => return None,
        },
    };
    let mut text: [&'a [u8]; 8] = [b""; 8];
    // String `i` of the record: the previous record's when it says so.
    macro_rules! string {
        ($i:literal) => {{
            let s = if !shared {
                c.bytes()?
            } else {
                c.shared(prev.text[$i])?
            };
            text[$i] = s;
            s
        }};
    }
    let sequence = c.u64()?;
    l.put(b"{\"sequence\":")?;
    l.u64(sequence)?;
    l.member_str(key!("node_id"), string!(0))?;
    let record_type = match c.byte()? {
        0 => RecordType::Usage,
        1 => RecordType::SessionEnd,
        2 => RecordType::Event,
        _ => return None,
    };
    l.member_word(key!("record_type"), record_type.as_str())?;
    l.member_str(key!("session_id"), string!(1))?;
    l.member_u64(key!("account"), c.u64()?)?;
    l.member_str(key!("subscriber"), string!(2))?;
    l.member_str(key!("service_context"), string!(3))?;
    l.member_word(key!("interface"), interface)?;
    if let Some(v) = c.opt_u32()? {
        l.member_u64(key!("rating_group"), v.into())?;
    }
    if let Some(v) = c.opt_u32()? {
        l.member_u64(key!("service_id"), v.into())?;
    }
    l.member_u64(key!("request_number"), c.u32()?.into())?;
    if let Some(code) = c.opt_u32()? {
        let action = match code {
            0 => "direct-debiting",
            1 => "refund-account",
            2 => "check-balance",
            3 => "price-enquiry",
            _ => return None,
        };
        l.member_word(key!("requested_action"), action)?;
    }
    match c.byte()? {
        0 => {}
        1 => {
            let unit = match c.byte()? {
                0 => "octets",
                1 => "seconds",
                2 => "events",
                _ => return None,
            };
            l.member_word(key!("unit"), unit)?;
        }
        _ => return None,
    }
    macro_rules! counter {
        ($name:literal) => {
            let v = c.u64()?;
            if v != 0 {
                l.member_u64(key!($name), v)?;
            }
        };
    }
    counter!("time");
    counter!("input_octets");
    counter!("output_octets");
    counter!("total_octets");
    counter!("service_units");
    counter!("rated_units");
    counter!("bundle_units");
    l.member_i64(key!("amount"), c.i64()?)?;
    let unbilled = c.i64()?;
    if unbilled != 0 {
        l.member_i64(key!("unbilled"), unbilled)?;
    }
    l.member_i64(key!("balance_after"), c.i64()?)?;
    l.member_u64(key!("started"), c.u64()?)?;
    l.member_u64(key!("ended"), c.u64()?)?;
    l.member_u64(key!("result_code"), c.u32()?.into())?;
    match c.byte()? {
        0 => {}
        1 => {
            let cause = match c.byte()? {
                0 => ClosingCause::Terminated,
                1 => ClosingCause::SupervisionExpired,
                2 => ClosingCause::Rejected,
                _ => return None,
            };
            l.member_word(key!("closing_cause"), cause.as_str())?;
        }
        _ => return None,
    }
    if let Some(v) = c.opt_u32()? {
        l.member_u64(key!("termination_cause"), v.into())?;
    }
    if let Some(v) = c.opt_u32()? {
        l.member_u64(key!("reporting_reason"), v.into())?;
    }
    if tag != TAG_CDR {
        macro_rules! label {
            ($name:literal, $i:literal) => {
                let s = string!($i);
                if !s.is_empty() {
                    l.member_str(key!($name), s)?;
                }
            };
        }
        label!("plan", 4);
        label!("rate", 5);
        label!("destination", 6);
        label!("zone", 7);
        let side = match c.byte()? {
            0 => None,
            1 => Some(TariffChangeUsage::Before),
            2 => Some(TariffChangeUsage::After),
            _ => return None,
        };
        if let Some(t) = side {
            l.member_word(key!("tariff_change"), t.as_str())?;
        }
    }
    l.put(b"}\n")?;
    out.extend_from_slice(&l.buf[..l.pos]);
    *prev = Strings { have: true, text };
    Some((sequence, c.pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_decimal() {
        let around_powers = POW10.iter().flat_map(|&p| [p - 1, p, p + 1]);
        for v in around_powers.chain([
            0u64,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1000,
            12345,
            u32::MAX.into(),
            u64::MAX / 10,
            u64::MAX,
        ]) {
            let mut room = Line::new();
            let mut l = W {
                buf: &mut room.buf,
                pos: 1,
            };
            l.u64(v).unwrap();
            assert_eq!(&l.buf[1..l.pos], v.to_string().as_bytes());
            assert_eq!(digits(v), v.to_string().len());
        }
        for v in [0i64, -1, -10, i64::MIN, i64::MAX, -1234567] {
            let mut room = Line::new();
            let mut l = W {
                buf: &mut room.buf,
                pos: 0,
            };
            l.i64(v).unwrap();
            assert_eq!(&l.buf[..l.pos], v.to_string().as_bytes());
        }
    }

    #[test]
    fn long_varints_read_the_same_with_and_without_room_after_them() {
        let mut values = vec![0u64, 127, 128, 300, u64::MAX, 1 << 63, (1 << 63) - 1];
        values.extend((0..64).map(|s| 1u64 << s));
        values.extend((0..64).map(|s| (1u64 << s).wrapping_sub(1)));
        for v in values {
            let mut b = Vec::new();
            let mut x = v;
            while x >= 0x80 {
                b.push(x as u8 | 0x80);
                x >>= 7;
            }
            b.push(x as u8);
            let n = b.len();
            for pad in [0, 20] {
                let mut buf = b.clone();
                buf.extend(std::iter::repeat_n(0xff, pad));
                let mut c = Cursor { buf: &buf, pos: 0 };
                assert_eq!((c.u64(), c.pos), (Some(v), n), "{v} pad {pad}");
            }
        }
        // A tenth byte above 1 (or one that goes on): refused, as the
        // record decoder refuses it.
        for tenth in [2u8, 0x81] {
            for pad in [0, 20] {
                let mut buf = vec![0xff; 9];
                buf.push(tenth);
                buf.extend(std::iter::repeat_n(0, pad));
                let mut c = Cursor { buf: &buf, pos: 0 };
                assert_eq!(c.u64(), None);
            }
        }
        // Cut short: refused.
        let mut c = Cursor {
            buf: &[0x80, 0x80],
            pos: 0,
        };
        assert_eq!(c.u64(), None);
    }

    #[test]
    fn plain_strings_are_printable_ascii_without_quote_or_backslash() {
        for len in 0..20 {
            for pos in 0..len {
                for b in 0..=255u8 {
                    let mut s = vec![b'a'; len];
                    s[pos] = b;
                    let want = (0x20..=0x7f).contains(&b) && b != b'"' && b != b'\\';
                    assert_eq!(plain(&s), want, "{s:?}");
                }
            }
        }
    }
}
