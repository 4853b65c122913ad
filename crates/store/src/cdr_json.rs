//! CDR file lines in JSON Lines written from decoded journal CDR records
//! (the CDR writer's hot path): each member is written into a fixed room
//! with its key spelled out at compile time and the line is copied to the
//! output whole.
//!
//! The bytes are exactly those of [`gyro_charging::CdrOf::write_json_line`]
//! for the same record (a property test holds them equal). A record with a
//! string that needs JSON escaping or is not ASCII, or a line longer than
//! the room, is left to that one by returning `None`.

use gyro_charging::{CdrView, RequestedAction, UnitKind};

/// `,"name":`: a member's separator and key, spelled out at compile time.
macro_rules! key {
    ($name:literal) => {
        concat!(",\"", $name, "\":").as_bytes()
    };
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

/// Appends the JSON line of `c` to `out` (`l`: the room to write it
/// in), or returns `None` with `out` unchanged when the record is one
/// this path leaves to [`gyro_charging::CdrOf::write_json_line`] (see the
/// module documentation).
pub(crate) fn json_line(c: &CdrView<'_>, l: &mut Line, out: &mut Vec<u8>) -> Option<()> {
    let mut l = W {
        buf: &mut l.buf,
        pos: 0,
    };
    l.put(b"{\"sequence\":")?;
    l.u64(c.sequence)?;
    l.member_str(key!("node_id"), c.node_id.as_bytes())?;
    l.member_word(key!("record_type"), c.record_type.as_str())?;
    l.member_str(key!("session_id"), c.session_id.as_bytes())?;
    l.member_u64(key!("account"), c.account.0)?;
    l.member_str(key!("subscriber"), c.subscriber.as_bytes())?;
    l.member_str(key!("service_context"), c.service_context.as_bytes())?;
    l.member_word(key!("interface"), c.interface.as_str())?;
    if let Some(v) = c.rating_group {
        l.member_u64(key!("rating_group"), v.into())?;
    }
    if let Some(v) = c.service_id {
        l.member_u64(key!("service_id"), v.into())?;
    }
    l.member_u64(key!("request_number"), c.request_number.into())?;
    if let Some(a) = c.requested_action {
        let action = match a {
            RequestedAction::DirectDebiting => "direct-debiting",
            RequestedAction::RefundAccount => "refund-account",
            RequestedAction::CheckBalance => "check-balance",
            RequestedAction::PriceEnquiry => "price-enquiry",
        };
        l.member_word(key!("requested_action"), action)?;
    }
    if let Some(u) = c.unit {
        let unit = match u {
            UnitKind::Octets => "octets",
            UnitKind::Seconds => "seconds",
            UnitKind::Events => "events",
        };
        l.member_word(key!("unit"), unit)?;
    }
    for (key, v) in [
        (key!("time"), c.time),
        (key!("input_octets"), c.input_octets),
        (key!("output_octets"), c.output_octets),
        (key!("total_octets"), c.total_octets),
        (key!("service_units"), c.service_units),
        (key!("rated_units"), c.rated_units),
        (key!("bundle_units"), c.bundle_units),
    ] {
        if v != 0 {
            l.member_u64(key, v)?;
        }
    }
    l.member_i64(key!("amount"), c.amount)?;
    if c.unbilled != 0 {
        l.member_i64(key!("unbilled"), c.unbilled)?;
    }
    l.member_i64(key!("balance_after"), c.balance_after)?;
    l.member_u64(key!("started"), c.started.0)?;
    l.member_u64(key!("ended"), c.ended.0)?;
    l.member_u64(key!("result_code"), c.result_code.into())?;
    if let Some(cause) = c.closing_cause {
        l.member_word(key!("closing_cause"), cause.as_str())?;
    }
    if let Some(v) = c.termination_cause {
        l.member_u64(key!("termination_cause"), v.into())?;
    }
    if let Some(v) = c.reporting_reason {
        l.member_u64(key!("reporting_reason"), v.into())?;
    }
    for (key, v) in [
        (key!("plan"), c.plan),
        (key!("rate"), c.rate),
        (key!("destination"), c.destination),
        (key!("zone"), c.zone),
    ] {
        if !v.is_empty() {
            l.member_str(key, v.as_bytes())?;
        }
    }
    if let Some(t) = c.tariff_change {
        l.member_word(key!("tariff_change"), t.as_str())?;
    }
    l.put(b"}\n")?;
    out.extend_from_slice(&l.buf[..l.pos]);
    Some(())
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
